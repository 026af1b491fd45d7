"""``make bench``'s scripts run (a path they used went stale for 169 commits and nothing saw it):
each at a tiny size, to its JSON. The figures are not looked at (speed is measured by the
scripts themselves, into docs/performance.md); that the scripts complete is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Process-based on purpose (the bench scripts start writers, CLI calls and servers).
pytestmark = pytest.mark.slow


def test_the_store_bench_runs_every_step_to_its_json(tmp_path: Path) -> None:
    out = tmp_path / "store.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_store.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["smoke"] is True
    assert set(results) >= {"stores", "cli_append", "import", "handoff"}
    assert list(results["stores"]) == ["tuneledger"]  # no peers in the smoke mode
    assert results["import"]["events"] == 2_000
    assert results["handoff"]["p50_ms"] >= 0
    assert "| tuneledger |" in done.stdout
    # each step's wall time is reported, so that a full run says where its minutes go
    assert list(results["step_s"]) == ["stores", "cli_append", "import", "handoff"]
    assert all(seconds >= 0 for seconds in results["step_s"].values())
    assert "wall time a step: stores" in done.stdout


def test_the_client_bench_runs_to_its_json() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_client.py")]
        + ["--concurrency", "2", "--requests", "20", "--rounds", "1", "--servers", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(done.stdout)
    assert row["concurrency"] == 2 and row["ours_req_s"] > 0 and row["aiohttp_req_s"] > 0
