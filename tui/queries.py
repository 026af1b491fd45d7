"""Data access of the TUI: plain functions over ``LedgerStore``; no Textual here.

Every function opens the ledger through the store's short-lived connections
(``LedgerStore.connect``), so the TUI never holds the DuckDB file: a CLI append
or a runner that writes meanwhile only waits for one query, never fails.
``load_snapshot`` reads everything the panes show in ONE open of the file.

The screens call these from thread workers; the results are plain dicts and
dataclasses, so they can be tested without a terminal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from ledger.store import LedgerStore
from schemas.metrics import HEADLINE_METRICS

#: The board's statuses in display order (the ``board`` view's ``status`` values).
STATUSES: tuple[str, ...] = ("proposed", "accepted", "rejected", "deferred", "done")

#: The metric of the board's delta column.
BOARD_DELTA_METRIC = "output_throughput"

#: Metrics of the benchmarks pane: (metric column, short label).
BENCH_METRICS: tuple[tuple[str, str], ...] = tuple((m.name, m.header) for m in HEADLINE_METRICS)

#: How many events the timeline loads at first (the tail); newer ones stream in.
TIMELINE_TAIL = 500


@dataclass
class TimelineFilter:
    """What the timeline shows: one event type and/or one session (``None``: all)."""

    type: str | None = None
    session_id: str | None = None


# --- board ----------------------------------------------------------------------------

_BOARD_SQL = """
WITH versions AS (
    SELECT stream, max(stream_version) AS stream_version
    FROM events WHERE stream LIKE 'candidate:%' GROUP BY stream
),
proposal_host AS (
    -- the envelope's host needs no upcasting: read events directly (cheaper than live_events)
    SELECT (payload->>'candidate_id') AS candidate_id, (host->>'engine_version') AS engine_version
    FROM events WHERE type = 'candidate_proposed'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'candidate_id') ORDER BY seq DESC) = 1
),
flag_engine AS (
    SELECT flag, arch, max(engine_version) AS engine_version FROM flag_verdicts GROUP BY ALL
)
SELECT b.candidate_id, b.session_id, b.kind, b.title, b.flag, b.priority, b.status, b.verdict,
       b.reason, b.hypothesis, b.arch, b.latest_evidence_type, b.latest_evidence, b.updated_seq, b.conflict,
       coalesce(ph.engine_version, fe.engine_version) AS engine_version,
       coalesce(v.stream_version, 0) AS stream_version
FROM board b
LEFT JOIN versions v ON v.stream = 'candidate:' || b.candidate_id
LEFT JOIN proposal_host ph USING (candidate_id)
LEFT JOIN flag_engine fe ON fe.flag = b.flag AND fe.arch IS NOT DISTINCT FROM b.arch
WHERE ?::VARCHAR IS NULL OR b.session_id = ?::VARCHAR
"""

_RUNS_SQL = """
SELECT config_name, session_id, coalesce(json_keys(flags), []) AS flag_names, NULL AS candidate_id FROM server_runs
WHERE config_name IS NOT NULL AND (?::VARCHAR IS NULL OR session_id = ?::VARCHAR)
UNION ALL
SELECT DISTINCT config_name, session_id, [] AS flag_names, candidate_id FROM benchmarks
WHERE candidate_id IS NOT NULL AND (?::VARCHAR IS NULL OR session_id = ?::VARCHAR)
"""

_DELTAS_SQL = """
SELECT session_id, config_name, baseline_config, concurrency, metric, baseline_value, value, change_pct,
       ci_low_pct, ci_high_pct, verdict, runs, baseline_runs, seq
FROM benchmark_deltas
WHERE ?::VARCHAR IS NULL OR session_id = ?::VARCHAR
ORDER BY config_name, concurrency, metric
"""


#: A candidate triaged concurrently on two hosts (``sync_conflicts``): listed first.
CONFLICTING = "conflicting"


def _status_rank(status: str | None) -> int:
    if status == CONFLICTING:
        return -1
    return STATUSES.index(status) if status in STATUSES else len(STATUSES)


def link_board_deltas(
    board: list[dict[str, Any]], runs: list[dict[str, Any]], deltas: list[dict[str, Any]]
) -> None:
    """Give each board row the benchmark delta of its latest related configuration (in place).

    The link rule: a configuration whose runs were recorded for a candidate
    (``candidate_id`` on ``benchmark_completed``: plans and ``run bench --candidate``)
    relates to that candidate only. Any other configuration relates to a candidate
    when its name is the candidate id or the id without its ``kind:`` prefix, or
    when a server run of it (same session) was started with the candidate's flag.
    Of the related configurations that have an ``output_throughput`` delta
    against the baseline, the one measured last (highest ``seq``) wins, and its
    change is shown at its highest concurrency. Sets ``delta_config``,
    ``delta_concurrency``, ``delta_pct`` and ``delta_verdict`` (``None`` when no
    configuration relates).
    """
    flags_by_config: dict[tuple[str | None, str], set[str]] = {}
    made_for: dict[tuple[str | None, str], set[str]] = {}
    for run in runs:
        key = (run["session_id"], run["config_name"])
        flags_by_config.setdefault(key, set()).update(run.get("flag_names") or [])
        if run.get("candidate_id"):
            made_for.setdefault(key, set()).add(run["candidate_id"])
    latest: dict[tuple[str | None, str], dict[str, Any]] = {}
    last_seq: dict[tuple[str | None, str], int] = {}
    for delta in deltas:
        if delta["metric"] != BOARD_DELTA_METRIC:
            continue
        key = (delta.get("session_id"), delta["config_name"])
        last_seq[key] = max(last_seq.get(key, 0), delta.get("seq") or 0)
        best = latest.get(key)
        if best is None or (delta["concurrency"] or 0) > (best["concurrency"] or 0):
            latest[key] = delta
    for row in board:
        names = {row["candidate_id"], row["candidate_id"].split(":", 1)[-1]}
        related = [
            key
            for key in latest
            if key[0] == row["session_id"]
            and (
                row["candidate_id"] in made_for[key]
                if key in made_for
                else key[1] in names
                or (row["flag"] and row["flag"] in flags_by_config.get(key, set()))
            )
        ]
        chosen = max(related, key=lambda key: last_seq[key], default=None)
        chosen_delta = latest.get(chosen) if chosen else None
        row["delta_config"] = chosen_delta["config_name"] if chosen_delta else None
        row["delta_concurrency"] = chosen_delta["concurrency"] if chosen_delta else None
        row["delta_pct"] = chosen_delta["change_pct"] if chosen_delta else None
        row["delta_verdict"] = chosen_delta["verdict"] if chosen_delta else None


def _rows(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _board(
    con: duckdb.DuckDBPyConnection, session_id: str | None, deltas: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    board = _rows(con, _BOARD_SQL, [session_id, session_id])
    runs = _rows(con, _RUNS_SQL, [session_id, session_id, session_id, session_id])
    link_board_deltas(board, runs, deltas)
    board.sort(
        key=lambda r: (_status_rank(r["status"]), _priority_rank(r["priority"]), r["candidate_id"])
    )
    return board


def _priority_rank(priority: str | None) -> int:
    return {"high": 0, "medium": 1, "low": 2}.get(priority or "", 3)


def _deltas(con: duckdb.DuckDBPyConnection, session_id: str | None) -> list[dict[str, Any]]:
    return _rows(con, _DELTAS_SQL, [session_id, session_id])


# --- benchmarks -------------------------------------------------------------------------

_BENCH_SQL = f"""
SELECT session_id, config_name, bool_or(is_baseline) AS is_baseline, concurrency,
       count(*) AS runs, max(seq) AS last_seq,
       {", ".join(f"avg({name}) AS {name}" for name, _ in BENCH_METRICS)}
FROM benchmarks
WHERE valid IS DISTINCT FROM false AND (?::VARCHAR IS NULL OR session_id = ?::VARCHAR)
GROUP BY session_id, config_name, concurrency
ORDER BY NOT bool_or(is_baseline), min(seq), concurrency
"""


def _bench(
    con: duckdb.DuckDBPyConnection, session_id: str | None, all_deltas: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per (configuration, concurrency): per metric, the value and the delta.

    A value is ``benchmark_deltas``' central value (over the runs of the compared arm: same
    workload, concurrency and rate) where the metric was compared, else the mean of the valid runs.
    """
    rows = _rows(con, _BENCH_SQL, [session_id, session_id])
    deltas = {
        (d["session_id"], d["config_name"], d["concurrency"], d["metric"]): d for d in all_deltas
    }
    # What a baseline row shows where a comparison used it: that comparison's baseline value.
    baselines = {
        (d["session_id"], d["baseline_config"], d["concurrency"], d["metric"]): d
        for d in all_deltas
    }
    for row in rows:
        key = (row["session_id"], row["config_name"], row["concurrency"])
        row["deltas"] = {metric: deltas.get((*key, metric)) for metric, _ in BENCH_METRICS}
        # Show the central value a change is computed from (benchmark_deltas' value over the compared
        # arm's runs), not an average over every workload of the config: the table and the view agree.
        for metric, _ in BENCH_METRICS:
            delta = row["deltas"][metric]
            if delta is not None and delta["value"] is not None:
                row[metric] = delta["value"]
            elif row["is_baseline"] and (base := baselines.get((*key, metric))) is not None:
                row[metric] = base["baseline_value"]
    return rows


# --- flags ------------------------------------------------------------------------------

_FLAGS_SQL = """
SELECT flag, engine, engine_version, arch, verdict, basis, no_effect, summary, findings, seq
FROM flag_verdicts ORDER BY flag, arch, engine_version
"""


def flag_columns(flags: list[dict[str, Any]]) -> list[tuple[str | None, str | None]]:
    """The matrix's columns: every (arch, engine_version) that has a verdict, sorted."""
    keys = {(row["arch"], row["engine_version"]) for row in flags}
    return sorted(keys, key=lambda k: (k[0] or "~", k[1] or "~"))


def flag_matrix(
    flags: list[dict[str, Any]],
) -> dict[str, dict[tuple[str | None, str | None], dict[str, Any]]]:
    """``{flag: {(arch, engine_version): latest verdict row}}``; a later row wins across engines."""
    matrix: dict[str, dict[tuple[str | None, str | None], dict[str, Any]]] = {}
    for row in sorted(flags, key=lambda r: r["seq"]):
        matrix.setdefault(row["flag"], {})[(row["arch"], row["engine_version"])] = row
    return dict(sorted(matrix.items()))


# --- timeline ---------------------------------------------------------------------------

_TIMELINE_COLUMNS = (
    "seq, strftime(recorded_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') AS recorded_at, session_id, type, "
    "actor_kind || ':' || actor_name AS actor, coalesce(summary, type) AS summary, "
    "event_id::VARCHAR AS event_id"
)


def _timeline(
    con: duckdb.DuckDBPyConnection, flt: TimelineFilter, after_seq: int, limit: int
) -> list[dict[str, Any]]:
    where: list[str] = ["seq > ?"]
    params: list[Any] = [after_seq]
    if flt.type:
        where.append("type = ?")
        params.append(flt.type)
    if flt.session_id:
        where.append("session_id = ?")
        params.append(flt.session_id)
    # Find the tail's first seq on the bare table first: the view computes a
    # summary per row, and a seq bound lets DuckDB skip all older rows.
    floor = con.execute(
        f"SELECT min(seq) FROM (SELECT seq FROM events WHERE {' AND '.join(where)} "
        f"ORDER BY seq DESC LIMIT {int(limit)})",
        params,
    ).fetchall()[0][0]
    if floor is None:
        return []
    where[0], params[0] = "seq >= ?", floor
    sql = (
        f"SELECT {_TIMELINE_COLUMNS} FROM timeline WHERE {' AND '.join(where)} "
        f"ORDER BY seq DESC LIMIT {int(limit)}"
    )
    rows = list(reversed(_rows(con, sql, params)))
    _mark_origins(con, rows)
    return rows


def _mark_origins(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Prefix the summary of events pulled from another host's ledger with ``⇣ host:`` (in place)."""
    if not rows:
        return
    origins = dict(
        con.execute(
            "SELECT event_id::VARCHAR, origin_name FROM sync_events WHERE seq BETWEEN ? AND ? AND origin_ledger::VARCHAR "
            "<> coalesce((SELECT value FROM ledger_meta WHERE key = 'ledger_id'), '')",
            [rows[0]["seq"], rows[-1]["seq"]],
        ).fetchall()
    )
    for row in rows:
        origin = origins.get(row["event_id"])
        if origin is not None:
            row["summary"] = f"⇣ {origin}: {row['summary']}"


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
    with store.connect() as con:
        rows = con.execute(
            "SELECT session_id FROM events WHERE session_id IS NOT NULL "
            "ORDER BY type = 'session_started' DESC, seq DESC LIMIT 1"
        ).fetchall()
    return rows[0][0] if rows else None


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
    flt = timeline_filter or TimelineFilter()
    with store.connect() as con:
        head = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
        yield "head", head
        if head < since_seq:  # the file was replaced by a shorter one: start over
            since_seq = 0
        parts = changed_parts(con, since_seq)
        deltas = _deltas(con, session_id) if parts & {"board", "bench"} else []
        if since_seq == 0:  # first paint: the board is what the user sees first
            yield "board", _board(con, session_id, deltas)
        if "timeline" in parts:
            reset = since_seq == 0 or "board" in parts and "bench" in parts and "flags" in parts
            yield "timeline", (_timeline(con, flt, 0 if reset else since_seq, tail), reset)
        if "board" in parts and since_seq != 0:
            yield "board", _board(con, session_id, deltas)
        if "bench" in parts:
            yield "bench", _bench(con, session_id, deltas)
        if "flags" in parts:
            yield "flags", _rows(con, _FLAGS_SQL)
        if "meta" in parts:
            sessions = [
                r[0]
                for r in con.execute(
                    "SELECT session_id FROM events WHERE session_id IS NOT NULL GROUP BY session_id ORDER BY min(seq)"
                ).fetchall()
            ]
            types = [
                r[0]
                for r in con.execute("SELECT DISTINCT type FROM events ORDER BY type").fetchall()
            ]
            yield "meta", (sessions, types)


def load_snapshot(store: LedgerStore, session_id: str | None, **kwargs: Any) -> dict[str, Any]:
    """Everything ``iter_snapshot`` yields, as one dict (for tests and the benchmark)."""
    return dict(iter_snapshot(store, session_id, **kwargs))


def load_timeline(
    store: LedgerStore, flt: TimelineFilter, *, tail: int = TIMELINE_TAIL
) -> list[dict[str, Any]]:
    """The last ``tail`` events matching ``flt``, oldest first (a filter change rereads)."""
    with store.connect() as con:
        return _timeline(con, flt, 0, tail)


def head(store: LedgerStore) -> int:
    """The ledger's highest ``seq`` (the fallback poll compares it)."""
    return store.head()


# --- event detail -----------------------------------------------------------------------

_LINK_FIELDS = ("evidence_event_ids", "refs", "benchmark_event_ids")


@dataclass
class EventDetail:
    """One event as JSON and the events it links to, each with how (``relation``)."""

    event_id: str
    seq: int | None
    type: str
    json: str
    links: list[dict[str, Any]]


def load_event_detail(store: LedgerStore, event_id: str) -> EventDetail:
    """The event's JSON (``ledger.jsonl.event_to_json``) and its links in both directions.

    Outgoing: its cause (``causation_id``), the events it cites
    (``evidence_event_ids``, ``refs``, ``benchmark_event_ids``) and the event it
    retracts. Incoming: events caused by it, citing it or retracting it.

    Raises:
        ledger.errors.NotFound: no such event.
    """
    from ledger.jsonl import event_to_json

    event = store.get(event_id)
    data = event.model_dump(mode="json")
    outgoing: dict[str, str] = {}
    if data.get("causation_id"):
        outgoing[data["causation_id"]] = "its cause"
    for name in _LINK_FIELDS:
        for ref in data.get(name) or []:
            outgoing.setdefault(str(ref), f"cited ({name})")
    if data.get("retracted_event_id"):
        outgoing[data["retracted_event_id"]] = "retracted by this"
    me = str(event.event_id)
    sql = """
    SELECT seq, type, coalesce(summary, type) AS summary, event_id::VARCHAR AS event_id,
           causation_id::VARCHAR AS causation_id
    FROM event_log
    WHERE event_id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))
       OR causation_id = ?::UUID
       OR seq IN (SELECT seq FROM all_events
                  WHERE list_contains(CAST(payload->'evidence_event_ids' AS VARCHAR[]), ?)
                     OR list_contains(CAST(payload->'refs' AS VARCHAR[]), ?)
                     OR list_contains(CAST(payload->'benchmark_event_ids' AS VARCHAR[]), ?)
                     OR (payload->>'retracted_event_id') = ?)
    ORDER BY seq
    """
    with store.connect() as con:
        rows = _rows(con, sql, [list(outgoing) or [""], me, me, me, me, me])
    links = []
    for row in rows:
        if row["event_id"] == me:
            continue
        if row["event_id"] in outgoing:
            relation = outgoing[row["event_id"]]
        elif row["causation_id"] == me:
            relation = "caused by this"
        elif row["type"] == "event_retracted":
            relation = "retracts this"
        else:
            relation = "cites this"
        links.append({**row, "relation": relation})
    return EventDetail(me, event.seq, event.type, event_to_json(event, indent=2), links)
