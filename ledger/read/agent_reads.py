"""The agent front end's and the use cases' reads, as named queries: the MCP read tools
(flag verdicts, benchmark deltas, server runs), the ``next_step`` prompt's reads, a flag's
history resource, the summaries a decision's cited events show, and the measured verdict and
the latest triage a decision follows. The front ends and ``ledger.app`` hold no SQL of their
own (``tests/project/test_sql_walls.py``).

Reads of a whole view row (``SELECT *``) answer dicts keyed by the view's columns, as the view
defines them (``ledger.derive.views``): a view's columns change there, not here. Reads of a few
chosen columns answer frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from ledger.read.model import Row, rows

# --- the MCP read tools -------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictFilter:
    """Which ``flag_verdicts`` rows: each field None means any."""

    flag: str | None = None
    arch: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    no_effect: bool | None = None


def flag_verdict_rows(con: duckdb.DuckDBPyConnection, only: VerdictFilter) -> list[Row]:
    """``flag_verdicts`` rows (the latest verdict per flag, value, engine, version and arch)."""
    return rows(
        con,
        "SELECT * EXCLUDE (sync_order) FROM flag_verdicts "
        "WHERE ($1::VARCHAR IS NULL OR flag = $1) AND ($2::VARCHAR IS NULL OR arch = $2) "
        "AND ($3::VARCHAR IS NULL OR engine = $3) AND ($4::VARCHAR IS NULL OR engine_version = $4) "
        "AND ($5::BOOLEAN IS NULL OR no_effect = $5) "
        "ORDER BY flag, value NULLS FIRST, arch, engine_version, engine, seq",
        [only.flag, only.arch, only.engine, only.engine_version, only.no_effect],
    )


@dataclass(frozen=True)
class DeltaFilter:
    """Which ``benchmark_deltas`` rows: each field None means any."""

    session_id: str | None = None
    config_name: str | None = None
    metric: str | None = None
    concurrency: int | None = None


def benchmark_delta_rows(con: duckdb.DuckDBPyConnection, only: DeltaFilter) -> list[Row]:
    """``benchmark_deltas`` rows, by session, configuration, concurrency and metric."""
    return rows(
        con,
        "SELECT * FROM benchmark_deltas "
        "WHERE ($1::VARCHAR IS NULL OR session_id = $1) AND ($2::VARCHAR IS NULL OR config_name = $2) "
        "AND ($3::VARCHAR IS NULL OR metric = $3) AND ($4::INTEGER IS NULL OR concurrency = $4) "
        "ORDER BY session_id, config_name, concurrency NULLS FIRST, metric",
        [only.session_id, only.config_name, only.metric, only.concurrency],
    )


def server_run_row(con: duckdb.DuckDBPyConnection, run_id: str) -> Row | None:
    """Server run ``run_id``'s whole ``server_runs`` row, or None."""
    found = rows(con, "SELECT * FROM server_runs WHERE run_id = $1", [run_id])
    return found[0] if found else None


@dataclass(frozen=True)
class ServerRunListed:
    """A server run as the ``server_runs`` tool lists it."""

    run_id: str
    config_name: str | None
    engine: str | None
    status: str | None
    started_at: Any
    previous_run_id: str | None
    changes_vs_previous: str | None


def server_runs_listed(
    con: duckdb.DuckDBPyConnection, session_id: str | None
) -> list[ServerRunListed]:
    """The server runs of ``session_id`` (None: every session), in the order they started."""
    found = rows(
        con,
        "SELECT run_id, config_name, engine, status, started_at, previous_run_id, "
        "changes_vs_previous FROM server_runs WHERE $1::VARCHAR IS NULL OR session_id = $1 "
        "ORDER BY started_seq",
        [session_id],
    )
    return [ServerRunListed(**r) for r in found]


# --- the next_step prompt ----------------------------------------------------------------


@dataclass(frozen=True)
class SessionHead:
    """What a session's ``session_started`` says: its title and model (None: not recorded)."""

    title: str | None = None
    model: str | None = None


def session_head(con: duckdb.DuckDBPyConnection, session_id: str | None) -> SessionHead:
    """The title and model of ``session_id``'s first ``session_started``."""
    found = rows(
        con,
        "SELECT payload->>'title' AS title, payload->>'model' AS model FROM live_events "
        "WHERE type = 'session_started' AND session_id IS NOT DISTINCT FROM ? "
        "ORDER BY seq LIMIT 1",
        [session_id],
    )
    return SessionHead(**found[0]) if found else SessionHead()


@dataclass(frozen=True)
class FlagVerdictBrief:
    """One flag verdict as the prompt shows it."""

    flag: str
    arch: str | None
    engine: str | None
    engine_version: str | None
    verdict: str | None
    basis: str | None
    summary: str | None


def verdicts_of_flags(con: duckdb.DuckDBPyConnection, flags: list[str]) -> list[FlagVerdictBrief]:
    """The ``flag_verdicts`` of ``flags`` on every arch and engine version."""
    found = rows(
        con,
        "SELECT flag, arch, engine, engine_version, verdict, basis, summary FROM flag_verdicts "
        "WHERE flag IN (SELECT unnest(?::VARCHAR[])) ORDER BY flag, arch, engine_version",
        [flags or [""]],
    )
    return [FlagVerdictBrief(**r) for r in found]


@dataclass(frozen=True)
class RecentRun:
    """A server run as the prompt shows it."""

    run_id: str
    config_name: str | None
    status: str | None
    changes_vs_previous: str | None


def recent_runs(
    con: duckdb.DuckDBPyConnection, session_id: str | None, limit: int = 5
) -> list[RecentRun]:
    """The last ``limit`` server runs of ``session_id``, newest first."""
    found = rows(
        con,
        "SELECT run_id, config_name, status, changes_vs_previous FROM server_runs "
        "WHERE session_id IS NOT DISTINCT FROM ? ORDER BY started_seq DESC LIMIT ?",
        [session_id, limit],
    )
    return [RecentRun(**r) for r in found]


@dataclass(frozen=True)
class DecisionBrief:
    """A decision as the prompt shows it."""

    decision: str | None
    rationale: str | None
    event_id: str


def session_decisions(
    con: duckdb.DuckDBPyConnection, session_id: str | None
) -> list[DecisionBrief]:
    """The decisions of ``session_id``, in log order."""
    found = rows(
        con,
        "SELECT decision, rationale, event_id::VARCHAR AS event_id FROM decisions "
        "WHERE session_id IS NOT DISTINCT FROM ? ORDER BY seq",
        [session_id],
    )
    return [DecisionBrief(**r) for r in found]


# --- a flag's history (the flag resource) -------------------------------------------------

_FLAG_HISTORY_SQL = """
SELECT h.engine, h.engine_version, h.arch, h.verdict, h.basis, h.no_effect, h.summary,
       h.session_id, h.seq, h.recorded_at, h.evidence_event_id::VARCHAR AS evidence_event_id,
       e.type AS evidence_type, e.summary AS evidence_summary, e.source AS evidence_source
FROM flag_verdict_history h LEFT JOIN event_log e ON e.event_id = h.evidence_event_id
WHERE h.flag = ? ORDER BY h.seq
"""


def flag_history_rows(con: duckdb.DuckDBPyConnection, flag: str) -> list[Row]:
    """Every verdict ever recorded on ``flag`` with the evidence it rests on, in log order."""
    return rows(con, _FLAG_HISTORY_SQL, [flag])


def flag_latest_rows(con: duckdb.DuckDBPyConnection, flag: str) -> list[Row]:
    """The latest verdicts of ``flag`` (``flag_verdicts`` rows) per value, arch, engine."""
    return rows(
        con,
        "SELECT * EXCLUDE (sync_order) FROM flag_verdicts WHERE flag = ? "
        "ORDER BY value NULLS FIRST, arch, engine_version, engine",
        [flag],
    )


# --- the use cases: decisions and triage by verdict ----------------------------------------


def event_summaries(con: duckdb.DuckDBPyConnection, event_ids: list[str]) -> dict[str, str]:
    """Each of ``event_ids``' summary (its type where it has none), by id (unknown ids left out)."""
    found = con.execute(
        "SELECT event_id::VARCHAR, coalesce(summary, type) FROM event_log "
        "WHERE event_id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
        [event_ids or [""]],
    ).fetchall()
    return {str(i): str(s) for i, s in found}


@dataclass(frozen=True)
class MeasuredDelta:
    """A candidate configuration's comparison with the baseline: its verdict, configuration,
    concurrency and the comparison's event id."""

    verdict: str | None
    config_name: str | None
    concurrency: int | None
    event_id: str


_DELTA_SQL = """
SELECT d.verdict, d.config_name, d.concurrency, t.event_id::VARCHAR AS event_id
FROM board b JOIN board_deltas bd USING (candidate_id)
JOIN benchmark_deltas d ON d.config_name = bd.delta_config
     AND d.session_id IS NOT DISTINCT FROM b.session_id
JOIN timeline t ON t.seq = d.seq
WHERE b.candidate_id = ? AND d.metric = ?
  AND d.concurrency IS NOT DISTINCT FROM coalesce(?::BIGINT, bd.delta_concurrency)
ORDER BY d.seq DESC LIMIT 1
"""


def measured_delta(
    con: duckdb.DuckDBPyConnection, candidate_id: str, metric: str, concurrency: int | None
) -> MeasuredDelta | None:
    """The latest comparison of ``candidate_id``'s configuration (the board's) with the
    baseline for ``metric`` at ``concurrency`` (None: the board's), or None."""
    found = rows(con, _DELTA_SQL, [candidate_id, metric, concurrency])
    return MeasuredDelta(**found[0]) if found else None


@dataclass(frozen=True)
class LatestTriage:
    """A candidate's latest live triage: its status, reason and the event that caused it."""

    status: str | None
    reason: str | None
    causation_id: str | None


def latest_triage(con: duckdb.DuckDBPyConnection, candidate_id: str) -> LatestTriage | None:
    """``candidate_id``'s latest live ``candidate_triaged``, or None (never triaged)."""
    found = rows(
        con,
        "SELECT payload->>'status' AS status, payload->>'reason' AS reason, "
        "causation_id::VARCHAR AS causation_id FROM live_control "
        "WHERE type = 'candidate_triaged' AND payload->>'candidate_id' = ? "
        "ORDER BY sync_order DESC LIMIT 1",
        [candidate_id],
    )
    return LatestTriage(**found[0]) if found else None
