"""bench/vllm_client_peer.py's parts that decide what is compared (docs/vllm-cpu.md, "Our client
and its peers, side by side"): the interleaving order, and the arm that runs our CLI after a CPU
burn (the process-age lead) is the real CLI behind a busy loop."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bench.vllm_client_peer import _BURN, round_order

ROOT = Path(__file__).resolve().parents[2]


def test_the_rounds_alternate_so_every_client_sits_at_every_place_alike() -> None:
    names = ["ours", "vllm", "sglang"]
    rounds = [round_order(names, r) for r in range(4)]
    assert rounds[0] == ["ours", "vllm", "sglang"]
    assert rounds[1] == ["sglang", "vllm", "ours"]
    assert rounds[2] == rounds[0] and rounds[3] == rounds[1]
    # the mean position over an even number of rounds is the same for every client
    places = {n: sum(r.index(n) for r in rounds) / len(rounds) for n in names}
    assert set(places.values()) == {1.0}
    assert names == ["ours", "vllm", "sglang"]  # the caller's list is left as it was


@pytest.mark.slow  # a fresh interpreter (CONTRIBUTING.md: process tests are slow)
def test_the_burnt_arm_spins_first_then_runs_the_cli() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", _BURN, "0.3", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert out.returncode == 0, out.stderr
    assert "tuneledger" in out.stdout.lower()
    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    assert used >= 0.3
