"""Data access of the TUI: plain functions over ``LedgerStore``; no Textual here.

Every function opens the ledger through the store's short-lived connections
(``LedgerStore.connect``), so the TUI never holds the DuckDB file: a CLI append
or a runner that writes meanwhile only waits for one query, never fails.
``iter_snapshot`` reads what the panes' parts (``tui.parts``) show in ONE open of the file.

Every row is read through ``ledger.read.model`` (the views' rows as they are: the same
functions the CLI, the export and the runners read through); this module only chooses
what to reread on a refresh and the display order. The screens call these from thread
workers; the results are plain dicts and dataclasses, so they can be tested without a
terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import duckdb

from ledger.read import model as read_model
from ledger.read.model import EventFilter
from ledger.store import LedgerStore
from schemas.metrics import HEADLINE_METRICS

from .parts import Part, Reading, stale_parts

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


def board(con: duckdb.DuckDBPyConnection, session_id: str | None) -> list[dict[str, Any]]:
    """The board pane's rows (``_board``)."""
    return _board(con, session_id)


@dataclass(frozen=True)
class TimelineData:
    """What the timeline shows after a refresh: ``rows`` (only the new events unless
    ``reset``), the sessions and event types its filters offer, and the filter it was read
    for (a pane whose filter changed since drops it: a reload follows)."""

    rows: list[dict[str, Any]]
    reset: bool
    sessions: list[str]
    types: list[str]
    filter: EventFilter


def timeline(reading: Reading, *, tail: int = TIMELINE_TAIL) -> TimelineData:
    """The timeline's part: the new events (all of the tail when the read is full) and its
    filters' choices."""
    flt = reading.state if isinstance(reading.state, EventFilter) else EventFilter()
    rows = _timeline(reading.con, flt, 0 if reading.full else reading.since_seq, tail)
    return TimelineData(
        rows,
        reading.full,
        read_model.sessions(reading.con),
        read_model.event_types(reading.con),
        flt,
    )


def default_session(store: LedgerStore) -> str | None:
    """The session of the latest ``session_started`` (else of any event), or None."""
    with store.connect(views=()) as con:
        return read_model.default_session(con)


def iter_snapshot(
    store: LedgerStore,
    session_id: str | None,
    parts: Sequence[Part],
    *,
    since_seq: int = 0,
    states: Mapping[str, Any] | None = None,
) -> Iterator[tuple[str, Any]]:
    """Read what changed since ``since_seq`` in one open of the ledger, part by part.

    Yields ``("head", seq)`` first, then ``(part name, data)`` for each of ``parts`` that the
    new events made stale (``tui.parts.stale_parts``), so the caller can show each part as
    soon as it is read. ``since_seq`` 0 reads everything; ``states`` is each part's
    ``Reading.state`` by name.
    """
    with store.connect(views=()) as con:
        head = read_model.log_head(con)
        yield "head", head
        if head < since_seq:  # the file was replaced by a shorter one: start over
            since_seq = 0
        stale, full = stale_parts(parts, con, since_seq)
        for part in stale:
            # only the views this part reads, bound as it comes (each costs its binding:
            # docs/performance.md), so the first part shows before the others' are made
            store.read_views(con, part.views)
            state = (states or {}).get(part.name)
            yield part.name, part.read(Reading(con, session_id, since_seq, full, state))


def load_snapshot(
    store: LedgerStore, session_id: str | None, parts: Sequence[Part], **kwargs: Any
) -> dict[str, Any]:
    """Everything ``iter_snapshot`` yields, as one dict (for tests and the benchmark)."""
    return dict(iter_snapshot(store, session_id, parts, **kwargs))


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
