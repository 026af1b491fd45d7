"""The read model: every front end's reads of the ledger, over the SQL views, in one place.

The TUI (``tui.queries``), the CLI (``events``, ``show``, ``import``'s chaining), the
Markdown export and the runners read through these functions, so a fact has one
answer whichever front end shows it. Each function takes an open DuckDB connection
(``LedgerStore.connect()``), so a caller that needs several reads makes them in one
open of the file; rows are plain dicts keyed by the view's column names, exactly as
the view returns them. Nothing here recomputes what a view derives: where a screen
needs a derived fact (the board's benchmark delta, a benchmark arm's central value)
the fact is a column of a view (``ledger.derive.views``: ``board``, ``board_deltas``,
``benchmark_summary``, ...). Presentation (column choice, display order, formatting)
stays with the front end.

Parts:

- ``EventFilter``: the read filters (types, session, stream, actor, since, after seq)
  of ``tuneledger events``, the TUI timeline and ``LedgerStore.read``.
- ``board``, ``benchmark_summary``, ``flag_verdicts``, ``timeline``, ``event_log``:
  the screens' rows.
- ``linked_events``: what an event links to and what links to it (``show``, the TUI's
  event detail).
- ``log_head``, ``new_events``: the log's last ``seq`` and what arrived after one (a screen's
  refresh: ``tui.queries``, ``tui.parts``).
- ``session_host``, ``default_session``: the facts that importers and the TUI start from
  (the previous run's startup facts are ``ledger.write.commands.previous_startup``, with the rule
  that pairs runs).
- ``read_report``: everything the Markdown export renders, read in one connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb

from ledger.errors import NotFound
from schemas.envelope import Host

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.store import LedgerStore
    from schemas.events import Event

Row = dict[str, Any]


def rows(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> list[Row]:
    """The rows of one query as dicts (column name -> value), in the query's order."""
    cur = con.execute(sql, list(params) if params else [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# --- read filters ---------------------------------------------------------------------


@dataclass(frozen=True)
class EventFilter:
    """Which events a listing shows; every field narrows (AND), an empty one does not.

    Attributes:
        types: event type names (any of them).
        session_id: one session.
        stream: one stream (``candidate:<id>``, ``session:<id>`` ...).
        actor: ``kind:name`` (``agent:claude``) or a bare actor name.
        since: only events recorded at or after this time (naive: UTC).
        after_seq: only events with a higher ``seq``.

    The columns it reads (``seq``, ``type``, ``session_id``, ``stream``, ``actor_kind``,
    ``actor_name``, ``recorded_at``) are the same in the ``events`` table and the
    ``event_log`` and ``timeline`` views, so one filter serves all three.
    """

    types: tuple[str, ...] = ()
    session_id: str | None = None
    stream: str | None = None
    actor: str | None = None
    since: datetime | None = None
    after_seq: int = 0

    def where(self) -> tuple[str, list[Any]]:
        """``(SQL condition, parameters)`` for a ``WHERE`` over events or event_log."""
        where: list[str] = ["seq > ?"]
        params: list[Any] = [self.after_seq]
        if self.types:
            where.append("type IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(self.types))
        if self.session_id is not None:
            where.append("session_id = ?")
            params.append(self.session_id)
        if self.stream is not None:
            where.append("stream = ?")
            params.append(self.stream)
        if self.actor is not None:
            where.append("(actor_kind || ':' || actor_name = ? OR actor_name = ?)")
            params += [self.actor, self.actor]
        if self.since is not None:
            since = self.since
            if since.tzinfo is None:  # a naive time is UTC, as recorded_at is stored
                since = since.replace(tzinfo=UTC)
            where.append("recorded_at >= ?")
            params.append(since)
        return " AND ".join(where), params


def _limit(limit: int | None) -> str:
    return f" LIMIT {int(limit)}" if limit is not None else ""


def event_log(
    con: duckdb.DuckDBPyConnection,
    flt: EventFilter,
    *,
    limit: int | None = None,
    newest_first: bool = False,
) -> pa.Table:
    """``event_log`` rows (retracted events too, marked) matching ``flt``, by ``seq``, as an
    Arrow table (``tuneledger events``; its columns even when no row matches).

    Columns: ``seq, recorded_at, type, session, stream, actor`` (``kind:name``),
    ``summary, event_id, retracted``.
    """
    where, params = flt.where()
    sql = (
        "SELECT seq, recorded_at, type, session_id AS session, stream, "
        "actor_kind || ':' || actor_name AS actor, summary, event_id, retracted "
        f"FROM event_log WHERE {where} ORDER BY seq{' DESC' if newest_first else ''}{_limit(limit)}"
    )
    return con.sql(sql, params=params).to_arrow_table()


def read_events(
    store: LedgerStore,
    flt: EventFilter,
    *,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[Event]:
    """The events matching ``flt`` in ``seq`` order (newest first when ``newest_first``), as
    current models (``tuneledger events --format json``)."""
    from ledger.store import COLUMNS, row_to_event

    where, params = flt.where()
    sql = (
        f"SELECT {', '.join(COLUMNS)} FROM events WHERE {where} "
        f"ORDER BY seq{' DESC' if newest_first else ''}{_limit(limit)}"
    )
    with store.connect(views=()) as con:
        found = con.execute(sql, params).fetchall()
    return [row_to_event(dict(zip(COLUMNS, row, strict=True))) for row in found]


#: The timeline's columns: time as UTC text, the actor as ``kind:name``, a summary always.
_TIMELINE_COLUMNS = (
    "seq, strftime(recorded_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') AS recorded_at, session_id, "
    "type, actor_kind || ':' || actor_name AS actor, coalesce(summary, type) AS summary, "
    "event_id::VARCHAR AS event_id"
)


def timeline(con: duckdb.DuckDBPyConnection, flt: EventFilter, *, tail: int) -> list[Row]:
    """The last ``tail`` ``timeline`` rows (retracted events left out) matching ``flt``, oldest
    first, each with ``origin``: the name of the host whose ledger it was pulled from
    (``ledger.sync.replicate``), or None for this ledger's own events.

    Columns: ``seq, recorded_at`` (UTC text), ``session_id, type, actor, summary, event_id, origin``.
    """
    where, params = flt.where()
    # Find the tail's first seq on the bare table first (retracted events left out, as the
    # view leaves them): the view computes a summary per row, and a seq bound lets DuckDB skip
    # all older rows.
    floor = con.execute(
        f"SELECT min(seq) FROM (SELECT seq FROM events ANTI JOIN retractions r USING (event_id) "
        f"WHERE {where} ORDER BY seq DESC LIMIT {int(tail)})",
        params,
    ).fetchall()[0][0]
    if floor is None:
        return []
    bounded = replace(flt, after_seq=max(flt.after_seq, floor - 1))
    where, params = bounded.where()
    out = rows(
        con,
        f"SELECT {_TIMELINE_COLUMNS} FROM timeline WHERE {where} ORDER BY seq DESC LIMIT {int(tail)}",
        params,
    )
    out.reverse()
    origins: dict[str, str] = {}
    if out:
        origins = dict(
            con.execute(
                "SELECT event_id::VARCHAR, origin_name FROM sync_events WHERE seq BETWEEN ? AND ? "
                "AND origin_ledger::VARCHAR <> "
                "coalesce((SELECT value FROM ledger_meta WHERE key = 'ledger_id'), '')",
                [out[0]["seq"], out[-1]["seq"]],
            ).fetchall()
        )
    for row in out:
        row["origin"] = origins.get(row["event_id"])
    return out


def sessions(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every session id, in the order of its first event."""
    return [
        r[0]
        for r in con.execute(
            "SELECT session_id FROM events WHERE session_id IS NOT NULL "
            "GROUP BY session_id ORDER BY min(seq)"
        ).fetchall()
    ]


def event_types(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The event types present in the ledger, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT type FROM events ORDER BY type").fetchall()]


def log_head(con: duckdb.DuckDBPyConnection) -> int:
    """The ``seq`` of the log's last event (0: an empty log)."""
    return int(con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0])


@dataclass(frozen=True)
class NewEvents:
    """What arrived after a ``seq``: the event ``types``, and whether one of them names a
    candidate (``names_candidate``: the board shows a candidate's latest evidence)."""

    types: frozenset[str]
    names_candidate: bool


def new_events(con: duckdb.DuckDBPyConnection, since_seq: int) -> NewEvents:
    """The types of the events after ``since_seq`` (retracted ones included: a retraction is
    news) and whether any of them names a candidate."""
    found = con.execute(
        "SELECT DISTINCT type, (payload->>'candidate_id') IS NOT NULL FROM events WHERE seq > ?",
        [since_seq],
    ).fetchall()
    return NewEvents(frozenset(t for t, _ in found), any(n for _, n in found))


def default_session(con: duckdb.DuckDBPyConnection) -> str | None:
    """The session of the latest ``session_started`` (else of any event), or None."""
    found = con.execute(
        "SELECT session_id FROM events WHERE session_id IS NOT NULL "
        "ORDER BY type = 'session_started' DESC, seq DESC LIMIT 1"
    ).fetchall()
    return found[0][0] if found else None


# --- the screens' rows ----------------------------------------------------------------


def board(con: duckdb.DuckDBPyConnection, session_id: str | None = None) -> list[Row]:
    """Every ``board`` row (one per candidate; of one session when given) with its
    ``board_deltas`` columns (``delta_config, delta_concurrency, delta_pct, delta_verdict,
    delta_seq``; None where no configuration relates), by ``candidate_id``."""
    return rows(
        con,
        "SELECT b.*, d.* EXCLUDE (candidate_id) FROM board b "
        "LEFT JOIN board_deltas d USING (candidate_id) "
        "WHERE ?::VARCHAR IS NULL OR b.session_id = ?::VARCHAR ORDER BY b.candidate_id",
        [session_id, session_id],
    )


def benchmark_summary(con: duckdb.DuckDBPyConnection, session_id: str | None = None) -> list[Row]:
    """``benchmark_summary`` rows (one per arm: configuration, workload, concurrency, rate), the
    baseline's first, then by first run, concurrency and workload."""
    return rows(
        con,
        "SELECT * FROM benchmark_summary WHERE ?::VARCHAR IS NULL OR session_id = ?::VARCHAR "
        "ORDER BY NOT is_baseline, min(first_seq) OVER (PARTITION BY session_id, config_name), "
        "config_name, concurrency NULLS FIRST, dataset NULLS FIRST, input_len NULLS FIRST, "
        "output_len NULLS FIRST, request_rate NULLS FIRST",
        [session_id, session_id],
    )


def flag_verdicts(con: duckdb.DuckDBPyConnection) -> list[Row]:
    """``flag_verdicts`` rows, by flag, value, arch and engine version (``setting``: the flag,
    with ``=value`` for a verdict on one of its values: what screens show)."""
    return rows(
        con,
        "SELECT flag, value, setting, engine, engine_version, arch, verdict, basis, no_effect, "
        "summary, evidence, findings, seq "
        "FROM flag_verdicts ORDER BY flag, value NULLS FIRST, arch, engine_version, engine, seq",
    )


# --- links ----------------------------------------------------------------------------

#: Payload fields whose values are ids of events the event cites.
LINK_FIELDS: tuple[str, ...] = ("evidence_event_ids", "refs", "benchmark_event_ids")


def linked_events(con: duckdb.DuckDBPyConnection, event: Event) -> list[Row]:
    """The events ``event`` links to and that link to it, by ``seq``, each with its ``relation``.

    Outgoing: its cause (``causation_id``: "its cause"), the events it cites
    (``evidence_event_ids``, ``refs``, ``benchmark_event_ids``: "cited (<field>)") and the
    event it retracts ("retracted by this"). Incoming: events caused by it ("caused by
    this"), citing it ("cites this": a ``comparison_completed`` naming a benchmark run, a
    decision naming its evidence) or retracting it ("retracts this"). Retracted events are
    listed too (``event_log``). Columns: ``seq, type, summary, event_id, causation_id,
    relation``.
    """
    data = event.model_dump(mode="json")
    outgoing: dict[str, str] = {}
    if data.get("causation_id"):
        outgoing[str(data["causation_id"])] = "its cause"
    for name in LINK_FIELDS:
        for ref in data.get(name) or []:
            outgoing.setdefault(str(ref), f"cited ({name})")
    if data.get("retracted_event_id"):
        outgoing[str(data["retracted_event_id"])] = "retracted by this"
    me = str(event.event_id)
    cites = " OR ".join(
        f"list_contains(CAST(payload->'{name}' AS VARCHAR[]), ?)" for name in LINK_FIELDS
    )
    sql = f"""
    SELECT seq, type, coalesce(summary, type) AS summary, event_id::VARCHAR AS event_id,
           causation_id::VARCHAR AS causation_id
    FROM event_log
    WHERE event_id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))
       OR causation_id = ?::UUID
       OR seq IN (SELECT seq FROM all_events WHERE {cites} OR (payload->>'retracted_event_id') = ?)
    ORDER BY seq
    """
    params = [list(outgoing) or [""], me, *([me] * len(LINK_FIELDS)), me]
    links = []
    for row in rows(con, sql, params):
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
    return links


# --- facts importers and the TUI start from ---------------------------------------------


def session_host(con: duckdb.DuckDBPyConnection, session_id: str | None) -> Host | None:
    """The host a session recorded (its latest ``host_observed`` or ``session_started`` with
    one), so files imported into it carry its GPU and arch when they do not say; or None."""
    if session_id is None:
        return None
    found = con.execute(
        "SELECT CAST(host AS VARCHAR) FROM live_control WHERE session_id = ? AND host IS NOT NULL "
        "AND type IN ('host_observed', 'session_started') ORDER BY seq DESC LIMIT 1",
        [session_id],
    ).fetchall()
    return Host.model_validate_json(found[0][0]) if found else None


# --- the export's report --------------------------------------------------------------


@dataclass
class SessionReport:
    """Everything the decision log shows of one session, as the views give it.

    Attributes:
        session_id: the session.
        header: its ``session_started``, ``host_observed`` and ``session_ended`` events
            (``seq, event_id, type, source, host, payload``; host and payload JSON text).
        decisions: ``decisions`` rows by seq.
        evidence: ``event_log`` rows of the events the decisions cite, by lower-case id.
        triage: ``board`` rows by first proposal, with ``first_seq``.
        archs: the archs (``smNN``) the session's events name.
        flag_verdicts: ``flag_verdicts`` rows of the session's own flags (its candidates',
            those it gave a verdict on) for those archs or without an arch.
        server_runs: ``server_runs`` rows by first start, with ``first_seq``.
        deltas: ``benchmark_deltas`` rows with ``config_seq`` (first seq of the configuration).
        sources: the ``source`` of the benchmark runs per (config, concurrency, request rate).
        timeline: ``timeline`` rows (``seq, type, stream, summary, event_id, occurred_at``).
        kernel_tunes: ``kernel_tunes`` rows, each with ``results`` (``kernel_tune_results``).
        spec_trials: ``spec_trials`` rows.
        comparison: the session's configurations compared (``ledger.read.comparison``: the
            diff, repeats and Pareto front), ``None`` with fewer than two configurations.
    """

    session_id: str
    header: list[Row] = field(default_factory=list)
    decisions: list[Row] = field(default_factory=list)
    evidence: dict[str, Row] = field(default_factory=dict)
    triage: list[Row] = field(default_factory=list)
    archs: list[str] = field(default_factory=list)
    flag_verdicts: list[Row] = field(default_factory=list)
    server_runs: list[Row] = field(default_factory=list)
    deltas: list[Row] = field(default_factory=list)
    sources: dict[tuple[Any, ...], str] = field(default_factory=dict)
    timeline: list[Row] = field(default_factory=list)
    kernel_tunes: list[Row] = field(default_factory=list)
    spec_trials: list[Row] = field(default_factory=list)
    comparison: Any = None  # ledger.read.comparison.SessionComparison | None


@dataclass
class Report:
    """The export's one report: the sessions to render and every event id of the ledger
    (short ids must be unique among all of them, not only the ones shown)."""

    sessions: list[SessionReport]
    event_ids: list[str]


def _session_report(con: duckdb.DuckDBPyConnection, session_id: str) -> SessionReport:
    one = [session_id]
    report = SessionReport(session_id)
    report.header = rows(
        con,
        "SELECT seq, event_id, type, source, host, payload FROM live_events WHERE session_id = ? "
        "AND type IN ('session_started', 'host_observed', 'session_ended') ORDER BY seq",
        one,
    )
    report.decisions = rows(
        con,
        "SELECT seq, event_id, actor_kind, actor_name, decision, rationale, alternatives, "
        "evidence_event_ids, candidate_id FROM decisions WHERE session_id = ? ORDER BY seq",
        one,
    )
    wanted = sorted(
        {str(e).lower() for d in report.decisions for e in (d["evidence_event_ids"] or [])}
    )
    if wanted:
        report.evidence = {
            r["event_id"].lower(): r
            for r in rows(
                con,
                "SELECT CAST(event_id AS VARCHAR) AS event_id, seq, type, summary, retracted "
                "FROM event_log WHERE CAST(event_id AS VARCHAR) IN (SELECT unnest(?::VARCHAR[]))",
                [wanted],
            )
        }
    report.triage = rows(
        con,
        "SELECT b.*, (SELECT min(e.seq) FROM live_control e WHERE e.type = 'candidate_proposed' "
        "             AND e.payload->>'candidate_id' = b.candidate_id) AS first_seq "
        "FROM board b WHERE b.session_id = ? ORDER BY first_seq, b.candidate_id",
        one,
    )
    report.archs = [
        r["arch"]
        for r in rows(
            con,
            # research read from the source names its target arch in the payload, not the host
            "SELECT DISTINCT arch FROM (SELECT coalesce(arch, CASE WHEN type = 'flag_researched' "
            "THEN payload->>'arch' END) AS arch FROM live_events WHERE session_id = ?) "
            "WHERE arch IS NOT NULL ORDER BY arch",
            one,
        )
    ]
    # The session's own flags (its candidates', decided or not, and those it gave a verdict on:
    # research, findings), on the session's archs or on none (a verdict that names no arch
    # applies anywhere): not every flag the ledger knows on those archs.
    report.flag_verdicts = rows(
        con,
        "SELECT * FROM flag_verdicts WHERE flag IN ("
        "  SELECT flag FROM board WHERE session_id = ? AND flag IS NOT NULL"
        "  UNION SELECT flag FROM flag_verdict_history WHERE session_id = ?)"
        " AND (arch IS NULL OR arch IN (SELECT unnest(?::VARCHAR[])))"
        " ORDER BY flag, engine NULLS FIRST, engine_version NULLS FIRST, arch NULLS FIRST, seq",
        [session_id, session_id, report.archs],
    )
    report.server_runs = rows(
        con,
        "SELECT r.*, (SELECT min(e.seq) FROM live_control e WHERE e.type = 'server_started' "
        "             AND e.payload->>'run_id' = r.run_id) AS first_seq "
        "FROM server_runs r WHERE r.session_id = ? ORDER BY first_seq, r.run_id",
        one,
    )
    report.deltas = rows(
        con,
        "SELECT d.*, min(d.seq) OVER (PARTITION BY d.config_name) AS config_seq "
        "FROM benchmark_deltas d WHERE d.session_id = ?",
        one,
    )
    report.sources = {
        (r["config_name"], r["concurrency"], r["request_rate"]): r["source"]
        for r in rows(
            con,
            "SELECT config_name, concurrency, request_rate, source FROM benchmarks "
            "WHERE session_id = ? AND source IS NOT NULL ORDER BY seq",
            one,
        )
    }
    report.timeline = rows(
        con,
        "SELECT seq, type, stream, summary, CAST(event_id AS VARCHAR) AS event_id, occurred_at "
        "FROM timeline WHERE session_id = ? ORDER BY seq",
        one,
    )
    report.kernel_tunes = rows(
        con, "SELECT * FROM kernel_tunes WHERE session_id = ? ORDER BY seq", one
    )
    for tune in report.kernel_tunes:
        tune["results"] = rows(
            con,
            "SELECT * FROM kernel_tune_results WHERE tune_id = ? AND seq = ? ORDER BY batch_size",
            [tune["tune_id"], tune["seq"]],
        )
    report.spec_trials = rows(
        con, "SELECT * FROM spec_trials WHERE session_id = ? ORDER BY seq", one
    )
    from ledger.read.comparison import read_session_comparison  # it reads with ``rows`` above

    report.comparison = read_session_comparison(con, session_id)
    return report


def read_report(store: LedgerStore, session_id: str | None = None) -> Report:
    """Everything the Markdown export renders, for one session (or every session, in the
    order of their first live event), read in ONE connection: a writer appending meanwhile
    cannot make two sections disagree.

    Raises:
        NotFound: no ledger file at ``store.path``, or no live event carries ``session_id``
            (the message names it and the sessions there are).
        LedgerBusy: the file stayed locked by a writer.
    """
    with store.connect() as con:
        known = [
            r[0]
            for r in con.execute(
                "SELECT session_id FROM live_events WHERE session_id IS NOT NULL "
                "GROUP BY session_id ORDER BY min(seq), session_id"
            ).fetchall()
        ]
        if session_id is not None:
            if session_id not in known:
                listed = ", ".join(known[:10]) or "none"
                raise NotFound(
                    f"no session {session_id!r} in ledger {store.path} (sessions: {listed})"
                )
            known = [session_id]
        event_ids = (
            [r[0] for r in con.execute("SELECT CAST(event_id AS VARCHAR) FROM events").fetchall()]
            if known
            else []
        )
        return Report([_session_report(con, sid) for sid in known], event_ids)
