"""A measured run to its recorded event: the validity gate, the ``benchmark_completed``, the append.

The three steps after ``runners.bench.client`` has measured a run, each alone: ``gate_run``
(summary metrics, the validity gate of ``runners.bench.metrics``, the notes a reader needs),
``benchmark_event`` (the run's identity, ``runners.bench.identity.RunIdentity``, and its result
as one event) and ``record_run`` (the event and its per-request samples in one transaction);
``SweepPoint`` holds a finished run and its event, ``format_point`` its console line.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ledger.write import commands
from runners.bench.identity import RunIdentity
from runners.bench.metrics import (
    RequestResult,
    mask_coarse_streaming,
    samples_table,
    summarize,
    validity,
)
from runners.bench.workload import BuiltWorkload
from schemas import Actor
from schemas.events import BenchmarkCompleted
from schemas.parts import BenchMetrics

TOOL_NAME = "tuneledger-bench"


@dataclass
class RunResult:
    """One timed run: per-request results, duration in s, summary metrics, validity gate."""

    results: list[RequestResult]
    duration_s: float
    metrics: BenchMetrics
    valid: bool
    notes: list[str] = field(default_factory=list)


@dataclass
class SweepPoint:
    """One finished run of a sweep and its event (not yet appended when ``store`` was None)."""

    concurrency: int | None
    request_rate: float | None
    repeat: int
    run: RunResult
    event: BenchmarkCompleted


def gate_run(
    results: list[RequestResult],
    duration_s: float,
    identity: RunIdentity,
    workload: BuiltWorkload,
    *,
    length_enforced: bool,
    server_metrics: dict[str, float] | None = None,
) -> RunResult:
    """Summarize one timed run and pass it through the validity gate.

    The achieved-concurrency check applies to a closed loop only; ``length_enforced``: the
    server was asked for exact output lengths (else they are not gated, and a note says so).
    A stream too coarse for TPOT/ITL has those masked (``mask_coarse_streaming``), and
    approximate prompt lengths are noted.
    """
    metrics = summarize(results, duration_s)
    valid, notes = validity(
        results,
        metrics,
        concurrency=identity.concurrency if identity.request_rate is None else None,
        output_len=workload.spec.output_len,
        length_enforced=length_enforced,
    )
    speculative = (server_metrics or {}).get("vllm:spec_decode_num_accepted_tokens", 0) > 0
    metrics, coarse = mask_coarse_streaming(results, metrics, speculative=speculative)
    if coarse:
        notes.append(coarse)
    if not workload.exact_length:
        notes.append(
            "prompt lengths approximate: "
            + (
                "the tokenizer's decode/encode did not round-trip"
                if workload.spec.tokenizer
                else "no tokenizer, random words of ~1 token each"
            )
        )
    return RunResult(results, duration_s, metrics, valid, notes)


def benchmark_event(
    identity: RunIdentity,
    run: RunResult,
    *,
    server_metrics: dict[str, Any] | None = None,
    notes: str | None = None,
    actor: Actor | None = None,
) -> BenchmarkCompleted:
    """The ``benchmark_completed`` event of one run: its identity (workload included) and result.

    ``server_metrics``: the server's own counters over the run (``runners.bench.server_metrics``);
    an engine's speculative ``spec_accept_length`` among them becomes the run's ``accept_length``.

    Raises:
        ValueError: the identity carries no workload (``RunIdentity.with_workload``).
    """
    if identity.workload is None:
        raise ValueError(f"run {identity.config_name} rep {identity.repeat}: no workload recorded")
    event = BenchmarkCompleted(
        run_id=identity.new_run_id(),
        config_name=identity.config_name,
        is_baseline=identity.is_baseline,
        server_run_id=identity.server_run_id,
        tool=TOOL_NAME,
        workload=identity.workload,
        concurrency=identity.concurrency,
        repeat=identity.repeat,
        metrics=run.metrics,
        valid=run.valid,
        validity_notes=run.notes,
        notes=notes,
        candidate_id=identity.candidate_id,
        source=identity.source,
        session_id=identity.session_id,
        host=identity.host,
        actor=actor or Actor(kind="runner", name="bench"),
    )
    if server_metrics:
        update: dict[str, Any] = {"server_metrics": server_metrics}
        if "spec_accept_length" in server_metrics:
            # the engine's own count over this run (vLLM: 1 + accepted / drafts)
            update["metrics"] = event.metrics.model_copy(
                update={"accept_length": server_metrics["spec_accept_length"]}
            )
        event = event.model_copy(update=update)
    return event


async def record_run(store: Any, event: BenchmarkCompleted, run: RunResult) -> None:
    """Append the run's event and its per-request samples in one transaction.

    Off the event loop: under load an append can wait on the ledger's lock.
    """
    await asyncio.to_thread(commands.record_benchmark, store, event, samples_table(run.results))


def format_point(point: SweepPoint) -> str:
    """One line per run for the console: throughput, median TTFT/TPOT, validity."""
    m = point.run.metrics
    load = (
        f"c={point.concurrency}" if point.request_rate is None else f"rate={point.request_rate:g}/s"
    )

    def f(x: float | None, spec: str = ".1f") -> str:
        return "-" if x is None else format(x, spec)

    gate = "valid" if point.run.valid else "INVALID: " + "; ".join(point.run.notes)
    return (
        f"{point.event.config_name} {load} rep {point.repeat}: {f(m.output_throughput)} tok/s out, "
        f"{f(m.request_throughput, '.2f')} req/s, median TTFT {f(m.median_ttft_ms)} ms, "
        f"median TPOT {f(m.median_tpot_ms, '.2f')} ms, concurrency {f(m.achieved_concurrency, '.2f')} [{gate}]"
    )
