"""Secret masking: no API key, token or password is ever stored in the ledger.

Applied in one place: the serializer of every event model (``Event`` and ``Host``
call ``mask_payload`` on their dumped data), so whatever writes an event — CLI
``append``, importers, the server runner, the benchmark and plan runners, the
TUI — stores the masked form, and so does every export made from the ledger.

What is masked (the value becomes ``***``; ``None``, ``""`` and booleans stay,
since "no key" and "auth on" are not secrets, and so do plain numbers in text, since
SGLang logs ``#token: 70011``):

- a mapping entry whose key is a *secret name* (``flags = {api-key = "sk-X"}``,
  parsed ``server_args = {"api_key": "sk-Z"}``); in a mapping called ``env`` the
  entry is dropped instead, as the runners' environment filter does;
- in a list of strings (an ``argv``), the value after ``--api-key`` and the part
  after ``=`` in ``--api-key=X``;
- in any text (log tails, evidence lines, notes, ``source``): ``--NAME VALUE``,
  ``--NAME=VALUE``, ``NAME=VALUE``, ``NAME: VALUE`` and ``NAME='VALUE'`` (SGLang's
  ``server_args=ServerArgs(api_key='sk-…')``, JSON, env assignments) for a secret
  NAME, ``Bearer`` credentials, and well-known token shapes (OpenAI
  ``sk-…``, Hugging Face ``hf_…``, GitHub ``ghp_…``, AWS ``AKIA…``, Slack ``xox?-…``,
  PEM private key blocks), and the password of a URL's user info
  (``postgresql://user:***@host``).

A *secret name* is one whose words (split at ``-``, ``_``, ``.``, spaces and
camelCase) contain a secret word — ``token``, ``password``, ``passwd``, ``pass``,
``auth``, ``authorization``, ``secret``, ``credential(s)``, ``bearer``, ``cookie``,
``apikey`` — or the word pairs ``api key``, ``private key``, ``access key``. Whole
words only, so ``max_total_tokens`` or ``tokenizer_path`` are not secrets. Users add
words with ``TUNELEDGER_SECRET_WORDS`` (comma-separated, read at start-up) or
``secret_words = [...]`` at the top of a servers TOML file (``runners/server/configs.py``),
both through ``add_secret_words``.

- token *shapes* from a maintained rule set, detect-secrets' plugins (``schemas.secret_shapes``
  says which and why), and the few it lacks (``github_pat_``, ``AIza…``, unlabelled AWS secret
  keys), and "the password is …" in prose.

Named values are our rules: detect-secrets targets code assignments, not argv pairs, parsed
argument dicts or environment names, and does not redact. The library is asked only about
texts the fast scan below flags as possibly holding a token (a known prefix, or a run of 20
letters and digits, or of 40 base64 characters), so the common event never imports it. Every
rule has a test (``tests/schemas/test_secrets.py``, ``tests/schemas/test_secret_shapes.py``).
"""

from __future__ import annotations

import json
import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate, pairwise
from typing import Any, NamedTuple

from schemas import secret_shapes

try:
    import ahocorasick
except ImportError:  # a GPU host that carries only the tune's wheels: the plain scan below
    ahocorasick = None
try:
    import ahocorasick_rs
except ImportError:  # as above: ``may_hold_secrets`` asks ``may_hold_secret`` text by text
    ahocorasick_rs = None  # type: ignore[assignment]

MASK = "***"

#: Single words that make a name secret-bearing (compared lower-case, whole words).
_WORDS: set[str] = {
    "token",
    "password",
    "passwd",
    "pass",
    "passphrase",
    "auth",
    "authorization",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "bearer",
    "cookie",
    "apikey",
}
#: Words of ``_WORDS`` that make a name secret only as its last word (``hf_token``, not
#: ``inter_token_latency``: benchmark tools name their metrics per token).
_LAST_WORD_ONLY: frozenset[str] = frozenset({"token"})
#: Consecutive word pairs that make a name secret-bearing.
_PAIRS: set[tuple[str, str]] = {
    ("api", "key"),
    ("private", "key"),
    ("access", "key"),
    ("secret", "key"),
}

#: Environment names that hold a secret with no secret word whole in them, and that the patterns
#: below miss: kept by hand from the tools' own docs (libpq's ``PGPASSWORD``, MySQL's
#: ``MYSQL_PWD``, Sentry's ``SENTRY_DSN``, which carries its key).
SECRET_ENV_NAMES: frozenset[str] = frozenset({"PGPASSWORD", "MYSQL_PWD", "SENTRY_DSN"})
#: An environment name (upper case, as the shell writes one) holds a secret when it matches
#: ``*PASSWORD*``, ``*PASSWD*``, ``*SECRET*``, ``*TOKEN*``, ``*PWD``, ``*_KEY`` (``AZURE_OPENAI_KEY``,
#: ``ANTHROPIC_KEY``). Not ``*TOKENS*`` nor ``*TOKENIZER*`` (a count: ``SGLANG_MAX_TOKENS``;
#: ``TOKENIZERS_PARALLELISM`` is in every Hugging Face environment) and not the shell's ``PWD``.
_ENV_SECRET = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN(?!IZER|S(?:$|_))|PWD$|_KEY$")
_ENV_KEEP = frozenset({"PWD", "OLDPWD"})
_UPPER_TAIL = re.compile(r"[A-Z][A-Z0-9_]*$")
#: Where a text may hold an upper-case environment name ``_ENV_SECRET`` matches (the gate).
_ENV_HINT = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|PWD|_KEY|SENTRY_DSN")
_ENV_HINT_BYTES = re.compile(_ENV_HINT.pattern.encode())
#: ``-u user:pw`` and ``api-key VALUE`` in the many-texts gate (``may_hold_secrets``).
_USER_OR_KEY_BYTES = re.compile(rb"(?:-u|--user|--proxy-user)[ \t=]|(?i:api[-_]?key)[ \t]")

_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_KEEP = (None, "", "None", "null", "none", "''", '""')

#: ``--name value`` / ``--name=value`` in text (the value quoted or up to whitespace).
_FLAG_RE = re.compile(
    # (?<![\w-]): a flag starts a word, so prose like "a 256-token batch cap" is no ``-token``.
    r"""(?P<lead>(?<![\w-])--?(?P<name>[A-Za-z][A-Za-z0-9_.-]*))(?P<sep>=|[ \t]+)(?P<value>"[^"]*"|'[^']*'|(?:(?:Bearer|Basic|Token|Digest)[ \t]+)?[^\s,;)\]}]+)"""
)
#: ``name=value``, ``name: value``, ``"name": "value"``, ``name='value'``.
_ASSIGN_RE = re.compile(
    # A name starts after a non-word character and is at most 128 long: unanchored, a long
    # run of name characters with no ':' or '=' was scanned again from each of its letters
    # (quadratic: a 1 MB note took hours).
    r"""(?P<lead>(?P<q>["']?)(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,127})(?P=q)"""
    r"""[ \t]*[:=][ \t]*)"""
    r"""(?P<value>"[^"]*"|'[^']*'|(?:(?:Bearer|Basic|Token|Digest)[ \t]+)?[^\s,;()\]}'"]+)"""
)
#: Credentials after an HTTP auth scheme, and token shapes that are secrets wherever they are.
_SHAPES_RE = re.compile(
    # A shape starts after any character but a letter or digit: ``\b`` saw no boundary after
    # "_", so ``bench_sk-proj-…`` (a file name, and the config name derived from it) was kept.
    r"(?P<scheme>(?<![A-Za-z0-9])Bearer[ \t]+)[A-Za-z0-9._~+/=-]{8,}"
    r"|(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"
    r"|(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}"
    r"|(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"
    r"|(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    re.DOTALL,
)
#: ``Authorization: Basic|Bearer|Token|Digest VALUE`` anywhere (a log line's
#: ``X=Authorization: Basic …``, a header quoted in a note): the scheme kept, the value masked.
_AUTH_HEADER_RE = re.compile(
    r"(?i)(?P<lead>(?<![A-Za-z0-9])(?:proxy-)?authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
    r"(?:Basic|Bearer|Token|Digest)[ \t]+)(?P<value>[^\s\"',;]+)"
)
#: ``-u user:pw`` / ``--user user:pw`` (curl, wget): the part after the colon.
_USER_PASSWORD_RE = re.compile(
    r"(?P<lead>(?<![\w-])(?:-u|--user|--proxy-user)(?:[ \t]+|=)[\"']?[^\s:\"']+:)(?P<value>[^\s\"']+)"
)
#: ``api-key VALUE`` (a secret name and its value with only a space between, as an HTTP header
#: is written in prose or a shell's ``-H api-key VALUE``): a value that is not a plain word.
_NAME_SPACE_VALUE_RE = re.compile(
    r"(?i)(?<![\w-])(?P<lead>(?:x-)?api[-_]?key[ \t]+)(?P<value>[^\s,;]*[0-9_\-+/=][^\s,;]*)"
)
#: The password of a URL's user info (``postgresql://tuner:hunter2@db/x``,
#: ``https://user:pw@host``): ``prefix`` keeps the scheme, user and colon.
_URL_PASSWORD = re.compile(
    # Each part bounded: an unbounded scheme was scanned again from each word start of a long
    # run ("sk-" * 20,000 took 1 s, quadratic); a scheme is at most 32 characters (RFC 3986
    # sets none; the registered ones are under 30), a user and a password at most 256.
    r"(?P<prefix>\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/@'\"]{0,256}:)[^\s/@'\"]{1,256}(?=@)"
)
_URL_PASSWORD_BYTES = re.compile(_URL_PASSWORD.pattern.encode())
#: Token shapes that start a secret wherever they appear (lower-case, as the scan sees them):
#: ours (``_SHAPES_RE``), then starts of detect-secrets' and ``secret_shapes.OWN_SHAPES``' shapes
#: that a long run of letters and digits (``_LONG_RUN``) may miss (a ``-`` or ``_`` inside).
_SHAPE_HINTS = (
    "sk-",
    "npm_",
    "hf_",
    "gh",
    "akia",
    "xox",
    "eyj",
    "github_pat_",
    "glpat-",
    "aiza",
    "sk_live_",
    "rk_live_",
)
#: Where a token without a known prefix may be: 20 letters and digits in a row, or 40 base64
#: characters (an AWS secret key); such a text is also asked of ``secret_shapes``.
_LONG_RUN = re.compile(r"[A-Za-z0-9]{20}|[A-Za-z0-9/+]{40}")
#: "the password is …" in prose: the value after a secret word and ``is``/``was``.
_PROSE_RE = re.compile(
    r"(?i)\b(?:password|passwd|passphrase|passcode|secret|token|api[ _-]?key)\s+(?:is|was)\s+"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;]+?)(?=[.!?]?(?:\s|$|[,;]))"
)
#: Words after "the password is" that describe it rather than being it.
_PROSE_KEEP = frozenset(
    "not a an the set empty missing required invalid valid wrong correct none null unset "
    "ignored optional needed expired revoked".split()
)
_LOWER_RUN = re.compile(r"[a-z]+")
_CAMEL_RUN = re.compile(r"[A-Za-z][a-z]*")
_roots: tuple[str, ...] = ()
_heads: frozenset[str] = frozenset()
#: Every root at once (Aho-Corasick, one pass in C): each occurrence, overlapping ones too,
#: comes back as (end index, (length, is a token shape)).
_scan: Any = None
#: The many-texts gate (``may_hold_secrets``): whole secret words and token-shape starts as
#: they read in the letters view (``_LETTERS``), one Aho-Corasick pass in Rust over bytes.
_gate: Any = None
#: A camel hump in the classes view (``_CLASSES``): one needle, searched at memchr speed
#: (bytes.find took 30x as long).
_HUMP: Any = None if ahocorasick_rs is None else ahocorasick_rs.BytesAhoCorasick([b"aA"])
#: Bytes to the letters view: ASCII letters lower-cased, every other byte a space.
_LETTERS = bytes(b | 0x20 if chr(b).isascii() and chr(b).isalpha() else 32 for b in range(256))
#: Bytes to the classes view: "a" a lower-case ASCII letter, "A" an upper-case one, "0" a
#: digit (UTF-8 bytes of other digits included), " " the rest.
_CLASSES = bytes(
    97 if 97 <= b <= 122 else 65 if 65 <= b <= 90 else 48 if chr(b).isdigit() and b < 128 else 32
    for b in range(256)
)


class _PlainScan:
    """``Automaton.iter``'s answers by one substring search per needle (slower; used only
    where pyahocorasick is not installed): ``(end index, (length, is a token shape))``."""

    def __init__(self, needles: tuple[str, ...]) -> None:
        self.needles = needles

    def iter(self, lower: str) -> Iterable[tuple[int, tuple[int, bool]]]:
        for needle in self.needles:
            start = lower.find(needle)
            while start >= 0:
                yield start + len(needle) - 1, (len(needle), needle in _SHAPE_HINTS)
                start = lower.find(needle, start + 1)


def _build_scan() -> tuple[str, ...]:
    """The fewest substrings to search for: each secret word or pair head, minus those
    that start with a shorter one ("pass" finds "password" and "passwd")."""
    global _heads, _scan, _gate
    _heads = frozenset({a for a, _ in _PAIRS} | {a + b for a, b in _PAIRS})
    words = sorted(_WORDS | {a for a, _ in _PAIRS})
    roots = [w for w in words if not any(w != other and w.startswith(other) for other in words)]
    needles = (*roots, *_SHAPE_HINTS)
    if ahocorasick is None:
        _scan = _PlainScan(needles)
    else:
        scan = ahocorasick.Automaton()
        for root in needles:
            scan.add_word(root, (len(root), root in _SHAPE_HINTS))
        scan.make_automaton()
        _scan = scan
    _gate = None
    if ahocorasick_rs is not None and all(w.isascii() and w.isalpha() for w in _WORDS | _heads):
        # (A word with a digit, added by a user, reads apart in the letters view: no gate.) In the letters view a whole word reads " word " and a shape start " sk" (see
        # ``may_hold_secrets`` for why every hit of ``may_hold_secret`` is one of these).
        gate = [f" {word} " for word in sorted(_WORDS | _heads)]
        gate += [" " + hint.translate(_LETTERS_STR) for hint in _SHAPE_HINTS]
        _gate = ahocorasick_rs.BytesAhoCorasick(
            [needle.encode() for needle in gate], matchkind=ahocorasick_rs.MatchKind.Standard
        )
    return tuple(roots) + _SHAPE_HINTS


_LETTERS_STR = {b: _LETTERS[b] for b in range(128)}
#: Raw bytes to "x" for an ASCII letter, digit, "/" or "+", " " for the rest.
_BASE64_X = bytes(
    120 if (chr(b).isascii() and chr(b).isalnum()) or b in b"/+" else 32 for b in range(256)
)


#: 20 base64 characters in a row, in the ``_BASE64_X`` view.
_RUN_20 = b"x" * 20
_roots = _build_scan()


def _hit(text: str, lower: str, start: int, shape: bool) -> bool:
    if (
        start
        and lower[start - 1].isalnum()
        and not (text[start].isupper() and text[start - 1].islower())
    ):
        return False  # inside a word: "disk-", "mytoken"
    if shape:
        return True
    run = _LOWER_RUN.match(lower, start).group()  # type: ignore[union-attr]
    camel = _CAMEL_RUN.match(text, start).group().lower()  # type: ignore[union-attr]
    # "tokens" in "output_tokens" is another word; "authToken" ends at the camel hump.
    return any(word in _WORDS or word in _heads for word in (run, camel))


def may_hold_secret(text: str) -> bool:
    """Cheap and conservative: False only when ``text`` cannot hold anything ``mask_text`` masks.

    One pass (Aho-Corasick, in C) over the lower-cased text finds every occurrence of every
    secret word's root and token shape, overlapping ones included; then a whole-word check
    of each (``tokens`` in ``output_tokens`` is not one), so the common event is never
    parsed again. Same answers as one substring search per root (``tests/schemas/test_secret_scan_sameness.py``)
    at about 0.6 of its cost (15 searches over a 2 KB payload were 22 µs).
    """
    if "://" in text and _URL_PASSWORD.search(text):
        return True
    if _LONG_RUN.search(text) or _ENV_HINT.search(text):
        return True
    if ("-u" in text or "--" in text or "key" in text.lower()) and (
        _USER_PASSWORD_RE.search(text) or _NAME_SPACE_VALUE_RE.search(text)
    ):
        return True
    lower = text.lower()
    if len(lower) != len(text):  # a few characters change length when lower-cased
        return True
    for end, (length, shape) in _scan.iter(lower):
        if _hit(text, lower, end - length + 1, shape):
            return True
    return False


class JoinedTexts(NamedTuple):
    """Many texts as one buffer, for one C-speed pass each (``join_texts``)."""

    #: The texts (None for a missing one).
    texts: Sequence[str | None]
    #: "\n", then each text followed by "\n"; one byte a character (a character beyond
    #: ASCII reads "?"), so an index is a character's index in the joined text.
    raw: bytes
    #: Where each text starts in ``raw``, and ``len(raw)`` last.
    starts: list[int]
    #: ``raw`` mapped by ``_CLASSES``: a camel hump reads "aA", a run of n ASCII digits n "0"s.
    classes: bytes
    #: Indexes of the texts that are not ASCII.
    beyond_ascii: list[int]


def join_texts(texts: Sequence[str | None]) -> JoinedTexts:
    """``texts`` joined for ``may_hold_secrets`` (and ``ledger.store.payloads.stored_payloads``'s BIGINT
    search in ``classes``: a newline is no digit, so no run crosses from one text to the next)."""
    joined = "\n".join(["", *(text or "" for text in texts), ""])
    if joined.isascii():
        raw, beyond = joined.encode("ascii"), []
    else:
        raw = joined.encode("ascii", "replace")
        beyond = [i for i, text in enumerate(texts) if text and not text.isascii()]
    starts = list(accumulate((len(text or "") + 1 for text in texts), initial=1))
    return JoinedTexts(texts, raw, starts, raw.translate(_CLASSES), beyond)


def may_hold_secrets(texts: Sequence[str | None] | JoinedTexts) -> list[bool]:
    """``[may_hold_secret(t) for t in texts]`` (None and "" give False), at a fraction of its
    CPU for many texts: a bulk import's payloads (2 KB each: ~4 against ~14.5 µs a text).

    One C-speed pass over all texts joined by newlines flags the few that may hold a secret,
    and only those take ``may_hold_secret``, so the answers are its answers exactly
    (``tests/schemas/test_secret_scan_sameness.py``). Why the pass misses no hit: ``may_hold_secret``
    finds a secret word or token shape at a start that follows a non-alphanumeric character
    (or the text's start) or a camel hump (lower then upper case), and a word counts when
    the letters from there up to a non-letter, or up to a non-lower-case letter, are one of
    the secret words. In the letters view (ASCII letters lower-cased, all else a space) the
    first kind reads " word " or " sk"; the second needs a camel hump at the word's start or
    end, so a text with any hump is flagged; a text that is not ASCII (lower-casing may
    change its length, and ``isalnum`` knows more letters) is flagged too. A newline reads
    as a space, as a text's start and end do, so nothing crosses from one text to the next.
    """
    if _gate is None:
        plain = texts.texts if isinstance(texts, JoinedTexts) else texts
        return [may_hold_secret(text) if text else False for text in plain]
    joined = texts if isinstance(texts, JoinedTexts) else join_texts(texts)
    starts = joined.starts
    flagged = set(joined.beyond_ascii)
    view = joined.raw.translate(_LETTERS)
    for _, start, _ in _gate.find_matches_as_indexes(view, overlapping=True):
        flagged.add(bisect_right(starts, start + 1) - 1)  # the word starts after the " "
    for _, hump, _ in _HUMP.find_matches_as_indexes(joined.classes):
        flagged.add(bisect_right(starts, hump + 1) - 1)
    for pattern in (_ENV_HINT_BYTES, _USER_OR_KEY_BYTES):  # env names, ``-u u:pw``, ``api-key V``
        for match in pattern.finditer(joined.raw):
            flagged.add(bisect_right(starts, match.start()) - 1)
    if b"://" in joined.raw:  # a URL's password: its own pattern, over the raw text
        for match in _URL_PASSWORD_BYTES.finditer(joined.raw):
            flagged.add(bisect_right(starts, match.start()) - 1)
    # ``_LONG_RUN`` (20 letters and digits, or 40 base64 characters, in a row) needs 20 base64
    # characters in a row: one translate and one search find the texts to ask (a newline is
    # none, so no run crosses from one text to the next)
    view = joined.raw.translate(_BASE64_X)
    run = view.find(_RUN_20)
    while run >= 0:  # (bytes.find: "x" is the view's commonest byte, no automaton skips it)
        flagged.add(bisect_right(starts, run) - 1)
        end = view.find(b" ", run)
        run = view.find(_RUN_20, end) if end >= 0 else -1
    answers = [False] * len(joined.texts)
    for i in flagged:
        text = joined.texts[i]
        answers[i] = bool(text) and may_hold_secret(text)  # type: ignore[arg-type]
    return answers


def add_secret_words(words: Iterable[str]) -> None:
    """Treat names containing any of ``words`` as secret-bearing too (e.g. ``["hmac"]``).

    A word with ``-``, ``_`` or a space (``"signing key"``) is added as a word pair.

    Raises:
        ValueError: a word is empty or has more than two parts.
    """
    global _roots
    for word in words:
        parts = tuple(p.lower() for p in _SPLIT.split(word.strip()) if p)
        if len(parts) == 1:
            _WORDS.add(parts[0])
        elif len(parts) == 2:
            _PAIRS.add((parts[0], parts[1]))
        else:
            raise ValueError(
                f"secret word {word!r}: want one word or two (e.g. 'hmac' or 'signing key')"
            )
    _roots = _build_scan()


def is_secret_name(name: str) -> bool:
    """True when a flag, argument, key or environment name carries a secret.

    ``api-key``, ``--api_key``, ``apiKey``, ``SGLANG_ADMIN_PASS``, ``NCCL_IB_AUTH``,
    ``HF_TOKEN``, ``access_token`` are; ``max_total_tokens``, ``tokenizer``, ``author``,
    ``inter_token_latency``, ``time_per_output_token_ms`` are not ("token" names a secret only
    as the last word: in the middle it is the field's unit of text, as in every metric name).
    """
    parts = [p.lower() for p in _SPLIT.split(name) if p]
    last = len(parts) - 1
    if any(p in _WORDS and (p not in _LAST_WORD_ONLY or i == last) for i, p in enumerate(parts)):
        return True
    return any(pair in _PAIRS for pair in pairwise(parts))


def is_secret_env_name(name: str) -> bool:
    """True when an environment variable's name carries a secret: ``is_secret_name``'s words,
    ``SECRET_ENV_NAMES``, or the patterns of ``_ENV_SECRET`` (``PGPASSWORD``, ``MYSQL_PWD``,
    ``AZURE_OPENAI_KEY``, ``ANTHROPIC_KEY``, ``GH_TOKEN``)."""
    upper = name.upper()
    if upper in _ENV_KEEP:
        return False
    return is_secret_name(name) or upper in SECRET_ENV_NAMES or bool(_ENV_SECRET.search(upper))


def _is_secret_key(name: str) -> bool:
    """A name anywhere (a flag, a key, ``NAME=value`` in text): ``is_secret_name``, and when it
    is written in upper case as an environment name is, ``is_secret_env_name`` too."""
    if is_secret_name(name):
        return True
    # the upper-case tail, as an environment name is written: ``x_PGPASSWORD``, ``MYSQL_PWD``
    tail = _UPPER_TAIL.search(name)
    return tail is not None and is_secret_env_name(tail.group())


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _masked_value(value: str, masked: str = MASK) -> str:
    # A plain number is a count, not a credential: SGLang logs "#token: 70011".
    if value in _KEEP or _NUMBER.fullmatch(value):
        return value
    if value[:1] in "'\"" and value[-1:] == value[:1] and len(value) >= 2:
        return value[0] + masked + value[0]
    return masked


def mask_text(text: str) -> str:
    """``text`` with every secret value replaced by ``***`` (see the module docstring)."""
    if not may_hold_secret(text):
        return text

    def named(match: re.Match[str]) -> str:
        if not _is_secret_key(match.group("name")):
            value = match.group("value")
            if len(value) > 2 and value[0] in "'\"" and may_hold_secret(value[1:-1]):
                # a quoted text under a plain name (``"cmd": "PGPASSWORD=x psql"``) is text too:
                # masked on its own (no quote of its kind inside, so at most two levels deep)
                lead = match.group(0)[: match.start("value") - match.start(0)]
                return lead + value[0] + mask_text(value[1:-1]) + value[-1]
            return match.group(0)
        return match.group(0)[: match.start("value") - match.start(0)] + _masked_value(
            match.group("value")
        )

    def prose(match: re.Match[str]) -> str:
        value = match.group("value")
        if value.strip("'\"").lower() in _PROSE_KEEP:
            return match.group(0)
        return match.group(0)[: match.start("value") - match.start(0)] + _masked_value(value)

    text = _FLAG_RE.sub(named, text)
    text = _ASSIGN_RE.sub(named, text)
    text = _PROSE_RE.sub(prose, text)
    text = _URL_PASSWORD.sub(lambda m: m.group("prefix") + MASK, text)
    text = _AUTH_HEADER_RE.sub(lambda m: m.group("lead") + _masked_value(m.group("value")), text)
    text = _USER_PASSWORD_RE.sub(lambda m: m.group("lead") + _masked_value(m.group("value")), text)
    text = _NAME_SPACE_VALUE_RE.sub(
        lambda m: m.group("lead") + _masked_value(m.group("value")), text
    )
    text = _SHAPES_RE.sub(lambda m: (m.group("scheme") or "") + MASK, text)
    if _may_hold_shape(text):
        text = _masked_spans(text, secret_shapes.found_spans(text))
    return text


def holds_secret(value: str) -> bool:
    """Whether ``value`` holds something ``mask_text`` would mask (a token, a password): an
    identifier that does is refused, since identifiers are stored as given."""
    return may_hold_secret(value) and mask_text(value) != value


def _may_hold_shape(text: str) -> bool:
    """Whether ``text`` may hold a shape only ``secret_shapes`` knows: a long run of token
    characters, or a shape hint (which ``_SHAPES_RE`` has not masked away)."""
    if _LONG_RUN.search(text):
        return True
    lower = text.lower()
    return any(hint in lower for hint in _LIBRARY_HINTS)


#: The hints of shapes ``_SHAPES_RE`` does not mask itself.
_LIBRARY_HINTS = ("eyj", "github_pat_", "glpat-", "aiza", "sk_live_", "rk_live_", "xox")


def _masked_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (overlapping ones merged) replaced by ``MASK``."""
    if not spans:
        return text
    out, last = [], 0
    for start, end in sorted(spans):
        if end <= last:
            continue
        start = max(start, last)
        out.append(text[last:start])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def _mask_argv(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    hide_next = changed = False
    for item in items:
        new = item
        if hide_next and isinstance(item, str) and not item.startswith("-"):
            new = MASK
        elif (
            isinstance(item, str)
            and item.startswith("-")
            and "=" not in item
            and is_secret_name(item)
        ):
            hide_next = True
            out.append(item)
            continue
        else:
            new = mask_payload(item)
        hide_next = False
        changed = changed or new is not item
        out.append(new)
    return out if changed else items


def mask_payload(value: Any, *, env: bool = False) -> Any:
    """Dumped event data (dicts, lists, strings, numbers) with secrets masked.

    ``env`` marks a mapping of environment variables: secret names are dropped, not masked.
    Returns ``value`` itself when nothing needed masking (callers test ``is``).
    """
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            if isinstance(key, str) and (is_secret_env_name(key) if env else _is_secret_key(key)):
                if env:
                    changed = True
                    continue
                new = item if item is None or isinstance(item, bool) or item == "" else MASK
            else:
                new = mask_payload(item, env=key == "env")
            changed = changed or new is not item
            # A key can hold a token too (a flag or variable named by one): masked like a value,
            # numbered when masking makes two keys one, so no entry is lost.
            masked_key = mask_text(key) if isinstance(key, str) else key
            if masked_key != key:
                changed = True
                base, n = masked_key, 2
                while masked_key in out or masked_key in value:
                    masked_key, n = f"{base} ({n})", n + 1
            out[masked_key] = new
        return out if changed else value
    if isinstance(value, list):
        return _mask_argv(value)
    return value


def mask_json(text: str) -> str:
    """A JSON document (an event's payload or host as stored) with secrets masked.

    Returns ``text`` unchanged — no parse — when ``may_hold_secret`` says it cannot hold one.
    """
    if not may_hold_secret(text):
        return text
    data = json.loads(text)
    masked = mask_payload(data)
    return text if masked is data else json.dumps(masked, ensure_ascii=False, separators=(",", ":"))


def _load_env_words() -> None:
    extra = os.environ.get("TUNELEDGER_SECRET_WORDS", "")
    words = [w for w in (part.strip() for part in extra.split(",")) if w]
    if words:
        add_secret_words(words)


_load_env_words()
