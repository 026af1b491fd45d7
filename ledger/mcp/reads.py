"""The read tools: the board, flag verdicts, benchmark deltas, server runs, one event, the tail,
and read-only SQL.

Each is a plain select over the ledger's views (``ledger.derive.views``) or a function of the
read model (``ledger.read.model``), so it answers what the CLI's ``sql``, ``show`` and ``events``
and the TUI answer. Every read opens the ledger one-shot and read-only. Rows come back as JSON
objects keyed by the view's column names (``ledger.mcp.values``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ledger.errors import NotFound
from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models
from ledger.mcp.values import event_json, jsonable, rows_of
from ledger.read import agent_reads
from ledger.read import model as read_model
from schemas.vocab import basis_text

if TYPE_CHECKING:
    import duckdb

Row = dict[str, Any]

#: The most rows one ``sql`` or ``events_since`` call returns (a tool result is read whole).
MAX_ROWS = 10_000
#: The longest ``sql`` timeout a call may ask for, seconds (writers wait while a query runs).
MAX_TIMEOUT_S = 60.0
#: JSON bytes of ``sql`` rows by default and at most: a client reads a result whole into the
#: model's context, and a 100 MB value once held the server for minutes.
DEFAULT_SQL_BYTES, MAX_SQL_BYTES = 256_000, 4_000_000


def _read(call: Call, query: Callable[[duckdb.DuckDBPyConnection], list[Any]]) -> list[Row]:
    """The rows of one named query of ``ledger.read`` as JSON objects (a dataclass row's fields
    by name)."""
    with call.seat.store().connect() as con:
        found = query(con)
    return [
        jsonable(asdict(r) if is_dataclass(r) and not isinstance(r, type) else r) for r in found
    ]


# --- board ---------------------------------------------------------------------------


class BoardArgs(Arguments):
    session_id: str | None = Field(
        None, description="The session (default: the server's --session; none: every session)."
    )


class RowsOut(BaseModel):
    rows: list[dict[str, Any]]


def board_rows(call: Call, session_id: str | None) -> list[Row]:
    """The board (with each candidate's latest benchmark delta) of ``session_id`` (None: all)."""
    with call.seat.store().connect() as con:
        return [jsonable(r) for r in read_model.board(con, session_id)]


def _board(args: BoardArgs, call: Call) -> dict[str, Any]:
    return {"rows": board_rows(call, args.session_id or call.seat.session_id)}


# --- flag verdicts ---------------------------------------------------------------------


class FlagVerdictArgs(Arguments):
    flag: str | None = Field(None, description="Only this flag (without dashes).")
    arch: str | None = Field(None, description="Only this GPU arch, e.g. sm90, sm120.")
    engine: str | None = Field(None, description="Only this engine: sglang, vllm, transformers.")
    engine_version: str | None = Field(None, description="Only this engine version.")
    no_effect: bool | None = Field(
        None,
        description="true: only verdicts of no effect (no-op, dead-code, not-activated, "
        "no-measurable-change); false: only the others.",
    )


def flag_verdict_rows(call: Call, args: FlagVerdictArgs) -> list[Row]:
    """``flag_verdicts`` rows (the latest verdict per flag, value, engine, version and arch)."""
    only = agent_reads.VerdictFilter(
        args.flag, args.arch, args.engine, args.engine_version, args.no_effect
    )
    return _read(call, lambda con: agent_reads.flag_verdict_rows(con, only))


def _flag_verdicts(args: FlagVerdictArgs, call: Call) -> dict[str, Any]:
    return {"rows": flag_verdict_rows(call, args)}


# --- benchmark deltas -------------------------------------------------------------------


class DeltaArgs(Arguments):
    session_id: str | None = Field(
        None, description="The session (default: the server's --session; none: every session)."
    )
    config_name: str | None = Field(None, description="Only this configuration.")
    metric: str | None = Field(
        None, description="Only this metric, e.g. output_throughput, median_ttft_ms."
    )
    concurrency: int | None = Field(None, description="Only this concurrency.")


def _benchmark_deltas(args: DeltaArgs, call: Call) -> dict[str, Any]:
    only = agent_reads.DeltaFilter(
        args.session_id or call.seat.session_id, args.config_name, args.metric, args.concurrency
    )
    return {"rows": _read(call, lambda con: agent_reads.benchmark_delta_rows(con, only))}


# --- server runs: what differs ----------------------------------------------------------


class ServerRunsArgs(Arguments):
    run_a: str | None = Field(
        None, description="The first run's run_id (default: the run before run_b)."
    )
    run_b: str | None = Field(
        None, description="The second run's run_id. Neither given: the session's runs, listed."
    )
    session_id: str | None = Field(
        None, description="For the listing: the session (default: the server's --session)."
    )


class ServerRunsOut(BaseModel):
    runs: list[dict[str, Any]] = Field(
        default_factory=list, description="The listing (neither run given)."
    )
    run_a: dict[str, Any] | None = None
    run_b: dict[str, Any] | None = None
    differences: list[dict[str, Any]] = Field(
        default_factory=list,
        description="What differs from run_a to run_b: {field, a, b}; flags and env per key "
        "(field 'flags.NAME', 'env.NAME'). Times and the view's run-over-run columns left out.",
    )


#: The columns that say which run it is or when, or compare a run with the one before it in the
#: view: not facts to diff between two chosen runs.
_NOT_DIFFED = frozenset(
    {
        "run_id",
        "session_id",
        "started_seq",
        "started_at",
        "ready_at",
        "ended_at",
        "ready_after_s",
        "occurred_at",
        "ended_occurred_at",
        "previous_run_id",
        "flags_added",
        "flags_removed",
        "flags_changed",
        "flag_changes",
        "max_running_requests_change",
        "max_total_num_tokens_change",
        "changes_vs_previous",
    }
)
_IDENTITY = ("run_id", "session_id", "config_name", "engine", "status", "started_at")


def _as_object(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def run_differences(a: Row, b: Row) -> list[Row]:
    """What differs from run ``a`` to run ``b`` (``ServerRunsOut.differences``)."""
    out: list[Row] = []
    for name in a:
        if name in _NOT_DIFFED:
            continue
        if name in ("flags", "env"):
            left, right = _as_object(a[name]), _as_object(b[name])
            for key in sorted(set(left) | set(right)):
                if left.get(key) != right.get(key):
                    out.append({"field": f"{name}.{key}", "a": left.get(key), "b": right.get(key)})
            continue
        if a[name] != b.get(name):
            out.append({"field": name, "a": a[name], "b": b.get(name)})
    return out


def _server_run(call: Call, run_id: str) -> Row:
    with call.seat.store().connect() as con:
        found = agent_reads.server_run_row(con, run_id)
    if found is None:
        raise NotFound(f"no server run {run_id!r} (server_runs with no run ids lists them)")
    row: Row = jsonable(found)
    return row


def _server_runs(args: ServerRunsArgs, call: Call) -> dict[str, Any]:
    if args.run_a is None and args.run_b is None:
        session = args.session_id or call.seat.session_id
        return {"runs": _read(call, lambda con: agent_reads.server_runs_listed(con, session))}
    if args.run_b is None:
        raise NotFound("server_runs: give run_b (and run_a, else the run before run_b)")
    b = _server_run(call, args.run_b)
    run_a = args.run_a or b.get("previous_run_id")
    if run_a is None:
        raise NotFound(f"server run {args.run_b} has no run before it in its session: give run_a")
    a = _server_run(call, run_a)
    return {
        "run_a": {k: a[k] for k in _IDENTITY},
        "run_b": {k: b[k] for k in _IDENTITY},
        "differences": run_differences(a, b),
    }


# --- one event, the tail, SQL --------------------------------------------------------------


class ShowArgs(Arguments):
    event_id: str = Field(description="The event id, or a unique prefix of 8+ hex digits.")


class ShowOut(BaseModel):
    event: dict[str, Any]
    links: list[dict[str, Any]] = Field(
        description="Its cause, what it cites, and what cites, retracts or was caused by it: "
        "{seq, type, summary, event_id, relation}."
    )


def _show(args: ShowArgs, call: Call) -> dict[str, Any]:
    store = call.seat.store()
    event = store.get(args.event_id)
    with store.connect() as con:
        links = read_model.linked_events(con, event)
    return {
        "event": event_json(event),
        "links": [jsonable({k: v for k, v in r.items() if k != "causation_id"}) for r in links],
    }


class EventsSinceArgs(Arguments):
    after_seq: int = Field(0, ge=0, description="Only events after this seq (0: from the start).")
    limit: int = Field(100, ge=1, le=MAX_ROWS, description="At most this many events.")
    types: list[str] = Field(default_factory=list, description="Only these event types.")
    session_id: str | None = Field(None, description="Only this session.")
    stream: str | None = Field(None, description="Only this stream, e.g. candidate:flag:NAME.")


class EventsSinceOut(BaseModel):
    events: list[dict[str, Any]] = Field(
        description="Full events in seq order (retracted ones too)."
    )
    next_after_seq: int = Field(description="Pass as after_seq to poll for what comes next.")
    head: int = Field(description="The highest seq in the ledger.")


def _events_since(args: EventsSinceArgs, call: Call) -> dict[str, Any]:
    store = call.seat.store()
    events = store.read(
        after_seq=args.after_seq,
        types=args.types or None,
        session_id=args.session_id,
        stream=args.stream,
        limit=args.limit,
    )
    last = events[-1].seq if events else None
    return {
        "events": [event_json(e) for e in events],
        "next_after_seq": last if last is not None else args.after_seq,
        "head": store.head(),
    }


class SqlArgs(Arguments):
    query: str = Field(description="One SELECT (or EXPLAIN) over the ledger's tables and views.")
    max_rows: int = Field(1000, ge=1, le=MAX_ROWS, description="Rows returned at most.")
    timeout_s: float = Field(
        10.0, gt=0, le=MAX_TIMEOUT_S, description="Stop the query after this many seconds."
    )
    max_bytes: int = Field(
        DEFAULT_SQL_BYTES,
        ge=1024,
        le=MAX_SQL_BYTES,
        description="JSON bytes of rows returned at most: the rows past it are left out, a "
        "longer text value is cut (truncated: true).",
    )


class SqlOut(BaseModel):
    columns: list[str] = Field(description="The result's column names, in order.")
    rows: list[dict[str, Any]] = Field(description="The rows, keyed by column name.")
    truncated: bool = Field(
        description="More rows than max_rows matched, or the rows passed max_bytes (or 8 MiB "
        "while they were fetched)."
    )


def capped(rows: list[Row], max_bytes: int) -> tuple[list[Row], bool]:
    """``rows`` up to ``max_bytes`` of JSON, and whether any was left out or cut. A first row
    longer than the whole budget is kept with its text values cut, so the answer still shows
    what the query found (a ``sql`` result is read whole by the client and the model)."""
    kept: list[Row] = []
    used = 2  # the array's brackets
    for row in rows:
        size = len(json.dumps(row)) + 1
        if used + size <= max_bytes:
            kept.append(row)
            used += size
            continue
        if not kept:
            share = max(16, (max_bytes - used) // max(1, len(row)) - 16)
            kept.append(
                {
                    k: v[:share] + "…" if isinstance(v, str) and len(v) > share else v
                    for k, v in row.items()
                }
            )
        return kept, True
    return kept, False


def _sql(args: SqlArgs, call: Call) -> dict[str, Any]:
    from ledger.read.sql_sandbox import run_readonly_capped

    # capped in rows and bytes before the answer is built (a 100 MB value held the server)
    table, truncated = run_readonly_capped(
        call.seat.store(), args.query, max_rows=args.max_rows, timeout_s=args.timeout_s
    )
    rows, cut = capped(rows_of(table), args.max_bytes)
    return {"columns": table.column_names, "rows": rows, "truncated": cut or truncated}


def add_read_tools(toolbox: Toolbox) -> None:
    """The read tools (all read-only)."""
    hints = {"read_only": True, "idempotent": True}
    toolbox.add(
        tool_from_models(
            "board",
            "The triage board: one row per candidate with status, verdict, reason, stream_version "
            "(triage_candidate reads it for you) and its latest benchmark delta.",
            BoardArgs,
            RowsOut,
            _board,
            **hints,
        )
    )
    toolbox.add(
        tool_from_models(
            "flag_verdicts",
            "The latest verdict per flag (and value), engine, engine version and arch; its "
            f"basis ({basis_text(words=False)}), no_effect, history: 'which flags were "
            "no-ops on sm120' is flag_verdicts(arch='sm120', no_effect=true).",
            FlagVerdictArgs,
            RowsOut,
            _flag_verdicts,
            **hints,
        )
    )
    toolbox.add(
        tool_from_models(
            "benchmark_deltas",
            "Each configuration against the session's baseline per workload, concurrency and "
            "metric: change_pct (value / baseline - 1, + means the metric went up), its 95% CI, "
            "the noise threshold and the verdict (improved, regressed, no-measurable-change, "
            "inconclusive with runs_needed, insufficient-data, invalid, too-noisy).",
            DeltaArgs,
            RowsOut,
            _benchmark_deltas,
            **hints,
        )
    )
    toolbox.add(
        tool_from_models(
            "server_runs",
            "What differs between two server runs (flags, env, attention backend, "
            "max_running_requests, CUDA graph, MoE kernel config, status, failure...): only the "
            "differences. Without run ids: the session's runs, to pick two.",
            ServerRunsArgs,
            ServerRunsOut,
            _server_runs,
            **hints,
        )
    )
    toolbox.add(
        tool_from_models(
            "show",
            "One event in full, with its links: its cause, the events it cites, and the events "
            "citing, retracting or caused by it.",
            ShowArgs,
            ShowOut,
            _show,
            **hints,
        )
    )
    toolbox.add(
        tool_from_models(
            "events_since",
            "Poll the ledger: the events after a seq, oldest first, and the next seq to ask from.",
            EventsSinceArgs,
            EventsSinceOut,
            _events_since,
            **hints,
        )
    )
    toolbox.add(
        tool_from_models(
            "sql",
            "One read-only SQL query (DuckDB) over the ledger's tables and views (board, "
            "flag_verdicts, benchmark_deltas, server_runs, benchmarks, timeline...), in the sandbox "
            "of `tuneledger sql`: writes, ATTACH, file access and settings are refused (exit 6), "
            "a query past timeout_s is stopped (exit 14).",
            SqlArgs,
            SqlOut,
            _sql,
            **hints,
        )
    )
