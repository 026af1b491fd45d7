"""Data access of the TUI: plain functions over ``LedgerStore``; no Textual here.

Every function opens the ledger through the store's short-lived connections
(``LedgerStore.connect``), so the TUI never holds the DuckDB file: a CLI append
or a runner that writes meanwhile only waits for one query, never fails.
``load_snapshot`` reads everything the panes show in ONE open of the file.

Every row is read through ``ledger.read.model`` (the views' rows as they are: the same
functions the CLI, the export and the runners read through); this module only chooses
what to reread on a refresh and the display order. The screens call these from thread
workers; the results are plain dicts and dataclasses, so they can be tested without a
terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import duckdb

from ledger.read import model as read_model
from ledger.read.model import EventFilter
from ledger.store import LedgerStore
from schemas.metrics import HEADLINE_METRICS

#: The board's statuses in display order (the ``board`` view's ``status`` values).
STATUSES: tuple[str, ...] = ("proposed", "accepted", "rejected", "deferred", "done")

#: Metrics of the benchmarks pane: (metric column of ``benchmark_summary``, short label).
BENCH_METRICS: tuple[tuple[str, str], ...] = tuple((m.name, m.header) for m in HEADLINE_METRICS)

#: How many events the timeline loads at first (the tail); newer ones stream in.
TIMELINE_TAIL = 500

#: What the timeline shows (the read model's one filter; the pane sets a type and a session).
TimelineFilter = EventFilter


# --- board ----------------------------------------------------------------------------

#: A candidate triaged concurrently on two hosts (``sync_conflicts``): listed first.
CONFLICTING = "conflicting"


def _status_rank(status: str | None) -> int:
    if status == CONFLICTING:
        return -1
    return STATUSES.index(status) if status in STATUSES else len(STATUSES)


def _priority_rank(priority: str | None) -> int:
    return {"high": 0, "medium": 1, "low": 2}.get(priority or "", 3)


def _board(con: duckdb.DuckDBPyConnection, session_id: str | None) -> list[dict[str, Any]]:
    """The ``board`` view's rows with their ``board_deltas`` columns, as they are, in display
    order: conflicting first, then by status, priority and candidate id."""
    board = read_model.board(con, session_id)
    board.sort(
        key=lambda r: (_status_rank(r["status"]), _priority_rank(r["priority"]), r["candidate_id"])
    )
    return board


# --- flags ------------------------------------------------------------------------------


def flag_columns(flags: list[dict[str, Any]]) -> list[tuple[str | None, str | None]]:
    """The matrix's columns: every (arch, engine_version) that has a verdict, sorted."""
    keys = {(row["arch"], row["engine_version"]) for row in flags}
    return sorted(keys, key=lambda k: (k[0] or "~", k[1] or "~"))


def flag_matrix(
    flags: list[dict[str, Any]],
) -> dict[str, dict[tuple[str | None, str | None], dict[str, Any]]]:
    """``{setting: {(arch, engine_version): latest verdict row}}``; a later row wins across
    engines. ``setting`` is the flag, or ``flag=value`` for a verdict on one of its values."""
    matrix: dict[str, dict[tuple[str | None, str | None], dict[str, Any]]] = {}
    for row in sorted(flags, key=lambda r: r["seq"]):
        matrix.setdefault(row["setting"], {})[(row["arch"], row["engine_version"])] = row
    return dict(sorted(matrix.items()))


def evidence_refs(evidence: Any, limit: int = 4) -> list[str]:
    """The ``file:line`` pointers of a verdict's evidence (a JSON list), at most ``limit``."""
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence)
        except ValueError:
            return []
    refs = [
        str(item["ref"])
        for item in evidence or []
        if isinstance(item, dict)
        and item.get("ref")
        and item.get("kind") in ("source", "log", "file")
    ]
    return refs[:limit] + ([f"+{len(refs) - limit} more"] if len(refs) > limit else [])


# --- timeline ---------------------------------------------------------------------------


def _timeline(
    con: duckdb.DuckDBPyConnection, flt: EventFilter, after_seq: int, limit: int
) -> list[dict[str, Any]]:
    """The timeline's tail (``read_model.timeline``); an event pulled from another host's
    ledger has its summary prefixed with ``⇣ host:``."""
    rows = read_model.timeline(con, replace(flt, after_seq=after_seq), tail=limit)
    for row in rows:
        if row["origin"] is not None:
            row["summary"] = f"⇣ {row['origin']}: {row['summary']}"
    return rows


# --- the snapshot -----------------------------------------------------------------------

#: The parts of a refresh, in the order they are read (the timeline first: it is
#: where a new event shows up, so its latency matters most).
PARTS: tuple[str, ...] = ("timeline", "board", "bench", "flags", "meta")

#: Event types that can change each part (besides any event naming a candidate,
#: which can change the board's latest evidence, and retractions, which change all).
_PART_TYPES: dict[str, frozenset[str]] = {
    "board": frozenset(
        {
            "candidate_proposed",
            "candidate_triaged",
            "flag_researched",
            "finding_recorded",
            "server_started",
            "benchmark_completed",
            "comparison_completed",
        }
    ),
    "bench": frozenset({"benchmark_completed", "comparison_completed"}),
    "flags": frozenset({"flag_researched", "finding_recorded"}),
}


def default_session(store: LedgerStore) -> str | None:
    """The session of the latest ``session_started`` (else of any event), or None."""
    with store.connect(views=()) as con:
        return read_model.default_session(con)


def changed_parts(con: duckdb.DuckDBPyConnection, since_seq: int) -> set[str]:
    """Which parts the events after ``since_seq`` can change (all of them when ``since_seq`` is 0)."""
    if since_seq <= 0:
        return set(PARTS)
    rows = con.execute(
        "SELECT DISTINCT type, (payload->>'candidate_id') IS NOT NULL FROM events WHERE seq > ?",
        [since_seq],
    ).fetchall()
    if not rows:
        return set()
    types = {t for t, _ in rows}
    if "event_retracted" in types:
        return set(PARTS)
    parts = {"timeline", "meta"}
    for part, part_types in _PART_TYPES.items():
        if types & part_types:
            parts.add(part)
    if any(named for _, named in rows):
        parts.add("board")
    return parts


#: The views each part of the snapshot reads.
_PART_VIEWS: dict[str, tuple[str, ...]] = {
    "board": ("board", "board_deltas"),
    "timeline": ("timeline",),
    "bench": ("benchmark_summary",),
    "flags": ("flag_verdicts",),
    "meta": (),
}


def iter_snapshot(
    store: LedgerStore,
    session_id: str | None,
    *,
    since_seq: int = 0,
    timeline_filter: TimelineFilter | None = None,
    tail: int = TIMELINE_TAIL,
) -> Iterator[tuple[str, Any]]:
    """Read what changed since ``since_seq`` in one open of the ledger, part by part.

    Yields ``("head", seq)`` first, then ``(part, data)`` for each part of
    ``PARTS`` that the new events can change, so the caller can show each part
    as soon as it is read. ``since_seq`` 0 reads everything. The timeline part
    is ``(rows, reset)``: ``reset`` false means ``rows`` are only the new events
    (a retraction forces a reset, since it hides an older row).
    """
    flt = timeline_filter or EventFilter()
    with store.connect(views=()) as con:
        head = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
        yield "head", head
        if head < since_seq:  # the file was replaced by a shorter one: start over
            since_seq = 0
        parts = changed_parts(con, since_seq)
        # only the views of the parts read this time (each costs its binding: docs/performance.md)
        read = parts | ({"board"} if since_seq == 0 else set())
        store.read_views(con, [v for part in read for v in _PART_VIEWS.get(part, ())])
        if since_seq == 0:  # first paint: the board is what the user sees first
            yield "board", _board(con, session_id)
        if "timeline" in parts:
            reset = since_seq == 0 or "board" in parts and "bench" in parts and "flags" in parts
            yield "timeline", (_timeline(con, flt, 0 if reset else since_seq, tail), reset)
        if "board" in parts and since_seq != 0:
            yield "board", _board(con, session_id)
        if "bench" in parts:
            yield "bench", read_model.benchmark_summary(con, session_id)
        if "flags" in parts:
            yield "flags", read_model.flag_verdicts(con)
        if "meta" in parts:
            yield "meta", (read_model.sessions(con), read_model.event_types(con))


def load_snapshot(store: LedgerStore, session_id: str | None, **kwargs: Any) -> dict[str, Any]:
    """Everything ``iter_snapshot`` yields, as one dict (for tests and the benchmark)."""
    return dict(iter_snapshot(store, session_id, **kwargs))


def load_timeline(
    store: LedgerStore, flt: TimelineFilter, *, tail: int = TIMELINE_TAIL
) -> list[dict[str, Any]]:
    """The last ``tail`` events matching ``flt``, oldest first (a filter change rereads)."""
    with store.connect(views=("timeline",)) as con:
        return _timeline(con, flt, 0, tail)


def head(store: LedgerStore) -> int:
    """The ledger's highest ``seq`` (the fallback poll compares it)."""
    return store.head()


# --- event detail -----------------------------------------------------------------------


@dataclass
class EventDetail:
    """One event as JSON and the events it links to, each with how (``relation``)."""

    event_id: str
    seq: int | None
    type: str
    json: str
    links: list[dict[str, Any]]


def load_event_detail(store: LedgerStore, event_id: str) -> EventDetail:
    """The event's JSON (``ledger.write.jsonl.event_to_json``) and its links in both directions
    (``ledger.read.model.linked_events``, as ``tuneledger show`` lists them).

    Raises:
        ledger.errors.NotFound: no such event.
    """
    from ledger.write.jsonl import event_to_json

    event = store.get(event_id)
    with store.connect(views=("event_log", "all_events")) as con:
        links = read_model.linked_events(con, event)
    return EventDetail(
        str(event.event_id), event.seq, event.type, event_to_json(event, indent=2), links
    )
