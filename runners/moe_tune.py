"""``tuneledger run tune``: tune SGLang's fused-MoE Triton kernel and record every step.

Flow, per batch size M (``INTERACTIVE_BATCH_SIZES`` 1..64 by default):

1. The space (SGLang's 1,920 configs) is pruned by the device's shared memory per block
   (``runners.tune_space.prune``): those configs are recorded as rejected, never run.
2. Successive halving (``tune_space.successive_halving``) over a first rung of ``sample`` x the
   pruned space (SGLang's default and the previous M's best first): each config is checked against
   torch once, then timed with a small window; the best third move on with three times the window.
   ``--search exhaustive`` times every pruned config at the largest window instead.
3. SGLang's default and the winner are re-timed interleaved (``rounds`` rounds) and their
   roofline fractions computed from the bytes and FLOPs the GEMMs must move and do.

Every timing and every rejection is a ``kernel_config_measured`` event keyed by (kernel, shape,
dtype, device, Triton version) — the ``tune_key`` — in the stream ``tune:<id>`` where the id
derives from that key: a killed or timed-out tune run again finds them and measures only what is
missing. ``--time-budget`` stops cleanly with the best so far (outcome ``timed-out``). The result
is SGLang's config file (``<output>/configs/triton_X_Y_Z/E=..,N=..,device_name=...json``, ready for
``SGLANG_MOE_CONFIG_DIR=<output>``) and a ``kernel_tune_completed`` with default-vs-tuned per M.

The GPU work is behind the ``Measurer`` protocol (``runners.moe_kernels.GpuMeasurer`` on a GPU);
events go to a ``Sink`` (the ledger, or a JSONL file on a machine without DuckDB).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ledger import commands
from schemas import Actor, Host
from schemas.events import Event, KernelConfigMeasured, KernelTuneCompleted, KernelTuneStarted

from .tune_space import (
    H200_PEAK,
    INTERACTIVE_BATCH_SIZES,
    Config,
    MoeShape,
    Rejected,
    config_file_content,
    config_file_name,
    config_key,
    default_config,
    nearest_config,
    prune,
    roofline,
    sample_configs,
    search_space,
    successive_halving,
)

TUNE_ACTOR = Actor(kind="runner", name="moe-tune")


class Measurer(Protocol):
    """What the tuner needs of the GPU side (``runners.moe_kernels.GpuMeasurer``).

    ``kernel``: has ``source`` (``sglang``/``reference``), ``version``, ``name``; ``facts``: a dict
    with ``gpu_name``, ``compute_capability``, ``shared_memory_limit`` (bytes), ``triton_version``.
    """

    kernel: Any
    facts: dict[str, Any]

    def prepare(self, M: int, configs: list[Config]) -> None: ...

    def check(self, M: int, config: Config) -> float: ...

    def time(self, M: int, config: Config, budget_ms: float) -> float: ...

    def experts_touched(self, M: int) -> int: ...


class Sink(Protocol):
    """Where events go, and where a resumed tune finds its earlier measurements."""

    def append(self, event: Event) -> None: ...

    def measured(self, tune_id: str) -> list[KernelConfigMeasured]: ...


class StoreSink:
    """Events into a ledger (``ledger.store.LedgerStore``), one append each (a kill loses nothing done)."""

    def __init__(self, store: Any):
        self.store = store

    def append(self, event: Event) -> None:
        commands.record(self.store, event)

    def measured(self, tune_id: str) -> list[KernelConfigMeasured]:
        return self.store.read(stream=f"tune:{tune_id}", types=["kernel_config_measured"])  # type: ignore[return-value]


class JsonlSink:
    """Events as JSON lines in a file (``tuneledger import``-able), flushed and fsynced one by one."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def append(self, event: Event) -> None:
        from ledger.jsonl import event_to_json

        with self.path.open("a", encoding="utf-8") as f:
            f.write(event_to_json(event) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def measured(self, tune_id: str) -> list[KernelConfigMeasured]:
        from ledger.jsonl import iter_jsonl

        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        # A line cut by a kill mid-write is dropped: that measurement is simply taken again.
        if lines and not lines[-1].rstrip().endswith("}"):
            lines = lines[:-1]
        return [
            e
            for e in iter_jsonl(lines, str(self.path))
            if isinstance(e, KernelConfigMeasured) and e.tune_id == tune_id
        ]


@dataclass
class TuneSpec:
    """What to tune and how. Budgets are do_bench ``rep`` windows in ms; ``sample`` is the first
    rung's share of the pruned space; ``time_budget_s`` stops the tune cleanly."""

    shape: MoeShape
    batch_sizes: Sequence[int] = INTERACTIVE_BATCH_SIZES
    search: str = "halving"
    eta: int = 3
    min_budget_ms: float = 2.0
    max_budget_ms: float = 18.0
    sample: float = 0.1
    rounds: int = 5
    seed: int = 0
    time_budget_s: float | None = None
    output_dir: Path | None = None
    session_id: str | None = None
    candidate_id: str | None = None
    #: Known configs per batch size (e.g. SGLang's shipped file for this GPU, ``--seed-file``): the
    #: entry nearest each M joins the first rung, so the tune never ends slower than it.
    seed_configs: dict[str, Config] = field(default_factory=dict)
    peak_bandwidth_Bps: float = H200_PEAK["memory_bandwidth_Bps"]
    peak_flops: float = H200_PEAK["bf16_flops"]


@dataclass
class TuneReport:
    """The outcome: best config per M, per-M results, the file written, counts."""

    tune_id: str
    tune_key: str
    outcome: str
    best: dict[int, Config] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    output_file: Path | None = None
    measured: int = 0
    reused: int = 0
    rejected: int = 0
    seconds: float = 0.0
    summary: str = ""


def tune_key_of(kernel: Any, shape: MoeShape, facts: dict[str, Any]) -> str:
    """(kernel, shape, dtype, device, Triton version) as one string."""
    block = f",block={list(shape.block_shape)}" if shape.block_shape else ""
    return (
        f"{kernel.source}:{kernel.name}@{kernel.version}|E={shape.E},N={shape.N},K={shape.K},topk={shape.topk}"
        f"|{shape.dtype}{block}|{facts['gpu_name']}|triton-{facts['triton_version']}"
    )


def tune_id_of(key: str, search: str) -> str:
    """The stream id of a tune: derived from its key (and search), so a rerun resumes it."""
    return "moe-" + hashlib.sha256(f"{key}|{search}".encode()).hexdigest()[:16]


def short(config: Config) -> str:
    """``16/64/128 G1 w4 s4`` (BLOCK_M/N/K, GROUP_M, warps, stages)."""
    c = config
    return (
        f"{c['BLOCK_SIZE_M']}/{c['BLOCK_SIZE_N']}/{c['BLOCK_SIZE_K']} G{c['GROUP_SIZE_M']} "
        f"w{c['num_warps']} s{c['num_stages']}"
    )


def time_interleaved(
    measurer: Measurer, M: int, configs: dict[str, Config], *, rounds: int, budget_ms: float
) -> dict[str, list[float]]:
    """Each named config timed ``rounds`` times, round-robin (A B C A B C ...), in µs."""
    out: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, c in configs.items():
            out[name].append(measurer.time(M, c, budget_ms))
    return out


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / median of repeated timings, in %: the timing noise of one config."""
    return (
        100.0 * (max(values) - min(values)) / statistics.median(values) if values else float("nan")
    )


def _host(facts: dict[str, Any], kernel: Any) -> Host:
    return Host(
        gpu_name=facts.get("gpu_name"),
        compute_capability=facts.get("compute_capability"),
        gpu_count=1,
        gpu_memory_mib=facts.get("gpu_memory_mib"),
        cuda=facts.get("cuda"),
        engine="sglang" if kernel.source == "sglang" else None,
        engine_version=kernel.version if kernel.source == "sglang" else None,
    )


def run_tune(
    spec: TuneSpec,
    measurer: Measurer,
    sink: Sink,
    *,
    say: Callable[[str], None] = lambda _l: None,
    progress: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> TuneReport:
    """Run the tune described by ``spec`` (module docstring); return its report.

    Raises:
        KeyboardInterrupt: after recording ``kernel_tune_completed`` with outcome ``cancelled``
            (measurements already recorded stay; a rerun resumes).
    """
    t0 = clock()
    shape, facts, kernel = spec.shape, measurer.facts, measurer.kernel
    key = tune_key_of(kernel, shape, facts)
    tune_id = tune_id_of(key, spec.search + ("+seeded" if spec.seed_configs else ""))
    report = TuneReport(tune_id=tune_id, tune_key=key, outcome="completed")
    host = _host(facts, kernel)
    common: dict[str, Any] = dict(
        tune_id=tune_id, session_id=spec.session_id, actor=TUNE_ACTOR, host=host
    )

    known: dict[tuple[int, str, float], float | None] = {}
    for ev in sink.measured(tune_id):
        if ev.tune_key == key and ev.budget_ms is not None:
            known[(ev.batch_size, config_key(ev.config), float(ev.budget_ms))] = ev.latency_us
    space = search_space()
    kept, pre_rejected = prune(
        space, shared_memory_limit=int(facts["shared_memory_limit"]), shape=shape
    )
    search = (
        f"exhaustive over the pruned space at {spec.max_budget_ms:g} ms"
        if spec.search == "exhaustive"
        else f"successive halving: first rung {spec.sample:.0%} of the pruned space, eta {spec.eta}, "
        f"{spec.min_budget_ms:g}..{spec.max_budget_ms:g} ms do_bench windows"
    )
    sink.append(
        KernelTuneStarted(
            kernel=kernel.name,
            script="tuneledger run tune",
            E=shape.E,
            N=shape.N,
            K=shape.K,
            topk=shape.topk,
            dtype=shape.dtype,
            block_shape=list(shape.block_shape) if shape.block_shape else None,
            device_name=facts["gpu_name"],
            batch_sizes=list(spec.batch_sizes),
            search_space=len(space),
            timeout_s=spec.time_budget_s,
            candidate_id=spec.candidate_id,
            kernel_source=kernel.source,
            kernel_version=kernel.version,
            triton_version=facts["triton_version"],
            tune_key=key,
            search=search,
            shared_memory_limit=int(facts["shared_memory_limit"]),
            pruned=len(pre_rejected),
            **common,
        )
    )
    say(
        f"tune {tune_id}: {kernel.source} kernel {kernel.version}, {shape.describe()}, {facts['gpu_name']} "
        f"({facts['compute_capability']}), triton {facts['triton_version']}: {len(kept)} of {len(space)} configs fit "
        f"{facts['shared_memory_limit']} B shared memory; {len(known)} measurements already in the ledger"
    )

    def stop() -> bool:
        if spec.time_budget_s is not None and clock() - t0 > spec.time_budget_s:
            report.outcome = "timed-out"
            return True
        return False

    bar = _progress(progress, len(spec.batch_sizes))
    done: list[int] = []
    try:
        for M in spec.batch_sizes:
            if stop():
                break
            t_m = clock()
            default = default_config(M, shape)
            seeds = [default] + ([report.best[done[-1]]] if done else [])
            if spec.seed_configs:
                seeds.append(nearest_config(spec.seed_configs, M))
            if spec.search == "exhaustive":
                configs, lo = list(kept), spec.max_budget_ms
            else:
                import random

                n = max(1, math.ceil(len(kept) * spec.sample))
                configs = sample_configs(
                    kept,
                    M=M,
                    shape=shape,
                    n=n,
                    seeds=seeds,
                    rng=random.Random(spec.seed * 100003 + M),
                )
                lo = spec.min_budget_ms
            fresh = [
                c for c in configs if not any(k[0] == M and k[1] == config_key(c) for k in known)
            ]
            measurer.prepare(M, fresh)

            def measure(c: Config, budget: float, M: int = M) -> float:
                ev = dict(batch_size=M, config=dict(c), tune_key=key, budget_ms=budget, **common)
                try:
                    err = measurer.check(M, c)
                    lat = measurer.time(M, c, budget)
                except Rejected as exc:
                    report.rejected += 1
                    sink.append(KernelConfigMeasured(latency_us=None, rejected=str(exc), **ev))
                    known[(M, config_key(c), budget)] = None
                    raise
                report.measured += 1
                sink.append(KernelConfigMeasured(latency_us=lat, max_rel_error=err, **ev))
                known[(M, config_key(c), budget)] = lat
                return lat

            known_m = {(k, b): v for (m, k, b), v in known.items() if m == M}
            reused_before = report.measured
            res = successive_halving(
                configs,
                measure,
                eta=spec.eta,
                min_budget=lo,
                max_budget=spec.max_budget_ms,
                known=known_m,
                stop=stop,
            )
            report.reused += sum(1 for k, b, _ in res.measured if (k, b) in known_m)
            if res.best is None:
                say(f"M={M}: no config ran ({len(res.rejected)} rejected)")
                continue
            report.best[M] = res.best
            done.append(M)
            search_s = clock() - t_m
            t = time_interleaved(
                measurer,
                M,
                {"default": default, "tuned": res.best},
                rounds=spec.rounds,
                budget_ms=spec.max_budget_ms,
            )
            d_us, t_us = statistics.median(t["default"]), statistics.median(t["tuned"])
            touched = measurer.experts_touched(M)
            roof = roofline(shape, M, touched, t_us, spec.peak_bandwidth_Bps, spec.peak_flops)
            report.results[str(M)] = {
                "default_us": round(d_us, 2),
                "tuned_us": round(t_us, 2),
                "speedup": round(d_us / t_us, 4),
                "default_config": default,
                "tuned_config": res.best,
                "noise_pct": round(max(spread_pct(t["default"]), spread_pct(t["tuned"])), 2),
                "configs_timed": len({k for k, _, lat in res.measured if lat is not None}),
                "rejected": len(res.rejected),
                "experts_touched": touched,
                "search_s": round(search_s, 2),
                "bandwidth_fraction": round(roof["bandwidth_fraction"], 4),
                "flops_fraction": round(roof["flops_fraction"], 4),
                "bytes": roof["bytes"],
                "flops": roof["flops"],
                "arithmetic_intensity": round(roof["arithmetic_intensity"], 2),
            }
            say(
                f"M={M}: {short(res.best)} {t_us:.1f} µs vs default {d_us:.1f} µs ({d_us / t_us:.2f}x); "
                f"{len(res.measured)} timings ({report.measured - reused_before} new), {len(res.rejected)} rejected; "
                f"{roof['bandwidth_fraction']:.0%} of peak bandwidth, {roof['flops_fraction']:.1%} of peak FLOP/s"
            )
            if bar is not None:
                bar[0].advance(bar[1])
    except KeyboardInterrupt:
        report.outcome = "cancelled"
        _complete(spec, report, kernel, facts, done, common, sink, t0, clock)
        raise
    finally:
        if bar is not None:
            bar[0].stop()
    _complete(spec, report, kernel, facts, done, common, sink, t0, clock)
    say(report.summary)
    return report


def _complete(
    spec: TuneSpec,
    report: TuneReport,
    kernel: Any,
    facts: dict[str, Any],
    done: list[int],
    common: dict[str, Any],
    sink: Sink,
    t0: float,
    clock: Callable[[], float],
) -> None:
    report.seconds = clock() - t0
    if report.best and spec.output_dir is not None:
        folder = (
            Path(spec.output_dir)
            / "configs"
            / ("triton_" + facts["triton_version"].replace(".", "_"))
        )
        folder.mkdir(parents=True, exist_ok=True)
        name = (
            sglang_file_name(spec.shape, facts["gpu_name"])
            if kernel.source == "sglang"
            else "reference-kernel_" + config_file_name(spec.shape, facts["gpu_name"])
        )
        report.output_file = folder / name
        tmp = report.output_file.with_name(report.output_file.name + ".tmp")
        tmp.write_text(config_file_content(report.best), encoding="utf-8")
        tmp.replace(report.output_file)
    speedups = [r["speedup"] for r in report.results.values()]
    report.summary = (
        f"tune {report.tune_id} {report.outcome} in {report.seconds:.0f} s: {len(done)}/{len(spec.batch_sizes)} batch sizes, "
        f"{report.measured} timings, {report.reused} reused, {report.rejected} rejected"
        + (
            f"; tuned vs SGLang's default {min(speedups):.2f}x..{max(speedups):.2f}x"
            if speedups
            else ""
        )
        + (f"; wrote {report.output_file}" if report.output_file else "")
        + ("" if kernel.source == "sglang" else " (tuneledger's reference kernel, not SGLang's)")
    )
    sink.append(
        KernelTuneCompleted(
            outcome=report.outcome,
            duration_s=round(report.seconds, 3),
            batch_sizes_done=done,
            best_configs={str(m): c for m, c in sorted(report.best.items())},
            output_file=str(report.output_file) if report.output_file else None,
            results=report.results,
            kernel_source=kernel.source,
            tune_key=report.tune_key,
            measured=report.measured,
            reused=report.reused,
            candidate_id=spec.candidate_id,
            summary=report.summary,
            **common,
        )
    )


def sglang_file_name(shape: MoeShape, device_name: str) -> str:
    """SGLang's own ``get_config_file_name`` when importable (it needs sgl_kernel), else ours
    (``tune_space.config_file_name``, the same documented format)."""
    try:
        from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config import (  # type: ignore[import-not-found]
            get_config_file_name,
        )

        block = list(shape.block_shape) if shape.block_shape else None
        return str(get_config_file_name(shape.E, shape.N, shape.file_dtype, block))
    except Exception:
        return config_file_name(shape, device_name)


def _progress(enabled: bool, total: int):
    """A rich progress bar with ETA on standard error (None when disabled)."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    p = Progress(
        TextColumn("tune"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("batch sizes"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    p.start()
    return p, p.add_task("tune", total=total)


def load_recorded(path: str | Path) -> dict[str, Any]:
    """A recorded-timings file (``tests/fixtures/h200_moe_timings.json``): JSON as written by
    ``bench/h200_moe_tune.py``."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
