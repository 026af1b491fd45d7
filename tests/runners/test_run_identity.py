"""A run's identity (``runners.bench.identity.RunIdentity``) travels into its recorded event whole.

The value a caller builds (``run bench``, a plan, ``run spec``) is narrowed to one run, gated,
turned into ``benchmark_completed`` and appended to a real ledger; what is read back carries
every field of it.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from runners.bench.identity import RunIdentity, event_workload
from runners.bench.metrics import RequestResult
from runners.bench.record import benchmark_event, gate_run, record_run
from runners.bench.workload import WorkloadSpec, build_workload
from schemas import Host


def _results(n: int, output_tokens: int) -> list[RequestResult]:
    """``n`` requests that streamed ``output_tokens`` tokens one chunk each, two at a time."""
    return [
        RequestResult(
            ok=True,
            start=0.1 * (i // 2),
            ttft=0.01,
            latency=0.1,
            itl=[0.09 / (output_tokens - 1)] * (output_tokens - 1),
            prompt_tokens=8,
            output_tokens=output_tokens,
            chunks=output_tokens,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("concurrency", "request_rate", "load", "run_id_prefix"),
    [(2, None, "closed-loop", "cb-c2-rep1-"), (None, 2.5, "open-loop", "cb-rate2.5-rep1-")],
)
def test_identity_round_trips_into_the_recorded_event(
    store, concurrency, request_rate, load, run_id_prefix
) -> None:
    workload = build_workload(WorkloadSpec(8, 8, 4, seed=3, shared_prefix_len=2))
    host = Host(gpu_name="NVIDIA H200", compute_capability="sm90", gpu_count=1, hostname="h1")
    plan_wide = RunIdentity(
        config_name="cb",
        request_rate=request_rate,
        is_baseline=False,
        candidate_id="flag:continuous-batching",
        session_id="cb-trial",
        source="plans/cb.toml",
    )
    identity = (
        plan_wide.on_server("srv-1", host)
        .at(concurrency, 1)
        .with_workload(
            event_workload(
                workload.spec,
                dataset=workload.dataset,
                endpoint="chat",
                ignore_eos=True,
                request_rate=request_rate,
            )
        )
    )
    run = gate_run(_results(4, 8), 0.2, identity, workload, length_enforced=True)
    event = benchmark_event(identity, run)
    asyncio.run(record_run(store, event, run))

    [recorded] = store.read(types=["benchmark_completed"])
    assert recorded.event_id == event.event_id
    assert recorded.run_id.startswith(run_id_prefix)
    assert (
        recorded.config_name,
        recorded.concurrency,
        recorded.repeat,
        recorded.is_baseline,
        recorded.candidate_id,
        recorded.session_id,
        recorded.server_run_id,
        recorded.host,
        recorded.source,
        recorded.workload,
    ) == (
        "cb",
        concurrency,
        1,
        False,
        "flag:continuous-batching",
        "cb-trial",
        "srv-1",
        host,
        "plans/cb.toml",
        identity.workload,
    )
    assert recorded.workload is not None and recorded.workload.load == load
    assert recorded.workload.request_rate == request_rate
    assert recorded.workload.shared_prefix_len == 2 and recorded.workload.num_prompts == 4
    assert (recorded.valid, recorded.validity_notes) == (run.valid, run.notes)
    assert recorded.metrics == run.metrics and recorded.metrics.completed == 4
    assert recorded.tool == "tuneledger-bench" and recorded.actor.name == "bench"
    samples = store.query_arrow("SELECT count(*) AS n FROM bench_samples").to_pylist()
    assert samples == [{"n": 4}]


def test_identity_is_frozen_and_needs_a_workload_for_an_event() -> None:
    identity = RunIdentity("baseline", concurrency=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        identity.repeat = 2  # type: ignore[misc]
    workload = build_workload(WorkloadSpec(8, 8, 2))
    run = gate_run(_results(2, 8), 0.1, identity, workload, length_enforced=True)
    with pytest.raises(ValueError, match="no workload"):
        benchmark_event(identity, run)
