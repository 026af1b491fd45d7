"""Server runs: one row per run, its startup facts and what changed against the run before."""

from __future__ import annotations

#: The startup facts' JSON shape, for ``from_json`` (each field parsed once per row).
_STARTUP_SHAPE = (
    '{"attention_backend": "VARCHAR", "max_running_requests": "BIGINT", '
    '"max_total_num_tokens": "BIGINT", "context_len": "BIGINT", "cuda_graph_bs": "BIGINT[]", '
    '"piecewise_cuda_graph": "BOOLEAN", "piecewise_disabled_reason": "VARCHAR", '
    '"moe_kernel_config": "VARCHAR"}'
)


def server_runs() -> str:
    """One row per server run: flag set, startup facts, change against the previous run, the
    engine version the runner's probe read."""
    return f"""
WITH server_events AS MATERIALIZED (
    -- the four server event types read once, each run id parsed once (each CTE below reading
    -- live_control again re-ran its joins and re-parsed run_id from every payload)
    SELECT (payload->>'run_id') AS run_id, type, session_id, seq, recorded_at, occurred_at, payload, arch, host_engine_version
    FROM live_control
    WHERE type IN ('server_started', 'server_ready', 'server_failed', 'server_stopped')
),
started AS (
    SELECT run_id, session_id, seq AS started_seq, recorded_at AS started_at,
           occurred_at, (payload->>'engine') AS engine, (payload->>'model') AS model,
           (payload->>'config_name') AS config_name, (payload->'flags') AS flags, (payload->'env') AS env,
           arch, host_engine_version AS engine_version
    FROM server_events WHERE type = 'server_started'
),
ready AS (
    SELECT run_id, recorded_at AS ready_at,
           (payload->>'ready_after_s')::DOUBLE AS ready_after_s
    FROM server_events WHERE type = 'server_ready'
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
),
facts AS (
    -- the startup facts: the ready event's, else those a failed (or still starting) run logged
    SELECT run_id,
           -- parse the startup facts once per row, not once per field
           from_json((payload->'startup'), '{_STARTUP_SHAPE}') AS startup,
           (payload->'startup'->'overrides') AS overrides
    FROM server_events
    WHERE type IN ('server_ready', 'server_failed', 'server_started') AND (payload->'startup') IS NOT NULL
      AND json_type(payload->'startup') = 'OBJECT'
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY type = 'server_ready' DESC, type = 'server_failed' DESC, seq DESC) = 1
),
ended AS (
    SELECT run_id, type, recorded_at AS ended_at, occurred_at AS ended_occurred_at,
           (payload->>'cause') AS failure_cause, (payload->>'message') AS failure_message
    FROM server_events WHERE type IN ('server_stopped', 'server_failed')
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
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
),
diffed AS (
    -- the flags set in both runs with another value, found once (two columns use it; each
    -- test re-parses both runs' flags JSON)
    SELECT *,
           list_filter(flag_names, lambda k: list_contains(coalesce(previous_flag_names, []), k)
                       AND (flags->k)::VARCHAR IS DISTINCT FROM (previous_flags->k)::VARCHAR) AS flags_changed
    FROM paired
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
       flags_changed,
       -- each changed flag with its values, as a person reads them ("speculative-algorithm
       -- None -> EAGLE"; a JSON null or a flag not set reads None)
       list_transform(
           flags_changed,
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
FROM diffed"""
