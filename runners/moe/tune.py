"""``tuneledger run tune``: tune SGLang's fused-MoE Triton kernel and record every step.

Flow, per batch size M (``INTERACTIVE_BATCH_SIZES`` 1..64 by default):

1. The space (SGLang's 1,920 configs) is pruned by the device's shared memory per block
   (``runners.moe.space.prune``): those configs are recorded as rejected, never run.
2. Successive halving (``tune_space.successive_halving``) over a first rung of ``sample`` x the
   pruned space's GROUP_SIZE_M-folded classes (SGLang's default and shipped configs and the
   previous M's best first; the same sample at every M, so kernels compile once): each config is
   checked against torch once, then timed with a small window; the best third move on with three
   times the window; then the winner's GROUP_SIZE_M siblings at the top window.
   ``--search exhaustive`` times every pruned config at the largest window instead.
3. The winner, SGLang's default and (``--seed-file``) the shipped config are re-timed interleaved
   (``rounds`` rounds, median each) and the fastest is kept, so the result is never slower than
   those references beyond that re-timing's noise; roofline fractions are computed from the bytes
   and FLOPs the GEMMs must move and do.

Every timing and every rejection is a ``kernel_config_measured`` event keyed by (kernel, shape,
dtype, device, Triton version) — the ``tune_key`` — in the stream ``tune:<id>`` where the id
derives from that key: a killed or timed-out tune run again finds them and measures only what is
missing. ``--time-budget`` stops cleanly with the best so far (outcome ``timed-out``). The result
is SGLang's config file (``<output>/configs/triton_X_Y_Z/E=..,N=..,device_name=...json``, ready for
``SGLANG_MOE_CONFIG_DIR=<output>``) and a ``kernel_tune_completed`` with default-vs-tuned per M.

The GPU work is behind the ``Measurer`` protocol (``runners.moe.kernels.GpuMeasurer`` on a GPU);
events go to a ``Sink`` (the ledger, or a JSONL file on a machine without DuckDB).
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ledger.errors import LedgerError
from ledger.input_files import load_json
from ledger.write import commands
from runners.moe.compile_errors import is_compile_failure
from runners.moe.peaks import known_devices, peaks_for
from runners.moe.space import (
    CONFIG_KEYS,
    INTERACTIVE_BATCH_SIZES,
    Config,
    MoeShape,
    Rejected,
    block_m_cap,
    config_classes,
    config_file_content,
    config_file_name,
    config_key,
    default_config,
    group_siblings,
    nearest_config,
    prune,
    roofline,
    sample_configs,
    search_space,
    successive_halving,
)
from schemas import Actor, Host
from schemas.events import Event, KernelConfigMeasured, KernelTuneCompleted, KernelTuneStarted

TUNE_ACTOR = Actor(kind="runner", name="moe-tune")


class Measurer(Protocol):
    """What the tuner needs of the GPU side (``runners.moe.kernels.GpuMeasurer``).

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
        return self.store.read(stream=f"tune:{tune_id}", types=["kernel_config_measured"])  # type: ignore[return-value,unused-ignore]  # read() is typed list[Event]


class JsonlSink:
    """Events as JSON lines in a file (``tuneledger import``-able), flushed and fsynced one by one."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def append(self, event: Event) -> None:
        from ledger.write.jsonl import event_to_json

        with self.path.open("a", encoding="utf-8") as f:
            f.write(event_to_json(event) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def measured(self, tune_id: str) -> list[KernelConfigMeasured]:
        from ledger.write.jsonl import iter_jsonl

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
    """What to tune and how. Budgets are do_bench ``rep`` windows in ms (1.2 .. 10.8: what the H200
    runs used and ``tune_space.H200_COSTS`` is fitted to); ``sample`` is the first
    rung's share of the pruned space's GROUP_SIZE_M-folded classes (0.2: 63 of the H200's 312,
    plus the seeds; ``tune_space.halving_cost`` says what that costs); ``rounds``: the final
    interleaved re-timing of the winner against SGLang's default and shipped configs;
    ``time_budget_s`` stops the tune cleanly."""

    shape: MoeShape
    batch_sizes: Sequence[int] = INTERACTIVE_BATCH_SIZES
    search: str = "halving"
    eta: int = 3
    min_budget_ms: float = 1.2
    max_budget_ms: float = 10.8
    sample: float = 0.2
    rounds: int = 5
    seed: int = 0
    time_budget_s: float | None = None
    output_dir: Path | None = None
    session_id: str | None = None
    candidate_id: str | None = None
    #: Known configs per batch size (e.g. SGLang's shipped file for this GPU, ``--seed-file``): the
    #: entry nearest each M joins the first rung and the final re-timing, so the tune never ends
    #: slower than it (beyond that re-timing's noise).
    seed_configs: dict[str, Config] = field(default_factory=dict)
    #: The roofline's peaks (bytes/s, dense tensor FLOP/s); None: the device's datasheet peaks
    #: at the shape's precision (``runners.moe.peaks``), no roofline for a device not there.
    peak_bandwidth_Bps: float | None = None
    peak_flops: float | None = None


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
    tune = _Tune(spec, measurer, sink, say, clock)
    tune.start()
    bar = _progress(progress, len(spec.batch_sizes))
    try:
        for M in spec.batch_sizes:
            if tune.stop():
                break
            if not tune.batch(M):
                continue
            if bar is not None:
                bar[0].advance(bar[1])
    except KeyboardInterrupt:
        tune.report.outcome = "cancelled"
        tune.complete()
        raise
    finally:
        if bar is not None:
            bar[0].stop()
    tune.complete()
    say(tune.report.summary)
    return tune.report


def _roof_peaks(spec: TuneSpec, gpu_name: str | None) -> tuple[float | None, float | None]:
    """(peak bandwidth B/s, peak FLOP/s) of the roofline: the spec's when given, else the
    device's datasheet peaks at the shape's precision (``peaks.peaks_for``); None: unknown."""
    device = peaks_for(gpu_name)
    precision = "fp8" if spec.shape.dtype.startswith("fp8") else "bf16"
    bandwidth = spec.peak_bandwidth_Bps
    if bandwidth is None and device is not None:
        bandwidth = device.memory_bandwidth_Bps
    flops = spec.peak_flops
    if flops is None and device is not None:
        flops = device.peak_flops(precision)
    return bandwidth, flops


class _Tune:
    """One tune's state and its steps: the start event, each batch size (candidates, search,
    the final interleaved re-timing, the result), the stop rule and the completion."""

    def __init__(
        self,
        spec: TuneSpec,
        measurer: Measurer,
        sink: Sink,
        say: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self.spec, self.measurer, self.sink, self.say, self.clock = (
            spec,
            measurer,
            sink,
            say,
            clock,
        )
        self.t0 = clock()
        self.shape, self.facts, self.kernel = spec.shape, measurer.facts, measurer.kernel
        self.key = tune_key_of(self.kernel, self.shape, self.facts)
        self.tune_id = tune_id_of(self.key, spec.search + ("+seeded" if spec.seed_configs else ""))
        self.report = TuneReport(tune_id=self.tune_id, tune_key=self.key, outcome="completed")
        self.common: dict[str, Any] = dict(
            tune_id=self.tune_id,
            session_id=spec.session_id,
            actor=TUNE_ACTOR,
            host=_host(self.facts, self.kernel),
        )
        self.known: dict[tuple[int, str, float], float | None] = {}
        self.compile_failures: set[str] = set()  # configs whose compile failure was printed
        for ev in sink.measured(self.tune_id):
            if ev.tune_key == self.key and ev.budget_ms is not None:
                self.known[(ev.batch_size, config_key(ev.config), float(ev.budget_ms))] = (
                    ev.latency_us
                )
        self.space = search_space()
        self.kept, self.pre_rejected = prune(
            self.space,
            shared_memory_limit=int(self.facts["shared_memory_limit"]),
            shape=self.shape,
            arch=self.facts.get("compute_capability"),
        )
        self.classes = config_classes(self.kept)
        self.peak_bandwidth, self.peak_flops = _roof_peaks(spec, self.facts.get("gpu_name"))
        self.done: list[int] = []

    def start(self) -> None:
        """Record ``kernel_tune_started`` and say what the tune covers."""
        spec, shape, facts, kernel = self.spec, self.shape, self.facts, self.kernel
        search = (
            f"exhaustive over the pruned space at {spec.max_budget_ms:g} ms"
            if spec.search == "exhaustive"
            else f"successive halving: first rung {spec.sample:.0%} of the pruned space's "
            f"{len(self.classes)} GROUP_SIZE_M-folded classes, eta {spec.eta}, "
            f"{spec.min_budget_ms:g}..{spec.max_budget_ms:g} ms do_bench windows; the winner's "
            "GROUP_SIZE_M siblings; the winner against the references re-timed interleaved"
        )
        self.sink.append(
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
                search_space=len(self.space),
                timeout_s=spec.time_budget_s,
                candidate_id=spec.candidate_id,
                kernel_source=kernel.source,
                kernel_version=kernel.version,
                triton_version=facts["triton_version"],
                tune_key=self.key,
                search=search,
                shared_memory_limit=int(facts["shared_memory_limit"]),
                pruned=len(self.pre_rejected),
                **self.common,
            )
        )
        self.say(
            f"tune {self.tune_id}: {kernel.source} kernel {kernel.version}, {shape.describe()}, {facts['gpu_name']} "
            f"({facts['compute_capability']}), triton {facts['triton_version']}: {len(self.kept)} of {len(self.space)} configs fit "
            f"{facts['shared_memory_limit']} B shared memory; {len(self.known)} measurements already in the ledger"
        )
        if self.peak_bandwidth is None or self.peak_flops is None:
            self.say(
                f"no roofline for {facts['gpu_name']}: its datasheet peaks are not in "
                "runners/moe/peaks.py (known: " + ", ".join(known_devices()) + ")"
            )

    def stop(self) -> bool:
        """Whether the time budget is spent (the outcome is then ``timed-out``)."""
        if self.spec.time_budget_s is not None and self.clock() - self.t0 > self.spec.time_budget_s:
            self.report.outcome = "timed-out"
            return True
        return False

    def _measure(self, M: int, c: Config, budget: float) -> float:
        """Time ``c`` at batch size ``M`` within ``budget`` ms and record it (a rejection too)."""
        ev = dict(batch_size=M, config=dict(c), tune_key=self.key, budget_ms=budget, **self.common)
        try:
            err = self.measurer.check(M, c)
            lat = self.measurer.time(M, c, budget)
        except Rejected as exc:
            self.report.rejected += 1
            self.sink.append(KernelConfigMeasured(latency_us=None, rejected=str(exc), **ev))
            self.known[(M, config_key(c), budget)] = None
            if is_compile_failure(str(exc)) and config_key(c) not in self.compile_failures:
                # one line per config, not per batch size (the events keep every one)
                self.compile_failures.add(config_key(c))
                self.say(f"M={M}: {short(c)} rejected: {exc}")
            raise
        self.report.measured += 1
        self.sink.append(KernelConfigMeasured(latency_us=lat, max_rel_error=err, **ev))
        self.known[(M, config_key(c), budget)] = lat
        return lat

    def _candidates(self, M: int, references: dict[str, Config]) -> tuple[list[Config], float]:
        """The configs the search at ``M`` starts from and its first budget (ms)."""
        spec = self.spec
        seeds = [*references.values()] + ([self.report.best[self.done[-1]]] if self.done else [])
        if spec.search == "exhaustive":
            return list(self.kept), spec.max_budget_ms
        import random

        n = max(1, math.ceil(len(self.classes) * spec.sample))
        # Seeded without M: every batch size with the same BLOCK_M cap draws the same
        # sample, so its kernels compile once (Triton's cache) for the whole tune.
        configs = sample_configs(
            self.kept,
            M=M,
            shape=self.shape,
            n=n,
            seeds=seeds,
            rng=random.Random(spec.seed * 100003 + block_m_cap(M, self.shape)),
        )
        return configs, spec.min_budget_ms

    def _search(self, M: int, configs: list[Config], lo: float) -> tuple[Any, list[Any]]:
        """Successive halving over ``configs`` at ``M``, then the winner's GROUP_SIZE_M
        siblings; (the result, every timing). Reused timings are counted in the report."""
        spec = self.spec

        def measure(c: Config, budget: float) -> float:
            return self._measure(M, c, budget)

        known_m = {(k, b): v for (m, k, b), v in self.known.items() if m == M}
        res = successive_halving(
            configs,
            measure,
            eta=spec.eta,
            min_budget=lo,
            max_budget=spec.max_budget_ms,
            known=known_m,
            stop=self.stop,
        )
        timings = list(res.measured)
        if res.best is not None and spec.search != "exhaustive" and not self.stop():
            # The first rung folded GROUP_SIZE_M away: the winner's siblings, at the top window.
            sibs = successive_halving(
                group_siblings(res.best, self.kept) or [res.best],
                measure,
                eta=spec.eta,
                min_budget=spec.max_budget_ms,
                max_budget=spec.max_budget_ms,
                known={(k, b): v for (m, k, b), v in self.known.items() if m == M},
                stop=self.stop,
            )
            timings += sibs.measured
            if sibs.best is not None:
                res.best, res.best_latency_us = sibs.best, sibs.best_latency_us
            res.rejected.update(sibs.rejected)
        self.report.reused += sum(1 for k, b, _ in timings if (k, b) in known_m)
        return res, timings

    def _final(
        self, M: int, best: Config, references: dict[str, Config]
    ) -> tuple[dict[str, Config], dict[str, list[float]]]:
        """The last word: the search's winner and the references re-timed interleaved (same
        process, same inputs, round-robin, ``rounds`` rounds at the top window); (finalists by
        name, their timings)."""
        # A search ranks by one noisy timing per rung, so its winner can land a little behind a
        # reference it met early; this way the tune is never slower than a reference by more
        # than the noise of this comparison.
        finalists: dict[str, Config] = {"search": best}
        for name, c in references.items():
            try:
                self.measurer.check(M, c)
            except Rejected as exc:
                self.say(f"M={M}: {name} config {short(c)} cannot run here ({exc})")
                continue
            finalists[name] = c
        # A config that is two finalists (the search found the shipped one) is timed once.
        by_key = {config_key(c): name for name, c in reversed(list(finalists.items()))}
        t = time_interleaved(
            self.measurer,
            M,
            {name: finalists[name] for name in by_key.values()},
            rounds=self.spec.rounds,
            budget_ms=self.spec.max_budget_ms,
        )
        return finalists, {name: t[by_key[config_key(c)]] for name, c in finalists.items()}

    def _roof(self, M: int, touched: int, t_us: float) -> dict[str, Any]:
        """The result's roofline fields; fractions only against known peaks."""
        roof = roofline(self.shape, M, touched, t_us, self.peak_bandwidth, self.peak_flops)
        fields: dict[str, Any] = {
            "bytes": roof["bytes"],
            "flops": roof["flops"],
            "arithmetic_intensity": round(roof["arithmetic_intensity"], 2),
        }
        for name in ("bandwidth_fraction", "flops_fraction"):
            value = roof[name]
            if value is not None:
                fields[name] = round(value, 4)
        return fields

    def batch(self, M: int) -> bool:
        """Tune batch size ``M``; False when no config ran."""
        spec, clock, report = self.spec, self.clock, self.report
        t_m = clock()
        default = default_config(M, self.shape)
        # The reference points the tune must not end slower than: SGLang's default and, when
        # given (--seed-file: the file SGLang ships for this GPU), its entry for this M.
        references = {"default": default}
        if spec.seed_configs:
            references["shipped"] = nearest_config(spec.seed_configs, M)
        configs, lo = self._candidates(M, references)
        fresh = [
            c for c in configs if not any(k[0] == M and k[1] == config_key(c) for k in self.known)
        ]
        self.measurer.prepare(M, fresh)
        prepare_s = clock() - t_m
        reused_before = report.measured
        res, timings = self._search(M, configs, lo)
        if res.best is None:
            self.say(f"M={M}: no config ran ({len(res.rejected)} rejected)")
            return False
        search_s = clock() - t_m
        finalists, t = self._final(M, res.best, references)
        medians = {name: statistics.median(v) for name, v in t.items()}
        kept_name = min(medians, key=lambda name: (medians[name], name != "search"))
        best = finalists[kept_name]
        report.best[M] = best
        self.done.append(M)
        d_us = medians.get("default", float("nan"))
        t_us = medians[kept_name]
        touched = self.measurer.experts_touched(M)
        roof = self._roof(M, touched, t_us)
        report.results[str(M)] = {
            "default_us": round(d_us, 2),
            "tuned_us": round(t_us, 2),
            "speedup": round(d_us / t_us, 4),
            "default_config": default,
            "tuned_config": best,
            "kept": kept_name,
            "search_us": round(medians["search"], 2),
            "search_config": res.best,
            **(
                {
                    "shipped_us": round(medians["shipped"], 2),
                    "shipped_config": finalists["shipped"],
                }
                if "shipped" in medians
                else {}
            ),
            "noise_pct": round(max(spread_pct(v) for v in t.values()), 2),
            "configs_timed": len({k for k, _, lat in timings if lat is not None}),
            "rejected": len(res.rejected),
            "experts_touched": touched,
            "search_s": round(search_s, 2),
            "prepare_s": round(prepare_s, 2),
            "configs_prepared": len(fresh),
            **roof,
        }
        vs = ", ".join(f"{name} {medians[name]:.1f} µs" for name in finalists if name != kept_name)
        fractions = (
            f"{roof['bandwidth_fraction']:.0%} of peak bandwidth, {roof['flops_fraction']:.1%} of peak FLOP/s"
            if "bandwidth_fraction" in roof and "flops_fraction" in roof
            else "no roofline (device peaks unknown)"
        )
        self.say(
            f"M={M}: {short(best)} ({kept_name}) {t_us:.1f} µs vs {vs} "
            f"({d_us / t_us:.2f}x the default); {len(timings)} timings "
            f"({report.measured - reused_before} new), {len(res.rejected)} rejected; {fractions}"
        )
        return True

    def complete(self) -> None:
        """Write the config file and record ``kernel_tune_completed`` (``_complete``)."""
        _complete(
            self.spec,
            self.report,
            self.kernel,
            self.facts,
            self.done,
            self.common,
            self.sink,
            self.t0,
            self.clock,
        )


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
        from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config import (
            get_config_file_name,
        )

        block = list(shape.block_shape) if shape.block_shape else None
        return str(get_config_file_name(shape.E, shape.N, shape.file_dtype, block))
    except Exception:
        return config_file_name(shape, device_name)


#: Where SGLang's wheel keeps its tuned fused-MoE files (0.5.23), under the ``sglang`` package.
SGLANG_CONFIG_DIR = ("srt", "layers", "moe", "moe_runner", "triton_utils", "configs")


def _version_key(folder: str) -> tuple[int, ...]:
    return tuple(int(x) for x in folder.removeprefix("triton_").split("_") if x.isdigit())


def find_shipped_config(
    shape: MoeShape, device_name: str, triton_version: str, package_dir: Path | None = None
) -> tuple[Path, dict[str, Config]] | None:
    """SGLang's shipped tuned file for this shape and GPU, when the installed sglang has one.

    Looks in ``<sglang>/srt/layers/moe/moe_runner/triton_utils/configs/triton_X_Y_Z/`` for the
    file SGLang would load (``tune_space.config_file_name``): the folder of this Triton version
    first, else the newest folder that has it (the H200 files of sglang 0.5.23 are under
    triton_3_1_0 and triton_3_7_1). ``package_dir`` defaults to where ``sglang`` would be imported
    from (found without importing it: its import chain needs CUDA extensions). Returns (path,
    entries) or None; a file that is not a valid MoE config file is ignored (None).
    """
    if package_dir is None:
        import importlib.util

        try:
            spec = importlib.util.find_spec("sglang")
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        package_dir = Path(next(iter(spec.submodule_search_locations)))
    root = package_dir.joinpath(*SGLANG_CONFIG_DIR)
    if not root.is_dir():
        return None
    name = config_file_name(shape, device_name)
    mine = "triton_" + triton_version.split("+")[0].replace(".", "_")
    folders = sorted(
        (d.name for d in root.iterdir() if d.is_dir() and d.name.startswith("triton_")),
        key=lambda f: (f == mine, _version_key(f)),
        reverse=True,
    )
    for folder in folders:
        path = root / folder / name
        if path.is_file():
            try:
                data = load_json(path)  # a regular file of at most 1 MiB
                return path, {
                    str(int(m)): {k: int(c[k]) for k in CONFIG_KEYS} for m, c in data.items()
                }
            except (LedgerError, ValueError, TypeError, KeyError, AttributeError):
                return None
    return None


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
