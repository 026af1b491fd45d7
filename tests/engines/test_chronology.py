"""``lines.Chronology``: the streamed import's one-pass ``oldest_first`` decision (see
docs/reliability.md, "Server log import speed and memory"), which stops reading leading times
once one rose."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledger.engines.lines import _LEADING_TIME_RE, Chronology, _has_timed_line, oldest_first
from ledger.input_files import BulkRun

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


_RUN_LINE = st.one_of(
    _LINE,
    st.sampled_from(
        [
            "(APIServer pid=7) INFO 12-01 14:45:00 [loggers.py:257] Engine 000: Avg prompt",
            'INFO:     127.0.0.1:40000 - "POST /v1/completions HTTP/1.1" 200 OK',
            "```2026-11-20 14:10:03 z",
            "WARNING [2026-11-20 14:10:04] w",
            "x [2026-11-20 14:10:05] not leading",
        ]
    ),
)


@given(st.lists(st.lists(_RUN_LINE, min_size=1, max_size=6), max_size=8), st.data())
def test_runs_are_counted_or_read_as_their_lines_are(
    groups: list[list[str]], data: st.DataObject
) -> None:
    """Lines given as ``BulkRun``s (a run with no leading time counted whole, one with a time
    read line by line, found by a search that jumps from line end to line end) decide as the
    same lines one at a time, and come out as they went in."""
    items: list[str] = []
    for group in groups:
        if all(line.strip() for line in group) and data.draw(st.booleans()):
            items.append(BulkRun("\n".join(group)))  # a bulk line is never blank
        else:
            items.extend(group)
    lines = [line for item in items for line in item.split("\n")]
    chronology = Chronology()
    out = list(chronology.watch(iter(items)))
    assert [line for item in out for line in item.split("\n")] == lines
    assert chronology.backwards == (oldest_first(lines) is not lines)
    timed = any(_LEADING_TIME_RE.match(line) for group in groups for line in group)
    assert _has_timed_line("\n".join(line for group in groups for line in group)) == timed
