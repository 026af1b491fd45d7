"""Importers of the field's other tools, on every real fixture with values asserted:
vLLM bench serve and nightly results, vLLM-tuned MoE configs, vLLM server logs, GuideLLM
(0.3 report and a real 0.8.1 run), llmperf, AIPerf (a real 0.13.0 run), sglang repository
scripts; the registry; refusals naming line and field; the CLI batch import."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest

from ledger.engines.identify import LOOKED_FOR
from ledger.errors import InvalidInput
from ledger.importers import import_file, registered_importers
from ledger.store import LedgerStore
from schemas import (
    BenchmarkCompleted,
    FindingRecorded,
    MoeConfigRecorded,
    ServerFailed,
    ServerReady,
    ServerStarted,
    StartupFacts,
    parse_event,
)
from tests.support.cli_inprocess import invoke
from tests.support.other_tools import (
    AIPERF_RUN,
    CASES,
    GUIDELLM_RUN,
    IMPORTABLE,
    MOE_CASE,
    MOE_NAME,
    NOT_IMPORTABLE,
    OTHER,
    SHARED,
    VLLM_LOG,
    VLLM_RESULT,
)


def _one(path: Path, **kwargs):
    result = import_file(path, **kwargs)
    return result, [e for e in result.events if isinstance(e, BenchmarkCompleted)]


# --- every fixture ---------------------------------------------------------------------


def test_fixture_lists_are_complete() -> None:
    every = {
        p for p in [*OTHER.rglob("*"), *CASES.rglob("*")] if p.is_file() and p.name != "MANIFEST.md"
    }
    assert every == {p for p, _, _ in IMPORTABLE} | set(NOT_IMPORTABLE)


@pytest.mark.parametrize(
    ("path", "kind", "count"), IMPORTABLE, ids=lambda x: x.name if isinstance(x, Path) else str(x)
)
def test_every_other_tool_fixture_imports(path: Path, kind: str, count: int) -> None:
    first = import_file(path, session_id="s1")
    again = import_file(path, session_id="s1")
    assert first.kind == kind
    assert len(first.events) == count
    assert [e.event_id for e in first.events] == [e.event_id for e in again.events]
    assert len({e.event_id for e in first.events}) == len(first.events)
    for event in first.events:
        assert event.source and event.source.startswith(path.name)
        assert event.session_id == "s1"
        assert parse_event(event.model_dump(mode="json")) == event
        if isinstance(event, BenchmarkCompleted):
            assert event.tool and event.tool != "sglang.bench_serving"
    for event_id, table in first.samples.items():
        assert event_id in {e.event_id for e in first.events} and table.num_rows > 0


@pytest.mark.parametrize("path", NOT_IMPORTABLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_other_files_are_refused_naming_the_kinds_tried(path: Path) -> None:
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    message = str(exc.value)
    assert "\n" not in message
    tried = (
        f"{path}: not a known format (tried: {', '.join(i.kind for i in registered_importers())})"
    )
    assert message in (tried, f"{tried}; no engine log line in it (looked for {LOOKED_FOR})")


def test_registry_kinds_are_unique_and_described() -> None:
    importers = registered_importers()
    kinds = [i.kind for i in importers]
    assert len(kinds) == len(set(kinds))
    assert all(i.description for i in importers)
    assert {
        "vllm-bench-serve",
        "guidellm-benchmarks",
        "llmperf-summary",
        "aiperf-json",
        "vllm-server-log",
        "vllm-moe-config",
    } <= set(kinds)


# --- vLLM bench serve ------------------------------------------------------------------


def test_vllm_bench_serve_result_is_not_taken_for_sglang() -> None:
    """The fault of the issue: this file was imported as sglang.bench_serving with E2E and total throughput empty."""
    result, (event,) = _one(
        VLLM_RESULT / "openai-chat-infqps-concurrency10-DeepSeek-V4-Flash-20260425-101512.json"
    )
    assert result.kind == "vllm-bench-serve" and event.tool == "vllm.bench_serve"
    m = event.metrics
    assert (
        event.concurrency == 10
        and event.workload.load == "closed-loop"
        and event.workload.request_rate is None
    )
    assert (m.completed, m.failed, m.total_input_tokens, m.total_output_tokens) == (
        100,
        0,
        12800,
        12800,
    )
    assert (
        m.output_throughput == 93.08
        and m.total_throughput == 186.15
        and m.request_throughput == 0.7272
    )
    assert m.median_ttft_ms == 3386.33 and m.median_tpot_ms == 78.96 and m.p99_itl_ms == 160.4
    assert (
        m.mean_e2e_latency_ms == 13750.72
        and m.median_e2e_latency_ms == 13410.05
        and m.p99_e2e_latency_ms == 19120.6
    )
    assert m.max_concurrent_requests == 20 and m.max_output_tokens_per_s == 130.0
    assert m.duration_s == 137.52 and m.input_throughput == pytest.approx(12800 / 137.52)
    assert m.achieved_concurrency == pytest.approx(13750.72 * 100 / 1000 / 137.52)
    assert event.valid is True


def test_vllm_minimal_result() -> None:
    result, (event,) = _one(VLLM_RESULT / "min_vllm_result.json")
    assert result.kind == "vllm-bench-serve"
    m = event.metrics
    assert (
        m.total_throughput == 186.15
        and m.mean_e2e_latency_ms == 13750.72
        and m.median_e2e_latency_ms == 13410.05
    )


def test_vllm_detailed_result_keeps_samples_and_other_percentiles(tmp_path: Path) -> None:
    raw = json.loads(
        (
            VLLM_RESULT / "openai-chat-infqps-concurrency10-DeepSeek-V4-Flash-20260425-101512.json"
        ).read_text()
    )
    raw.update(
        {
            "p50_ttft_ms": 3380.0,
            "p99.9_ttft_ms": 7200.0,
            "request_goodput": 0.5,
            "ttfts": [0.1, 0.2, 0.3],
            "itls": [[0.01, 0.02], [0.03], []],
            "input_lens": [4, 4, 4],
            "output_lens": [3, 2, 0],
            "errors": ["", "", "timeout"],
        }
    )
    path = tmp_path / "detailed.json"
    path.write_text(json.dumps(raw))
    result, (event,) = _one(path)
    table = result.samples[event.event_id]
    assert table.column("ok").to_pylist() == [True, True, False]
    assert table.column("ttft_ms").to_pylist()[:2] == pytest.approx([100.0, 200.0])
    assert (
        event.metrics.failed == 1 and event.valid is False and "timeout" in event.validity_notes[0]
    )
    assert event.tool_metrics == {
        "p50_ttft_ms": 3380.0,
        "p99.9_ttft_ms": 7200.0,
        "request_goodput": 0.5,
    }


def test_vllm_append_result_jsonl(tmp_path: Path) -> None:
    line = (VLLM_RESULT / "min_vllm_result.json").read_text().strip()
    other = json.loads(line) | {"max_concurrency": 20}
    path = tmp_path / "appended.jsonl"
    path.write_text(line + "\n" + json.dumps(other) + "\n")
    result, events = _one(path)
    assert result.kind == "vllm-bench-serve" and [e.concurrency for e in events] == [10, 20]
    assert [e.source for e in events] == ["appended.jsonl:1", "appended.jsonl:2"]


def test_vllm_append_result_per_request_latencies_are_used(tmp_path: Path) -> None:
    """vLLM's --save-detailed lines keep each request's own E2E (``latencies``,
    seconds) while the summary has no E2E statistics: E2E and TPOT come from them (not TTFT +
    the ITL sum, which misses the tail after the last chunk)."""
    raw = json.loads(
        (Path(__file__).parents[1] / "fixtures/other_tools/vllm_run/vllm_short.json").read_text()
    )
    assert "median_e2el_ms" not in raw  # the default --percentile-metrics: ttft,tpot,itl
    # a 5 ms tail after the last chunk (the stream's end), which TTFT + sum(ITL) cannot see
    raw["latencies"] = [x + 0.005 for x in raw["latencies"]]
    path = tmp_path / "appended.jsonl"
    path.write_text(json.dumps(raw) + "\n" + json.dumps(raw | {"max_concurrency": 4}) + "\n")
    result, events = _one(path)
    assert len(events) == 2
    ok = [i for i, e in enumerate(raw["errors"]) if not e]
    e2e = [raw["latencies"][i] * 1000 for i in ok]
    tpots = [
        (raw["latencies"][i] - raw["ttfts"][i]) * 1000 / (raw["output_lens"][i] - 1)
        if raw["output_lens"][i] > 1
        else None
        for i in ok
    ]
    m = events[0].metrics
    assert m.median_e2e_latency_ms == pytest.approx(float(np.median(e2e)))
    assert m.mean_e2e_latency_ms == pytest.approx(statistics.mean(e2e))
    samples = result.samples[events[0].event_id].to_pylist()
    assert [r["e2e_ms"] for r in samples if r["ok"]] == pytest.approx(e2e)
    assert [r["tpot_ms"] for r in samples if r["ok"]] == [
        pytest.approx(t) if t is not None else None for t in tpots
    ]


def test_vllm_seed_from_its_metadata(tmp_path: Path) -> None:
    """vLLM's result keeps no seed; ``--metadata seed=N`` (which `run bench --tool vllm` passes)
    writes it as a string key: each line's workload records its own seed."""
    line = json.loads((VLLM_RESULT / "min_vllm_result.json").read_text())
    path = tmp_path / "seeds.jsonl"
    path.write_text(
        json.dumps(line | {"seed": "0"}) + "\n" + json.dumps(line | {"seed": "1"}) + "\n"
    )
    _, events = _one(path)
    assert [e.workload.seed for e in events] == [0, 1]
    path.write_text(json.dumps(line | {"seed": "abc"}) + "\n")
    with pytest.raises(InvalidInput, match=r"seeds.jsonl:1: field 'seed': expected an integer"):
        import_file(path)


def test_vllm_result_breaking_its_rules_names_line_and_field(tmp_path: Path) -> None:
    raw = json.loads((VLLM_RESULT / "min_vllm_result.json").read_text())
    raw["mean_e2el_ms"] = "slow"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert str(exc.value) == f"{path}:1: field 'mean_e2el_ms': expected a number, got \"slow\""


def test_vllm_nightly_rows() -> None:
    result, events = _one(SHARED / "vllm" / "2024-08-23_18-47-20_vllm_055_nightly_results.json")
    first = events[0]
    assert (
        first.config_name == "vllm_055_llama8B_tp1_sharegpt_qps_2"
        and first.tool == "vllm.nightly_benchmarks"
    )
    assert first.workload.request_rate == 2.0 and first.workload.dataset == "sharegpt"
    assert first.metrics.completed == 500 and first.metrics.mean_ttft_ms == pytest.approx(
        59.795693818479776
    )
    assert first.metrics.output_throughput == pytest.approx(410.20790797844614)
    assert first.host.gpu_name == "A100-SXM4-80GB" and first.host.compute_capability == "sm80"
    assert (first.host.gpu_count, first.host.engine, first.host.engine_version) == (
        1,
        "vllm",
        "0.5.5",
    )
    inf = next(e for e in events if e.config_name == "vllm_055_llama8B_tp1_sharegpt_qps_inf")
    assert inf.workload.request_rate is None and inf.metrics.mean_ttft_ms == pytest.approx(
        6800.77205661498
    )
    assert {e.host.gpu_count for e in events} >= {1, 4}


# --- MoE configs from vLLM's tuner --------------------------------------------------------


def test_vllm_tuned_moe_config_with_triton_version_key() -> None:
    result = import_file(MOE_CASE / MOE_NAME)
    (event,) = result.events
    assert result.kind == "vllm-moe-config" and isinstance(event, MoeConfigRecorded)
    assert (event.E, event.N, event.dtype, event.block_shape) == (256, 512, "fp8_w8a8", [128, 128])
    assert event.host.compute_capability == "sm120" and event.triton_version == "3.6.0"
    assert len(event.configs) == 18 and "triton_version" not in event.configs
    assert event.configs["1"] == {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3,
    }


def test_same_config_without_the_key() -> None:
    (event,) = import_file(MOE_CASE / "no_version_key" / MOE_NAME).events
    assert (event.E, event.N, event.block_shape, len(event.configs), event.triton_version) == (
        256,
        512,
        [128, 128],
        18,
        None,
    )


def test_moe_config_with_a_bad_triton_version_names_line_and_field(tmp_path: Path) -> None:
    text = (
        (MOE_CASE / MOE_NAME)
        .read_text()
        .replace('"triton_version": "3.6.0"', '"triton_version": 3.6')
    )
    path = tmp_path / MOE_NAME
    path.write_text(text)
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert (
        str(exc.value)
        == f"{path}:2: field 'triton_version': expected a version string such as \"3.6.0\", got 3.6"
    )


# --- vLLM server logs ---------------------------------------------------------------------


def test_vllm_log_default_moe_config_and_kv_capacity() -> None:
    result = import_file(VLLM_LOG)
    started, ready, finding = result.events
    assert isinstance(started, ServerStarted) and started.engine == "vllm"
    assert started.model == "/models/Qwen3.6-35B-A3B-FP8" and started.pid == 2102
    assert started.flags == {
        "max-model-len": 65536,
        "gpu-memory-utilization": 0.9,
        "tensor-parallel-size": 2,
    }
    assert isinstance(ready, ServerReady) and ready.source == "vllm_server.log:7"
    assert (
        ready.startup.kv_cache_tokens == 1_205_376
        and ready.startup.max_total_num_tokens == 1_205_376
    )
    assert ready.startup.context_len == 65536 and ready.startup.weight_load_s == pytest.approx(
        61.102193
    )
    assert ready.startup.moe_kernel_config == "default"
    assert (
        isinstance(finding, FindingRecorded)
        and finding.kind == "default-moe-config"
        and finding.engine == "vllm"
    )
    assert (
        "E=256,N=256" in finding.message
        and "dtype=fp8_w8a8" in finding.message
        and "block_shape=[128,128]" in finding.message
    )
    assert finding.host.compute_capability == "sm120" and finding.host.gpu_count == 2
    assert (
        finding.source == "vllm_server.log:3"
    )  # the first rank's warning; the second rank's repeat is one finding


V1_CRASH_LOG = """\
(APIServer pid=7) INFO 07-25 13:41:40 [api_server.py:1805] vLLM API server version 0.25.1
(APIServer pid=7) INFO 07-25 13:41:40 [utils.py:326] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', 'max_num_seqs': 512, 'enable_chunked_prefill': True, 'kv_cache_dtype': 'fp8'}
(APIServer pid=7) WARNING 07-25 13:41:41 [arg_utils.py:1700] --kv-cache-dtype fp8 is not supported on this GPU; falling back to auto
(EngineCore pid=9) INFO 07-25 13:41:51 [core.py:114] Initializing a V1 LLM engine (v0.25.1) with config: model='Qwen/Qwen3-8B', compilation_config={"level":3,"cudagraph_capture_sizes":[4,2,1,8],"max_capture_size":8}
(EngineCore pid=9) INFO 07-25 13:41:52 [cuda.py:482] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER'].
(EngineCore pid=9) INFO 07-25 13:42:03 [kv_cache_utils.py:1087] GPU KV cache size: 100,000 tokens
(EngineCore pid=9) ERROR 07-25 13:42:04 [core.py:700] EngineCore failed to start.
(EngineCore pid=9) Traceback (most recent call last):
(EngineCore pid=9)   File "/vllm/v1/engine/core.py", line 691, in run_engine_core
(EngineCore pid=9) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

V0_LOG = """\
INFO 08-23 18:47:20 api_server.py:212] vLLM API server version 0.5.5
INFO 08-23 18:47:20 api_server.py:213] args: Namespace(host=None, port=8000, model='meta-llama/Meta-Llama-3-8B', max_num_seqs=256, block_size=16, tensor_parallel_size=1, enforce_eager=True)
INFO 08-23 18:47:25 llm_engine.py:184] Initializing an LLM engine (v0.5.5) with config: model='meta-llama/Meta-Llama-3-8B'
INFO 08-23 18:47:30 selector.py:142] Using Flash Attention backend.
INFO 08-23 18:47:40 gpu_executor.py:122] # GPU blocks: 2000, # CPU blocks: 2048
INFO 08-23 18:47:50 api_server.py:300] Starting vLLM API server on http://0.0.0.0:8000
"""


def test_vllm_v1_log_crash_root_cause_override_and_startup_facts(tmp_path: Path) -> None:
    path = tmp_path / "v1.log"
    path.write_text(V1_CRASH_LOG)
    result = import_file(path)
    assert result.kind == "vllm-server-log"
    by_type = {type(e).__name__: e for e in result.events}
    failed = by_type["ServerFailed"]
    assert isinstance(failed, ServerFailed) and failed.cause == "out-of-memory"
    assert (
        failed.message.startswith("torch.OutOfMemoryError: CUDA out of memory")
        and failed.source == "v1.log:10"
    )
    assert "ServerReady" not in by_type  # it crashed before it was ready
    assert failed.host.engine_version == "0.25.1"
    assert (
        failed.startup is not None and failed.startup.kv_cache_tokens == 100_000
    )  # what it showed before dying
    findings = [e for e in result.events if isinstance(e, FindingRecorded)]
    (override,) = [f for f in findings if f.kind == "flag-not-in-effect"]
    assert (
        override.flag == "kv-cache-dtype"
        and override.verdict == "not-activated"
        and override.source == "v1.log:3"
    )
    assert override.engine == "vllm" and override.engine_version == "0.25.1"


def test_vllm_v0_log_namespace_args_blocks_and_capacity_finding(tmp_path: Path) -> None:
    path = tmp_path / "v0.log"
    path.write_text(V0_LOG)
    previous = StartupFacts(max_running_requests=512, max_total_num_tokens=64000)
    result = import_file(path, previous_startup=previous)
    started, ready, *findings = result.events
    assert (
        started.port == 8000
        and started.flags["max-num-seqs"] == 256
        and started.host.engine_version == "0.5.5"
    )
    assert ready.startup.attention_backend == "Flash Attention"
    assert ready.startup.kv_cache_tokens == 2000 * 16 and ready.startup.max_running_requests == 256
    assert ready.startup.cuda_graph_bs == []  # enforce_eager: no CUDA graph
    assert sorted(f.message.split(" ")[0] for f in findings if f.kind == "capacity-reduced") == [
        "max_running_requests",
        "max_total_num_tokens",
    ]


def test_v1_log_capture_sizes(tmp_path: Path) -> None:
    path = tmp_path / "v1ok.log"
    path.write_text(
        "\n".join(V1_CRASH_LOG.splitlines()[:6])
        + "\n(APIServer pid=7) INFO 07-25 13:42:20 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
    )
    ready = next(e for e in import_file(path).events if isinstance(e, ServerReady))
    assert (
        ready.startup.cuda_graph_bs == [1, 2, 4, 8]
        and ready.startup.attention_backend == "FLASH_ATTN"
    )
    assert ready.startup.max_running_requests == 512 and ready.startup.kv_cache_tokens == 100_000


# --- GuideLLM -----------------------------------------------------------------------------


def test_guidellm_03_json_and_yaml_agree() -> None:
    (json_event,) = _one(SHARED / "guidellm" / "benchmarks_stripped.json")[1]
    (yaml_event,) = _one(SHARED / "guidellm" / "benchmarks_stripped.yaml")[1]
    assert (
        json_event.metrics == yaml_event.metrics
        and json_event.tool_metrics == yaml_event.tool_metrics
    )
    m = json_event.metrics
    assert (
        json_event.concurrency == 1
        and json_event.workload.input_len == 256
        and json_event.workload.output_len == 128
    )
    assert (m.completed, m.failed, m.total_output_tokens) == (46, 0, 5888)
    assert m.output_throughput == pytest.approx(5888 / 29.997201442718506)
    assert m.request_throughput == pytest.approx(46 / 29.997201442718506)
    assert m.mean_ttft_ms == pytest.approx(16.792535781860348) and m.p99_ttft_ms == pytest.approx(
        21.281957626342773
    )
    assert m.mean_e2e_latency_ms == pytest.approx(644.4743664368339)
    # GuideLLM 0.3's per-request ITL is our TPOT, but 0.3 keeps no chunk counts to tell the
    # streaming granularity (docs/importers.md): not measurable, the tool's figure kept aside
    assert m.mean_tpot_ms is None
    assert json_event.tool_metrics["mean_tpot_ms"] == pytest.approx(4.941609043733832)
    assert json_event.tool_metrics["time_per_output_token_ms_mean"] == pytest.approx(
        4.90300272307966
    )
    assert json_event.tool_metrics["output_tokens_per_second_mean"] == pytest.approx(
        198.13346751788123
    )
    assert json_event.tool_metrics["incomplete_requests"] == 1
    assert m.mean_itl_ms is None and json_event.metric_notes


def test_guidellm_sampled_request_in_bench_samples() -> None:
    result, (event,) = _one(SHARED / "guidellm" / "benchmarks_stripped.json")
    (row,) = result.samples[event.event_id].to_pylist()
    assert row["ttft_ms"] == pytest.approx(21.281957626342773) and row["e2e_ms"] == pytest.approx(
        689.1846656799316
    )
    assert row["tpot_ms"] == pytest.approx((689.1846656799316 - 21.281957626342773) / 127)
    assert (row["prompt_tokens"], row["output_tokens"]) == (257, 128)


def test_guidellm_08_real_run() -> None:
    """Produced by the real GuideLLM 0.8.1 against transformers serve (tests/fixtures/MANIFEST.md)."""
    raw = json.loads((GUIDELLM_RUN / "benchmarks.json").read_text())
    result, events = _one(GUIDELLM_RUN / "benchmarks.json")
    assert [e.concurrency for e in events] == [1, 4] and all(
        e.tool_version == "0.8.1" for e in events
    )
    for event, bench in zip(events, raw["benchmarks"], strict=True):
        requests = bench["requests"]["successful"]
        ttfts = [r["time_to_first_token_ms"] for r in requests]
        assert event.metrics.completed == 8 and event.metrics.failed == 0
        assert result.samples[event.event_id].num_rows == 8
        # every request is in the file: our statistics from them (numpy, as sglang)
        assert event.metrics.median_ttft_ms == pytest.approx(float(np.median(ttfts)))
        assert event.metrics.p90_ttft_ms == pytest.approx(float(np.percentile(ttfts, 90)))
        assert event.metrics.mean_e2e_latency_ms == pytest.approx(
            statistics.fmean(r["request_latency"] for r in requests) * 1000
        )
        assert event.metrics.output_throughput == pytest.approx(64 / bench["duration"])
        # 0.8 weights ITL by tokens: not our per-request TPOT, kept aside
        assert "inter_token_latency_ms_mean" in event.tool_metrics
    yaml_events = _one(GUIDELLM_RUN / "benchmarks.yaml")[1]
    assert [e.metrics for e in yaml_events] == [e.metrics for e in events]


def test_guidellm_console_table() -> None:
    (event,) = _one(SHARED / "guidellm" / "benchmarks_stripped_output.txt")[1]
    m = event.metrics
    assert event.tool == "guidellm" and event.concurrency == 1
    assert (m.completed, m.failed, m.total_input_tokens, m.total_output_tokens, m.duration_s) == (
        46,
        0,
        11827,
        5888,
        30.0,
    )
    assert (m.mean_ttft_ms, m.median_ttft_ms, m.p99_ttft_ms) == (16.8, 16.4, 21.3)
    assert (m.mean_e2e_latency_ms, m.median_e2e_latency_ms, m.p99_e2e_latency_ms) == (
        640.0,
        640.0,
        690.0,
    )
    assert m.mean_tpot_ms is None and event.tool_metrics["mean_tpot_ms"] == 4.9
    assert event.tool_metrics["output_tokens_per_second_mean"] == 198.1


def test_guidellm_yaml_breaking_its_rules_names_the_field(tmp_path: Path) -> None:
    text = (
        (SHARED / "guidellm" / "benchmarks_stripped.yaml")
        .read_text()
        .replace("duration: 29.997201442718506", "duration: soon", 1)
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert (
        str(exc.value)
        == f"{path}: benchmarks[0]: field 'duration': expected a number, got \"soon\""
    )


# --- llmperf -------------------------------------------------------------------------------


def test_llmperf_summary() -> None:
    (event,) = _one(SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur1_550_150_summary.json")[1]
    m = event.metrics
    assert event.tool == "llmperf" and event.tool_version is None and event.concurrency == 1
    assert (m.completed, m.failed) == (80, 0)
    assert m.mean_ttft_ms == pytest.approx(586.9289812874854) and m.median_ttft_ms == pytest.approx(
        586.917666500085
    )
    assert m.p99_e2e_latency_ms == pytest.approx(7522.39977344012)
    assert m.output_throughput == pytest.approx(20.982177074314603)
    assert m.request_throughput == pytest.approx(7.915935703584854 / 60)
    assert m.duration_s == pytest.approx(80 / 7.915935703584854 * 60)
    # llmperf's ITL (E2E / output tokens) and its sample std are not ours
    assert m.mean_itl_ms is None and m.mean_tpot_ms is None and m.std_ttft_ms is None
    assert event.tool_metrics["inter_token_latency_s_mean"] == pytest.approx(0.046801568884606674)


def test_llmperf_individual_responses_match_the_summary() -> None:
    result, (event,) = _one(
        SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur1_550_150_individual_responses.json"
    )
    summary = json.loads(
        (SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur1_550_150_summary.json").read_text()
    )
    table = result.samples[event.event_id]
    assert table.num_rows == 80 and all(table.column("ok").to_pylist())
    m = event.metrics
    assert m.mean_ttft_ms == pytest.approx(summary["results_ttft_s_mean"] * 1000)
    assert m.p90_ttft_ms == pytest.approx(summary["results_ttft_s_quantiles_p90"] * 1000)
    assert m.p95_e2e_latency_ms == pytest.approx(
        summary["results_end_to_end_latency_s_quantiles_p95"] * 1000
    )
    assert m.total_output_tokens == round(summary["results_number_output_tokens_mean"] * 80)
    # llmperf's per-request ITL is the time to the last token (~E2E, TTFT included) / output tokens
    raw = json.loads(
        (SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur1_550_150_individual_responses.json").read_text()
    )
    assert raw[0]["inter_token_latency_s"] == pytest.approx(
        raw[0]["end_to_end_latency_s"] / raw[0]["number_output_tokens"], rel=1e-4
    )
    first = table.to_pylist()[0]
    assert first["tpot_ms"] == pytest.approx(
        (raw[0]["end_to_end_latency_s"] - raw[0]["ttft_s"]) * 1000 / 159
    )


def test_llmperf_sweep_csv_and_aggregate() -> None:
    events = _one(SHARED / "llmperf" / "a10g_vllm-meta-llama_Meta-Llama-3-8B-Instruct.csv")[1]
    assert [e.concurrency for e in events] == [1, 2, 4, 8, 16, 32, 64]
    last = events[-1].metrics
    assert last.mean_ttft_ms == pytest.approx(
        1080.4201672266204
    ) and last.output_throughput == pytest.approx(301.18513911051025)
    assert last.request_throughput == pytest.approx(102.6630805720438 / 60)
    (agg,) = _one(SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur_64.json")[1]
    assert agg.concurrency == 64 and agg.metrics.median_ttft_ms == pytest.approx(17220.491680999658)
    assert agg.metrics.completed == 128 and agg.tool_metrics["ttft_ms_p75"] == pytest.approx(
        25327.48620450093
    )


def test_llmperf_csv_breaking_its_rules_names_line_and_field(tmp_path: Path) -> None:
    lines = (
        (SHARED / "llmperf" / "a10g_vllm-meta-llama_Meta-Llama-3-8B-Instruct.csv")
        .read_text()
        .splitlines()
    )
    lines[4] = lines[4].replace("137.29", "n/a", 1)
    path = tmp_path / "sweep.csv"
    path.write_text("\n".join(lines))
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert str(exc.value).startswith(
        f"{path}:5: field 'first-time-to-token_mean_in_ms_(ttft)' column 2: expected a number"
    )


# --- AIPerf --------------------------------------------------------------------------------


def test_aiperf_real_run_json_csv_and_records_agree() -> None:
    """Produced by the real AIPerf 0.13.0 against transformers serve (tests/fixtures/MANIFEST.md)."""
    raw = json.loads((AIPERF_RUN / "profile_export_aiperf.json").read_text())
    (summary,) = _one(AIPERF_RUN / "profile_export_aiperf.json")[1]
    assert (
        summary.tool == "aiperf" and summary.tool_version == "0.13.0" and summary.concurrency == 2
    )
    m = summary.metrics
    assert (m.completed, m.failed, m.total_output_tokens) == (8, 0, 64)
    assert (
        m.mean_ttft_ms == raw["time_to_first_token"]["avg"]
        and m.p99_ttft_ms == raw["time_to_first_token"]["p99"]
    )
    assert (
        m.output_throughput == raw["output_token_throughput"]["avg"]
        and m.duration_s == raw["benchmark_duration"]["avg"]
    )
    assert m.achieved_concurrency == pytest.approx(
        raw["request_latency"]["sum"] / 1000 / raw["benchmark_duration"]["avg"]
    )
    assert (
        m.mean_tpot_ms is None and "inter_token_latency_avg" in summary.tool_metrics
    )  # AIPerf's ITL differs
    (csv_event,) = _one(AIPERF_RUN / "profile_export_aiperf.csv")[1]
    assert csv_event.metrics.mean_ttft_ms == pytest.approx(m.mean_ttft_ms, abs=0.005)
    assert csv_event.metrics.output_throughput == pytest.approx(m.output_throughput, abs=0.005)
    result, (records,) = _one(AIPERF_RUN / "profile_export.jsonl")
    assert result.samples[records.event_id].num_rows == 8
    # AIPerf's percentiles are numpy's linear ones, like ours: the records reproduce the summary
    assert records.metrics.p90_ttft_ms == pytest.approx(raw["time_to_first_token"]["p90"])
    assert records.metrics.std_e2e_latency_ms == pytest.approx(raw["request_latency"]["std"])
    # transformers serve sent each answer in one chunk: TPOT not measurable (docs/importers.md)
    assert records.metrics.mean_tpot_ms is None and "coarse streaming" in records.validity_notes[0]


def test_aiperf_request_count_against_its_own_command(tmp_path: Path) -> None:
    """AIPerf's warm-up phase file imported as a valid 1-request benchmark although
    the tool's own configuration asked for 8: a count other than the profiling phase's
    ``requests`` is not the run asked for (not valid, and the note says which counts)."""
    raw = json.loads((AIPERF_RUN / "profile_export_aiperf.json").read_text())
    (real,) = _one(AIPERF_RUN / "profile_export_aiperf.json")[1]
    assert real.valid is True  # 8 requests, 8 asked
    raw["request_count"]["avg"] = 1.0
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(raw))
    (warmup,) = import_file(path).events
    assert warmup.valid is False
    assert (
        "1 request(s) in the file, 8 in the tool's own profiling phase" in warmup.validity_notes[-1]
    )
    raw["request_count"]["avg"] = 8.0
    raw["benchmark_phase"] = "warmup"
    path.write_text(json.dumps(raw))
    (phase,) = import_file(path).events
    assert phase.valid is False and "a warmup phase" in phase.validity_notes[-1]


def test_aiperf_records_with_a_broken_line_name_it(tmp_path: Path) -> None:
    lines = (AIPERF_RUN / "profile_export.jsonl").read_text().splitlines()
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([lines[0], lines[1][:40], *lines[2:]]))
    with pytest.raises(InvalidInput, match=r"profile_export.jsonl:2: not valid JSON"):
        import_file(path)


# --- sglang repository scripts ---------------------------------------------------------------


def test_sglang_script_results() -> None:
    off = _one(SHARED / "sglang_repo" / "double_sparsity_smoke_16k_native_off.json")[1]
    assert [(e.config_name, e.concurrency) for e in off] == [
        ("branch_ds_off", 1),
        ("branch_ds_off", 4),
    ]
    assert (
        off[0].metrics.median_ttft_ms == pytest.approx(765.7214403152466)
        and off[0].workload.input_len == 16384
    )
    assert off[0].tool_metrics["tbt_ms_p50"] == pytest.approx(8.22758674621582)
    raw = json.loads((SHARED / "sglang_repo" / "moe_tp_ep_e2e_none_r1_in1024.json").read_text())
    result, (run,) = _one(SHARED / "sglang_repo" / "moe_tp_ep_e2e_none_r1_in1024.json")
    assert run.metrics.median_ttft_ms == pytest.approx(raw["ttft_ms_median"])
    assert run.tool_metrics["median_tpot_ms"] == pytest.approx(raw["tpot_ms_median"])
    assert run.metrics.median_e2e_latency_ms == pytest.approx(raw["total_ms_median"])
    assert (
        run.metrics.output_throughput == pytest.approx(raw["throughput"])
        and result.samples[run.event_id].num_rows == 16
    )
    summary = _one(SHARED / "sglang_repo" / "moe_tp_ep_serving-summary.json")[1]
    none_1024 = [e for e in summary if e.config_name == "none" and e.workload.input_len == 1024]
    assert [e.repeat for e in none_1024] == [0, 1, 2]
    assert [e.metrics.output_throughput for e in none_1024] == pytest.approx(
        [42.9829431868737, 48.106425640765046, 50.770970825812626]
    )


# --- the CLI ---------------------------------------------------------------------------------


def test_cli_imports_every_tool_in_one_batch_and_reimport_is_a_no_op(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    files = [str(p) for p, _, _ in IMPORTABLE]
    cmd = ["--ledger", str(ledger), "import", "--create", "--json", *files]
    out = invoke(cmd)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [row["kind"] for row in summary] == [kind for _, kind, _ in IMPORTABLE]
    again = invoke(cmd)
    assert all(row["new"] == 0 for row in json.loads(again.stdout))
    tools = (
        LedgerStore(ledger)
        .query_arrow("SELECT DISTINCT tool FROM benchmarks ORDER BY tool")
        .column("tool")
        .to_pylist()
    )
    assert tools == [
        "aiperf",
        "guidellm",
        "llmperf",
        "sglang.benchmark_script",
        "vllm.bench_serve",
        "vllm.nightly_benchmarks",
    ]


def test_cli_refuses_an_unknown_file_with_exit_3(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing to see\n")
    out = invoke(["--ledger", str(tmp_path / "l.duckdb"), "import", "--create", str(path)])
    assert out.returncode == 3
    assert f"{path}: not a known format (tried: sglang-bench-serving, " in out.stderr
    assert "guidellm-benchmarks" in out.stderr and "vllm-server-log" in out.stderr
    assert not (tmp_path / "l.duckdb").exists() or LedgerStore(tmp_path / "l.duckdb").query_arrow(
        "SELECT count(*) AS n FROM all_events"
    ).column("n").to_pylist() == [0]


def test_vllm_log_one_word_args_need_their_flag_form(tmp_path: Path) -> None:
    """A bare common word in a warning ("dtype") is not taken for the --dtype the user set."""
    lines = [
        "(APIServer pid=7) INFO 07-25 13:41:40 [utils.py:326] non-default args: {'model': 'm', 'dtype': 'bfloat16', 'seed': 1}",
        "(APIServer pid=7) WARNING 07-25 13:41:41 [utils.py:9] tokenizer dtype probe disabled for this model",
        "(APIServer pid=7) WARNING 07-25 13:41:42 [arg_utils.py:9] --seed is ignored by the V1 sampler",
        "(APIServer pid=7) INFO 07-25 13:42:20 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000",
    ]
    path = tmp_path / "words.log"
    path.write_text("\n".join(lines) + "\n")
    findings = [e for e in import_file(path).events if isinstance(e, FindingRecorded)]
    assert [(f.kind, f.flag, f.source) for f in findings] == [
        ("flag-not-in-effect", "seed", "words.log:3")
    ]


def test_vllm_log_import_remembers_flags_known_to_do_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    base = ["--ledger", str(ledger)]
    research = invoke(
        [
            *base,
            "append",
            "--create",
            "flag_researched",
            "-f",
            "flag=gpu-memory-utilization",
            "-f",
            "engine=vllm",
            "-f",
            "verdict=no-op",
            "--host",
            '{"compute_capability": "sm120", "engine": "vllm"}',
        ]
    )
    assert research.returncode == 0, research.stderr
    out = invoke([*base, "import", "--json", str(VLLM_LOG)])
    assert out.returncode == 0, out.stderr
    rows = (
        LedgerStore(ledger)
        .query_arrow(
            "SELECT payload->>'kind' AS kind, payload->>'flag' AS flag FROM live_events WHERE type = 'finding_recorded' "
            "ORDER BY seq"
        )
        .to_pylist()
    )
    assert {"kind": "known-no-effect", "flag": "gpu-memory-utilization"} in rows
