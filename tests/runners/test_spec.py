"""``tuneledger run spec`` against real processes: SGLang cannot run on these machines, so each
trial's server is tests/fake_servers/sglang_spec_server.py — a small real HTTP server started by
the real server runner (sglang adapter, ``command``) that replays SGLang's recorded
``/server_info`` body with ``avg_spec_accept_length``, prints ``Decode batch`` lines with
``accept len`` in SGLang's log format, and answers ``/generate`` with
``meta_info.spec_accept_length``. The ledger is a real DuckDB file."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from runners.server.runner import ServerRunner
from runners.spec import decode_log_accept, load_spec, run_spec

FAKE = Path(__file__).parents[1] / "fake_servers" / "sglang_spec_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_spec(tmp_path: Path) -> Path:
    text = f"""
[spec]
session = "spec-test"
baseline = "baseline"
repeats = 2
concurrency = [1]
stop_wait_s = 5

[[trials]]
name = "eagle-3-1-4"
algorithm = "EAGLE"
num_steps = 3
eagle_topk = 1
num_draft_tokens = 4
flags = {{ fake-accept = 3.0 }}

[[trials]]
name = "ngram-per-request"
algorithm = "prompt-lookup"
request_options = {{ generation_config = '{{"prompt_lookup_num_tokens": 10}}' }}

[bench]
endpoint = "chat"
model = "fake"
input_len = 8
output_len = 8
num_prompts = 6
warmup = 1
seed = 1

[defaults]
engine = "sglang"
model = "fake"
command = ["{sys.executable}", "{FAKE}"]
port = {free_port()}
health_timeout_s = 30

[configs.baseline]
flags = {{ delay-ms = 6 }}
"""
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_decode_batch_accept_series_in_sglangs_formats():
    lines = [
        "[2026-11-30 21:00:00 TP0] Decode batch, #running-req: 3, #token: 900, token usage: 0.02, accept len: 2.31, "
        "accept rate: 0.77, cuda graph: True, gen throughput (token/s): 310.22, #queue-req: 0",
        "[2026-11-30 21:00:01 TP0] Decode batch. #running-req: 3, #token: 930, token usage: 0.02, accept len: 1.90, "
        "cuda graph: True, gen throughput (token/s): 290.10, #queue-req: 0,",
        "[2026-11-30 21:00:02 TP0] Decode batch, #running-req: 3, #token: 960, token usage: 0.02, cuda graph: True, "
        "gen throughput (token/s): 120.00, #queue-req: 0",
    ]
    assert decode_log_accept(lines) == ([2.31, 1.90], [0.77])


@pytest.mark.slow  # real server processes restarted per trial
def test_spec_trials_restart_benchmark_and_record_accept_length(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    eagle = spec.plan.configs["eagle-3-1-4"]
    assert (
        eagle.flags["speculative-algorithm"] == "EAGLE"
        and eagle.flags["speculative-num-draft-tokens"] == 4
    )
    assert spec.request_options == {
        "ngram-per-request": {"generation_config": '{"prompt_lookup_num_tokens": 10}'}
    }
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    runner = ServerRunner(
        store, session_id="spec-test", poll_interval_s=0.1, sigint_wait_s=5, sigterm_wait_s=5
    )
    try:
        result, events = run_spec(spec, store, runner, progress=False)
    finally:
        runner.close(reason="test ended")
    # Interleaved and repeated like a plan: baseline, trial, trial per repeat, each a restart.
    starts = [e.config_name for e in store.read(types=["server_started"])]
    assert starts == ["baseline", "eagle-3-1-4", "ngram-per-request"] * 2
    by_name = {e.trial_id.split(":")[1]: e for e in events}
    ev = by_name["eagle-3-1-4"]
    assert (
        ev.accept_length == 3.0 and ev.accept_length_source == "server_info"
    )  # lifetime average, per start
    assert ev.accept_length_series and all(
        x == 3.0 for x in ev.accept_length_series
    )  # the log's windowed series
    assert ev.per_request_accept_length == 3.0  # /generate meta_info
    assert ev.accept_rate is not None and abs(ev.accept_rate - 2 / 3) < 0.01
    assert ev.runs == 2 and ev.concurrency == 1 and ev.output_throughput_change is not None
    assert ev.output_throughput_change > 0  # the fake streams 3x faster under speculation
    assert ev.verdict in ("effective", "unknown")
    assert ev.flags["speculative-eagle-topk"] == 1 and len(ev.benchmark_event_ids) == 2
    ngram = by_name["ngram-per-request"]
    # No server flag for this trial: it is the baseline's server with per-request options.
    assert "speculative-algorithm" in ngram.flags and ngram.request_options
    # `run spec --json` (and the MCP tool run_spec): the trials and verdicts as one object
    from runners.results_json import spec_json

    out = json.loads(json.dumps(spec_json(result, events, "spec-test")))
    assert [t["trial_id"] for t in out["trials"]] == [e.trial_id for e in events]
    eagle = next(t for t in out["trials"] if t["trial_id"].endswith("eagle-3-1-4"))
    assert eagle["accept_length"] == 3.0 and eagle["output_throughput_change_pct"] > 0
    assert out["session_id"] == "spec-test" and out["verdicts"] and out["missing"] == []
    rows = store.query_arrow(
        "SELECT trial_id, accept_length, accept_length_source, output_throughput_change_pct, "
        "verdict FROM spec_trials ORDER BY trial_id"
    ).to_pylist()
    assert [r["trial_id"] for r in rows] == ["spec-test:eagle-3-1-4", "spec-test:ngram-per-request"]
    assert rows[0]["accept_length"] == 3.0 and rows[0]["output_throughput_change_pct"] > 0
    assert json.loads(
        json.dumps(result.comparisons[0].model_dump(mode="json"))
    )  # comparisons recorded
    from ledger.export.markdown import render_markdown

    md = render_markdown(store, session_id="spec-test")
    assert (
        "## Speculative-decoding trials" in md
        and "| spec-test:eagle-3-1-4 | EAGLE | 3.00 (server_info) | 1 |" in md
    )
