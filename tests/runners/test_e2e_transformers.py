"""End to end on a CPU against a real server: `transformers serve` of a tiny random-weight Qwen3-MoE,
a plan with two real configurations (continuous batching off / on) at two concurrencies with
3 interleaved repeats, run through the real CLI; then the ledger is checked: server events,
benchmark events with samples, statistical comparisons feeding benchmark_deltas.

Needs torch and transformers[serving] (CI installs them; skipped without them, failed where every
test must run: tests/support/needs.py).
Offline: the model and tokenizer are built locally (tests/support/tiny_model.py), HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import needs  # noqa: E402 (first: the skips decide)

for _name in ("torch", "transformers", "fastapi", "uvicorn"):
    needs.module(_name, "the e2e extra: make")

from ledger.store import LedgerStore  # noqa: E402
from runners.plan import measured_flag_verdict  # noqa: E402
from schemas.vocab import COMPARISON_VERDICTS  # noqa: E402

#: Process-based on purpose (a real transformers server on the CPU): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
VERDICTS = set(COMPARISON_VERDICTS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen3-moe"))


def _plan(tmp_path: Path, model: Path) -> Path:
    # The KV cache of continuous batching is sized small: by default it sizes itself from host
    # memory and its first request then takes ~30 s on this CPU. Both arms carry the sizing
    # flags (ignored without --continuous-batching) so that the candidate differs by one flag.
    text = f"""
[plan]
session = "e2e-tiny-moe"
session_title = "e2e: transformers serve, continuous batching, tiny Qwen3-MoE on CPU"
baseline = "baseline"
repeats = 3
concurrency = [1, 4]
stop_wait_s = 3      # transformers serve with continuous batching does not exit on SIGINT

[[candidates]]
config = "continuous-batching"
flag = "continuous-batching"
hypothesis = "batching raises throughput at c=4"

[bench]
endpoint = "chat"
model = "{model}"
input_len = 16
output_len = 8
num_prompts = 32    # 8 x the highest concurrency: fewer fail the achieved-concurrency gate
warmup = 1
seed = 0
tokenizer = "{model}"

[defaults]
engine = "transformers"
model = "{model}"
port = {_free_port()}
health_timeout_s = 180

[configs.baseline]
flags = {{ device = "cpu", cb-num-blocks = 128, cb-max-batch-tokens = 512 }}

[configs.continuous-batching]
base = "baseline"
flags = {{ continuous-batching = true }}
"""
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def test_plan_against_transformers_serve(tmp_path: Path, tiny_model: Path) -> None:
    needs.program("transformers", BIN)
    ledger = tmp_path / "e2e.duckdb"
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TUNELEDGER_LEDGER": str(ledger),
        "COLUMNS": "200",
    }
    out = subprocess.run(
        [str(BIN / "tuneledger"), "run", "plan", str(_plan(tmp_path, tiny_model)), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(out.stdout)  # the verdict table (pytest -s shows it)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Plan verdicts" in out.stdout

    store = LedgerStore(ledger)
    runs = store.query_arrow(
        "SELECT config_name, status, engine FROM server_runs ORDER BY started_seq"
    ).to_pylist()
    assert [r["config_name"] for r in runs] == ["baseline", "continuous-batching"] * 3
    assert all(r["status"] == "stopped" and r["engine"] == "transformers" for r in runs)

    benches = store.query_arrow(
        "SELECT b.config_name, b.concurrency, b.repeat, b.valid, b.completed, b.output_throughput, "
        "b.median_ttft_ms, e.payload->'validity_notes' AS notes FROM benchmarks b JOIN events e USING (event_id) "
        "ORDER BY b.seq"
    ).to_pylist()
    assert len(benches) == 2 * 2 * 3
    assert all(
        b["completed"] == 32 and b["output_throughput"] > 0 and b["median_ttft_ms"] > 0
        for b in benches
    )
    # transformers serve rejects ignore_eos: noted on every run, and lengths are not gated on it
    assert all("ignore_eos not honoured" in b["notes"] for b in benches)
    # the gate is evaluated on every run; on a busy host a run can miss 0.9 c, and then every
    # comparison at that concurrency must say invalid (and only then)
    assert all(b["valid"] is not None for b in benches)
    invalid_loads = {b["concurrency"] for b in benches if not b["valid"]}
    samples = store.query_arrow(
        "SELECT count(*) AS n, count(*) FILTER (WHERE ok) AS ok FROM bench_samples"
    ).to_pylist()[0]
    assert samples == {"n": 12 * 32, "ok": 12 * 32}

    # transformers serve streams a few tokens per chunk on this CPU: where a run's
    # stream was coarse its TPOT/ITL are empty with the reason, and a metric no run measured is
    # never compared (it was "median TPOT 0.01 ms, +401.8%" before)
    coarse = [b for b in benches if "coarse streaming" in b["notes"]]
    tpots = store.query_arrow("SELECT median_tpot_ms, median_itl_ms FROM benchmarks").to_pylist()
    assert sum(t["median_tpot_ms"] is None and t["median_itl_ms"] is None for t in tpots) == len(
        coarse
    )
    comparisons = store.read(types=["comparison_completed"])
    compared = {(c.concurrency, c.metric) for c in comparisons}
    per_token = {"median_tpot_ms", "p99_tpot_ms", "median_itl_ms"}
    for load in (1, 4):
        if all(b["concurrency"] != load or b in coarse for b in benches):
            assert not {m for c, m in compared if c == load} & per_token
    assert len(comparisons) >= 2 * 6
    assert all(c.verdict in VERDICTS and c.baseline_runs == 3 and c.runs == 3 for c in comparisons)
    assert all((c.verdict == "invalid") == (c.concurrency in invalid_loads) for c in comparisons)
    deltas = store.query_arrow(
        "SELECT concurrency, verdict, change_pct, ci_low_pct, ci_high_pct FROM benchmark_deltas "
        "WHERE metric = 'output_throughput' AND verdict_rule LIKE 'statistical%' ORDER BY concurrency"
    ).to_pylist()
    assert [d["concurrency"] for d in deltas] == [1, 4]
    assert all(
        d["ci_low_pct"] <= d["change_pct"] <= d["ci_high_pct"]
        for d in deltas
        if d["concurrency"] not in invalid_loads
    )

    # the plan's measurement reaches flag_verdicts whatever it found (docs/comparison.md)
    expected = measured_flag_verdict([d["verdict"] for d in deltas])
    findings = store.query_arrow(
        "SELECT flag, verdict, basis, engine FROM flag_verdicts"
    ).to_pylist()
    assert findings == [
        {
            "flag": "continuous-batching",
            "verdict": expected,
            "basis": "measured",
            "engine": "transformers",
        }
    ]
