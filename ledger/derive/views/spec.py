"""Speculative-decoding trials (``runners/spec.py``)."""

from __future__ import annotations


def spec_trials() -> str:
    """Speculative-decoding trials (runners/spec.py): one row per trial and concurrency, its
    latest result (a spec resumed with more repeats records the trial again, over all its
    runs: the earlier result is superseded, still in ``events``); the *_change_pct columns are
    value / baseline - 1 as every change (a shorter TPOT or TTFT is negative)."""
    return """
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
FROM live_control WHERE type = 'spec_decoding_trial_completed'
QUALIFY row_number() OVER (
    PARTITION BY session_id, payload->>'trial_id', payload->>'concurrency' ORDER BY seq DESC
) = 1"""
