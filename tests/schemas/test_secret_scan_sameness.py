"""The one-pass secret scan answers exactly as the per-root substring loop it replaced.

``may_hold_secret`` is the gate of the no-secret guarantee (False only when the text cannot
hold anything ``mask_text`` masks), so its answers must not move: every fixture and case
file, each line of them, and generated strings built from the roots, shapes and the
boundary characters the whole-word check looks at, give the same answer old and new.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import secrets
from schemas.secrets import _SHAPE_HINTS, _hit, _PlainScan, may_hold_secret, may_hold_secrets

ROOT = Path(__file__).resolve().parents[1]


def reference(text: str) -> bool:
    """The loop before the one-pass scan: one ``str.find`` chain per root, and the long-run
    test that sends a text to the library's token shapes (``schemas.secret_shapes``); since
    round three also an upper-case secret environment name, ``-u user:pw`` and ``api-key V``."""
    if secrets._LONG_RUN.search(text) or secrets._ENV_HINT.search(text):
        return True
    if secrets._USER_PASSWORD_RE.search(text) or secrets._NAME_SPACE_VALUE_RE.search(text):
        return True
    lower = text.lower()
    if len(lower) != len(text):
        return True
    for root in secrets._roots:
        shape = root in _SHAPE_HINTS
        start = lower.find(root)
        while start >= 0:
            if _hit(text, lower, start, shape):
                return True
            start = lower.find(root, start + 1)
    return False


def _texts() -> list[str]:
    texts: list[str] = []
    for base in (ROOT / "fixtures",):  # ../shared/cases are copied to fixtures/cases
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.stat().st_size > 20_000_000:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            texts.append(text)
            texts.extend(text.splitlines())
    return texts


def test_fixture_and_case_files_same_answers() -> None:
    texts = _texts()
    assert len(texts) > 1000
    differ = [t[:200] for t in texts if may_hold_secret(t) != reference(t)]
    assert differ == []
    # Both answers occur, so the comparison means something.
    answers = {may_hold_secret(t) for t in texts}
    assert answers == {True, False}


_PIECES = [
    *secrets._roots,
    "ghf_",
    "xghf_",
    "gHf_",
    "sk-",
    "SK-",
    "hF_",
    "tokens",
    "authToken",
    "apiKey",
    "api_key",
    "output_tokens",
    "AKIA",
    "xoxb-",
    "private",
    "İ",
    "ß",
    "K",
    "eyJ",
    "github_pat_",
    "glpat-",
    "AIza",
    "sk_live_",
    "0123456789",
    "abcdefghij",
    "AB/+cd",
]
_pieces = st.sampled_from(_PIECES)
_glue = st.text(alphabet="aZ_-. :=\"'0\n", max_size=3)


@pytest.mark.slow  # thousands of generated texts: `make test`, not `make check`
@settings(max_examples=3000, deadline=None)
@given(st.lists(st.tuples(_glue, _pieces, _glue), max_size=6))
def test_generated_from_roots_same_answers(parts: list[tuple[str, str, str]]) -> None:
    text = "".join(a + b + c for a, b, c in parts)
    assert may_hold_secret(text) == reference(text)
    assert may_hold_secret(text.upper()) == reference(text.upper())


@pytest.mark.slow  # thousands of generated texts: `make test`, not `make check`
@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=300))
def test_generated_any_text_same_answers(text: str) -> None:
    assert may_hold_secret(text) == reference(text)


def test_the_plain_scan_finds_what_the_automaton_finds() -> None:
    """Where pyahocorasick is not installed (a GPU host with only the tune's wheels), the
    plain scan stands in: the same occurrences for every fixture line."""
    if not hasattr(secrets._scan, "make_automaton"):
        pytest.skip("pyahocorasick is not installed: the plain scan is already the one in use")
    plain = _PlainScan(tuple(secrets._roots))
    for text in _texts()[:5000]:
        lower = text.lower()
        assert sorted(plain.iter(lower)) == sorted(secrets._scan.iter(lower))


# --- the many-texts gate (``may_hold_secrets``, the bulk import's) answers as text by text ---


def test_many_texts_gate_fixture_lines_same_answers() -> None:
    if secrets._gate is None:
        pytest.skip("ahocorasick_rs is not installed: may_hold_secrets asks text by text")
    texts = _texts()
    # in batches, as the bulk import asks (and the whole lot at once)
    for batch in (texts[i : i + 997] for i in range(0, len(texts), 997)):
        assert may_hold_secrets(batch) == [bool(t) and may_hold_secret(t) for t in batch]
    assert sum(may_hold_secrets(texts)) > 0


_camel_glue = st.text(alphabet="aZ_-. :=\"'0\nq", max_size=3)


@pytest.mark.slow  # thousands of generated texts: `make test`, not `make check`
@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.lists(st.tuples(_camel_glue, _pieces, _camel_glue), max_size=4).map(
                lambda parts: "".join(a + b + c for a, b, c in parts)
            ),
            st.text(max_size=40),
        ),
        max_size=8,
    )
)
def test_many_texts_gate_generated_same_answers(texts: list[str | None]) -> None:
    """Texts built from the roots and the characters the whole-word check looks at, side by
    side (a word at one text's end and the next one's start must not join), each as it is
    and upper-cased: the gate's answers are ``may_hold_secret``'s."""
    for batch in (texts, [t.upper() if t else t for t in texts]):
        assert may_hold_secrets(batch) == [bool(t) and may_hold_secret(t) for t in batch]
