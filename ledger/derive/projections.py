"""Projections: derived tables caught up from a stored position (catch-up projections).

The views in ``ledger.derive.views`` answer from these tables, not from the raw log,
because a long campaign's ledger holds a million events, most of them
benchmark runs with large JSON payloads: re-parsing every payload on every
query cost seconds. Each projection is a pure function of the ``events``
table, applied in batches to the rows after the stored position
(``ledger_meta.projected_seq``): ``catch_up`` projects ``seq > projected_seq``
and moves the position, in the caller's transaction, so a view never sees a
half-applied batch. The store runs it inside a one-shot append's transaction,
and a long-lived writer runs it when idle, before any read and before it lets
go of the file (``ledger.store``), so no view answers from a stale table.
``rebuild`` empties the tables and applies the same SQL to the whole log:
incremental and full replay give the same tables (a test checks it).
They are a cache of the log, never a source of truth: dropping them loses nothing.

Tables:

``retractions``       event id -> seq of the ``event_retracted`` that retracted it
``control_events``    every event but the high-volume measurements
                      (``benchmark_completed``, ``kernel_config_measured``), payload upcast
``bench_runs``        one typed row per ``benchmark_completed`` (metrics as columns)
``event_summaries``   one row per event with its one-line ``summary`` (the timeline)
``stream_heads``      stream -> its highest ``stream_version`` (the store reads a stream's
                      head here plus the not-yet-projected tail, instead of scanning the log)
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import duckdb

from ledger.store.schema import POSITION_KEY, set_position
from schemas import CURRENT_VERSIONS, EVENT_TYPES
from schemas.metrics import COMPARED_METRICS, INTEGER_METRICS, VIEW_METRICS
from schemas.upcasting import sql_upcast_expression

#: Types kept out of ``control_events`` (they have their own typed projections).
MEASUREMENT_TYPES = ("benchmark_completed", "kernel_config_measured")

#: The metrics of ``bench_runs`` (the ``view`` rows of the metric table ``schemas.metrics``).
BENCH_METRICS: tuple[str, ...] = VIEW_METRICS
_INT_METRICS = INTEGER_METRICS

#: (metric, direction: +1 higher is better / -1 lower is better, noise floor as a fraction): the
#: compared rows of the metric table (floors: docs/comparison.md).
DELTA_METRICS: tuple[tuple[str, int, float], ...] = tuple(
    (m.name, m.direction, m.noise_floor) for m in COMPARED_METRICS if m.noise_floor is not None
)

_BENCH_METRIC_DDL = ",\n    ".join(
    f"{name} {'BIGINT' if name in _INT_METRICS else 'DOUBLE'}" for name in BENCH_METRICS
)

DDL = f"""
CREATE TABLE IF NOT EXISTS retractions (
    event_id UUID PRIMARY KEY,
    retracted_by_seq BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS control_events (
    seq BIGINT NOT NULL, event_id UUID NOT NULL, type VARCHAR NOT NULL, stream VARCHAR,
    stream_version BIGINT, recorded_at TIMESTAMPTZ, actor_kind VARCHAR, actor_name VARCHAR,
    session_id VARCHAR, causation_id UUID, correlation_id UUID, source VARCHAR, host JSON,
    arch VARCHAR, host_engine VARCHAR, host_engine_version VARCHAR, payload JSON, occurred_at TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS bench_runs (
    seq BIGINT NOT NULL, event_id UUID NOT NULL, session_id VARCHAR, recorded_at TIMESTAMPTZ,
    arch VARCHAR, source VARCHAR, run_id VARCHAR, config_name VARCHAR, is_baseline BOOLEAN,
    server_run_id VARCHAR, tool VARCHAR, dataset VARCHAR, input_len BIGINT, output_len BIGINT,
    load VARCHAR, request_rate DOUBLE, num_prompts BIGINT, seed BIGINT, concurrency BIGINT,
    repeat BIGINT, valid BOOLEAN, validity_notes VARCHAR[],
    {_BENCH_METRIC_DDL},
    candidate_id VARCHAR
);
CREATE TABLE IF NOT EXISTS event_summaries (
    seq BIGINT NOT NULL, event_id UUID NOT NULL, type VARCHAR NOT NULL, stream VARCHAR,
    recorded_at TIMESTAMPTZ, session_id VARCHAR, actor_kind VARCHAR, actor_name VARCHAR,
    arch VARCHAR, summary VARCHAR, causation_id UUID, correlation_id UUID, source VARCHAR,
    occurred_at TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS stream_heads (stream VARCHAR PRIMARY KEY, version BIGINT NOT NULL);
"""

#: Projections older code kept and this code no longer reads, dropped by the next rebuild
#: (a views change rebuilds): ``bench_arms`` (running sums per arm; ``benchmark_deltas`` now
#: needs each run's value for its spread and reads ``bench_runs``).
RETIRED_TABLES = ("bench_arms",)

PROJECTION_TABLES = (
    "retractions",
    "control_events",
    "bench_runs",
    "event_summaries",
    "stream_heads",
)

_ENVELOPE = (
    "e.seq, e.event_id, e.type, e.stream, e.stream_version, e.recorded_at, e.actor_kind, "
    "e.actor_name, e.session_id, e.causation_id, e.correlation_id, e.source, e.host"
)
_MEASUREMENTS = ", ".join(f"'{t}'" for t in MEASUREMENT_TYPES)


def _bench_struct_type() -> str:
    metrics = ", ".join(
        f'"{name}": "{"BIGINT" if name in _INT_METRICS else "DOUBLE"}"' for name in BENCH_METRICS
    )
    return (
        '{"run_id": "VARCHAR", "config_name": "VARCHAR", "is_baseline": "BOOLEAN", '
        '"server_run_id": "VARCHAR", "tool": "VARCHAR", "concurrency": "BIGINT", "repeat": "BIGINT", '
        '"valid": "BOOLEAN", "validity_notes": "VARCHAR[]", "candidate_id": "VARCHAR", '
        '"workload": {"dataset": "VARCHAR", "input_len": "BIGINT", "output_len": "BIGINT", '
        '"load": "VARCHAR", "request_rate": "DOUBLE", "num_prompts": "BIGINT", "seed": "BIGINT"}, '
        f'"metrics": {{{metrics}}}}}'
    )


_SUMMARY_FIELD = re.compile(r"(?<![\w.])p\.(\w+)(?:\.(\w+))?")


def _summarised(types: frozenset[str] | None) -> list[tuple[str, Any]]:
    """The registered types (name, class) whose summaries a statement needs (None: all)."""
    return [(n, cls) for n, cls in EVENT_TYPES.items() if types is None or n in types]


def _summary_struct(types: frozenset[str] | None = None) -> str:
    """The from_json struct of every payload field the summaries of ``types`` (None: every
    registered type) name (``p.x``, ``p.x.y``): VARCHAR, BOOLEAN for a bool field, parsed
    once per row."""
    struct: dict[str, Any] = {}
    for _, cls in _summarised(types):
        for field, sub in _SUMMARY_FIELD.findall(cls.summary_sql):
            if sub:
                struct.setdefault(field, {})[sub] = "VARCHAR"
            else:
                info = cls.model_fields.get(field)
                struct[field] = (
                    "BOOLEAN" if info is not None and info.annotation is bool else "VARCHAR"
                )
    return json.dumps(struct or {"_": "VARCHAR"})  # from_json needs one field at least


def _summary_case(types: frozenset[str] | None = None) -> str:
    """One CASE over the event type giving the ``summary_sql`` of each type of ``types``
    (None: every registered type); any other type's summary is its name."""
    branches = "\n    ".join(
        f"WHEN '{name}' THEN {cls.summary_sql}" for name, cls in _summarised(types)
    )
    return f"CASE e.type\n    {branches}\n    ELSE e.type\nEND" if branches else "e.type"


@functools.lru_cache(maxsize=256)
def _summaries_sql(
    upcast_payloads: bool, types: frozenset[str] | None = None, source: str = "events"
) -> str:
    """The ``event_summaries`` statement for a batch holding only ``types`` (None: any type),
    read from ``source`` (``apply_sql``).

    A batch's own types only: a CASE of every registered type and a struct of every field
    their summaries name cost a catch-up twice its own (docs/performance.md), and binding a
    smaller statement is cheaper for a one-event append too."""
    upcast = sql_upcast_expression("e.payload") if upcast_payloads else "e.payload"
    return f"""INSERT INTO event_summaries
            SELECT e.seq, e.event_id, e.type, e.stream, e.recorded_at, e.session_id, e.actor_kind,
                   e.actor_name, h.compute_capability, {_summary_case(types)}, e.causation_id,
                   e.correlation_id, e.source, e.occurred_at
            FROM (SELECT *, from_json({upcast}, '{_summary_struct(types)}') AS p,
                         from_json(coalesce(host, '{{}}'), '{{"gpu_name": "VARCHAR", "gpu_count": "VARCHAR",
                                   "compute_capability": "VARCHAR"}}') AS h
                  FROM {source} e WHERE e.seq > $after) e"""


#: What makes two benchmark runs one arm of a comparison: the same session, configuration,
#: workload (dataset, input/output length, seed: another seed draws other prompts and arrivals,
#: another workload, docs/comparison.md), concurrency and request rate (``benchmark_deltas`` and
#: ``benchmark_summary`` group by these columns, the deltas per metric too).
ARM_KEY: tuple[str, ...] = (
    "session_id",
    "config_name",
    "dataset",
    "input_len",
    "output_len",
    "seed",
    "concurrency",
    "request_rate",
)


@functools.cache
def apply_sql(upcast_payloads: bool = True, source: str = "events") -> tuple[str, ...]:
    """The statements that project the events with ``seq > $after`` (one parameter each).

    In order: retractions, control_events, bench_runs, event_summaries, stream_heads; ``STATEMENT_TYPES`` says which event types each needs.
    ``source``: the relation the events are read from: ``events``, or a relation of the same
    columns holding rows just inserted into it (``catch_up``'s ``source``).
    ``upcast_payloads`` False: the statements for a batch holding only current schema versions
    (every append of this code): they skip the upcasters, whose SQL costs CPU to bind on every
    statement (more than the rest of a small append's projection).
    """
    upcast = sql_upcast_expression("e.payload") if upcast_payloads else "e.payload"
    bench = _bench_struct_type()
    metric_cols = ", ".join(f"b.metrics.{name}" for name in BENCH_METRICS)
    return (
        # Retractions first: the arm bookkeeping below needs to know which runs are new-retracted.
        f"""INSERT INTO retractions
           SELECT DISTINCT ON (target) target, seq FROM (
               SELECT (payload->>'retracted_event_id')::UUID AS target, seq FROM {source}
               WHERE seq > $after AND type = 'event_retracted' ORDER BY seq)
           ON CONFLICT DO NOTHING""",
        f"""INSERT INTO control_events
            SELECT {_ENVELOPE}, (e.host->>'compute_capability'), (e.host->>'engine'),
                   (e.host->>'engine_version'), {upcast}, e.occurred_at
            FROM {source} e WHERE e.seq > $after AND e.type NOT IN ({_MEASUREMENTS})""",
        f"""INSERT INTO bench_runs
            SELECT seq, event_id, session_id, recorded_at, arch, source, b.run_id, b.config_name,
                   coalesce(b.is_baseline, false) OR b.config_name = 'baseline', b.server_run_id, b.tool,
                   b.workload.dataset, b.workload.input_len, b.workload.output_len, b.workload.load,
                   b.workload.request_rate, b.workload.num_prompts, b.workload.seed, b.concurrency, b.repeat, b.valid,
                   b.validity_notes, {metric_cols}, b.candidate_id
            FROM (SELECT e.seq, e.event_id, e.session_id, e.recorded_at, (e.host->>'compute_capability') AS arch,
                         e.source, from_json(e.payload, '{bench}') AS b
                  FROM {source} e WHERE e.seq > $after AND e.type = 'benchmark_completed')""",
        _summaries_sql(upcast_payloads, None, source),
        f"""INSERT INTO stream_heads
           SELECT stream, max(stream_version) FROM {source} WHERE seq > $after GROUP BY stream
           ON CONFLICT (stream) DO UPDATE SET version = greatest(version, EXCLUDED.version)""",
    )


def create(con: duckdb.DuckDBPyConnection) -> None:
    """Create the projection tables if they do not exist."""
    con.execute(DDL)


#: For each statement of ``apply_sql``: the event types that give it work (None: any type).
#: An append skips the statements its batch has nothing for: a single note runs 3 of 5.
STATEMENT_TYPES: tuple[frozenset[str] | None, ...] = (
    frozenset({"event_retracted"}),
    None,  # control_events: any type but the measurements (checked below)
    frozenset({"benchmark_completed"}),
    None,
    None,
)


#: ``apply_sql``'s index of the ``event_summaries`` statement (specialised to a batch's types).
_SUMMARIES = 3


def apply(
    con: duckdb.DuckDBPyConnection,
    after_seq: int,
    types: set[str] | None = None,
    *,
    upcast: bool = True,
    source: str = "events",
) -> None:
    """Project the events with ``seq > after_seq`` (call inside the append's transaction).

    ``types`` (the event types of those events, when the caller knows them) lets statements
    with nothing to do be skipped; None runs them all (a rebuild). ``upcast`` False: the
    caller knows every one of those events is at its current schema version. ``source``:
    as ``apply_sql``'s.
    """
    statements = zip(apply_sql(upcast, source), STATEMENT_TYPES, strict=True)
    for index, (statement, needs) in enumerate(statements):
        if types is not None:
            if index == 1 and types <= set(MEASUREMENT_TYPES):
                continue
            if needs is not None and not (types & needs):
                continue
            if index == _SUMMARIES:
                statement = _summaries_sql(upcast, frozenset(types), source)
        con.execute(statement, {"after": after_seq})


@functools.cache
def _stale_versions() -> str:
    """SQL list of ``'type:version'`` for every schema version an upcaster reads (not current)."""
    pairs = [
        f"'{name}:{version}'"
        for name, current in CURRENT_VERSIONS.items()
        for version in range(1, current)
    ]
    return "[" + ", ".join(pairs) + "]::VARCHAR[]"


def rebuild(con: duckdb.DuckDBPyConnection) -> None:
    """Drop, recreate and refill every projection from the whole log (a full replay)."""
    for table in (*PROJECTION_TABLES, *RETIRED_TABLES):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    create(con)
    head = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
    if head:  # a log with no event (a ledger being created) has nothing to replay
        apply(con, 0)
    set_position(con, head)


def position(con: duckdb.DuckDBPyConnection) -> int:
    """The stored position (``ledger_meta``, the store's ``POSITION_KEY``): every event with
    ``seq <=`` it is projected (0 when none is); ``set_position`` stores it."""
    rows = con.execute("SELECT value FROM ledger_meta WHERE key = ?", [POSITION_KEY]).fetchall()
    return int(rows[0][0]) if rows else 0


def catch_up(
    con: duckdb.DuckDBPyConnection, after_seq: int | None = None, *, source: str = "events"
) -> int:
    """Project every event after the stored position, in one batch; return the new position.

    Call inside a write transaction (the caller commits): the tables and the position move
    together, so a crash leaves both at the old position and the next catch-up redoes the
    batch. ``after_seq``: the stored position when the caller already knows it (saves a query).
    Cost: about one statement per projection with work to do, whatever the batch size
    (planning and binding dominate a small batch, so batching appends makes each cheaper).

    ``source``: where the events after the position are read: ``events``, or (the bulk
    import's) a relation of ``events``' columns holding exactly the rows just inserted after
    the position, as inserted; reading them there spares decompressing and scanning the
    transaction's own new rows again (the payloads were read three times: docs/performance.md).
    """
    after = position(con) if after_seq is None else after_seq
    types, head, stale = con.execute(
        "SELECT list(DISTINCT type), max(seq), "
        f"bool_or(list_contains({_stale_versions()}, type || ':' || schema_version)) "
        f"FROM {source} WHERE seq > ?",
        [after],
    ).fetchall()[0]
    if head is None:
        return after
    apply(con, after, set(types), upcast=bool(stale), source=source)
    set_position(con, head)
    return int(head)
