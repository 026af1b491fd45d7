"""The value models events hold (not events themselves): a server's start-up facts and the
settings its log showed overridden, a benchmark's workload and its summary metrics.

``schemas.events`` re-exports them; they live here to keep each module one concern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, create_model

from .envelope import StrictModel
from .metrics import METRICS
from .vocab import LoadKind

# --- servers --------------------------------------------------------------------


class SettingOverride(StrictModel):
    """A setting the server args asked for that a later log line (or the resolved limits) changed.

    ``flag`` in CLI spelling without dashes, as the log's SGLang version spells it (``None`` when
    the line names no flag); ``requested`` is the server args' value (``None``: default / not
    logged), ``effective`` what the server runs with (``None``: not stated); ``reason`` the line's
    "because ..." part; ``source`` ``file:line`` of the line that shows it.
    """

    flag: str | None = None
    requested: Any = None
    effective: Any = None
    reason: str | None = None
    source: str | None = None


class StartupFacts(StrictModel):
    """What a server's startup log and ``/server_info`` say it resolved to.

    ``cuda_graph_bs``: the decode batch sizes captured in CUDA graphs;
    ``piecewise_cuda_graph``: whether piecewise CUDA graph was captured (``None``
    when unknown); ``moe_kernel_config``: ``found`` (a tuned file for this GPU),
    ``fallback`` (another Triton version's file), ``default`` (none:
    "Performance might be sub-optimal!") or ``None`` (no MoE / unknown).
    Memory in GB as SGLang logs it.
    """

    attention_backend: str | None = None
    max_running_requests: int | None = None
    max_total_num_tokens: int | None = None
    context_len: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    cuda_graph_bs: list[int] | None = None
    piecewise_cuda_graph: bool | None = None
    piecewise_disabled_reason: str | None = None
    moe_kernel_config: Literal["found", "fallback", "default"] | None = None
    moe_config_paths: list[str] = Field(default_factory=list)
    kv_cache_tokens: int | None = None
    weight_load_s: float | None = None
    available_gpu_mem_gb: float | None = None
    server_args: dict[str, Any] = Field(default_factory=dict)
    kv_cache_gb: float | None = Field(
        default=None, description="K + V cache size in GB, as logged."
    )
    overrides: list[SettingOverride] = Field(
        default_factory=list,
        description="Requested settings a later log line overrode (effective value kept).",
    )
    max_concurrency: float | None = Field(
        default=None,
        description="Requests of the maximum model length the KV cache holds at once, as the "
        "engine logs it (vLLM: 'Maximum concurrency for 512 tokens per request: 2048.00x').",
    )
    speculative_config: dict[str, Any] | None = Field(
        default=None,
        description="The speculative decoding configuration the engine was started with "
        "(vLLM's --speculative-config as parsed); None: none, or not known.",
    )


# --- benchmarks -----------------------------------------------------------------


class Workload(StrictModel):
    """What was sent: dataset, lengths in tokens, how many prompts, load pattern.

    ``range_ratio`` follows sglang bench_serving's ``--random-range-ratio``
    (1.0: fixed lengths). ``request_rate`` in requests/s, ``None`` for closed loop.
    """

    dataset: str | None = None
    input_len: int | None = Field(default=None, ge=0)
    output_len: int | None = Field(default=None, ge=0)
    range_ratio: float | None = Field(default=None, ge=0, le=1)
    num_prompts: int | None = Field(default=None, ge=0)
    load: LoadKind | None = None
    request_rate: float | None = None
    seed: int | None = None
    ignore_eos: bool | None = None
    endpoint: str | None = None
    shared_prefix_len: int | None = Field(
        default=None,
        ge=0,
        description="Tokens at the start of every prompt that all prompts share (a system "
        "prompt: what prefix caching reuses); None or 0: every prompt random from its start.",
    )


_BENCH_METRICS_DOC = """Summary metrics of one run, named and defined as sglang bench_serving does.

    The fields are the rows of ``schemas.metrics.METRICS`` (the one metric table: unit, better
    direction, noise floor, label), all optional. Throughputs in tok/s (requests/s for
    ``request_throughput``), latencies in ms, ``duration_s`` in seconds,
    ``achieved_concurrency`` = sum(E2E)/duration. TTFT, TPOT, ITL and E2E are
    sglang bench_serving's (docs/metrics.md; TPOT excludes the first token).
    """

if TYPE_CHECKING:

    class BenchMetrics(StrictModel):
        __doc__ = _BENCH_METRICS_DOC

        def __init__(self, **values: float | int | None) -> None: ...
        def __getattr__(self, name: str) -> Any: ...

else:
    BenchMetrics = create_model(
        "BenchMetrics",
        __base__=StrictModel,
        __doc__=_BENCH_METRICS_DOC,
        __module__=__name__,
        **{
            m.name: (
                int | None if m.integer else float | None,
                # Every metric is a count, a duration, a rate or a latency: never negative, and
                # finite (JSON has no Infinity or NaN: pydantic would store them as null). An
                # integer is finite already: allow_inf_nan on one costs a Python-level check
                # per field (pydantic cannot give it to the integer validator).
                Field(
                    default=None,
                    ge=0,
                    allow_inf_nan=None if m.integer else False,
                    description=f"{m.label} ({m.unit})",
                ),
            )
            for m in METRICS
        },
    )
