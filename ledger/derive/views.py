"""The derived views: SQL views over the log and its projections, stored in the ledger file.

The hot views read the projection tables of ``ledger.derive.projections`` (kept
current inside every append), not the raw ``events`` table, so they stay fast
on a ledger of a million events. Everything a user sees is derived from the
log by these views, so any query —
the CLI's ``sql``, the TUI, DuckDB's own shell — sees the same answers. Later
findings supersede earlier ones (the latest by ``seq`` wins); the history stays
queryable in ``flag_verdict_history``, ``timeline`` and ``events``. Retracted
events (``event_retracted``) drop out of every view but ``events``.

Views (docs/views.md; every column with its type: docs/reference/views.md):

``all_events``           every event, payload upcast to the current version, ``retracted`` flag
``live_events``          the same without retracted events
``live_control``         the projection ``control_events`` without retracted events (what the views read)
``board``                every candidate's current status, verdict, priority, reason, latest evidence,
                         engine version (the proposal's, else that of its flag's latest verdict)
``board_deltas``         per candidate, the output_throughput change of its latest related configuration
``flag_verdict_history`` every verdict ever given on a flag, with its basis
``flag_verdicts``        the latest verdict per flag (and value, for a verdict on one value),
                         engine, engine_version and arch
``server_runs``          one row per server run: flag set, startup facts, change against the previous run,
                         the engine version the runner's probe read
``benchmarks``           one row per benchmark run (one concurrency), metrics flattened
``benchmark_summary``    one row per arm (configuration, workload, concurrency, rate): runs, and per
                         compared metric the value, change and verdict (the benchmarks pane)
``benchmark_deltas``     each configuration against the session's baseline, per concurrency and metric:
                         the latest statistical comparison (``comparison_completed``) while no
                         run came after it, else the same Welch rule over all the arms' runs
                         with the metric's noise floor as threshold
``decisions``            the decision log
``sync_conflicts``       candidates triaged (or decided, or given a flag verdict) concurrently on
                         two hosts, until a later triage that saw both (``ledger.sync.replicate``)
``event_log``            every event with a one-line ``summary`` and its ``retracted`` flag
``timeline``             ``event_log`` without retracted events
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import duckdb

from ledger.derive import projections
from ledger.derive.projections import ARM_KEY, BENCH_METRICS, DELTA_METRICS, MEASUREMENT_TYPES
from schemas import EVENT_TYPES
from schemas.student_t import Z_SUM_80, t975_sql
from schemas.upcasting import sql_upcast_expression
from schemas.vocab import NO_EFFECT_VERDICTS

if TYPE_CHECKING:
    from ledger.store import LedgerStore

__all__ = [
    "DELTA_METRICS",
    "VIEWS_VERSION",
    "VIEW_NAMES",
    "create_views",
    "known_no_effect",
    "view_sql",
]

#: The metric of the board's benchmark column (``board_deltas``).
BOARD_DELTA_METRIC = "output_throughput"

#: Every candidate as last proposed (a re-proposal replaces the first): the board's rows.
_PROPOSED = """
    SELECT (payload->>'candidate_id') AS candidate_id, session_id, seq AS proposed_seq,
           recorded_at AS proposed_at, (payload->>'kind') AS kind, (payload->>'title') AS title,
           (payload->>'flag') AS flag, (payload->>'priority') AS priority,
           (payload->>'hypothesis') AS hypothesis, arch, host_engine_version AS engine_version
    FROM live_control WHERE type = 'candidate_proposed'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'candidate_id') ORDER BY sync_order DESC) = 1
"""


def _sql_list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def view_sql() -> dict[str, str]:
    """Return ``{view name: SELECT statement}`` in creation order."""
    no_effect = _sql_list(NO_EFFECT_VERDICTS)
    # The board's evidence: every registered type naming its candidate by candidate_id (the
    # proposal itself and the measurements, kept out of live_control, aside).
    linked_types = _sql_list(
        tuple(
            name
            for name, cls in EVENT_TYPES.items()
            if "candidate_id" in cls.candidate_link
            and name != "candidate_proposed"
            and name not in MEASUREMENT_TYPES
        )
    )
    metric_cols = ", ".join(BENCH_METRICS)
    delta_rows = ",\n            ".join(
        f"('{name}', {direction}, {floor}::DOUBLE)" for name, direction, floor in DELTA_METRICS
    )
    metrics = [name for name, _, _ in DELTA_METRICS]
    delta_metric_cols = ", ".join(metrics)
    t975 = t975_sql("df")
    z_sum = Z_SUM_80
    # one delta row of an arm (ARM_KEY) and metric against another (t: a comparison, s: the rule's)
    same_arm = " AND ".join(f"t.{k} IS NOT DISTINCT FROM s.{k}" for k in (*ARM_KEY, "metric"))
    arm_cols = ", ".join(ARM_KEY)
    base_arm_cols = ", ".join("baseline_config" if c == "config_name" else c for c in ARM_KEY)
    # the arm's central value as runners.compare's: the geometric mean when every value is
    # positive (one run: its value as stored), else the mean
    run_means = ", ".join(
        f"CASE WHEN count({m}) > 1 AND bool_and({m} > 0) "
        f"THEN exp(avg(ln(CASE WHEN {m} > 0 THEN {m} END))) "
        f"ELSE avg({m}) END AS {m}_mean"
        for m in metrics
    )
    compared_cols = ", ".join(
        f"max({col}) FILTER (WHERE metric = '{m}') AS {m}_{alias}"
        for m in metrics
        for col, alias in (("value", "value"), ("change_pct", "change_pct"), ("verdict", "verdict"))
    )
    as_baseline_cols = ", ".join(
        f"max(baseline_value) FILTER (WHERE metric = '{m}') AS {m}_value" for m in metrics
    )
    r_arm_cols = ", ".join(f"r.{c}" for c in ARM_KEY)
    summary_cols = ",\n       ".join(
        f"coalesce(c.{m}_value, CASE WHEN r.is_baseline THEN b.{m}_value END, r.{m}_mean) AS {m}, "
        f"c.{m}_change_pct, c.{m}_verdict"
        for m in metrics
    )
    join_c = " AND ".join(f"c.{k} IS NOT DISTINCT FROM r.{k}" for k in ARM_KEY)
    join_b = " AND ".join(
        f"b.{'baseline_config' if k == 'config_name' else k} IS NOT DISTINCT FROM r.{k}"
        for k in ARM_KEY
    )
    return {
        "all_events": f"""
SELECT e.seq, e.event_id, e.type, e.stream, e.stream_version, e.recorded_at, e.occurred_at,
       e.actor_kind, e.actor_name, e.session_id, e.causation_id, e.correlation_id, e.source, e.host,
       (e.host->>'compute_capability') AS arch,
       (e.host->>'engine') AS host_engine,
       (e.host->>'engine_version') AS host_engine_version,
       {sql_upcast_expression("e.payload")} AS payload,
       r.event_id IS NOT NULL AS retracted
FROM events e LEFT JOIN retractions r ON r.event_id = e.event_id""",
        "live_events": """
SELECT * EXCLUDE (retracted) FROM all_events WHERE NOT retracted""",
        "live_control": """
SELECT c.*,
       -- "latest" means latest in sync order: the hub position where the event has one, else
       -- after every synced event in local seq order; hosts synced to one hub position agree
       coalesce(so.position, 4611686018427387904 + c.seq) AS sync_order
FROM control_events c LEFT JOIN sync_events so ON so.event_id = c.event_id
ANTI JOIN retractions r ON r.event_id = c.event_id""",
        "flag_verdict_history": f"""
WITH v AS (
    SELECT (payload->>'flag') AS flag, NULL::VARCHAR AS value,
           coalesce(payload->>'engine', host_engine) AS engine,
           coalesce(payload->>'engine_version', host_engine_version) AS engine_version,
           coalesce(payload->>'arch', arch) AS arch, (payload->>'verdict') AS verdict,
           coalesce(payload->>'basis', 'researched') AS basis,
           -- research read from the source says why in notes; a person's reading says what it does
           CASE WHEN payload->>'basis' = 'source' THEN payload->>'notes'
                ELSE coalesce(payload->>'what_it_does', (payload->>'notes')) END AS summary,
           (payload->'evidence') AS evidence,
           seq, event_id, session_id, recorded_at, sync_order
    FROM live_control WHERE type = 'flag_researched'
    UNION ALL
    SELECT (payload->>'flag'), (payload->>'value'), coalesce(payload->>'engine', host_engine),
           coalesce(payload->>'engine_version', host_engine_version),
           arch, (payload->>'verdict'), (payload->>'basis'), (payload->>'message'),
           (payload->'evidence'), seq, event_id, session_id, recorded_at, sync_order
    FROM live_control
    WHERE type = 'finding_recorded' AND (payload->>'flag') IS NOT NULL AND (payload->>'verdict') IS NOT NULL
)
SELECT flag, value, engine, engine_version, arch, verdict, basis,
       verdict IN ({no_effect}) AS no_effect, summary, evidence,
       event_id AS evidence_event_id, seq, session_id, recorded_at, sync_order
FROM v""",
        "flag_verdicts": """
SELECT flag, value, flag || coalesce('=' || value, '') AS setting,
       engine, engine_version, arch, verdict, basis, no_effect, summary, evidence,
       evidence_event_id, seq, session_id, recorded_at,
       count(*) OVER w AS findings, sync_order,
       list(verdict || ' (' || basis || ')' ORDER BY sync_order) OVER w AS history
FROM flag_verdict_history
WINDOW w AS (PARTITION BY flag, value, engine, engine_version, arch)
QUALIFY row_number() OVER (PARTITION BY flag, value, engine, engine_version, arch ORDER BY sync_order DESC) = 1""",
        "sync_conflicts": """
WITH me AS (
    SELECT coalesce(max(value) FILTER (WHERE key = 'ledger_id'), '') AS id,
           coalesce(max(value) FILTER (WHERE key = 'ledger_name'), 'this ledger') AS name
    FROM ledger_meta
),
pulled AS (SELECT seq, position FROM sync_events WHERE origin_ledger::VARCHAR <> (SELECT id FROM me)),
flag_candidates AS (
    SELECT DISTINCT (payload->>'candidate_id') AS candidate_id, (payload->>'flag') AS flag, arch
    FROM live_control WHERE type = 'candidate_proposed' AND (payload->>'flag') IS NOT NULL
),
acts AS (
    SELECT (payload->>'candidate_id') AS candidate_id, seq, event_id, type,
           coalesce(payload->>'status', 'decision') AS what, (payload->>'verdict') AS verdict
    FROM live_control
    WHERE type IN ('candidate_triaged', 'decision_recorded') AND (payload->>'candidate_id') IS NOT NULL
    UNION ALL
    SELECT f.candidate_id, h.seq, h.evidence_event_id, 'flag_verdict', 'flag verdict ' || h.verdict, h.verdict
    FROM flag_verdict_history h JOIN flag_candidates f ON f.flag = h.flag AND h.arch IS NOT DISTINCT FROM f.arch
),
placed AS (
    -- an event's origin and what it saw: its own ledger's earlier events, and the hub up to seen
    SELECT a.*, s.position,
           coalesce(s.origin_ledger::VARCHAR, me.id) AS origin,
           coalesce(s.origin_name, me.name) AS origin_name,
           coalesce(s.origin_seq, a.seq) AS origin_seq,
           CASE WHEN s.origin_ledger IS NULL OR s.origin_ledger::VARCHAR = me.id
                THEN coalesce(p.position, 0) ELSE s.seen_position END AS seen
    FROM acts a CROSS JOIN me
    LEFT JOIN sync_events s ON s.event_id = a.event_id
    ASOF LEFT JOIN pulled p ON a.seq > p.seq
),
frontier AS (
    SELECT x.* FROM placed x
    WHERE NOT EXISTS (
        SELECT 1 FROM placed y
        WHERE y.candidate_id = x.candidate_id AND y.event_id <> x.event_id
          AND ((y.origin = x.origin AND y.origin_seq > x.origin_seq) OR x.position <= y.seen)
    )
)
SELECT candidate_id, count(*) AS heads,
       string_agg(what || ' by ' || origin_name || ' (' || event_id::VARCHAR || ')', ' vs '
                  ORDER BY position NULLS LAST, seq) AS conflict,
       list(event_id ORDER BY position NULLS LAST, seq) AS event_ids
FROM frontier
GROUP BY candidate_id
HAVING count(DISTINCT origin) >= 2
   AND (count(DISTINCT origin) FILTER (WHERE type <> 'flag_verdict') >= 2
        OR count(DISTINCT verdict) >= 2
        OR (bool_or(type = 'decision_recorded') AND bool_or(type = 'flag_verdict')))""",
        "board": f"""
WITH proposed AS ({_PROPOSED}),
stream_heads AS (
    -- the candidate stream's version (retracted events count: they are still in the stream),
    -- what a triage passes as expected_version
    SELECT stream, max(stream_version) AS stream_version FROM control_events
    WHERE stream LIKE 'candidate:%' GROUP BY stream
),
triage AS (
    SELECT (payload->>'candidate_id') AS candidate_id, (payload->>'status') AS status,
           (payload->>'reason') AS reason, (payload->>'verdict') AS verdict, seq AS triaged_seq
    FROM live_control WHERE type = 'candidate_triaged'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'candidate_id') ORDER BY sync_order DESC) = 1
),
links AS (
    SELECT (payload->>'candidate_id') AS candidate_id, seq, sync_order, event_id, type,
           coalesce(payload->>'text', (payload->>'decision'), (payload->>'what_it_does'),
                    (payload->>'description'), (payload->>'message'), (payload->>'reason'),
                    (payload->>'summary'), (payload->>'outcome'), (payload->>'title')) AS summary
    FROM live_control
    WHERE type IN ({linked_types})
      AND (payload->>'candidate_id') IS NOT NULL
    UNION ALL
    SELECT p.candidate_id, h.seq, h.sync_order, h.evidence_event_id, 'flag verdict (' || h.basis || ')',
           h.verdict || coalesce(': ' || h.summary, '')
    FROM flag_verdict_history h JOIN proposed p ON p.flag = h.flag AND h.arch IS NOT DISTINCT FROM p.arch
),
latest_link AS (
    SELECT * FROM links
    -- a flag_researched naming its candidate is linked twice with one seq: break the tie
    QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY sync_order DESC, type DESC) = 1
)
SELECT p.candidate_id, p.session_id, p.kind, p.title, p.flag, p.priority,
       CASE WHEN k.candidate_id IS NOT NULL THEN 'conflicting' ELSE coalesce(t.status, 'proposed') END AS status,
       coalesce(t.verdict, fv.verdict) AS verdict,
       t.reason, p.hypothesis, p.arch,
       -- no engine version on the proposal (no host): the one the flag's verdict was given at
       coalesce(p.engine_version, fv.engine_version) AS engine_version, h.stream_version,
       l.type AS latest_evidence_type, l.summary AS latest_evidence,
       l.event_id AS latest_evidence_event_id,
       greatest(p.proposed_seq, coalesce(t.triaged_seq, 0), coalesce(l.seq, 0)) AS updated_seq,
       p.proposed_seq, p.proposed_at, k.conflict
FROM proposed p
LEFT JOIN sync_conflicts k USING (candidate_id)
LEFT JOIN triage t USING (candidate_id)
LEFT JOIN latest_link l USING (candidate_id)
LEFT JOIN stream_heads h ON h.stream = 'candidate:' || p.candidate_id
LEFT JOIN (
    -- the flag's latest verdict on the candidate's arch, and the engine version it was given at
    SELECT flag, arch, verdict, engine_version FROM flag_verdicts
    QUALIFY row_number() OVER (PARTITION BY flag, arch ORDER BY sync_order DESC) = 1
) fv ON fv.flag = p.flag AND fv.arch IS NOT DISTINCT FROM p.arch""",
        "server_runs": """
WITH started AS (
    SELECT (payload->>'run_id') AS run_id, session_id, seq AS started_seq, recorded_at AS started_at,
           occurred_at, (payload->>'engine') AS engine, (payload->>'model') AS model,
           (payload->>'config_name') AS config_name, (payload->'flags') AS flags, (payload->'env') AS env,
           arch, host_engine_version AS engine_version
    FROM live_control WHERE type = 'server_started'
),
ready AS (
    SELECT (payload->>'run_id') AS run_id, recorded_at AS ready_at,
           (payload->>'ready_after_s')::DOUBLE AS ready_after_s
    FROM live_control WHERE type = 'server_ready'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'run_id') ORDER BY seq DESC) = 1
),
facts AS (
    -- the startup facts: the ready event's, else those a failed (or still starting) run logged
    SELECT (payload->>'run_id') AS run_id,
           -- parse the startup facts once per row, not once per field
           from_json((payload->'startup'), '{"attention_backend": "VARCHAR", "max_running_requests": "BIGINT",
               "max_total_num_tokens": "BIGINT", "context_len": "BIGINT", "cuda_graph_bs": "BIGINT[]",
               "piecewise_cuda_graph": "BOOLEAN", "piecewise_disabled_reason": "VARCHAR",
               "moe_kernel_config": "VARCHAR"}') AS startup,
           (payload->'startup'->'overrides') AS overrides
    FROM live_control
    WHERE type IN ('server_ready', 'server_failed', 'server_started') AND (payload->'startup') IS NOT NULL
      AND json_type(payload->'startup') = 'OBJECT'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'run_id')
                               ORDER BY type = 'server_ready' DESC, type = 'server_failed' DESC, seq DESC) = 1
),
ended AS (
    SELECT (payload->>'run_id') AS run_id, type, recorded_at AS ended_at, occurred_at AS ended_occurred_at,
           (payload->>'cause') AS failure_cause, (payload->>'message') AS failure_message
    FROM live_control WHERE type IN ('server_stopped', 'server_failed')
    QUALIFY row_number() OVER (PARTITION BY (payload->>'run_id') ORDER BY seq DESC) = 1
),
runs AS (
    SELECT s.run_id, s.session_id, s.config_name, s.engine, s.model, s.arch, s.flags, s.env,
           CASE WHEN e.type = 'server_failed' THEN 'failed'
                WHEN e.type = 'server_stopped' THEN 'stopped'
                WHEN r.run_id IS NOT NULL THEN 'ready' ELSE 'starting' END AS status,
           s.started_at, r.ready_at, e.ended_at, r.ready_after_s, s.occurred_at, e.ended_occurred_at,
           f.startup.attention_backend AS attention_backend,
           f.startup.max_running_requests AS max_running_requests,
           f.startup.max_total_num_tokens AS max_total_num_tokens,
           f.startup.context_len AS context_len,
           f.startup.cuda_graph_bs AS cuda_graph_bs,
           f.startup.piecewise_cuda_graph AS piecewise_cuda_graph,
           f.startup.piecewise_disabled_reason AS piecewise_disabled_reason,
           f.startup.moe_kernel_config AS moe_kernel_config, f.overrides,
           e.failure_cause, e.failure_message, s.started_seq,
           coalesce(json_keys(s.flags), []) AS flag_names, s.engine_version
    FROM started s LEFT JOIN ready r USING (run_id) LEFT JOIN facts f USING (run_id)
         LEFT JOIN ended e USING (run_id)
),
paired AS (
    SELECT *,
           lag(run_id) OVER w AS previous_run_id,
           lag(flags) OVER w AS previous_flags,
           lag(flag_names) OVER w AS previous_flag_names,
           lag(max_running_requests) OVER w AS previous_max_running_requests,
           lag(max_total_num_tokens) OVER w AS previous_max_total_num_tokens,
           lag(piecewise_cuda_graph) OVER w AS previous_piecewise_cuda_graph,
           lag(moe_kernel_config) OVER w AS previous_moe_kernel_config
    FROM runs
    WINDOW w AS (PARTITION BY session_id ORDER BY started_seq)
)
SELECT run_id, session_id, config_name, engine, model, arch, status, flags, env,
       started_seq, started_at, ready_at, ended_at, ready_after_s, occurred_at, ended_occurred_at,
       attention_backend,
       max_running_requests, max_total_num_tokens, context_len, cuda_graph_bs,
       list_max(cuda_graph_bs) AS cuda_graph_max_bs, piecewise_cuda_graph,
       piecewise_disabled_reason, moe_kernel_config, overrides, failure_cause, failure_message,
       previous_run_id,
       list_filter(flag_names, lambda k: previous_run_id IS NOT NULL
                   AND NOT list_contains(coalesce(previous_flag_names, []), k)) AS flags_added,
       list_filter(coalesce(previous_flag_names, []), lambda k: NOT list_contains(flag_names, k)) AS flags_removed,
       list_filter(flag_names, lambda k: list_contains(coalesce(previous_flag_names, []), k)
                   AND (flags->k)::VARCHAR IS DISTINCT FROM (previous_flags->k)::VARCHAR) AS flags_changed,
       -- each changed flag with its values, as a person reads them ("speculative-algorithm
       -- None -> EAGLE"; a JSON null or a flag not set reads None)
       list_transform(
           list_filter(flag_names, lambda k: list_contains(coalesce(previous_flag_names, []), k)
                       AND (flags->k)::VARCHAR IS DISTINCT FROM (previous_flags->k)::VARCHAR),
           lambda k: k || ' ' || coalesce(previous_flags->>k, 'None') || ' -> '
                     || coalesce(flags->>k, 'None')) AS flag_changes,
       max_running_requests - previous_max_running_requests AS max_running_requests_change,
       max_total_num_tokens - previous_max_total_num_tokens AS max_total_num_tokens_change,
       concat_ws('; ',
           CASE WHEN max_running_requests IS DISTINCT FROM previous_max_running_requests
                     AND previous_run_id IS NOT NULL AND max_running_requests IS NOT NULL
                THEN 'max_running_requests ' || coalesce(previous_max_running_requests::VARCHAR, '?')
                     || ' -> ' || max_running_requests END,
           CASE WHEN max_total_num_tokens IS DISTINCT FROM previous_max_total_num_tokens
                     AND previous_run_id IS NOT NULL AND max_total_num_tokens IS NOT NULL
                THEN 'max_total_num_tokens ' || coalesce(previous_max_total_num_tokens::VARCHAR, '?')
                     || ' -> ' || max_total_num_tokens END,
           CASE WHEN piecewise_cuda_graph IS DISTINCT FROM previous_piecewise_cuda_graph
                     AND previous_run_id IS NOT NULL AND piecewise_cuda_graph IS NOT NULL
                THEN 'piecewise CUDA graph '
                     || CASE WHEN previous_piecewise_cuda_graph THEN 'on' WHEN previous_piecewise_cuda_graph IS NULL THEN '?' ELSE 'off' END
                     || ' -> ' || CASE WHEN piecewise_cuda_graph THEN 'on' ELSE 'off' END END,
           CASE WHEN moe_kernel_config IS DISTINCT FROM previous_moe_kernel_config
                     AND previous_run_id IS NOT NULL AND moe_kernel_config IS NOT NULL
                THEN 'MoE kernel config ' || coalesce(previous_moe_kernel_config, '?') || ' -> ' || moe_kernel_config END
       ) AS changes_vs_previous,
       engine_version
FROM paired""",
        "benchmarks": f"""
SELECT run_id, session_id, seq, event_id, recorded_at, config_name, is_baseline, server_run_id, tool,
       arch, dataset, input_len, output_len, load, request_rate, num_prompts, concurrency, repeat,
       valid, {metric_cols}, source, candidate_id
FROM bench_runs b ANTI JOIN retractions r ON r.event_id = b.event_id""",
        "benchmark_deltas": f"""
WITH metric_rules(metric, direction, noise_floor) AS (
    VALUES {delta_rows}
),
-- Arms no comparison event covers are judged here by runners.compare's rule with the
-- metric's noise floor as tau (no A-vs-A runs): the Welch CI of the log ratio, t from
-- schemas.student_t (within 0.08% of scipy's).
arm_values AS (
    SELECT session_id, config_name, is_baseline, dataset, input_len, output_len, concurrency,
           request_rate, seq, metric, value
    FROM (UNPIVOT (SELECT session_id, config_name, is_baseline, dataset, input_len, output_len,
                          concurrency, request_rate, seq, {delta_metric_cols}
                   FROM benchmarks WHERE valid IS DISTINCT FROM false)
          ON {delta_metric_cols} INTO NAME metric VALUE value)
),
arms AS (
    SELECT session_id, config_name, bool_or(is_baseline) AS is_baseline, dataset, input_len,
           output_len, concurrency, request_rate, metric, count(*) AS runs,
           count(*) FILTER (WHERE value <= 0) AS unusable,
           avg(ln(value)) FILTER (WHERE value > 0) AS log_mean,
           var_samp(ln(value)) FILTER (WHERE value > 0) AS log_var,
           avg(value) AS arithmetic_mean,
           stddev_samp(value) / nullif(abs(avg(value)), 0) AS cv,
           max(seq) AS last_seq
    FROM arm_values GROUP BY ALL
),
pairs AS (
    SELECT c.session_id, c.config_name, base.config_name AS baseline_config, c.dataset, c.input_len,
           c.output_len, c.concurrency, c.request_rate, c.metric,
           -- central values as runners.compare: the geometric mean when every value is positive
           -- (one run: its value as stored, without exp(ln x)'s rounding)
           CASE WHEN base.unusable = 0 AND base.runs > 1 THEN exp(base.log_mean)
                ELSE base.arithmetic_mean END AS baseline_value,
           CASE WHEN c.unusable = 0 AND c.runs > 1 THEN exp(c.log_mean) ELSE c.arithmetic_mean END AS value,
           base.runs AS baseline_runs, c.runs,
           CASE WHEN base.unusable + c.unusable = 0 THEN c.log_mean - base.log_mean END AS d,
           base.log_var / base.runs AS va, c.log_var / c.runs AS vb,
           sqrt((base.log_var + c.log_var) / 2) AS pooled_log_sd,
           r.direction, r.noise_floor AS tau,
           greatest(c.last_seq, base.last_seq) AS seq, base.cv AS baseline_cv, c.cv
    FROM arms c
    JOIN arms base
      ON base.is_baseline AND NOT c.is_baseline
     AND base.session_id IS NOT DISTINCT FROM c.session_id
     AND base.metric = c.metric
     AND base.concurrency IS NOT DISTINCT FROM c.concurrency
     AND base.request_rate IS NOT DISTINCT FROM c.request_rate
     AND base.dataset IS NOT DISTINCT FROM c.dataset
     AND base.input_len IS NOT DISTINCT FROM c.input_len
     AND base.output_len IS NOT DISTINCT FROM c.output_len
    JOIN metric_rules r ON r.metric = c.metric
),
welch AS (
    SELECT *, sqrt(va + vb) AS se,
           CASE WHEN va + vb > 0
                THEN (va + vb) ^ 2 / (va ^ 2 / (baseline_runs - 1) + vb ^ 2 / (runs - 1)) END AS df,
           least(baseline_runs, runs) >= 2 AND d IS NOT NULL AS judged
    FROM pairs
),
bounds AS (
    SELECT *, {t975} AS t,
           exp(direction * d - ({t975}) * se) - 1 AS better_low,
           exp(direction * d + ({t975}) * se) - 1 AS better_high
    FROM welch
),
simple AS (
    SELECT session_id, config_name, baseline_config, dataset, input_len, output_len, concurrency,
           request_rate, metric, baseline_value, value, baseline_runs, runs,
           -- e^d - 1, computed from the central values (exact for one run each)
           CASE WHEN d IS NOT NULL THEN 100 * (value / nullif(baseline_value, 0) - 1) END AS change_pct,
           CASE WHEN judged THEN 100 * (exp(d - t * se) - 1) END AS ci_low_pct,
           CASE WHEN judged THEN 100 * (exp(d + t * se) - 1) END AS ci_high_pct,
           direction AS better_direction, 100 * tau AS noise_threshold_pct,
           CASE
               WHEN NOT judged THEN 'insufficient-data'
               WHEN better_low > tau THEN 'improved'
               WHEN better_high < -tau THEN 'regressed'
               WHEN better_low >= -tau AND better_high <= tau THEN 'no-measurable-change'
               ELSE 'inconclusive'
           END AS verdict,
           CASE WHEN judged AND NOT (better_low > tau OR better_high < -tau
                                     OR (better_low >= -tau AND better_high <= tau))
                THEN CASE WHEN greatest(3, ceil({z_sum} ^ 2 * 2 * (pooled_log_sd / tau) ^ 2))
                               <= least(baseline_runs, runs)
                          THEN least(baseline_runs, runs) + 2
                          ELSE greatest(3, ceil({z_sum} ^ 2 * 2 * (pooled_log_sd / tau) ^ 2)) END
           END::BIGINT AS runs_needed,
           'statistical, here: Welch CI of the log ratio vs the noise floor (no current comparison event)' AS verdict_rule,
           seq, 100 * baseline_cv AS baseline_cv_pct, 100 * cv AS cv_pct
    FROM bounds
),
stat AS (
    SELECT session_id, (payload->>'config_name') AS config_name,
           (payload->>'baseline_config') AS baseline_config, (payload->>'dataset') AS dataset,
           (payload->>'input_len')::BIGINT AS input_len, (payload->>'output_len')::BIGINT AS output_len,
           (payload->>'concurrency')::BIGINT AS concurrency, (payload->>'request_rate')::DOUBLE AS request_rate,
           (payload->>'metric') AS metric,
           (payload->>'baseline_mean')::DOUBLE AS baseline_value, (payload->>'mean')::DOUBLE AS value,
           (payload->>'baseline_runs')::BIGINT AS baseline_runs, (payload->>'runs')::BIGINT AS runs,
           -- the one sign convention: change = value / baseline - 1 (+ = it went up), as the
           -- simple rule's; stored v1 events (+ = better) arrive upcast to it
           100 * (payload->>'change')::DOUBLE AS change_pct,
           100 * (payload->>'ci_low')::DOUBLE AS ci_low_pct,
           100 * (payload->>'ci_high')::DOUBLE AS ci_high_pct,
           (payload->>'better_direction')::INTEGER AS better_direction,
           100 * (payload->>'noise_threshold')::DOUBLE AS noise_threshold_pct,
           (payload->>'verdict') AS verdict, (payload->>'runs_needed')::BIGINT AS runs_needed,
           'statistical: Welch CI of the log ratio vs noise threshold' AS verdict_rule, seq,
           100 * (payload->>'baseline_cv')::DOUBLE AS baseline_cv_pct, 100 * (payload->>'cv')::DOUBLE AS cv_pct
    FROM live_control WHERE type = 'comparison_completed'
    QUALIFY row_number() OVER (
        PARTITION BY session_id, payload->>'config_name', payload->>'baseline_config', payload->>'metric',
                     payload->>'concurrency', payload->>'request_rate', payload->>'dataset',
                     payload->>'input_len', payload->>'output_len'
        ORDER BY seq DESC) = 1
),
-- A comparison event stands while no run of its arms came after it; a later run (an import,
-- one more `run bench`) makes it stale, and the arms are judged here over all their runs, so
-- a row's runs and value always describe the same runs.
current_stat AS (
    SELECT t.* FROM stat t
    WHERE NOT EXISTS (
        -- runs of its own two arms only: a later baseline of another part of the session
        -- (another baseline_config) leaves it standing
        SELECT 1 FROM simple s
        WHERE s.seq > t.seq AND s.baseline_config = t.baseline_config AND {same_arm})
)
SELECT * FROM current_stat
UNION ALL
SELECT s.* FROM simple s
WHERE NOT EXISTS (SELECT 1 FROM current_stat t WHERE {same_arm})""",
        # The benchmarks pane: one row per arm (ARM_KEY: session, configuration, workload,
        # concurrency, request rate), per compared metric the value a change is computed from
        # (benchmark_deltas' value; for a baseline arm the baseline value its latest comparison
        # used; else the mean of the valid runs), the change and its verdict.
        "benchmark_summary": f"""
WITH runs AS (
    SELECT {arm_cols}, bool_or(is_baseline) AS is_baseline, count(*) AS runs,
           min(seq) AS first_seq, max(seq) AS last_seq,
           {run_means}
    FROM benchmarks WHERE valid IS DISTINCT FROM false
    GROUP BY {arm_cols}
),
deltas AS MATERIALIZED (SELECT * FROM benchmark_deltas),
latest AS (
    SELECT * FROM deltas
    QUALIFY row_number() OVER (PARTITION BY {arm_cols}, metric ORDER BY seq DESC) = 1
),
compared AS (
    SELECT {arm_cols}, {compared_cols} FROM latest GROUP BY {arm_cols}
),
as_baseline AS (
    SELECT {base_arm_cols}, {as_baseline_cols}
    FROM (SELECT * FROM deltas
          QUALIFY row_number() OVER (PARTITION BY {base_arm_cols}, metric ORDER BY seq DESC) = 1)
    GROUP BY {base_arm_cols}
)
SELECT {r_arm_cols}, r.is_baseline, r.runs, r.first_seq, r.last_seq,
       {summary_cols}
FROM runs r
LEFT JOIN compared c ON {join_c}
LEFT JOIN as_baseline b ON {join_b}""",
        # The board's benchmark column: per candidate, the output_throughput change of its latest
        # related configuration at that configuration's highest concurrency (the link rule below).
        "board_deltas": f"""
WITH candidates AS ({_PROPOSED}),
made_for AS (
    -- runs recorded for a candidate (plans, run bench --candidate): their configuration is that
    -- candidate's alone
    SELECT DISTINCT session_id, config_name, candidate_id FROM benchmarks
    WHERE candidate_id IS NOT NULL AND config_name IS NOT NULL
),
config_flags AS (
    -- the flags each configuration's server runs started with (server_runs.flags, read from the
    -- server_started events directly: the view's other columns are not needed here)
    SELECT DISTINCT session_id, (payload->>'config_name') AS config_name,
           unnest(coalesce(json_keys(payload->'flags'), [])) AS flag
    FROM live_control WHERE type = 'server_started' AND (payload->>'config_name') IS NOT NULL
),
deltas AS (
    SELECT session_id, config_name, concurrency, change_pct, verdict,
           max(seq) OVER (PARTITION BY session_id, config_name) AS last_seq
    FROM benchmark_deltas WHERE metric = '{BOARD_DELTA_METRIC}'
    QUALIFY row_number() OVER (PARTITION BY session_id, config_name
                               ORDER BY coalesce(concurrency, 0) DESC, seq DESC) = 1
),
related AS (
    SELECT c.candidate_id, d.*
    FROM candidates c JOIN deltas d ON d.session_id IS NOT DISTINCT FROM c.session_id
    WHERE CASE
        WHEN EXISTS (SELECT 1 FROM made_for m WHERE m.session_id IS NOT DISTINCT FROM d.session_id
                                                AND m.config_name = d.config_name)
        THEN EXISTS (SELECT 1 FROM made_for m WHERE m.session_id IS NOT DISTINCT FROM d.session_id
                                                AND m.config_name = d.config_name
                                                AND m.candidate_id = c.candidate_id)
        ELSE d.config_name = c.candidate_id
             OR d.config_name = substr(c.candidate_id, strpos(c.candidate_id, ':') + 1)
             OR (coalesce(c.flag, '') <> '' AND EXISTS (
                    SELECT 1 FROM config_flags f WHERE f.session_id IS NOT DISTINCT FROM d.session_id
                                                   AND f.config_name = d.config_name AND f.flag = c.flag))
    END
)
SELECT candidate_id, config_name AS delta_config, concurrency AS delta_concurrency,
       change_pct AS delta_pct, verdict AS delta_verdict, last_seq AS delta_seq
FROM related
QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY last_seq DESC, config_name) = 1""",
        "decisions": """
SELECT seq, event_id, session_id, recorded_at, actor_kind, actor_name,
       (payload->>'decision') AS decision, (payload->>'rationale') AS rationale,
       CAST(payload->'alternatives' AS VARCHAR[]) AS alternatives,
       CAST(payload->'evidence_event_ids' AS VARCHAR[]) AS evidence_event_ids,
       (payload->>'candidate_id') AS candidate_id, source
FROM live_control WHERE type = 'decision_recorded'""",
        # Kernel tunes (runners/moe/tune.py): one row per tune run, and per tuned batch size the
        # default-vs-tuned latency (µs) and the roofline fractions of kernel_tune_completed.results.
        "kernel_tunes": """
SELECT c.seq, c.session_id, c.recorded_at, (c.payload->>'tune_id') AS tune_id,
       coalesce(s.payload->>'kernel_source', c.payload->>'kernel_source') AS kernel_source,
       (s.payload->>'kernel') AS kernel,
       CAST(s.payload->>'E' AS INTEGER) AS E, CAST(s.payload->>'N' AS INTEGER) AS N,
       CAST(s.payload->>'K' AS INTEGER) AS K, CAST(s.payload->>'topk' AS INTEGER) AS topk,
       (s.payload->>'dtype') AS dtype, (s.payload->>'device_name') AS device_name, c.arch,
       (s.payload->>'triton_version') AS triton_version, (s.payload->>'search') AS search,
       (c.payload->>'outcome') AS outcome, CAST(c.payload->>'duration_s' AS DOUBLE) AS duration_s,
       CAST(c.payload->>'measured' AS INTEGER) AS measured, CAST(c.payload->>'reused' AS INTEGER) AS reused,
       (c.payload->>'output_file') AS output_file, (c.payload->>'summary') AS summary, c.event_id,
       (c.payload->>'error') AS error
FROM live_control c
LEFT JOIN (SELECT payload, row_number() OVER (PARTITION BY payload->>'tune_id' ORDER BY seq DESC) AS k
           FROM live_control WHERE type = 'kernel_tune_started') s
  ON s.payload->>'tune_id' = c.payload->>'tune_id' AND s.k = 1
WHERE c.type = 'kernel_tune_completed'""",
        "kernel_tune_results": """
SELECT t.seq, t.session_id, t.tune_id, t.kernel_source, t.E, t.N, t.K, t.topk, t.dtype, t.device_name, t.arch,
       CAST(r.key AS INTEGER) AS batch_size,
       CAST(r.value->>'default_us' AS DOUBLE) AS default_us, CAST(r.value->>'tuned_us' AS DOUBLE) AS tuned_us,
       CAST(r.value->>'speedup' AS DOUBLE) AS speedup, CAST(r.value->>'noise_pct' AS DOUBLE) AS noise_pct,
       CAST(r.value->>'bandwidth_fraction' AS DOUBLE) AS bandwidth_fraction,
       CAST(r.value->>'flops_fraction' AS DOUBLE) AS flops_fraction,
       CAST(r.value->>'configs_timed' AS INTEGER) AS configs_timed, (r.value->'tuned_config') AS tuned_config
FROM kernel_tunes t
JOIN live_control c ON c.event_id = t.event_id,
     json_each(c.payload->'results') r""",
        # Speculative-decoding trials (runners/spec.py): one row per trial; the *_change_pct columns
        # are value / baseline - 1 as every change (a shorter TPOT or TTFT is negative).
        "spec_trials": """
SELECT seq, session_id, recorded_at, (payload->>'trial_id') AS trial_id, (payload->>'algorithm') AS algorithm,
       CAST(payload->>'num_steps' AS INTEGER) AS num_steps, CAST(payload->>'eagle_topk' AS INTEGER) AS eagle_topk,
       CAST(payload->>'num_draft_tokens' AS INTEGER) AS num_draft_tokens, (payload->>'draft_model') AS draft_model,
       CAST(payload->>'accept_length' AS DOUBLE) AS accept_length,
       (payload->>'accept_length_source') AS accept_length_source,
       CAST(payload->>'accept_rate' AS DOUBLE) AS accept_rate,
       CAST(payload->>'per_request_accept_length' AS DOUBLE) AS per_request_accept_length,
       (payload->>'baseline_config') AS baseline_config, CAST(payload->>'concurrency' AS INTEGER) AS concurrency,
       100 * CAST(payload->>'output_throughput_change' AS DOUBLE) AS output_throughput_change_pct,
       100 * CAST(payload->'output_throughput_ci'->>0 AS DOUBLE) AS ci_low_pct,
       100 * CAST(payload->'output_throughput_ci'->>1 AS DOUBLE) AS ci_high_pct,
       100 * CAST(payload->>'median_tpot_change' AS DOUBLE) AS median_tpot_change_pct,
       100 * CAST(payload->>'median_ttft_change' AS DOUBLE) AS median_ttft_change_pct,
       CAST(payload->>'runs' AS INTEGER) AS runs, (payload->>'verdict') AS verdict,
       CAST(payload->'request_options' AS VARCHAR) AS request_options, CAST(payload->'flags' AS VARCHAR) AS flags,
       (payload->>'candidate_id') AS candidate_id, arch, event_id
FROM live_control WHERE type = 'spec_decoding_trial_completed'""",
        "event_log": """
SELECT s.seq, s.recorded_at, s.session_id, s.type, s.stream, s.actor_kind, s.actor_name, s.arch,
       s.summary, s.event_id, s.causation_id, s.correlation_id, s.source,
       r.event_id IS NOT NULL AS retracted, s.occurred_at
FROM event_summaries s LEFT JOIN retractions r ON r.event_id = s.event_id""",
        "timeline": """
SELECT * EXCLUDE (retracted) FROM event_log WHERE NOT retracted""",
    }


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create every view in the open read-write connection ``con``."""
    for name, select in view_sql().items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")


VIEW_NAMES: tuple[str, ...] = tuple(view_sql())


def views_version() -> str:
    """A digest of every statement that derives the views from the log: the projections' DDL and
    catch-up SQL (with the upcasters and one-line summaries inside) and each view's SELECT.

    Stored in ``ledger_meta.views_version``; a file whose digest differs (older code, or a view
    changed since) gets its projections rebuilt and its views recreated on the next open, so a
    changed view is never served stale and nobody has to remember to bump a number.
    """
    digest = hashlib.sha256()
    for text in (projections.DDL, *projections.apply_sql(), *view_sql().values()):
        digest.update(text.encode())
        digest.update(b"\0")
    return "sql-" + digest.hexdigest()[:16]


#: ``views_version()`` of this code (see there). Older tuneledgers stored a hand-bumped number.
VIEWS_VERSION = views_version()


#: The no-effect verdicts (``flag_verdicts.no_effect``: no-op, dead-code, not-activated,
#: no-measurable-change) already held for some flags on one engine and arch. Parameters:
#: flags (CLI spelling), engine, arch, engine version (NULL: any version), the run's own
#: ``server_started`` event id (verdicts recorded after it, or its own findings, do not count).
KNOWN_NO_EFFECT_SQL = """
SELECT flag, value, verdict, basis, engine, engine_version, arch, summary,
       CAST(evidence_event_id AS VARCHAR) AS evidence_event_id, seq
FROM flag_verdicts
WHERE no_effect AND list_contains(?::VARCHAR[], flag)
  AND engine IS NOT DISTINCT FROM ?
  -- dead code read from the source is dead on every arch; anything else holds for its arch
  AND (arch = ?::VARCHAR OR (basis = 'source' AND verdict = 'dead-code'))
  -- a verdict read from one version's source never stands for another version
  AND (?::VARCHAR IS NULL OR engine_version IS NULL OR engine_version = ?::VARCHAR)
  AND seq < coalesce((SELECT min(seq) FROM events WHERE event_id = ?::UUID), 9223372036854775807)
ORDER BY flag, seq"""


def known_no_effect(
    store: LedgerStore,
    flags: list[str],
    *,
    engine: str | None,
    engine_version: str | None,
    arch: str | None,
    before_event_id: str | None = None,
) -> list[dict[str, Any]]:
    """The ledger's no-effect verdicts for ``flags`` on ``engine`` / ``arch`` and ``engine_version``
    (a verdict or a run without a version matches any version): one dict per flag with the ``flag_verdicts`` columns
    ``flag, value, verdict, basis, engine, engine_version, arch, summary, evidence_event_id, seq``.

    ``before_event_id``: when that event (the run's ``server_started``) is already stored, only
    verdicts recorded before it count, so that re-importing a run adds nothing.
    ``store`` is a ``LedgerStore`` (its ``query_arrow``). No flags or no ledger file: ``[]``; no
    arch: only the verdicts that hold on every arch (dead code read from the source).
    """
    if not flags or not store.path.exists():
        return []
    table = store.query_arrow(
        KNOWN_NO_EFFECT_SQL,
        [sorted(set(flags)), engine, arch, engine_version, engine_version, before_event_id],
    )
    return list(table.to_pylist())
