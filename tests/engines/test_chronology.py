"""``lines.Chronology``: the streamed import's one-pass ``oldest_first`` decision (see
docs/reliability.md, "Server log import speed and memory"), which stops reading leading times
once one rose."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledger.engines.lines import Chronology, oldest_first

_LINE = st.one_of(
    st.integers(0, 9).map(lambda s: f"[2026-11-20 14:10:0{s}] INFO x"),
    st.integers(0, 9).map(lambda s: f"2026-11-20T14:10:0{s} y"),
    st.sampled_from(["", "  ", "no time here", "Traceback (most recent call last):"]),
)


@given(st.lists(_LINE, max_size=40))
def test_chronology_passes_every_line_and_decides_as_oldest_first(lines: list[str]) -> None:
    """Every line passed on in order, and ``backwards`` is ``oldest_first``'s decision, on any
    mix of rising, falling, equal and missing times and blank lines."""
    chronology = Chronology()
    assert list(chronology.watch(iter(lines))) == lines
    assert chronology.backwards == (oldest_first(lines) is not lines)


def test_chronology_reads_no_time_after_one_rose() -> None:
    """After a rise the rest is passed on unread: a later fall does not count (``backwards``
    needs no rise, so it cannot change the answer)."""
    lines = ["[2026-11-20 14:10:01] a", "[2026-11-20 14:10:02] b", "[2026-11-20 14:10:00] c"]
    chronology = Chronology()
    assert list(chronology.watch(iter(lines))) == lines
    assert chronology.rise and not chronology.fall and not chronology.backwards
