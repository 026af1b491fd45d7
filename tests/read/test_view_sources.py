"""The event types each view is derived from (``ledger.read.view_sources``), read off the views'
SQL, and the TUI's panes' stale lists derived from them (one declaration: a part's views)."""

from __future__ import annotations

import pytest

from ledger.derive.views import VIEW_NAMES
from ledger.derive.views.board import LINKED_TYPES
from ledger.read.view_sources import Sources, sources_of, view_sources
from schemas import EVENT_TYPES
from tui.panes import PANES, PARTS

SERVER = {"server_started", "server_ready", "server_failed", "server_stopped"}
RETRACTED = "event_retracted"


def test_every_view_has_its_sources_and_they_are_event_types() -> None:
    sources = view_sources()
    assert tuple(sources) == VIEW_NAMES
    for name, found in sources.items():
        if found.types is not None:
            assert found.types <= set(EVENT_TYPES), name


def test_the_sources_follow_the_sql_and_the_views_read() -> None:
    sources = view_sources()
    assert sources["timeline"] == Sources(None)
    assert sources["all_events"].types is None
    # a view's own type filters, and the retractions every live view leaves out
    assert sources["server_runs"] == Sources(frozenset({*SERVER, RETRACTED}))
    assert sources["decisions"] == Sources(frozenset({"decision_recorded", RETRACTED}))
    # bench_runs holds benchmark_completed: the benchmark views are derived from it
    assert sources["benchmarks"] == Sources(frozenset({"benchmark_completed", RETRACTED}))
    # transitively: benchmark_summary reads benchmark_deltas (comparisons) and benchmarks
    assert sources["benchmark_summary"].types == {
        "benchmark_completed",
        "comparison_completed",
        RETRACTED,
    }
    # board_deltas reads server_runs: a server's failure changes a candidate's delta
    assert sources["board_deltas"].types is not None
    assert SERVER <= sources["board_deltas"].types


def test_the_boards_evidence_counts_as_any_event_naming_a_candidate() -> None:
    board = view_sources()["board"]
    assert board.names_candidate
    assert board.types is not None
    # read only from events that name a candidate: not stale on those types as such...
    assert "note_added" in LINKED_TYPES and "note_added" not in board.types
    # ...but a type the board reads elsewhere stays (triages; flag research via the verdicts;
    # decisions via the sync conflicts)
    assert {"candidate_triaged", "flag_researched", "decision_recorded"} <= board.types
    assert not view_sources()["server_runs"].names_candidate


def test_sources_of_several_views_and_an_unknown_one() -> None:
    assert sources_of(["decisions", "timeline"]) == Sources(None)
    assert sources_of(["decisions", "board"]).names_candidate
    assert sources_of([]) == Sources(frozenset())
    with pytest.raises(KeyError, match="no_such_view"):
        sources_of(["no_such_view"])


def test_the_panes_stale_lists_are_their_views_sources() -> None:
    parts = {p.name: p for p in PARTS}
    assert {p.NAME for p in PANES if p.PART is not None} == set(parts)
    for part in PARTS:
        found = sources_of(part.views)
        assert (part.dirtied_by, part.names_candidate) == (found.types, found.names_candidate)
    assert parts["timeline"].dirtied_by is None
    assert parts["flags"].dirtied_by == {"flag_researched", "finding_recorded", RETRACTED}
    assert parts["bench"].dirtied_by == {"benchmark_completed", "comparison_completed", RETRACTED}
    # what the hand-written lists missed: a server's failure or a decision changes the board
    assert parts["board"].is_stale({"server_failed"}, names_candidate=False)
    assert parts["board"].is_stale({"decision_recorded"}, names_candidate=False)
    assert not parts["board"].is_stale({"note_added"}, names_candidate=False)
    assert parts["board"].is_stale({"note_added"}, names_candidate=True)
    assert parts["compare"].dirtied_by == {
        *SERVER,
        "benchmark_completed",
        "comparison_completed",
        RETRACTED,
    }
