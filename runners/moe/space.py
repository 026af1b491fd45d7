"""The fused-MoE Triton kernel's tuning space, what a device can hold of it, and how to search it.

Pure Python (no torch, no GPU): everything here is tested on the CPU against recorded H200
timings (``tests/fixtures/h200_moe_timings.json``); ``runners.moe.kernels`` does the GPU part.

- **Shape** (``MoeShape``): E experts, N the per-rank intermediate size, K the hidden size,
  top-k, dtype; from a model's ``config.json`` and the TP size (``shape_from_model_config``).
- **Space** (``search_space``): SGLang's tuner's (docs/engines.md) —
  num_stages {2,3,4,5} x BLOCK_M {16..256} x BLOCK_K {64,128,256} x BLOCK_N {32..256} x
  warps {4,8} x GROUP_M {1,16,32,64} = 1,920 configs.
- **Pruning** (``prune``): before anything runs, each config's shared memory — one A and one
  B tile ``(BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N) x element bytes`` per stage Triton keeps in
  flight: ``num_stages`` under Hopper's wgmma (BLOCK_M >= 64), ``num_stages - 1`` under
  mma.sync (``ledger.engines.gpu_arch.moe_shared_memory``, measured on the H200) — against the
  device's per-block limit (Triton's ``max_shared_mem``: 232,448 B on the H200, 101,376 B on
  SM120). A config that still fails to compile is rejected when tried.
- **Search** (``successive_halving``): many configs at a small timing budget, the best
  ``1/eta`` at ``eta`` times the budget, until one is left — Jamieson & Talwalkar (2016),
  the inner loop of Hyperband (Li et al., 2018).
- **Output** (``config_file_name`` / ``config_file_content``): SGLang's file name and content.
- **Roofline** (``roofline``): bytes and FLOPs the two expert GEMMs must move and do.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.engines.gpu_arch import SHARED_MEMORY_PER_BLOCK, moe_shared_memory

__all__ = ["SHARED_MEMORY_PER_BLOCK"]  # re-exported: the tuner prunes by it

#: The six fields of one config, in SGLang's file order.
CONFIG_KEYS = (
    "BLOCK_SIZE_M",
    "BLOCK_SIZE_N",
    "BLOCK_SIZE_K",
    "GROUP_SIZE_M",
    "num_warps",
    "num_stages",
)

#: The batch sizes SGLang's tuner (benchmark/kernels/fused_moe_triton) tunes, 18 of them.
SGLANG_BATCH_SIZES = (
    1,
    2,
    4,
    8,
    16,
    24,
    32,
    48,
    64,
    96,
    128,
    256,
    512,
    1024,
    1536,
    2048,
    3072,
    4096,
)

#: The default: the interactive range, 1..64 of SGLang's list.
INTERACTIVE_BATCH_SIZES = tuple(m for m in SGLANG_BATCH_SIZES if m <= 64)

#: Bytes per element of the weights/activations the kernel loads, by dtype name.
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp8_w8a8": 1}

Config = dict[str, int]


def config_key(config: Mapping[str, Any]) -> str:
    """A config's canonical text: its six fields in SGLang's order (``"16,32,64,1,4,3"``)."""
    return ",".join(str(int(config[k])) for k in CONFIG_KEYS)


@dataclass(frozen=True)
class MoeShape:
    """The shape of one MoE layer's expert GEMMs on one rank.

    E experts; N the per-rank intermediate size (the first GEMM's weights are [E, 2N, K],
    the second's [E, K, N]); K the hidden size; ``topk`` experts per token; ``dtype``
    ``bf16`` (``fp16``) or ``fp8_w8a8`` with an optional ``block_shape`` [block_n, block_k].
    """

    E: int
    N: int
    K: int
    topk: int
    dtype: str = "bf16"
    block_shape: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if min(self.E, self.N, self.K, self.topk) < 1 or self.topk > self.E:
            raise ValueError(f"not a MoE shape: E={self.E} N={self.N} K={self.K} topk={self.topk}")
        if self.dtype not in ELEMENT_BYTES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {', '.join(ELEMENT_BYTES)}")

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def file_dtype(self) -> str | None:
        """The ``dtype=`` part of SGLang's file name: none for bf16/fp16."""
        return None if self.dtype in ("bf16", "fp16") else self.dtype

    def describe(self) -> str:
        bs = f" block {list(self.block_shape)}" if self.block_shape else ""
        return f"E={self.E} N={self.N} K={self.K} top-{self.topk} {self.dtype}{bs}"


def shape_from_model_config(
    config: Mapping[str, Any], tp: int = 1, dtype: str = "bf16"
) -> MoeShape:
    """The MoE shape of a Hugging Face ``config.json`` (as a dict) at tensor parallel size ``tp``.

    Reads the expert count (``num_experts`` / ``num_local_experts`` / ``n_routed_experts``),
    the expert intermediate size (``moe_intermediate_size``, else ``intermediate_size``), the
    hidden size and ``num_experts_per_tok``; a ``text_config`` (multimodal models) is looked into.
    N = intermediate size / tp, as SGLang's tuner computes it.

    Raises:
        ValueError: a field is missing, or the intermediate size does not divide by ``tp``.
    """
    cfg: Mapping[str, Any] = config.get("text_config") or config

    def first(*names: str) -> int:
        for name in names:
            if cfg.get(name):
                return int(cfg[name])
        raise ValueError(f"model config has none of {', '.join(names)}: not a MoE model config")

    E = first("num_experts", "num_local_experts", "n_routed_experts")
    inter = first("moe_intermediate_size", "intermediate_size")
    K = first("hidden_size")
    topk = first("num_experts_per_tok", "moe_topk", "top_k")
    if tp < 1 or inter % tp:
        raise ValueError(f"intermediate size {inter} does not divide by tensor parallel size {tp}")
    block = None
    quant = cfg.get("quantization_config") or config.get("quantization_config") or {}
    if quant.get("weight_block_size"):
        dtype, block = "fp8_w8a8", tuple(int(x) for x in quant["weight_block_size"])
    return MoeShape(E=E, N=inter // tp, K=K, topk=topk, dtype=dtype, block_shape=block)  # type: ignore[arg-type]


# --- the space and its pruning -------------------------------------------------------------


def search_space() -> list[Config]:
    """SGLang's tuner's 1,920 configs (docs/engines.md), in a fixed order."""
    return [
        dict(
            BLOCK_SIZE_M=bm,
            BLOCK_SIZE_N=bn,
            BLOCK_SIZE_K=bk,
            GROUP_SIZE_M=g,
            num_warps=w,
            num_stages=s,
        )
        for s, bm, bk, bn, w, g in itertools.product(
            (2, 3, 4, 5),
            (16, 32, 64, 128, 256),
            (64, 128, 256),
            (32, 64, 128, 256),
            (4, 8),
            (1, 16, 32, 64),
        )
    ]


def shared_memory_bytes(
    config: Mapping[str, Any],
    element_bytes: int = 2,
    block_shape: Sequence[int] | None = None,
    arch: str | None = None,
    *,
    bound: str = "high",
) -> int:
    """Bytes of shared memory one block needs on ``arch``: the stages Triton keeps in flight
    (``ledger.engines.gpu_arch.moe_shared_memory``: ``num_stages`` under Hopper's wgmma for
    BLOCK_M >= 64, ``num_stages - 1`` under mma.sync; ``bound`` ``low`` or ``high`` where the
    arch's pipeline is not known) times one stage's A and B tiles — plus, for block-quantised
    fp8, the float32 scales each stage loads beside its tiles: BLOCK_M activation scales and,
    when BLOCK_N exceeds block_n, BLOCK_N weight scales (one otherwise), counted in full (an
    upper bound, under 1% of the tiles)."""
    need = moe_shared_memory(dict(config), arch, element_bytes)
    total = need.low if bound == "low" else need.high
    if block_shape and all(block_shape):
        bn = int(config["BLOCK_SIZE_N"]) if int(config["BLOCK_SIZE_N"]) > int(block_shape[0]) else 1
        total += (total // need.stage) * (int(config["BLOCK_SIZE_M"]) + bn) * 4
    return total


def block_shape_fits(config: Mapping[str, Any], block_shape: Sequence[int] | None) -> str | None:
    """Why ``config`` cannot run with fp8 block quantisation ``block_shape`` [block_n, block_k],
    or None when it can (always None without a block shape).

    SGLang 0.5.23's kernel loads one activation and one weight scale per K step
    (``offs_ks = k_start // group_k``), so a K tile must lie inside one quantisation group:
    BLOCK_SIZE_K must divide block_k (SGLang's tuners keep ``block_k % BLOCK_SIZE_K == 0``).
    Along N it loads one scale per column when BLOCK_SIZE_N > block_n (then BLOCK_SIZE_N must be
    a multiple of block_n for the tile to cover whole groups) and one scale for the whole tile
    otherwise (then BLOCK_SIZE_N must divide block_n)."""
    if not block_shape or not all(block_shape):
        return None
    bn, bk = int(block_shape[0]), int(block_shape[1])
    k, n = int(config["BLOCK_SIZE_K"]), int(config["BLOCK_SIZE_N"])
    if bk % k:
        return f"BLOCK_SIZE_K {k} does not divide block_k {bk}"
    if (n > bn and n % bn) or (n <= bn and bn % n):
        return f"BLOCK_SIZE_N {n} neither divides nor is a multiple of block_n {bn}"
    return None


def prune(
    space: Iterable[Config],
    *,
    shared_memory_limit: int,
    shape: MoeShape,
    arch: str | None = None,
) -> tuple[list[Config], list[tuple[Config, str]]]:
    """Split ``space`` into (kept, rejected-with-reason) before anything runs.

    A config is rejected when the shared memory it needs on ``arch`` (``shared_memory_bytes``;
    where the arch's pipeline is not known, the smaller count: a config that may fit is tried,
    and Triton's own refusal rejects it then) exceeds ``shared_memory_limit`` (bytes per block),
    or, for block-quantised fp8, when its tiles straddle quantisation groups
    (``block_shape_fits``).
    """
    kept: list[Config] = []
    rejected: list[tuple[Config, str]] = []
    for c in space:
        need = shared_memory_bytes(c, shape.element_bytes, shape.block_shape, arch, bound="low")
        misfit = block_shape_fits(c, shape.block_shape)
        if need > shared_memory_limit:
            rejected.append(
                (c, f"needs {need} B shared memory > {shared_memory_limit} B per block")
            )
        elif misfit:
            rejected.append((c, misfit))
        else:
            kept.append(c)
    return kept, rejected


def kernel_refusal(source: str, shape: MoeShape) -> str | None:
    """Why kernel ``source`` (``sglang`` / ``reference``) cannot be tuned for ``shape`` by this
    tuner, or None. fp8 is measured only with SGLang's kernel and a block shape (w8a8 block
    quantisation, DeepSeek-V3 / Qwen3-FP8 style); per-tensor fp8 is not measured yet."""
    if shape.dtype != "fp8_w8a8":
        return None
    if source == "reference":
        return (
            "the reference kernel (runners.moe.reference_kernel) has no fp8 path: "
            "tune fp8_w8a8 with --kernel sglang"
        )
    if not shape.block_shape or not all(shape.block_shape):
        return (
            "fp8_w8a8 is measured only with block quantisation (--block-shape 128,128); "
            "per-tensor fp8 is not measured by this tuner"
        )
    return None


def block_m_cap(M: int, shape: MoeShape) -> int:
    """The largest BLOCK_M worth sampling first at batch size M: 2x the tokens an expert gets
    on average (M x topk / E), rounded up to a power of two, at least 16. Larger BLOCK_M pads
    every expert's rows with tokens that are not there."""
    per_expert = M * shape.topk / shape.E
    return max(16, 1 << max(0, math.ceil(math.log2(max(1.0, 2 * per_expert)))))


def default_config(M: int, shape: MoeShape) -> Config:
    """SGLang's default config when no tuned file exists (0.5.23 ``get_default_config``, the rule
    docs/engines.md states): bf16 16/32/64/G1 for M <= E, else 64/64/32/G8; fp8 block
    quantisation 64/block_n/block_k/G32 w4 s3; fp8 per-tensor 64/128/128/G1 w4 s4 for M <= E, else
    128/256/128/G32 w8 s4. Where SGLang gives no num_warps / num_stages, Triton's launch defaults
    (4 warps, 3 stages) apply, and those are written here."""
    if shape.dtype == "fp8_w8a8" and shape.block_shape:
        bn, bk = shape.block_shape
        return dict(
            BLOCK_SIZE_M=64,
            BLOCK_SIZE_N=bn,
            BLOCK_SIZE_K=bk,
            GROUP_SIZE_M=32,
            num_warps=4,
            num_stages=3,
        )
    if shape.dtype == "fp8_w8a8":
        if M <= shape.E:
            return dict(
                BLOCK_SIZE_M=64,
                BLOCK_SIZE_N=128,
                BLOCK_SIZE_K=128,
                GROUP_SIZE_M=1,
                num_warps=4,
                num_stages=4,
            )
        return dict(
            BLOCK_SIZE_M=128,
            BLOCK_SIZE_N=256,
            BLOCK_SIZE_K=128,
            GROUP_SIZE_M=32,
            num_warps=8,
            num_stages=4,
        )
    if M <= shape.E:
        return dict(
            BLOCK_SIZE_M=16,
            BLOCK_SIZE_N=32,
            BLOCK_SIZE_K=64,
            GROUP_SIZE_M=1,
            num_warps=4,
            num_stages=3,
        )
    return dict(
        BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8, num_warps=4, num_stages=3
    )


def nearest_config(configs: Mapping[str, Mapping[str, Any]], M: int) -> dict[str, Any]:
    """The entry SGLang uses at batch size M: the key nearest M (``min(keys, key=|k - M|)``)."""
    key = min(configs, key=lambda k: abs(int(k) - M))
    return dict(configs[key])


# --- the file SGLang loads ------------------------------------------------------------------


def config_file_name(shape: MoeShape, device_name: str, *, down: bool = False) -> str:
    """SGLang's file name for this shape and GPU (docs/engines.md; 0.5.23 ``get_config_file_name``):
    ``E={E},N={N},device_name={name, spaces as _}[,dtype=..][,block_shape=[a, b]][_down].json``."""
    dtype = f",dtype={shape.file_dtype}" if shape.file_dtype else ""
    block = (
        f",block_shape={list(shape.block_shape)}"
        if shape.block_shape and all(shape.block_shape)
        else ""
    )
    return f"E={shape.E},N={shape.N},device_name={device_name.replace(' ', '_')}{dtype}{block}{'_down' if down else ''}.json"


def config_file_content(best: Mapping[int, Mapping[str, Any]]) -> str:
    """The JSON text of a tuned file: string batch-size keys in increasing order, the six fields
    each, indented as SGLang's tuner writes them."""
    data = {str(m): {k: int(best[m][k]) for k in CONFIG_KEYS} for m in sorted(best)}
    return json.dumps(data, indent=4) + "\n"


# --- successive halving --------------------------------------------------------------------


class Rejected(Exception):
    """A config failed to compile, to launch, or to match the reference: never retried."""


@dataclass
class HalvingResult:
    """What a successive-halving search found.

    ``best``/``best_latency_us``: the winner and its time at the last rung; ``rungs``: per rung
    (budget, configs timed); ``measured``: every (config key, budget, latency_us or None) in
    order; ``rejected``: config key -> reason.
    """

    best: Config | None
    best_latency_us: float | None
    rungs: list[tuple[float, int]] = field(default_factory=list)
    measured: list[tuple[str, float, float | None]] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)


def config_class(config: Mapping[str, Any]) -> tuple[int, ...]:
    """A config without its GROUP_SIZE_M: (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages).

    GROUP_SIZE_M only reorders the blocks of the output grid (an L2-reuse swizzle); in the
    interactive range the grid has few rows of blocks and the order barely matters: on the H200
    the four GROUP_SIZE_M values of one class differ by a median 0.5% at M = 1 and 0.7% at
    M = 64 (tests/fixtures/h200_moe_timings.json), under do_bench's own noise at small windows.
    """
    return tuple(int(config[k]) for k in CONFIG_KEYS if k != "GROUP_SIZE_M")


def group_siblings(config: Mapping[str, Any], kept: Sequence[Config]) -> list[Config]:
    """The configs of ``kept`` that differ from ``config`` only in GROUP_SIZE_M (itself included)."""
    cls = config_class(config)
    return [dict(c) for c in kept if config_class(c) == cls]


def config_classes(kept: Sequence[Config]) -> dict[tuple[int, ...], Config]:
    """One representative per ``config_class``: the one with the smallest GROUP_SIZE_M (1, SGLang's
    default's), in ``kept``'s order. 1,248 H200 configs fold into 312 classes."""
    out: dict[tuple[int, ...], Config] = {}
    for c in kept:
        cls = config_class(c)
        if cls not in out or c["GROUP_SIZE_M"] < out[cls]["GROUP_SIZE_M"]:
            out[cls] = dict(c)
    return out


def sample_configs(
    kept: Sequence[Config],
    *,
    M: int,
    shape: MoeShape,
    n: int,
    seeds: Sequence[Config] = (),
    rng: random.Random | None = None,
) -> list[Config]:
    """The first rung's configs: ``seeds`` (SGLang's default and shipped configs, the best at the
    previous batch size) first, then a random sample of ``config_classes`` (GROUP_SIZE_M folded:
    the winner's siblings are tried at the end of the search), three quarters from classes with
    BLOCK_M within ``block_m_cap`` and a quarter from the rest, ``n`` in all (fewer when the space
    is smaller). The same ``rng`` state gives the same sample at every M with the same cap, so the
    kernels compiled for one batch size are reused at the next (Triton's cache)."""
    rng = rng or random.Random(0)
    keep_keys = {config_key(c) for c in kept}
    out: dict[str, Config] = {}
    for s in seeds:
        if config_key(s) in keep_keys:
            out.setdefault(config_key(s), dict(s))
    taken = {config_class(c) for c in out.values()}
    classes = [c for cls, c in config_classes(kept).items() if cls not in taken]
    cap = block_m_cap(M, shape)
    near = [c for c in classes if c["BLOCK_SIZE_M"] <= cap]
    far = [c for c in classes if c["BLOCK_SIZE_M"] > cap]
    room = max(0, n - len(out))
    n_far = min(len(far), room // 4)
    n_near = min(len(near), room - n_far)
    n_far = min(len(far), room - n_near)
    for c in rng.sample(near, n_near) + rng.sample(far, n_far):
        out[config_key(c)] = c
    return list(out.values())


def successive_halving(
    configs: Sequence[Config],
    measure: Callable[[Config, float], float],
    *,
    eta: int = 3,
    min_budget: float = 2.0,
    max_budget: float = 18.0,
    known: Mapping[tuple[str, float], float | None] | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> HalvingResult:
    """Successive halving over ``configs``: time all at ``min_budget``, keep the best
    ``ceil(n / eta)``, time them at ``eta x`` the budget, ... until one is left or the budget
    reaches ``max_budget`` (then the best at that rung wins).

    Args:
        measure: ``(config, budget) -> latency in µs``; the budget is the timing window in ms
            (``triton.testing.do_bench``'s ``rep``). Raises ``Rejected`` for a config that fails;
            it is dropped and never tried again.
        known: (config key, budget) -> latency (None = rejected) already in the ledger: a
            resumed tune takes these instead of measuring again.
        stop: polled before each measurement; True ends the search with the best so far
            (``--time-budget``).
    """
    known = dict(known or {})
    result = HalvingResult(best=None, best_latency_us=None)
    alive = [dict(c) for c in configs]
    budget = float(min_budget)
    while alive:
        timed: list[tuple[float, Config]] = []
        for c in alive:
            if stop():
                break
            key = config_key(c)
            if key in result.rejected:
                continue
            if (key, budget) in known:
                lat = known[(key, budget)]
            else:
                try:
                    lat = measure(c, budget)
                except Rejected as exc:
                    lat = None
                    result.rejected[key] = str(exc)
            result.measured.append((key, budget, lat))
            if lat is None:
                result.rejected.setdefault(key, "rejected earlier")
                continue
            timed.append((lat, c))
        if not timed:
            break
        timed.sort(key=lambda t: t[0])
        result.rungs.append((budget, len(timed)))
        result.best, result.best_latency_us = timed[0][1], timed[0][0]
        if stop() or len(timed) == 1 or budget >= max_budget:
            break
        alive = [c for _, c in timed[: max(1, math.ceil(len(timed) / eta))]]
        # Rounded: 1.2 x 3 x 3 is 10.799999999999999 in floats, which is not max_budget and
        # used to cost one more rung (and gave a resumed tune keys that never matched).
        budget = min(max_budget, round(budget * eta, 6))
    return result


# --- what a search costs ----------------------------------------------------------------------


@dataclass(frozen=True)
class SearchCosts:
    """Where a search's seconds go on one GPU with a pool of compile workers.

    Fitted to the H200 runs of 2026-11-30 (data/h200_moe_tune.jsonl; times from the UUIDv7 event
    ids, ms resolution; 14 workers on 16 cores, SGLang 0.5.23's kernel, triton 3.6.0):

    - ``compile_s``: one config compiled and checked by a worker when Triton's cache lacks it
      (14 at a time contend for the CPU: 1.32 s each, from a cold first rung of 125 configs,
      14.3 s, and a cold exhaustive pass, 104 s for 1,103);
    - ``check_s``: the same for a config already in the cache (1.5 s for 1,123);
    - ``first_call_s``: a worker's first kernel call (Triton's JIT set-up, the first batch
      size's torch reference): 2.4 s, once per process — the tuner now pays it when the pool
      starts, outside any search;
    - ``first_time_s``: the timing process loading a config at a new batch size and capturing
      its CUDA graph, beyond the do_bench window (a first-rung timing took 10 ms at a 1.2 ms
      window; a later rung's 5 ms at 3.6 ms);
    - ``timing_overhead_s``: per do_bench call beyond its warm-up (max(1, rep/4) ms) and window.
    """

    compile_s: float = 1.32
    check_s: float = 0.019
    first_call_s: float = 2.4
    first_time_s: float = 0.007
    timing_overhead_s: float = 0.0007
    workers: int = 14

    def timing(self, budget_ms: float, first: bool) -> float:
        """Seconds one do_bench call at window ``budget_ms`` takes, first at its batch size or not."""
        return (
            (max(1.0, budget_ms / 4) + budget_ms) / 1000
            + self.timing_overhead_s
            + (self.first_time_s if first else 0.0)
        )

    def prepare(self, fresh: int, cached: int = 0, first_call: bool = False) -> float:
        """Seconds the pool takes to compile ``fresh`` and check ``cached`` configs."""
        return (
            (self.first_call_s if first_call else 0.0)
            + math.ceil(fresh / self.workers) * self.compile_s
            + math.ceil(cached / self.workers) * self.check_s
        )


#: The H200 machine's costs (SearchCosts' defaults).
H200_COSTS = SearchCosts()


def halving_cost(
    rungs: Sequence[tuple[float, int]],
    *,
    fresh: int,
    cached: int = 0,
    first_call: bool = False,
    costs: SearchCosts = H200_COSTS,
) -> float:
    """Predicted seconds of a search that times ``rungs`` — (window ms, configs) in order, the
    first rung's configs timed for the first time at this batch size, later rungs' again
    (their CUDA graphs kept) — after the pool prepared ``fresh`` uncached and ``cached`` cached
    configs. An exhaustive pass is one rung: ``[(max_budget, n)]``. (``run_tune``'s last step, the
    winner's GROUP_SIZE_M siblings at ``max_budget``, is first timings: add
    ``3 x costs.timing(max_budget, first=True)``.)"""
    total = costs.prepare(fresh, cached, first_call)
    for i, (budget, n) in enumerate(rungs):
        total += n * costs.timing(budget, first=i == 0)
    return total


def halving_rungs(
    n: int, *, eta: int, min_budget: float, max_budget: float
) -> list[tuple[float, int]]:
    """The rungs successive halving runs over ``n`` configs when none is rejected: (window ms,
    configs), as ``successive_halving`` schedules them."""
    out: list[tuple[float, int]] = []
    budget = float(min_budget)
    while n > 0:
        out.append((budget, n))
        if n == 1 or budget >= max_budget:
            break
        n = max(1, math.ceil(n / eta))
        budget = min(max_budget, round(budget * eta, 6))
    return out


# --- roofline ------------------------------------------------------------------------------


def roofline(
    shape: MoeShape,
    M: int,
    experts_touched: int,
    latency_us: float,
    peak_bandwidth_Bps: float | None,
    peak_flops: float | None,
) -> dict[str, Any]:
    """Bytes, FLOPs and fractions of the device's peaks for the two expert GEMMs at batch size M.

    Bytes (the least the kernels must move): weights of the experts touched, both GEMMs
    (``experts_touched x (2N x K + K x N) x element bytes``), activations read (M x K, then
    M x topk x N), outputs written (M x topk x 2N, then M x topk x K), activations and outputs at
    2 bytes (bf16). FLOPs: ``2 x M x topk x (2N x K + N x K)``. Achieved = amount / time; the
    fractions say which roof the kernel is nearer: memory-bound when ``bandwidth_fraction`` is
    far above ``flops_fraction``. Returns bytes, flops, achieved_Bps, achieved_flops,
    bandwidth_fraction, flops_fraction, arithmetic_intensity (FLOP/byte); a fraction is None
    when its peak is (a device whose peaks are unknown: ``runners.moe.peaks``).
    """
    N, K, t = shape.N, shape.K, shape.topk
    weights = experts_touched * (2 * N * K + K * N) * shape.element_bytes
    acts = (M * K + M * t * N) * 2
    outs = (M * t * 2 * N + M * t * K) * 2
    nbytes = weights + acts + outs
    flops = 2.0 * M * t * (2 * N * K + N * K)
    seconds = latency_us * 1e-6
    return {
        "bytes": float(nbytes),
        "flops": flops,
        "achieved_Bps": nbytes / seconds,
        "achieved_flops": flops / seconds,
        "bandwidth_fraction": nbytes / seconds / peak_bandwidth_Bps if peak_bandwidth_Bps else None,
        "flops_fraction": flops / seconds / peak_flops if peak_flops else None,
        "arithmetic_intensity": flops / nbytes,
    }


def gemm_lower_bound_us(
    shape: MoeShape,
    M: int,
    experts_touched: int,
    config: Mapping[str, Any],
    gemm: str,
    peak_bandwidth_Bps: float,
    peak_flops: float,
) -> float:
    """The least time (µs) ``config`` can take on ``gemm`` (``up``, ``down`` or ``both``) at
    batch size M: the larger of the weights' bytes at peak bandwidth and the padded FLOPs at peak
    FLOP/s. Padded rows: every touched expert's rows rounded up to BLOCK_SIZE_M, so at least
    ``BLOCK_SIZE_M x max(experts touched, ceil(M x topk / BLOCK_SIZE_M))`` — a bound whatever the
    routing. A config whose bound is over a time already measured cannot beat it."""
    bm = int(config["BLOCK_SIZE_M"])
    rows = bm * max(experts_touched, math.ceil(M * shape.topk / bm))
    N, K = shape.N, shape.K
    per_row = {"up": 2 * N * K, "down": N * K, "both": 3 * N * K}[gemm]
    weights = experts_touched * per_row * shape.element_bytes
    return 1e6 * max(weights / peak_bandwidth_Bps, 2.0 * rows * per_row / peak_flops)
