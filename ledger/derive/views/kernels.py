"""Kernel tunes (``runners/moe/tune.py``): one row per tune run, and one per tuned batch size."""

from __future__ import annotations


def kernel_tunes() -> str:
    """Kernel tunes (runners/moe/tune.py): one row per tune run, and per tuned batch size
    the default-vs-tuned latency (µs) and the roofline fractions of
    kernel_tune_completed.results."""
    return """
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
WHERE c.type = 'kernel_tune_completed'"""


def kernel_tune_results() -> str:
    """Per tuned batch size of a kernel tune (``kernel_tunes``): the default-vs-tuned
    latency (µs), speedup, noise and roofline fractions; for a tune of two configs (the up/gate
    and down GEMMs tuned separately) the best one config and the pair on the whole layer, each
    GEMM's search time alone and its config (one-config tunes: the one config for both, the
    GEMM times NULL)."""
    return """
SELECT t.seq, t.session_id, t.tune_id, t.kernel_source, t.E, t.N, t.K, t.topk, t.dtype, t.device_name, t.arch,
       CAST(r.key AS INTEGER) AS batch_size,
       CAST(r.value->>'default_us' AS DOUBLE) AS default_us, CAST(r.value->>'tuned_us' AS DOUBLE) AS tuned_us,
       CAST(r.value->>'shipped_us' AS DOUBLE) AS shipped_us, (r.value->>'kept') AS kept,
       CAST(r.value->>'speedup' AS DOUBLE) AS speedup, CAST(r.value->>'noise_pct' AS DOUBLE) AS noise_pct,
       CAST(r.value->>'bandwidth_fraction' AS DOUBLE) AS bandwidth_fraction,
       CAST(r.value->>'flops_fraction' AS DOUBLE) AS flops_fraction,
       CAST(r.value->>'configs_timed' AS INTEGER) AS configs_timed, (r.value->'tuned_config') AS tuned_config,
       CAST(r.value->>'one_config_us' AS DOUBLE) AS one_config_us,
       CAST(r.value->>'two_config_us' AS DOUBLE) AS two_config_us,
       CAST(r.value->>'up_us' AS DOUBLE) AS up_us, CAST(r.value->>'down_us' AS DOUBLE) AS down_us,
       coalesce(r.value->'down_config', r.value->'tuned_config') AS down_config
FROM kernel_tunes t
JOIN live_control c ON c.event_id = t.event_id,
     json_each(c.payload->'results') r"""
