"""The GPU side of ``tuneledger run tune``: build a MoE layer's expert GEMMs at batch size M, run
them with one config on SGLang's fused-MoE Triton kernel (or tuneledger's reference kernel),
check them against torch, and time them with ``triton.testing.do_bench``.

Needs torch and triton (and, for ``kernel="sglang"``, sglang's Python package: only its Triton
kernels are imported, ``sglang.kernels.ops.moe.fused_moe_triton_kernels``, 0.5.23's
``invoke_fused_moe_kernel``). Imported only where a GPU is; ``runners.moe.tune`` drives it through
the ``Measurer`` protocol, which tests replay from recorded H200 timings.

What is timed: one MoE layer's two expert GEMMs — with one config, as SGLang runs them when no
``_down`` file exists, with a config each (the ``_down`` file's for the second), or one GEMM
alone when the tuner tunes them separately (``gemm``: ``both``, ``up``, ``down``) — up/gate ``[M, K] x [E, 2N, K] -> [M, topk, 2N]``, then down
``[M x topk, N] x [E, K, N] -> [M, topk, K]`` scaled by the routing weights. The activation between
them (SiLU and multiply) and the final sum are not timed: they do not depend on the config. Tokens
are aligned to BLOCK_SIZE_M in torch (SGLang's ``moe_align_block_size`` is a CUDA op that may not
build), outside the timed region, identically for every config. Routing is a softmax top-k of
seeded random logits; weights are seeded random bf16 (the time does not depend on their values).
do_bench clears the L2 cache before each repetition, so weights come from HBM as in serving.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from runners.moe.compile_errors import captured_stderr, rejection_reason
from runners.moe.fp8_quant import FP8_MAX, dequantize_blocks, quantize_blocks, quantize_token_groups
from runners.moe.space import Config, MoeShape, Rejected, config_key

__all__ = ["FP8_MAX", "dequantize_blocks", "quantize_blocks", "quantize_token_groups"]

SGLANG_KERNEL_MODULE = "sglang.kernels.ops.moe.fused_moe_triton_kernels"
#: The first 22 parameters of sglang 0.5.23's ``invoke_fused_moe_kernel``, the ones called here.
SGLANG_PARAMS = (
    "A",
    "B",
    "bias",
    "C",
    "A_scale",
    "B_scale",
    "B_zp",
    "topk_weights",
    "topk_ids",
    "sorted_token_ids",
    "expert_ids",
    "num_tokens_post_padded",
    "mul_routed_weight",
    "top_k",
    "config",
    "compute_type",
    "use_fp8_w8a8",
    "use_int8_w8a8",
    "use_int8_w8a16",
    "use_int4_w4a16",
    "per_channel_quant",
    "block_shape",
)
#: Largest relative error (max |out - ref| / max |ref|) accepted for bf16 outputs.
BF16_TOLERANCE = 2e-2
#: The same for fp8 w8a8 block-quantised GEMMs, against the dequantised matmul in float32: the
#: inputs are the same fp8 values on both sides, so what remains is the kernel's bf16 output
#: rounding and its float32 accumulation order, plus the fp8 path's per-K-step rescaling; looser
#: than bf16 all the same, as a wrong scale index shows as an error of order 1, not of 1e-2.
FP8_TOLERANCE = 6e-2


def tolerance(shape: MoeShape) -> float:
    """The relative error accepted for ``shape``'s dtype."""
    return FP8_TOLERANCE if shape.dtype == "fp8_w8a8" else BF16_TOLERANCE


class KernelUnavailable(RuntimeError):
    """The kernel asked for cannot run here (sglang missing, or a version whose signature differs)."""


@dataclass(frozen=True)
class KernelInfo:
    """The kernel under tune: ``source`` ``sglang`` or ``reference``, its version and function name."""

    source: str
    version: str
    name: str
    invoke: Any


def load_kernel(source: str) -> KernelInfo:
    """Import the kernel: ``sglang`` (0.5.23's ``invoke_fused_moe_kernel``) or ``reference``.

    Raises:
        KernelUnavailable: sglang is not importable, or its ``invoke_fused_moe_kernel`` takes other
            parameters than 0.5.23's (the message names the version and the difference).
    """
    if source == "reference":
        from runners.moe import reference_kernel as ref

        return KernelInfo(
            "reference", "tuneledger-1", "runners.moe.reference_kernel.grouped_moe_gemm", ref.launch
        )
    if source != "sglang":
        raise KernelUnavailable(f"unknown kernel {source!r} (sglang or reference)")
    try:
        import importlib

        module = importlib.import_module(SGLANG_KERNEL_MODULE)
    except Exception as exc:  # ImportError, or a broken import chain of an unrelated sglang part
        raise KernelUnavailable(
            f"sglang's fused-MoE Triton kernel is not importable ({type(exc).__name__}: "
            f"{str(exc)[:200]}); use --kernel reference to tune tuneledger's own kernel"
        ) from None
    version = _sglang_version()
    fn = getattr(module, "invoke_fused_moe_kernel", None)
    if fn is None:
        raise KernelUnavailable(
            f"sglang {version}: {SGLANG_KERNEL_MODULE} has no invoke_fused_moe_kernel"
        )
    params = tuple(inspect.signature(fn).parameters)[: len(SGLANG_PARAMS)]
    if params != SGLANG_PARAMS:
        diff = next(
            (
                f"parameter {i + 1} is {a!r}, 0.5.23 has {b!r}"
                for i, (a, b) in enumerate(zip(params, SGLANG_PARAMS, strict=False))
                if a != b
            ),
            f"{len(params)} parameters",
        )
        raise KernelUnavailable(
            f"sglang {version}: invoke_fused_moe_kernel's signature differs from 0.5.23's ({diff}); "
            "this tuner supports 0.5.23's"
        )
    return KernelInfo("sglang", version, f"{SGLANG_KERNEL_MODULE}.fused_moe_kernel", fn)


def _sglang_version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:
        try:
            import sglang.version as v

            return str(v.__version__)
        except Exception:
            return "unknown"


def device_facts(device: int = 0) -> dict[str, Any]:
    """GPU name, ``smNN``, Triton's shared-memory limit per block (bytes), versions."""
    props = torch.cuda.get_device_properties(device)
    smem = int(triton.runtime.driver.active.utils.get_device_properties(device)["max_shared_mem"])
    return {
        "gpu_name": torch.cuda.get_device_name(device),
        "compute_capability": f"sm{props.major}{props.minor}",
        "gpu_memory_mib": int(props.total_memory // 2**20),
        "shared_memory_limit": smem,
        "triton_version": triton.__version__,
        "torch_version": torch.__version__,
        "cuda": torch.version.cuda,
    }


def align_tokens(
    topk_ids: torch.Tensor, E: int, block_m: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort the (token, slot) rows by expert and pad each expert's rows to a multiple of ``block_m``.

    Returns ``sorted_ids`` (int32 row ids ``token x topk + slot``, padding = M x topk),
    ``expert_ids`` (int32, one per block of ``block_m`` rows) and ``num_tokens_post_padded``
    (int32 [1]) — the three arrays SGLang's ``moe_align_block_size`` produces, computed in torch.
    """
    flat = topk_ids.flatten().long()
    numel = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + block_m - 1) // block_m * block_m
    starts = torch.cumsum(padded, 0) - padded
    cstarts = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    experts = flat[order]
    dest = starts[experts] + (torch.arange(numel, device=flat.device) - cstarts[experts])
    total = int(padded.sum())
    sorted_ids = torch.full((total,), numel, dtype=torch.int32, device=flat.device)
    sorted_ids[dest] = order.to(torch.int32)
    expert_ids = torch.repeat_interleave(
        torch.arange(E, device=flat.device, dtype=torch.int32), padded // block_m
    )
    return sorted_ids, expert_ids, torch.tensor([total], dtype=torch.int32, device=flat.device)


class MoeProblem:
    """Inputs, outputs and torch references of the two expert GEMMs at batch size M.

    bf16/fp16: ``weights`` = (W1, W2). fp8_w8a8 with a block shape: ``weights`` = (W1, W2, W1
    scales, W2 scales) from ``make_weights``; the activations (A and the down GEMM's input) are
    quantised here per token group of block_k, outside any timed region, and passed to SGLang's
    kernel already in fp8 with their scales (its pre-quantised path), so the time is the GEMMs'
    alone; the references are the dequantised matmuls in float32.
    """

    def __init__(self, shape: MoeShape, M: int, weights: tuple[torch.Tensor, ...], seed: int = 0):
        from runners.moe.space import kernel_refusal

        refusal = kernel_refusal("sglang", shape)
        if shape.dtype not in ("bf16", "fp16", "fp8_w8a8") or refusal:
            raise KernelUnavailable(refusal or f"dtype {shape.dtype}: not measured by this tuner")
        self.shape, self.M = shape, M
        self.fp8 = shape.dtype == "fp8_w8a8"
        dev = "cuda"
        dt = torch.bfloat16 if self.fp8 else weights[0].dtype  # the outputs' / compute dtype
        g = torch.Generator(device=dev).manual_seed(seed * 7919 + M)
        E, N, K, t = shape.E, shape.N, shape.K, shape.topk
        self.w1, self.w2 = weights[0], weights[1]
        self.w1_scale: torch.Tensor | None = weights[2] if self.fp8 else None
        self.w2_scale: torch.Tensor | None = weights[3] if self.fp8 else None
        self.a = torch.randn(M, K, device=dev, generator=g).to(dt)
        logits = torch.randn(M, E, device=dev, generator=g)
        w, ids = torch.topk(torch.softmax(logits, -1), t)
        self.topk_weights, self.topk_ids = w.float().contiguous(), ids.to(torch.int32).contiguous()
        self.inter = torch.randn(M * t, N, device=dev, generator=g).to(dt)
        self.a_scale: torch.Tensor | None = None
        self.inter_scale: torch.Tensor | None = None
        if self.fp8:
            assert shape.block_shape is not None and self.w1_scale is not None
            bn, bk = shape.block_shape
            self.a, self.a_scale = quantize_token_groups(self.a, bk)
            self.inter, self.inter_scale = quantize_token_groups(self.inter, bk)
            a_ref = dequantize_blocks(self.a, self.a_scale, (1, bk))
            i_ref = dequantize_blocks(self.inter, self.inter_scale, (1, bk))
        else:
            a_ref, i_ref = self.a.float(), self.inter.float()
        self.out1 = torch.empty(M, t, 2 * N, device=dev, dtype=dt)
        self.out2 = torch.empty(M, t, K, device=dev, dtype=dt)
        self.experts_touched = int(torch.unique(self.topk_ids).numel())
        self._aligned: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        # References in float32, expert by expert (the dense gather would need M x topk x 2N x K floats).
        self.ref1 = torch.zeros(M * t, 2 * N, device=dev)
        self.ref2 = torch.zeros(M * t, K, device=dev)
        flat = self.topk_ids.flatten().long()
        for e in torch.unique(flat).tolist():
            rows = (flat == e).nonzero().flatten()
            if self.fp8:
                assert shape.block_shape is not None
                assert self.w1_scale is not None and self.w2_scale is not None
                w1e = dequantize_blocks(self.w1[e], self.w1_scale[e], shape.block_shape)
                w2e = dequantize_blocks(self.w2[e], self.w2_scale[e], shape.block_shape)
            else:
                w1e, w2e = self.w1[e].float(), self.w2[e].float()
            self.ref1[rows] = a_ref[rows // t] @ w1e.T
            self.ref2[rows] = (i_ref[rows] @ w2e.T) * self.topk_weights.flatten()[rows, None]

    def aligned(self, block_m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if block_m not in self._aligned:
            self._aligned[block_m] = align_tokens(self.topk_ids, self.shape.E, block_m)
        return self._aligned[block_m]


def make_weights(shape: MoeShape, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded random expert weights, scaled to keep outputs near unit size: W1 [E, 2N, K], W2 [E, K, N]
    in bf16; for fp8_w8a8 with a block shape, (W1, W2, W1 scales, W2 scales) block-quantised
    (``quantize_blocks``) from the same bf16 values."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    w1 = (
        torch.randn(shape.E, 2 * shape.N, shape.K, device="cuda", generator=g) / math.sqrt(shape.K)
    ).to(torch.bfloat16)
    w2 = (
        torch.randn(shape.E, shape.K, shape.N, device="cuda", generator=g) / math.sqrt(shape.N)
    ).to(torch.bfloat16)
    if shape.dtype == "fp8_w8a8" and shape.block_shape:
        bn, bk = shape.block_shape
        q1, s1 = quantize_blocks(w1, bn, bk)
        q2, s2 = quantize_blocks(w2, bn, bk)
        del w1, w2
        torch.cuda.empty_cache()  # the bf16 originals: every compile worker holds its own weights
        return q1, q2, s1, s2
    return w1, w2


#: Which expert GEMMs a launch runs: ``both`` (one config for both, or ``down_config`` for the
#: second: SGLang's ``_down`` file), ``up`` (up/gate alone) or ``down`` (down alone).
GEMMS = ("both", "up", "down")


def run_config(
    kernel: KernelInfo,
    p: MoeProblem,
    config: Config,
    gemm: str = "both",
    down_config: Config | None = None,
) -> None:
    """Launch the GEMMs ``gemm`` names of problem ``p`` with ``config`` (the down GEMM with
    ``down_config`` when given). Tokens are aligned once, to ``config``'s BLOCK_SIZE_M, for both
    GEMMs: SGLang 0.5.23 sorts once and forces the ``_down`` config's BLOCK_SIZE_M to the up
    config's (``try_get_optimal_moe_config``)."""
    sid, eid, ntp = p.aligned(int(config["BLOCK_SIZE_M"]))
    down = dict(down_config or config, BLOCK_SIZE_M=int(config["BLOCK_SIZE_M"]))
    if gemm in ("both", "up"):
        _launch(kernel, p, config, first=True, aligned=(sid, eid, ntp))
    if gemm in ("both", "down"):
        _launch(kernel, p, down, first=False, aligned=(sid, eid, ntp))


def _launch(
    kernel: KernelInfo,
    p: MoeProblem,
    config: Config,
    *,
    first: bool,
    aligned: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    """One expert GEMM: up/gate (``first``) ``[M, K] x [E, 2N, K]``, else down
    ``[M x topk, N] x [E, K, N]`` scaled by the routing weights."""
    sid, eid, ntp = aligned
    t = p.shape.topk
    a, w, out = (p.a, p.w1, p.out1) if first else (p.inter, p.w2, p.out2)
    if kernel.source == "sglang":
        ct = tl.bfloat16 if p.out1.dtype == torch.bfloat16 else tl.float16
        block = list(p.shape.block_shape) if p.fp8 and p.shape.block_shape else None
        kernel.invoke(
            a,
            w,
            None,
            out,
            p.a_scale if first else p.inter_scale,
            p.w1_scale if first else p.w2_scale,
            None,
            p.topk_weights,
            p.topk_ids,
            sid,
            eid,
            ntp,
            not first,
            t if first else 1,
            config,
            ct,
            p.fp8,
            False,
            False,
            False,
            False,
            block,
        )
        return
    if p.fp8:
        raise KernelUnavailable(
            "the reference kernel has no fp8 path: tune fp8_w8a8 with --kernel sglang"
        )
    M, N, K = p.M, p.shape.N, p.shape.K
    kernel.invoke(
        a,
        w,
        out.view(M * t, 2 * N if first else K),
        p.topk_weights.view(-1),
        sid,
        eid,
        top_k=t if first else 1,
        mul_weight=not first,
        config=config,
    )


def check_config(
    kernel: KernelInfo,
    p: MoeProblem,
    config: Config,
    gemm: str = "both",
    down_config: Config | None = None,
) -> float:
    """Run ``config`` once (the GEMMs ``gemm`` names, ``run_config``) and compare their outputs
    with the torch references.

    Returns the larger relative error (max |out - ref| / max |ref|).

    Raises:
        Rejected: compile or launch failed (e.g. Triton's ``OutOfResources`` for shared memory),
            or the error exceeds ``tolerance(shape)`` (bf16 2e-2, fp8 6e-2).
    """
    # Triton writes a failed compile's MLIR reproducer to descriptor 2 from C++ (hundreds of
    # lines a config): captured, and only its first diagnostic and failing pass kept.
    with captured_stderr() as compiler_output:
        try:
            p.out1.zero_()
            p.out2.zero_()
            run_config(kernel, p, config, gemm, down_config)
            torch.cuda.synchronize()
            failure = None
        except Exception as exc:
            failure = exc
    if failure is not None:
        raise Rejected(rejection_reason(failure, compiler_output.text)) from None
    if compiler_output.text.strip():
        sys.stderr.write(compiler_output.text)  # a compile that worked: its warnings are the user's
    t = p.shape.topk
    errs = []
    pairs = ((p.out1.view(p.M * t, -1), p.ref1), (p.out2.view(p.M * t, -1), p.ref2))
    for out, ref in pairs[1:] if gemm == "down" else pairs[:1] if gemm == "up" else pairs:
        errs.append(float((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-12)))
    err = max(errs)
    tol = tolerance(p.shape)
    if not math.isfinite(err) or err > tol:
        raise Rejected(
            f"wrong result: max relative error {err:.2e} > {tol:g} against torch"
            + (" (dequantised fp8)" if p.fp8 else "")
        )
    return err


def capture(
    kernel: KernelInfo,
    p: MoeProblem,
    config: Config,
    gemm: str = "both",
    down_config: Config | None = None,
) -> torch.cuda.CUDAGraph:
    """The GEMMs ``gemm`` names (``run_config``) captured as one CUDA graph (run once eagerly
    first).

    SGLang replays decode under CUDA graphs, and Python's launch cost (tens of µs per
    ``invoke_fused_moe_kernel``) would otherwise be timed instead of the GPU: it put a floor under
    every small-batch timing (docs/performance.md).
    """
    run_config(kernel, p, config, gemm, down_config)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_config(kernel, p, config, gemm, down_config)
    torch.cuda.synchronize()
    return graph


def time_config(
    kernel: KernelInfo,
    p: MoeProblem,
    config: Config,
    budget_ms: float,
    graph: torch.cuda.CUDAGraph | None = None,
) -> float:
    """Median time of both GEMMs with ``config`` in µs: ``do_bench`` of a CUDA-graph replay with
    ``rep = budget_ms`` after a warmup of a quarter of it (L2 cleared before each repetition, so
    the weights come from HBM as in serving)."""
    graph = graph or capture(kernel, p, config)
    return (
        float(
            do_bench(
                graph.replay, warmup=max(1.0, budget_ms / 4), rep=budget_ms, return_mode="median"
            )
        )
        * 1000.0
    )


# --- a pool of processes that compile and check configs in parallel -----------------------------
# Compiling is CPU work (0.3-0.4 s a config on the H200 machine) and dominates a tune; the workers
# compile into Triton's on-disk cache (shared by all processes) and check each config against torch,
# so the timing process only loads compiled kernels. Timing stays in one process: one GPU.

_WORKER: dict[str, Any] = {}


def _worker_init(source: str, shape: MoeShape, seed: int) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _WORKER["kernel"] = load_kernel(source)
    _WORKER["weights"] = make_weights(shape, seed)
    _WORKER["shape"], _WORKER["seed"], _WORKER["problems"] = shape, seed, {}
    warm_up(_WORKER["kernel"], shape, _WORKER["weights"])


def _worker_ping(_i: int) -> bool:
    import time

    time.sleep(0.5)
    return "kernel" in _WORKER


def warm_up(kernel: KernelInfo, shape: MoeShape, weights: tuple[torch.Tensor, ...]) -> None:
    """One launch of SGLang's default config at M = 1, so this process's first-call costs
    (Triton's JIT set-up, loading the module, about 2.4 s on the H200 machine: ``SearchCosts``)
    are paid before any search is timed, not inside the first batch size's."""
    from runners.moe.space import default_config

    try:
        check_config(kernel, MoeProblem(shape, 1, weights), default_config(1, shape))
    except Rejected:
        pass  # the default cannot run here: the tune records that when it reaches it


def _worker_check(
    M: int, config: Config, gemm: str = "both"
) -> tuple[str, float | None, str | None]:
    problems = _WORKER["problems"]
    if M not in problems:
        problems.clear()
        problems[M] = MoeProblem(_WORKER["shape"], M, _WORKER["weights"], _WORKER["seed"])
    key = launch_key(config, gemm)
    try:
        return key, check_config(_WORKER["kernel"], problems[M], config, gemm), None
    except Rejected as exc:
        return key, None, str(exc)


def launch_key(config: Config, gemm: str = "both", down_config: Config | None = None) -> str:
    """What one launch runs: the GEMMs, the config, the down GEMM's config when it has its own."""
    down = f"|{config_key(down_config)}" if down_config is not None else ""
    return f"{gemm}|{config_key(config)}{down}"


class GpuMeasurer:
    """Measures configs of one shape on GPU 0 (the ``Measurer`` protocol of ``runners.moe.tune``).

    ``workers`` > 0 starts that many processes (spawned) that compile and check configs in
    parallel before they are timed here.
    """

    def __init__(self, source: str, shape: MoeShape, *, seed: int = 0, workers: int = 0):
        from runners.moe.space import kernel_refusal

        refusal = kernel_refusal(source, shape)
        if refusal:
            raise KernelUnavailable(refusal)
        self.kernel = load_kernel(source)
        self.shape, self.seed = shape, seed
        self.facts = device_facts()
        self.weights = make_weights(shape, seed)
        warm_up(self.kernel, shape, self.weights)
        self._problems: dict[int, MoeProblem] = {}
        self._checked: dict[tuple[int, str], tuple[float | None, str | None]] = {}
        self._graphs: dict[str, Any] = {}
        self._pool = None
        if workers > 0:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(source, shape, seed),
            )
            # Start every worker now (import, weights, a first launch), so their start-up is not
            # counted in a search.
            list(self._pool.map(_worker_ping, range(workers)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def problem(self, M: int) -> MoeProblem:
        if M not in self._problems:
            self._problems.clear()  # one batch size at a time: keeps GPU memory flat
            self._graphs.clear()
            self._problems[M] = MoeProblem(self.shape, M, self.weights, self.seed)
        return self._problems[M]

    def experts_touched(self, M: int) -> int:
        return self.problem(M).experts_touched

    def prepare(self, M: int, configs: list[Config], gemm: str = "both") -> None:
        """Compile and check ``configs`` at M for ``gemm`` (in the pool when there is one)."""
        todo = [c for c in configs if (M, launch_key(c, gemm)) not in self._checked]
        if self._pool is not None and len(todo) > 1:
            for key, err, reason in self._pool.map(
                _worker_check, [M] * len(todo), todo, [gemm] * len(todo), chunksize=1
            ):
                self._checked[(M, key)] = (err, reason)

    def check(
        self, M: int, config: Config, gemm: str = "both", down_config: Config | None = None
    ) -> float:
        """Relative error against torch (checked once per launch and M); raises ``Rejected``."""
        key = (M, launch_key(config, gemm, down_config))
        if key not in self._checked:
            try:
                self._checked[key] = (
                    check_config(self.kernel, self.problem(M), config, gemm, down_config),
                    None,
                )
            except Rejected as exc:
                self._checked[key] = (None, str(exc))
        err, reason = self._checked[key]
        if reason is not None:
            raise Rejected(reason)
        return err  # type: ignore[return-value]

    def probe(
        self, M: int, config: Config, gemm: str = "both", down_config: Config | None = None
    ) -> float:
        """Mean of three CUDA-graph replays in µs, the L2 left warm: a quick figure at or under
        what ``time`` would measure (its windows start from a cleared L2), so a probe above the
        best so far means the config cannot win (the tuner's early stop)."""
        p = self.problem(M)
        key = launch_key(config, gemm, down_config)
        if key not in self._graphs:
            self._graphs[key] = capture(self.kernel, p, config, gemm, down_config)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            self._graphs[key].replay()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1000.0 / 3

    def time(
        self,
        M: int,
        config: Config,
        budget_ms: float,
        gemm: str = "both",
        down_config: Config | None = None,
    ) -> float:
        p = self.problem(M)
        try:
            key = launch_key(config, gemm, down_config)
            if key not in self._graphs:
                self._graphs[key] = capture(self.kernel, p, config, gemm, down_config)
            return time_config(self.kernel, p, config, budget_ms, self._graphs[key])
        except Exception as exc:  # a launch that compiled in a worker can still fail here
            raise Rejected(f"{type(exc).__name__}: {' '.join(str(exc).split())[:240]}") from None
