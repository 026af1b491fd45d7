"""``failure.classify`` answers a line by its text with the digits no cascade regex names written
alike (``prefilter.digit_shape``, cached): the verdict must be the full cascade's on the line
as it is, whatever its numbers (docs/reliability.md, the log import's speed)."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.engines import failure
from ledger.engines.lines import strip_layers
from ledger.engines.prefilter import digit_shape

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEVELS = (None, "ERROR", "CRITICAL")
#: each digit rewritten three ways: shifted, reversed, and all to the one digit a regex names
REWRITES = (
    str.maketrans("0123456789", "1234567890"),
    str.maketrans("0123456789", "9876543210"),
    str.maketrans("0123456789", "2222222222"),
)


def _full(text: str, level: str | None) -> failure.Verdict:
    return failure.cascade(text.strip(), level, failure._PREFILTER.all)


def _numbered_lines() -> list[str]:
    seen: set[str] = set()
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix not in (".log", ".txt") or not path.is_file():
            continue
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            text = strip_layers(raw)[0].strip()
            if any(c.isdigit() for c in text):
                seen.add(text)
    return sorted(seen)


def test_lines_whose_numbers_differ_get_the_full_cascades_verdict() -> None:
    lines = _numbered_lines()
    assert len(lines) > 1_000
    for text in lines:
        for table in REWRITES:
            for variant in (text, text.translate(table)):
                for level in LEVELS:
                    assert failure.classify(variant, level) == _full(variant, level), variant


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.lists(
        st.sampled_from(["D2H", "d2h", "OOM", "CUDA error", "req", "#running-req: ", "error"])
        | st.text(alphabet=" :.,-()0123456789", max_size=8),
        max_size=8,
    ),
    st.sampled_from(LEVELS),
)
def test_lines_of_numbers_and_the_cascades_literals(parts: list[str], level: str | None) -> None:
    text = "".join(parts)
    assert failure.classify(text, level) == _full(text, level)


def test_the_table_keeps_the_digits_a_pattern_names() -> None:
    # every digit unnamed: all written as 0
    assert digit_shape([re.compile(r"\d+ of [0-9a-f]+\b")]) == {c: "0" for c in b"123456789"}
    # a literal digit and a partial range keep theirs; the rest go to the smallest one left
    assert digit_shape([re.compile(r"error 7"), re.compile(r"[1-3]x")]) == {
        c: "0" for c in b"4568 9".replace(b" ", b"")
    }
    # a back-reference compares the digits it captured: no table
    assert digit_shape([re.compile(r"(\d)\1")]) is None
    # the cascade names "D2H": 2 is kept
    table = failure._SHAPE
    assert table is not None and ord("2") not in table and table[ord("7")] == "0"
