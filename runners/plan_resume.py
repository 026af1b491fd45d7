"""What a plan already has in the ledger, and what the rest will take: ``run plan --resume`` and
``run plan --dry-run``.

Resume: a plan killed or interrupted midway leaves every finished run in the ledger (each run's
``benchmark_completed`` is appended as soon as it ends). Started again with ``--resume`` it
measures only the (arm, repeat, load) runs that have no valid run of this plan's session,
workload and tool yet, and compares all of them: the finished ones are read back as they were
recorded. An arm whose loads are all finished is not started at all.

Dry run: the arms (configuration, flags), the runs in the order they would run, and an estimate of
the time from this ledger's earlier runs: the mean ``ready_after_s`` of the configuration's
earlier server starts (else of every start of the engine, else unknown), plus the mean duration of
its earlier benchmark runs at that load with this workload, plus a stop. Where the ledger has no
such run (a fresh ledger), the estimate comes from the model's size and the workload
(``prior_estimate``): loading reads the weights at ``LOAD_BYTES_PER_S`` after ``START_BASE_S``;
a run decodes ceil(prompts / c) waves of ``output_len`` steps, each step reading the weights once
at ``DECODE_BYTES_PER_S`` (decode is memory-bound; a batch of c shares the read). Each start says
which it used (``basis``); nothing is recorded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from ledger.read import runs
from ledger.store import LedgerStore
from runners.bench.client import TOOL_NAME, RunResult, SweepPoint
from schemas.events import BenchmarkCompleted

#: Seconds a stop takes when the ledger knows of none (vLLM's CPU build: ~3 s after SIGINT).
STOP_S = 5.0

#: The prior of a fresh ledger (deliberately round, an order of magnitude: the ledger's own runs
#: replace it after the first plan): an engine's start before it reads the weights, the rate it
#: reads them at, and the rate a decode step reads them at (a CPU's memory bandwidth; a GPU's is
#: ~100x, so on a GPU the prior overestimates the benchmark part).
START_BASE_S = 30.0
LOAD_BYTES_PER_S = 0.5e9
DECODE_BYTES_PER_S = 20e9
#: The model's size when neither a folder nor the Hugging Face cache has its weights.
UNKNOWN_MODEL_BYTES = 2e9
_WEIGHTS = (".safetensors", ".bin", ".pt", ".gguf")


def _workload(plan: Any) -> runs.Workload:
    b = plan.bench
    return runs.Workload(
        plan.plan.session, TOOL_NAME, b.input_len, b.output_len, plan.plan.request_rate
    )


def finished_points(
    store: LedgerStore, plan: Any, loads: Sequence[int | None]
) -> dict[tuple[str, int, int | None], SweepPoint]:
    """The valid runs this plan's session already holds, by (arm, repeat, load): the latest of
    each, with this workload (lengths, seed, endpoint, shared prefix) and tool."""
    event_ids = runs.valid_benchmark_ids(store, _workload(plan), list(plan.arms))
    b = plan.bench
    found: dict[tuple[str, int, int | None], SweepPoint] = {}
    for event_id in event_ids:
        event = store.get(event_id)
        if not isinstance(event, BenchmarkCompleted) or event.repeat is None:
            continue
        w = event.workload
        if (w.seed, w.endpoint, w.shared_prefix_len or 0) != (
            b.seed,
            b.endpoint,
            b.shared_prefix_len,
        ):
            continue
        if event.concurrency not in loads or event.repeat >= plan.plan.repeats:
            continue
        run = RunResult(
            [], event.metrics.duration_s or 0.0, event.metrics, True, list(event.validity_notes)
        )
        point = SweepPoint(event.concurrency, plan.plan.request_rate, event.repeat, run, event)
        found[(event.config_name, event.repeat, event.concurrency)] = point
    return found


@dataclass(frozen=True)
class PlannedArm:
    """One server start of the plan: arm, repeat, the loads it would measure, and the estimate."""

    arm: str
    repeat: int
    loads: list[int | None]
    start_s: float | None
    bench_s: float | None
    done: list[int | None]
    #: Where the estimate came from: "ledger" (earlier runs) or the prior's description.
    basis: str = "ledger"


def _mean(values: list[Any]) -> float | None:
    clean = [float(v) for v in values if v is not None]
    return fmean(clean) if clean else None


def estimate(store: LedgerStore | None, plan: Any, *, resume: bool = False) -> list[PlannedArm]:
    """The plan's server starts in run order with their time estimates (module doc)."""
    loads: list[int | None] = (
        list(plan.plan.concurrency) if plan.plan.request_rate is None else [None]
    )
    done = finished_points(store, plan, loads) if (store is not None and resume) else {}
    starts: dict[str | None, list[Any]] = {}
    engine_starts: list[Any] = []
    durations: dict[tuple[str | None, int | None], list[Any]] = {}
    if store is not None:
        for server in runs.server_starts(store):
            engine_starts.append(server.ready_after_s)
            starts.setdefault(server.config_name, []).append(server.ready_after_s)
        for run in runs.benchmark_durations(store, _workload(plan)):
            key = (run.config_name, run.concurrency)
            durations.setdefault(key, []).append(run.duration_s)
    out = []
    for repeat in range(plan.plan.repeats):
        for arm in plan.arms:
            finished = [c for c in loads if (arm, repeat, c) in done]
            pending = [c for c in loads if c not in finished]
            start = _mean(starts.get(arm, [])) or _mean(engine_starts)
            bench = [
                _mean(durations.get((arm, c), []))
                or _mean([d for (_, load), ds in durations.items() if load == c for d in ds])
                for c in pending
            ]
            bench_s = None if any(x is None for x in bench) else sum(x or 0.0 for x in bench)
            basis = "ledger"
            if start is None or bench_s is None:
                prior_start, prior_bench, basis = prior_estimate(plan, arm, pending)
                start = prior_start if start is None else start
                bench_s = prior_bench if bench_s is None else bench_s
            out.append(PlannedArm(arm, repeat, pending, start, bench_s, finished, basis))
    return out


def model_bytes(model: str | None) -> float | None:
    """The bytes of a model's weight files: a local folder's, else its Hugging Face cache
    snapshot's (``HF_HOME``/hub, ``HF_HUB_CACHE``); None when neither holds it."""
    if not model:
        return None
    folders = [Path(model)]
    if "/" in model and not Path(model).exists():
        hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
        )
        snapshots = Path(hub) / f"models--{model.replace('/', '--')}" / "snapshots"
        folders = sorted(snapshots.glob("*"))[-1:] if snapshots.is_dir() else []
    for folder in folders:
        if folder.is_dir():
            sizes = [os.path.getsize(f) for f in folder.rglob("*") if f.suffix in _WEIGHTS]
            if sizes:
                return float(sum(sizes))
    return None


def prior_estimate(plan: Any, arm: str, loads: list[int | None]) -> tuple[float, float, str]:
    """(start s, bench s, basis) from the model's size and the workload (module doc)."""
    config = plan.configs[arm]
    size = model_bytes(config.model)
    known = size is not None
    size = size if size is not None else UNKNOWN_MODEL_BYTES
    b = plan.bench
    start = START_BASE_S + size / LOAD_BYTES_PER_S
    step = size / DECODE_BYTES_PER_S
    bench = 0.0
    for c in loads:
        width = c or 1
        prompts = b.num_prompts
        if b.prompts_per_concurrency and c is not None:
            prompts = min(b.num_prompts, max(b.min_prompts, b.prompts_per_concurrency * c))
        waves = math.ceil(prompts / width) + (b.warmup > 0)
        bench += waves * b.output_len * step
    what = f"model {size / 1e9:.1f} GB" if known else "model size unknown (2 GB assumed)"
    return start, bench, f"{what}, {b.output_len} output tokens, no earlier run"


def dry_run_table(plan: Any, arms: list[PlannedArm]):
    """A rich Table of the plan's starts, in order, with the total time estimate as its caption."""
    from rich.table import Table

    table = Table(title=f"Plan {plan.source}: {len(plan.arms)} arms x {plan.plan.repeats} repeats")
    for col in ("#", "arm", "repeat", "flags", "loads to run", "finished", "start s", "bench s"):
        table.add_column(col, justify="right" if col in ("#", "repeat") else "left")
    total, unknown = _estimate_s(arms)
    for i, a in enumerate(arms, start=1):
        config = plan.configs[a.arm]
        flags = " ".join(f"{k}={v}" for k, v in config.flags.items()) or "-"
        table.add_row(
            str(i),
            a.arm,
            str(a.repeat),
            flags,
            ", ".join(_load(c) for c in a.loads) or "none: not started",
            ", ".join(_load(c) for c in a.done) or "-",
            "-" if a.start_s is None else f"{a.start_s:.0f}",
            "-" if a.bench_s is None else f"{a.bench_s:.0f}",
        )
    starts = sum(1 for a in arms if a.loads)
    priors = sorted({a.basis for a in arms if a.loads and a.basis != "ledger"})
    source = (
        "this ledger's earlier runs"
        if not priors
        else ("" if all(a.basis != "ledger" for a in arms if a.loads) else "earlier runs and ")
        + "the model's size and the workload ("
        + "; ".join(priors)
        + ")"
    )
    caption = f"{starts} server starts; estimate {total / 60:.1f} min from {source}"
    if unknown:
        caption += f" ({unknown} start(s) with no earlier run to go by: not counted)"
    table.caption = caption
    return table


def _estimate_s(arms: list[PlannedArm]) -> tuple[float, int]:
    """The seconds the starts that run are estimated to take, and how many have no estimate."""
    total, unknown = 0.0, 0
    for a in arms:
        if a.loads:
            if a.start_s is None or a.bench_s is None:
                unknown += 1
            else:
                total += a.start_s + a.bench_s + STOP_S
    return total, unknown


def dry_run_json(plan: Any, arms: list[PlannedArm]) -> dict[str, Any]:
    """``run plan --dry-run --json``: what ``dry_run_table`` shows, as one object (``loads``:
    the concurrencies to run, null for the open loop; times in seconds, null when unknown)."""
    total, unknown = _estimate_s(arms)
    return {
        "plan": str(plan.source),
        "repeats": plan.plan.repeats,
        "arms": [
            {
                "arm": arm,
                "engine": plan.configs[arm].engine,
                "model": plan.configs[arm].model,
                "flags": dict(plan.configs[arm].flags),
            }
            for arm in plan.arms
        ],
        "starts": [
            {
                "arm": a.arm,
                "repeat": a.repeat,
                "loads": list(a.loads),
                "finished": list(a.done),
                "start_s": a.start_s,
                "bench_s": a.bench_s,
                "basis": a.basis,
            }
            for a in arms
        ],
        "server_starts": sum(1 for a in arms if a.loads),
        "estimate_s": total,
        "starts_without_estimate": unknown,
    }


def _load(c: int | None) -> str:
    return f"c={c}" if c is not None else "open loop"
