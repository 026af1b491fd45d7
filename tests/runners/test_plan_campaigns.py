"""What long campaigns need of plans: candidate grids expanded into named configurations, a plan
killed midway and resumed measuring only what is missing, and a dry run with its time estimate."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.errors import InvalidInput
from ledger.store import LedgerStore
from runners.plan import load_plan
from runners.results_json import SHOWN_METRICS

FAKE = Path(__file__).parents[1] / "fake_servers" / "openai_stream.py"
TUNELEDGER = Path(sys.executable).parent / "tuneledger"


def write_plan(tmp_path: Path) -> Path:
    """A baseline and one candidate of the fake OpenAI engine, 2 repeats at c=1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "plan.toml"
    path.write_text(
        f"""
[plan]
session = "resume"
baseline = "baseline"
repeats = 2
concurrency = [1]

[[candidates]]
config = "fast"
flag = "delay-ms"

[bench]
endpoint = "chat"
model = "fake"
input_len = 8
output_len = 6
num_prompts = 8
warmup = 1
seed = 1

[defaults]
engine = "transformers"
command = ["{sys.executable}", "{FAKE}"]
port = {port}
health_timeout_s = 30

[configs.baseline]
flags = {{ chunks = 6, delay-ms = 20 }}

[configs.fast]
base = "baseline"
flags = {{ delay-ms = 5 }}
"""
    )
    return path


GRID = """
[plan]
baseline = "baseline"

[[candidates]]
grid = { max-num-seqs = [1, 8, 32] }
hypothesis = "fewer running sequences, less throughput at c=8"

[[candidates]]
grid = { enforce-eager = [true], max-num-batched-tokens = [128, 512] }
base = "small"

[defaults]
engine = "vllm"
model = "/m"

[configs.baseline]
flags = { max-model-len = 512 }

[configs.small]
base = "baseline"
flags = { max-num-seqs = 4 }
"""


def test_a_grid_expands_into_named_configurations(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(GRID)
    plan = load_plan(path)
    assert plan.arms == [
        "baseline",
        "max-num-seqs-1",
        "max-num-seqs-8",
        "max-num-seqs-32",
        "enforce-eager-on_max-num-batched-tokens-128",
        "enforce-eager-on_max-num-batched-tokens-512",
    ]
    assert plan.configs["max-num-seqs-8"].flags == {"max-model-len": 512, "max-num-seqs": 8}
    one = plan.candidates[1]
    assert (one.flag, one.title, one.hypothesis) == (
        "max-num-seqs",
        "--max-num-seqs 8",
        "fewer running sequences, less throughput at c=8",
    )
    # several flags: configuration candidates, on their base
    two = plan.candidates[3]
    assert two.flag is None
    assert plan.configs[two.config].flags == {
        "max-model-len": 512,
        "max-num-seqs": 4,
        "enforce-eager": True,
        "max-num-batched-tokens": 128,
    }


@pytest.mark.parametrize(
    ("grid", "error"),
    [
        ("grid = {}", "grid must be a table"),
        ("grid = { max-num-seqs = [] }", "want a non-empty list"),
        ('grid = { max-num-seqs = [1] }\nbase = "nope"', "base: no configuration 'nope'"),
        ('grid = { max-num-seqs = [1] }\nconfig = "x"', "no config or flag"),
        ("grid = { max-num-seqs = [4] }", "'max-num-seqs-4' already exists"),
    ],
)
def test_bad_grids_are_refused_naming_the_file(tmp_path: Path, grid: str, error: str) -> None:
    text = f"""
[plan]
baseline = "baseline"
[[candidates]]
{grid}
[defaults]
engine = "vllm"
model = "/m"
[configs.baseline]
flags = {{}}
[configs.max-num-seqs-4]
flags = {{}}
"""
    path = tmp_path / "plan.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=f"{path}: candidates\\[0\\]: .*{error}"):
        load_plan(path)


@pytest.mark.slow  # real (fake-engine) servers, a real SIGKILL of the plan's process group
def test_a_killed_plan_resumes_measuring_only_what_is_missing(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    ledger = tmp_path / "l.duckdb"
    env = {**os.environ, "TUNELEDGER_LEDGER": str(ledger), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [str(TUNELEDGER), "run", "plan", str(plan), "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    store = LedgerStore(ledger)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                if ledger.exists() and len(store.read(types=["benchmark_completed"])) >= 2:
                    break
            except Exception:  # noqa: BLE001 - the file may exist before its tables are committed
                continue
        else:
            pytest.fail("no two runs recorded within 90 s")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the plan and its server: no chance to record anything
        proc.communicate(timeout=30)
    for started in store.read(types=["server_started"]):  # reap the orphaned fake servers
        try:
            os.killpg(started.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    before = store.read(types=["benchmark_completed"])
    assert 2 <= len(before) < 4 and not store.read(types=["comparison_completed"])
    keys_before = {(e.config_name, e.repeat) for e in before}

    dry = subprocess.run(
        [str(TUNELEDGER), "run", "plan", str(plan), "--dry-run", "--resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert "none: not started" in dry.stdout  # the finished arms
    assert f"{4 - len(keys_before)} server starts; estimate" in dry.stdout
    assert len(store.read(types=["benchmark_completed"])) == len(
        before
    )  # a dry run records nothing

    out = subprocess.run(
        [str(TUNELEDGER), "run", "plan", str(plan), "--no-progress", "--resume", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert f"resume: {len(before)} run(s) of this plan already in the ledger" in out.stderr
    # --json: the verdict table as one object on stdout (docs/cli.md: Output for programs)
    result = json.loads(out.stdout)
    assert set(result) == {"session_id", "verdicts", "findings", "missing", "not_compared", "runs"}
    assert result["missing"] == [] and result["runs"] == 4  # the resumed runs count too
    verdict = next(v for v in result["verdicts"] if v["metric"] == "output_throughput")
    assert verdict["config_name"] == "fast" and verdict["runs"] == verdict["baseline_runs"] == 2
    assert {v["metric"] for v in result["verdicts"]} <= set(SHOWN_METRICS)
    after = store.read(types=["benchmark_completed"])
    keys = [(e.config_name, e.repeat) for e in after if e.valid]
    assert sorted(keys) == sorted(
        [(arm, r) for arm in ("baseline", "fast") for r in range(2)]
    )  # every run once: the finished ones were not measured again
    comparisons = store.read(types=["comparison_completed"])
    thr = [c for c in comparisons if c.metric == "output_throughput"]
    assert len(thr) == 1 and thr[0].baseline_runs == 2 and thr[0].runs == 2
    assert verdict["event_id"] == str(thr[0].event_id)
    assert set(thr[0].benchmark_event_ids) == {e.event_id for e in after if e.valid}
    assert sys.executable  # the same interpreter ran every step
