"""vLLM server logs: the public face of ``vllm_facts`` (the grammar and facts) and
``vllm_findings``; the run's state and failure come from ``failure``."""

from __future__ import annotations

from schemas import StartupFacts

from .vllm_facts import (
    LOG_MARKERS,
    VllmLogFacts,
    is_ready_line,
    is_vllm_log,
    parse_vllm_log,
    split_vllm_line,
)
from .vllm_findings import vllm_findings


def to_startup_facts(parsed: VllmLogFacts) -> StartupFacts:
    """The ledger's ``StartupFacts`` (``attention_backend``, ``max_running_requests`` =
    ``max_num_seqs``, ``max_total_num_tokens`` = ``kv_cache_tokens`` = the KV cache's tokens,
    ``context_len``, ``cuda_graph_bs``, ``moe_kernel_config``, ``server_args``)."""
    return parsed.facts.to_startup_facts()


__all__ = [
    "LOG_MARKERS",
    "VllmLogFacts",
    "is_ready_line",
    "is_vllm_log",
    "parse_vllm_log",
    "split_vllm_line",
    "to_startup_facts",
    "vllm_findings",
]
