"""Token shapes from a maintained rule set: Yelp's detect-secrets plugins (docs/reliability.md).

Why detect-secrets: it is the widely used Python secret scanner (Apache-2.0, ~25 plugins:
AWS, Azure, GitHub, GitLab, JWT, OpenAI, Stripe, Slack, Twilio, SendGrid, Mailchimp, npm,
PyPI, Telegram, Discord, private keys, basic-auth URLs, keyword assignments, …), each plugin
a set of regular expressions kept up as vendors change their token formats, with a Python API
(``analyze_string``) that returns what it found without scanning files or calling out. The
others looked at: bc-detect-secrets (Bridgecrew's fork, newer releases but fewer plugins:
no GitLab, OpenAI, PyPI or Telegram), ggshield (GitGuardian: detection needs their API),
gitleaks and TruffleHog (Go binaries, their rules not a Python package).

What it does not cover, and ``schemas.secrets`` keeps as its own rules (each tested):
secret-bearing *names* (flags, argv pairs, parsed argument dicts, environment variables: the
ledger's main case), "the password is …" in prose, Hugging Face ``hf_`` tokens, GitHub's
fine-grained ``github_pat_`` tokens (its GitHub plugin knows the ``ghp_`` family only),
Google API keys (``AIza…``) and AWS secret access keys with no ``aws…key`` label before them
(40 characters of base64 with upper and lower case and digits, and the entropy of a random
key, by the library's own Shannon-entropy function).

Four of its plugins are left out: the hex and base64 high-entropy ones (they take any quoted
digest or id for a secret: a kernel config hash, an event id, a model revision would be
masked, a wrong fact), the public-IP one (a server's address is a fact of the run) and the
keyword one: its regular expressions backtrack quadratically on a run of secret words
(``"PGPASSWORD" * 2000``, 20 KB, took 89 s; a 1 MB note would have taken days), and what it
finds — ``password = "…"`` assignments — is what ``schemas.secrets``' named rules mask.

Importing detect-secrets costs ~0.3 s (it brings ``requests``), so it is imported on first
need: only for a text ``schemas.secrets`` flags as possibly holding a token shape (a known
prefix, or a long run of token characters), never for the common event.
"""

from __future__ import annotations

import re
from typing import Any

#: detect-secrets plugins not used (see the module docstring).
EXCLUDED_PLUGINS = frozenset(
    {"HexHighEntropyString", "Base64HighEntropyString", "IPPublicDetector", "KeywordDetector"}
)

#: Shapes of our own (see the module docstring), whole matches masked.
OWN_SHAPES = re.compile(
    # after any character but a letter or digit (``\b`` saw no boundary after "_")
    r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,255}"
    r"|(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z])"
)
#: A bare AWS secret access key candidate: 40 characters of base64, not part of a longer run.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
#: A random 40-character base64 key has ~5.3 bits of entropy a character; English words, paths
#: and camel-case identifiers of that length stay under 4.3.
_AWS_ENTROPY = 4.5
#: Characters other than letters and digits a token may hold.
_TOKEN_PUNCTUATION = "_-+/=."

_plugins: list[Any] | None = None
_entropy: Any = None


def _load() -> list[Any]:
    """The detect-secrets plugins in use, made once per process."""
    global _plugins, _entropy
    if _plugins is None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

        plugins = []
        plugin_class: Any
        for plugin_class in get_mapping_from_secret_type_to_class().values():
            if plugin_class.__name__ in EXCLUDED_PLUGINS:
                continue
            plugins.append(plugin_class())
        _entropy = Base64HighEntropyString().calculate_shannon_entropy
        _plugins = plugins
    return _plugins


def _spans_of(text: str, secret: str) -> list[tuple[int, int]]:
    spans = []
    start = text.find(secret)
    while start >= 0:
        spans.append((start, start + len(secret)))
        start = text.find(secret, start + len(secret))
    return spans


#: The library's rules are asked about windows of this many characters, each overlapping the
#: next by ``_OVERLAP`` (a token is far shorter: a fine-grained GitHub token is 93, a JWT a few
#: hundred), so a rule that backtracks quadratically costs a bounded amount per window and the
#: whole text stays linear (OpenAI's rule took 8 s on "sk-" * 20,000, 60 KB).
_WINDOW = 8192
_OVERLAP = 2048


def found_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a token shape (detect-secrets' rules and ``OWN_SHAPES``), as
    ``(start, end)`` spans, each widened to the whole run of token characters around it."""
    if len(text) <= _WINDOW:
        spans = _found(text)
    else:
        spans = []
        for start in range(0, len(text), _WINDOW - _OVERLAP):
            window = text[start : start + _WINDOW]
            spans.extend((s + start, e + start) for s, e in _found(window))
            if start + _WINDOW >= len(text):
                break
    widened: list[tuple[int, int]] = []
    reach = -1
    for start, end in sorted(set(spans)):
        if end <= reach:  # inside a span already widened: widening again rescans its run
            continue
        wide = _widened(text, start, end)
        widened.append(wide)
        reach = max(reach, wide[1])
    return widened


def _found(text: str) -> list[tuple[int, int]]:
    """The spans of ``found_spans`` before widening."""
    spans: list[tuple[int, int]] = []
    for plugin in _load():
        denylist = getattr(plugin, "denylist", None)
        if denylist and type(plugin).analyze_string is _regex_analyze(plugin):
            for regex in denylist:  # the whole match, not only its groups (findall's answer)
                spans.extend(m.span() for m in regex.finditer(text) if m.end() > m.start())
            continue
        for secret in plugin.analyze_string(text):
            if isinstance(secret, str) and len(secret) >= 4:
                spans.extend(_spans_of(text, secret))
    spans.extend(m.span() for m in OWN_SHAPES.finditer(text))
    for match in _AWS_SECRET.finditer(text):
        key = match.group()
        if (
            any(c.isupper() for c in key)
            and any(c.islower() for c in key)
            and any(c.isdigit() for c in key)
            and _entropy(key) >= _AWS_ENTROPY
        ):
            spans.append(match.span())
    return spans


def _regex_analyze(plugin: Any) -> Any:
    """The regex plugins' shared ``analyze_string`` (a plugin that overrides it, as JWT's
    check of the token's JSON does, is asked through its own)."""
    from detect_secrets.plugins.base import RegexBasedDetector

    return RegexBasedDetector.analyze_string


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` extended over the letters, digits and the punctuation the match itself
    holds: a rule that matched the first 24 characters of a longer key (Stripe's) or a JWT's
    first two parts masks the whole token, and a token in a path (``runs-glpat-…/x.json``)
    stops at the ``/`` it does not hold."""
    own = {c for c in text[start:end] if c in _TOKEN_PUNCTUATION}

    def part_of_token(c: str) -> bool:
        return (c.isascii() and c.isalnum()) or c in own

    new_end = end
    while new_end < len(text) and part_of_token(text[new_end]):
        new_end += 1
    while new_end > end and text[new_end - 1] in ".=":  # a sentence's full stop is no part
        new_end -= 1
    new_start = start
    while new_start > 0 and part_of_token(text[new_start - 1]) and text[new_start - 1] != "=":
        new_start -= 1
    return new_start, new_end
