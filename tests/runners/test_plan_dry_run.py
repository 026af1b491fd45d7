"""``run plan --dry-run`` on a fresh ledger (it said "0.0 min" for a 30-start plan): the
estimate comes from the model's size and the workload, and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.plan_file import load_plan
from runners.plan_resume import (
    DECODE_BYTES_PER_S,
    LOAD_BYTES_PER_S,
    START_BASE_S,
    STOP_S,
    estimate,
)
from tests.support.cli_inprocess import invoke

PLAN = """
[plan]
repeats = 3
concurrency = [1, 4]
[[candidates]]
config = "cb"
[bench]
output_len = 16
num_prompts = 8
[configs.baseline]
engine = "vllm"
model = "model"
[configs.cb]
engine = "vllm"
model = "model"
flags = { max-num-seqs = 8 }
"""


def _plan(tmp_path: Path) -> Path:
    weights = tmp_path / "model" / "model.safetensors"
    weights.parent.mkdir()
    with weights.open("wb") as f:  # a sparse 4 GB file: its size is what counts
        f.truncate(4 * 10**9)
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    return path


def test_a_fresh_ledger_estimates_from_the_model_size_and_workload(tmp_path: Path) -> None:
    path = _plan(tmp_path)
    plan = load_plan(path)
    arms = estimate(None, plan)
    assert len(arms) == 6 and {a.basis for a in arms} == {
        "model 4.0 GB, 16 output tokens, no earlier run"
    }
    step = 4e9 / DECODE_BYTES_PER_S
    # c=1: 8 waves + a warmup, c=4: 2 waves + a warmup, 16 steps each
    assert arms[0].bench_s == pytest.approx((9 + 3) * 16 * step)
    assert arms[0].start_s == pytest.approx(START_BASE_S + 4e9 / LOAD_BYTES_PER_S)
    ledger = tmp_path / "l.duckdb"
    out = invoke(["--ledger", ledger, "run", "plan", path, "--dry-run", "--json"])
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    per_start = arms[0].start_s + arms[0].bench_s + STOP_S
    assert (
        data["estimate_s"] == pytest.approx(6 * per_start) and data["starts_without_estimate"] == 0
    )
    assert data["starts"][0]["basis"].startswith("model 4.0 GB")
    text = invoke(["--ledger", ledger, "run", "plan", path, "--dry-run"])
    assert "from the model's size and the workload (model 4.0 GB" in text.stdout
    assert f"estimate {6 * per_start / 60:.1f} min" in text.stdout
