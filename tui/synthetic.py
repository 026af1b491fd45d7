"""A synthetic large ledger for the TUI's benchmark: the demo campaign scaled up.

``build_large(path, n_events)`` writes a ledger of about ``n_events`` events in
one session: candidates with triage, server runs, benchmarks at several
concurrencies, flag research and many notes (the bulk), so every view has work.
Kept out of tests' hot path: it takes a few seconds per 10,000 events.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.store import LedgerStore
from ledger.write import commands
from schemas.envelope import Actor, Host
from schemas.events import (
    BenchmarkCompleted,
    CandidateProposed,
    CandidateTriaged,
    Event,
    FlagResearched,
    NoteAdded,
    ServerStarted,
    SessionStarted,
)
from schemas.parts import BenchMetrics

SESSION = "synthetic"
_HOST = Host(
    gpu_name="NVIDIA H200",
    compute_capability="sm90",
    gpu_count=8,
    engine="sglang",
    engine_version="0.5.12",
)


def _events(n_events: int, rng: random.Random) -> list[Event]:
    actor = Actor(kind="runner", name="synthetic")
    out: list[Event] = [
        SessionStarted(title="synthetic large ledger", session_id=SESSION, actor=actor, host=_HOST)
    ]
    verdicts = [
        "effective",
        "no-op",
        "dead-code",
        "not-activated",
        "harmful",
        "no-measurable-change",
    ]
    statuses = ["accepted", "rejected", "deferred", "done"]
    configs = [f"cfg-{i}" for i in range(20)]
    for i in range(60):
        flag = f"synthetic-flag-{i}"
        cid = f"flag:{flag}"
        out.append(
            CandidateProposed(
                candidate_id=cid,
                kind="flag",
                title=f"Try --{flag}",
                flag=flag,
                priority=rng.choice(["high", "medium", "low"]),
                session_id=SESSION,
                actor=actor,
                host=_HOST,
            )
        )
        out.append(
            FlagResearched(
                flag=flag, verdict=rng.choice(verdicts), session_id=SESSION, actor=actor, host=_HOST
            )
        )
        if i % 3:
            out.append(
                CandidateTriaged(
                    candidate_id=cid,
                    status=rng.choice(statuses),
                    reason="synthetic",
                    session_id=SESSION,
                    actor=actor,
                    host=_HOST,
                )
            )
    for name in ["baseline", *configs]:
        out.append(
            ServerStarted(
                run_id=name,
                engine="sglang",
                config_name=name,
                flags={f"synthetic-flag-{rng.randrange(60)}": True},
                session_id=SESSION,
                actor=actor,
                host=_HOST,
            )
        )
        for c in (1, 4, 16, 64):
            for r in range(3):
                out.append(
                    BenchmarkCompleted(
                        run_id=f"{name}-c{c}-r{r}",
                        config_name=name,
                        is_baseline=name == "baseline",
                        concurrency=c,
                        repeat=r,
                        valid=True,
                        session_id=SESSION,
                        actor=actor,
                        host=_HOST,
                        metrics=BenchMetrics(
                            output_throughput=100 * c**0.8 * rng.uniform(0.95, 1.05),
                            median_ttft_ms=50 * rng.uniform(0.9, 1.1),
                            p99_ttft_ms=120 * rng.uniform(0.9, 1.1),
                            median_tpot_ms=8 * rng.uniform(0.95, 1.05),
                            p99_tpot_ms=15 * rng.uniform(0.9, 1.1),
                        ),
                    )
                )
    i = 0
    while len(out) < n_events:
        out.append(
            NoteAdded(text=f"synthetic note {i}", session_id=SESSION, actor=actor, host=_HOST)
        )
        i += 1
    return out


def build_large(
    path: str | Path,
    n_events: int = 100_000,
    *,
    clock: Callable[[], datetime] | None = None,
    seed: int = 1,
) -> LedgerStore:
    """Write a fresh synthetic ledger of ``n_events`` events at ``path`` (replacing it)."""
    path = Path(path)
    for stale in (path, path.with_name(path.name + ".wal")):
        stale.unlink(missing_ok=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    counter = iter(range(10**9))
    store = LedgerStore(path, clock=clock or (lambda: start + timedelta(seconds=next(counter))))
    store.init()
    events = _events(n_events, random.Random(seed))
    for lo in range(0, len(events), 5000):
        commands.restore(store, events[lo : lo + 5000])
    return store
