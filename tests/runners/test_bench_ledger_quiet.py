"""No ledger work of ours in the client's process while a timed run streams.

A kept-open ledger (``LedgerStore.kept_open``, what ``run bench`` and a plan record through)
has a watcher thread that wakes every 5 ms and, two seconds after the last append, catches the
projections up and checkpoints: in the middle of a run, in the process that reads the stream.
On the loaded 2-core machine that made our client read whole answers late, as bursts, where
vLLM's and sglang's clients (other processes) streamed (docs/vllm-cpu.md, "The client's own
ledger"). A real streaming server and a real ledger: the watcher must not be alive while a
timed request is in flight, and every run is still recorded.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from runners.bench.client import BenchTarget, RunIdentity, sweep
from runners.bench.workload import WorkloadSpec, build_workload

#: Process-based on purpose (a real server): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

FAKE_SERVER = Path(__file__).parents[1] / "fake_servers" / "openai_stream.py"
WATCHER = "ledger-hold-watch"  # ledger/store/connection.py's thread name


@pytest.fixture()
def paced_server():
    """8 chunks 40 ms apart: a request streams for about 0.3 s."""
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--chunks", "8", "--delay-ms", "40"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_kept_open_ledger_is_let_go_before_each_timed_run(
    paced_server: str, tmp_path: Path
) -> None:
    store = LedgerStore(tmp_path / "l.duckdb").kept_open()
    store.init()  # opens the kept connection: its watcher runs from here
    assert WATCHER in {t.name for t in threading.enumerate()}
    target = BenchTarget(
        url=paced_server,
        endpoint="chat",
        model="fake",
        workload=build_workload(WorkloadSpec(8, 8, 6, seed=1)),
    )
    seen: list[tuple[float, bool]] = []  # (perf_counter, watcher alive) while the sweep runs

    async def main() -> list:
        done = asyncio.Event()

        async def watch() -> None:
            while not done.is_set():
                alive = any(t.name == WATCHER and t.is_alive() for t in threading.enumerate())
                seen.append((time.perf_counter(), alive))
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        try:
            return await sweep(
                target,
                RunIdentity(config_name="baseline"),
                concurrencies=[2],
                repeats=range(2),
                warmup_requests=1,
                store=store,
                progress=False,
            )
        finally:
            done.set()
            await watcher

    try:
        points = asyncio.run(main())
    finally:
        store.close()
    assert len(points) == 2
    in_flight = [(r.start, r.start + r.latency) for p in points for r in p.run.results if r.ok]
    assert len(in_flight) == 12
    during = [alive for t, alive in seen if any(a <= t <= b for a, b in in_flight)]
    assert during, "no sample fell inside a timed request"
    assert not any(during)
    # and both runs are in the ledger (each append reopened it)
    rows = LedgerStore(tmp_path / "l.duckdb").query_arrow("SELECT count(*) n FROM benchmarks")
    assert rows.to_pylist() == [{"n": 2}]
