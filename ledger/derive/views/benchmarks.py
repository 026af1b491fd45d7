"""Benchmarks: each run, each configuration against the session's baseline (``benchmark_deltas``:
the latest statistical comparison, else the same Welch rule in SQL), and one row per arm."""

from __future__ import annotations

from ledger.derive.projections import ARM_KEY, BENCH_METRICS, DELTA_METRICS
from ledger.derive.verdict_rule import EARLIER_RULE_SOURCE, verdict_rule
from schemas.student_t import MAX_PRACTICAL_RUNS, runs_needed_sql, t975_sql

#: The compared metrics (``DELTA_METRICS``' names), in their order.
_METRICS = [name for name, _, _ in DELTA_METRICS]


def _sql_text(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def benchmarks() -> str:
    """One row per benchmark run (one concurrency), metrics flattened; ``validity_notes``: why
    a run is not valid (or what its import set aside), as the run recorded it."""
    metric_cols = ", ".join(BENCH_METRICS)
    return f"""
SELECT run_id, session_id, seq, event_id, recorded_at, config_name, is_baseline, server_run_id, tool,
       arch, dataset, input_len, output_len, load, request_rate, num_prompts, seed, concurrency, repeat,
       valid, validity_notes, {metric_cols}, source, candidate_id
FROM bench_runs b ANTI JOIN retractions r ON r.event_id = b.event_id"""


def _arm_aggregates(m: str) -> str:
    """One compared metric's aggregates per arm, over the runs that reported it."""
    # CASE, not FILTER: the ~70 aggregates' filters each cost a selection of their own
    positive = f"CASE WHEN {m} > 0 THEN {m} END"
    return (
        f"bool_or(CASE WHEN {m} IS NOT NULL THEN is_baseline END) AS {m}__is_baseline, "
        f"count({m}) AS {m}__runs, count(CASE WHEN {m} <= 0 THEN 1 END) AS {m}__unusable, "
        f"avg(ln({positive})) AS {m}__log_mean, var_samp(ln({positive})) AS {m}__log_var, "
        f"avg({m}) AS {m}__arithmetic_mean, "
        f"stddev_samp({m}) / nullif(abs(avg({m})), 0) AS {m}__cv, "
        f"max(CASE WHEN {m} IS NOT NULL THEN seq END) AS {m}__last_seq"
    )


def _arm_row(m: str) -> str:
    """One compared metric's (arm, metric) rows from ``arm_wide``: the arms with a run of it."""
    return (
        f"SELECT session_id, config_name, {m}__is_baseline AS is_baseline, dataset, input_len, "
        f"output_len, seed, concurrency, request_rate, '{m}' AS metric, {m}__runs AS runs, "
        f"{m}__unusable AS unusable, {m}__log_mean AS log_mean, {m}__log_var AS log_var, "
        f"{m}__arithmetic_mean AS arithmetic_mean, {m}__cv AS cv, {m}__last_seq AS last_seq "
        f"FROM arm_wide WHERE {m}__runs > 0"
    )


def _welch_rule() -> str:
    """``benchmark_deltas``' first CTEs, up to ``simple``: every arm against its session's
    baseline by runners.compare's rule (the Welch CI of the log ratio against the metric's
    default practical threshold)."""
    delta_rows = ",\n            ".join(
        f"('{name}', {direction}, {floor}::DOUBLE)" for name, direction, floor in DELTA_METRICS
    )
    arm_aggregates = ",\n           ".join(_arm_aggregates(m) for m in _METRICS)
    arm_rows = "\n    UNION ALL\n    ".join(_arm_row(m) for m in _METRICS)
    t975 = t975_sql("df")
    signed = "direction * d"
    distance = f"least(abs({signed} - ln(1 + tau)), abs({signed} - ln(1 - tau)))"
    needed = runs_needed_sql("pooled_log_sd", distance)
    at_zero = runs_needed_sql("pooled_log_sd", "ln(1 + tau)")
    max_runs = MAX_PRACTICAL_RUNS
    return f"""
WITH metric_rules(metric, direction, noise_floor) AS (
    VALUES {delta_rows}
),
-- Arms no comparison event covers are judged here by runners.compare's rule with the
-- metric's default practical threshold as tau: the Welch CI of the log ratio, t from
-- schemas.student_t (within 0.08% of scipy's).
-- Per arm first, one wide GROUP BY over the runs (each compared metric's aggregates side by
-- side), then the few arm rows unpivoted into (arm, metric) rows: unpivoting the runs first
-- made 5.1M rows to group at 1M events (docs/performance.md). Each metric's aggregates are
-- over the runs that reported it, as the unpivot's (which drops NULLs) were.
arm_wide AS MATERIALIZED (
    SELECT session_id, config_name, dataset, input_len, output_len, seed, concurrency,
           request_rate,
           {arm_aggregates}
    FROM benchmarks WHERE valid IS DISTINCT FROM false
    GROUP BY ALL
),
arms AS (
    {arm_rows}
),
pairs AS (
    SELECT c.session_id, c.config_name, base.config_name AS baseline_config, c.dataset, c.input_len,
           c.output_len, c.seed, c.concurrency, c.request_rate, c.metric,
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
     AND base.seed IS NOT DISTINCT FROM c.seed
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
needs AS (
    -- runs per arm to decide (runners.compare's rule, schemas.student_t.runs_needed): at the
    -- observed change (its distance to the nearest threshold), and at no change (too-noisy)
    SELECT *, {needed} AS needed, {at_zero} AS at_zero,
           judged AND NOT (better_low > tau OR better_high < -tau
                           OR (better_low >= -tau AND better_high <= tau)) AS undecided
    FROM bounds
),
simple AS (
    SELECT session_id, config_name, baseline_config, dataset, input_len, output_len, seed,
           concurrency, request_rate, metric, baseline_value, value, baseline_runs, runs,
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
               WHEN coalesce(needed > {max_runs}, true) AND coalesce(at_zero > {max_runs}, true)
                    THEN 'too-noisy'
               ELSE 'inconclusive'
           END AS verdict,
           CASE WHEN undecided THEN CASE WHEN needed <= least(baseline_runs, runs)
                                         THEN least(baseline_runs, runs) + 2 ELSE needed END
           END::BIGINT AS runs_needed,
           {_sql_text(verdict_rule(stored=False))} AS verdict_rule,
           seq, 100 * baseline_cv AS baseline_cv_pct, 100 * cv AS cv_pct,
           NULL::UUID AS comparison_event_id
    FROM needs
),
"""


def benchmark_deltas() -> str:
    """Each configuration against the session's baseline, per concurrency and metric: the
    latest statistical comparison (``comparison_completed``, its ``comparison_event_id``) while
    no run came after it and it was judged by this rule (not the earlier 2 x CV one), else the same Welch rule over all the arms' valid runs with the
    metric's default threshold (``_welch_rule``, ``comparison_event_id`` NULL)."""
    # one delta row of an arm (ARM_KEY) and metric against another (t: a comparison, s: the rule's)
    same_arm = " AND ".join(f"t.{k} IS NOT DISTINCT FROM s.{k}" for k in (*ARM_KEY, "metric"))
    return (
        _welch_rule()
        + f"""compared_seed AS (
    SELECT c.event_id, min(b.seed) AS seed
    FROM (SELECT event_id,
                 unnest(from_json(payload->'benchmark_event_ids', '["VARCHAR"]')) AS benchmark_id
          FROM live_control
          WHERE type = 'comparison_completed' AND payload->>'seed' IS NULL) c
    JOIN bench_runs b ON CAST(b.event_id AS VARCHAR) = c.benchmark_id
    GROUP BY c.event_id
),
stat AS (
    SELECT session_id, (payload->>'config_name') AS config_name,
           (payload->>'baseline_config') AS baseline_config, (payload->>'dataset') AS dataset,
           (payload->>'input_len')::BIGINT AS input_len, (payload->>'output_len')::BIGINT AS output_len,
           -- the seed of its runs: events written before comparisons kept one name it by their runs
           coalesce((payload->>'seed')::BIGINT, compared_seed.seed) AS seed,
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
           CASE WHEN coalesce(payload->>'noise_source', '') LIKE {_sql_text(EARLIER_RULE_SOURCE)}
                THEN {_sql_text(verdict_rule(earlier=True))}
                ELSE {_sql_text(verdict_rule())} END AS verdict_rule, seq,
           100 * (payload->>'baseline_cv')::DOUBLE AS baseline_cv_pct, 100 * (payload->>'cv')::DOUBLE AS cv_pct,
           event_id AS comparison_event_id
    FROM live_control LEFT JOIN compared_seed USING (event_id) WHERE type = 'comparison_completed'
    QUALIFY row_number() OVER (
        PARTITION BY session_id, payload->>'config_name', payload->>'baseline_config', payload->>'metric',
                     payload->>'concurrency', payload->>'request_rate', payload->>'dataset',
                     payload->>'input_len', payload->>'output_len', seed
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
),
-- A verdict of the earlier rule (tau = 2 x the baseline's CV) is not this rule's: where this
-- view's own judgment pairs the same baseline over as many runs per arm (the same runs), and
-- the comparison was no invalid one, that judgment stands instead (ledger/derive/verdict_rule.py)
rejudged AS (
    SELECT t.comparison_event_id AS replaced, s.* FROM current_stat t JOIN simple s
      ON {same_arm} AND s.baseline_config = t.baseline_config
     AND s.baseline_runs = t.baseline_runs AND s.runs = t.runs
    WHERE t.verdict_rule = {_sql_text(verdict_rule(earlier=True))} AND t.verdict <> 'invalid'
)
SELECT * FROM current_stat WHERE comparison_event_id NOT IN (SELECT replaced FROM rejudged)
UNION ALL
SELECT * EXCLUDE (replaced) FROM rejudged
UNION ALL
SELECT s.* FROM simple s
WHERE NOT EXISTS (SELECT 1 FROM current_stat t WHERE {same_arm})"""
    )


def benchmark_summary() -> str:
    """The benchmarks pane: one row per arm (ARM_KEY: session, configuration, workload,
    concurrency, request rate), per compared metric the value a change is computed from
    (benchmark_deltas' value; for a baseline arm the baseline value its latest comparison
    used; else the mean of the valid runs), the change, its verdict and ``<metric>_runs``: the
    number of runs that value is over (a comparison's count; it can differ from ``runs``, the
    arm's valid runs stored: a comparison that counted a run the gate marked invalid, a metric
    some runs did not report)."""
    metrics = _METRICS
    arm_cols = ", ".join(ARM_KEY)
    base_arm_cols = ", ".join("baseline_config" if c == "config_name" else c for c in ARM_KEY)
    # the arm's central value as runners.compare's: the geometric mean when every value is
    # positive (one run: its value as stored), else the mean
    run_means = ", ".join(
        f"CASE WHEN count({m}) > 1 AND bool_and({m} > 0) "
        f"THEN exp(avg(ln(CASE WHEN {m} > 0 THEN {m} END))) "
        f"ELSE avg({m}) END AS {m}_mean, count({m}) AS {m}_n"
        for m in metrics
    )
    compared_cols = ", ".join(
        f"max({col}) FILTER (WHERE metric = '{m}') AS {m}_{alias}"
        for m in metrics
        for col, alias in (
            ("value", "value"),
            ("change_pct", "change_pct"),
            ("verdict", "verdict"),
            ("runs", "runs"),
        )
    )
    as_baseline_cols = ", ".join(
        f"max(baseline_value) FILTER (WHERE metric = '{m}') AS {m}_value, "
        f"max(baseline_runs) FILTER (WHERE metric = '{m}') AS {m}_runs"
        for m in metrics
    )
    r_arm_cols = ", ".join(f"r.{c}" for c in ARM_KEY)
    # each value with the number of runs it is over, taken from where the value is
    summary_cols = ",\n       ".join(
        f"coalesce(c.{m}_value, CASE WHEN r.is_baseline THEN b.{m}_value END, r.{m}_mean) AS {m}, "
        f"c.{m}_change_pct, c.{m}_verdict, "
        f"CASE WHEN c.{m}_value IS NOT NULL THEN c.{m}_runs "
        f"WHEN r.is_baseline AND b.{m}_value IS NOT NULL THEN b.{m}_runs "
        f"ELSE r.{m}_n END AS {m}_runs"
        for m in metrics
    )
    join_c = " AND ".join(f"c.{k} IS NOT DISTINCT FROM r.{k}" for k in ARM_KEY)
    join_b = " AND ".join(
        f"b.{'baseline_config' if k == 'config_name' else k} IS NOT DISTINCT FROM r.{k}"
        for k in ARM_KEY
    )
    return f"""
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
LEFT JOIN as_baseline b ON {join_b}"""
