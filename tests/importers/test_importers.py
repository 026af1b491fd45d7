"""``import_file`` on every real fixture, with field values asserted, and on bad input."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from ledger.engines.identify import LOOKED_FOR
from ledger.engines.sglang_log import parse_server_log
from ledger.errors import InvalidInput, NotFound
from ledger.importers import SAMPLES_SCHEMA, import_file, registered_importers
from schemas import (
    BenchmarkCompleted,
    FindingRecorded,
    Host,
    MoeConfigRecorded,
    ServerFailed,
    ServerReady,
    ServerStarted,
    parse_event,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sglang"
BENCH = FIXTURES / "bench_serving"
MOE = FIXTURES / "moe_configs"
SERVER = FIXTURES / "server"

IMPORTABLE = sorted([*BENCH.glob("*.jsonl"), *MOE.glob("*/*.json"), *SERVER.glob("*.log")], key=str)
NOT_IMPORTABLE = sorted(
    [*BENCH.glob("*.txt"), MOE / "README.md", *SERVER.glob("*.txt"), *SERVER.glob("*.json")],
    key=str,
)


def single_line(exc: pytest.ExceptionInfo[InvalidInput]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- every fixture -----------------------------------------------------------------


def test_fixture_lists_are_complete() -> None:
    every = {p for p in FIXTURES.rglob("*") if p.is_file()}
    assert every == set(IMPORTABLE) | set(NOT_IMPORTABLE)
    assert len(IMPORTABLE) == 2 + 8 + 4


@pytest.mark.parametrize("path", IMPORTABLE, ids=lambda p: p.name)
def test_every_importable_fixture_gives_valid_deterministic_events(path: Path) -> None:
    first = import_file(path, session_id="s1")
    again = import_file(path, session_id="s1")
    assert first.events and [e.event_id for e in first.events] == [e.event_id for e in again.events]
    assert len({e.event_id for e in first.events}) == len(first.events)
    for event in first.events:
        assert event.source and event.source.startswith(path.name)
        assert event.session_id == "s1"
        # What the importer built survives a JSON round trip through the event models.
        assert parse_event(event.model_dump(mode="json")) == event


@pytest.mark.parametrize("path", NOT_IMPORTABLE, ids=lambda p: p.name)
def test_other_files_are_rejected_as_unknown_format(path: Path) -> None:
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    message = single_line(exc)
    assert message.startswith(f"{path}: not a known format")
    assert "tried: sglang-bench-serving, " in message


# --- bench_serving -------------------------------------------------------------------


def test_bench_two_concurrencies() -> None:
    result = import_file(BENCH / "vllm_1129_16_64_32.jsonl")
    assert result.kind == "sglang-bench-serving" and result.samples == {}
    c1, c4 = result.events
    assert isinstance(c1, BenchmarkCompleted)
    assert c1.tool == "sglang.bench_serving"
    assert c1.config_name == "vllm_1129_16_64_32"
    assert c1.source == "vllm_1129_16_64_32.jsonl:1" and c4.source == "vllm_1129_16_64_32.jsonl:2"
    assert (c1.concurrency, c4.concurrency) == (1, 4)
    m = c1.metrics
    assert m.output_throughput == 445.428342293991
    assert m.completed == 16 and m.failed is None
    assert m.duration_s == 1.1494553699999415
    assert m.achieved_concurrency == 0.9860493530947567
    assert m.total_input_tokens == 1024 and m.total_output_tokens == 512
    assert m.p90_ttft_ms == 24.434678999966764 and m.p95_e2e_latency_ms == 100.37754150002343
    assert m.max_output_tokens_per_s == 162.0 and m.max_concurrent_requests == 14
    assert m.accept_length is None and m.max_itl_ms is None
    w = c1.workload
    assert (w.dataset, w.input_len, w.output_len, w.range_ratio) == ("random-ids", 64, 32, 1.0)
    assert w.request_rate is None and w.load == "closed-loop" and w.num_prompts is None
    # ~13 chunks for 32 tokens (transformers serve): TPOT and ITL not measurable (docs/importers.md)
    assert c1.valid is True and c1.validity_notes[0].startswith("coarse streaming: 13.3 chunks")
    assert m.mean_tpot_ms is None and c1.tool_metrics["mean_tpot_ms"] == 1.729500298386982
    assert c4.metrics.mean_ttft_ms == 220.53212312500392


def test_bench_config_name_and_refactored_keys(tmp_path: Path) -> None:
    line = json.loads((BENCH / "vllm_1129_16_64_32.jsonl").read_text().splitlines()[0])
    line["total_input"] = line.pop("total_input_tokens")
    line["total_output"] = line.pop("total_output_tokens")
    line["max_itl_ms"] = 18.36
    line["request_rate"] = 4.0
    path = tmp_path / "renamed.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (event,) = import_file(path, config_name="baseline").events
    assert event.config_name == "baseline"
    assert event.metrics.total_input_tokens == 1024 and event.metrics.total_output_tokens == 512
    assert event.tool_metrics["max_itl_ms"] == 18.36  # a coarse stream: kept aside
    assert event.workload.load == "open-loop" and event.workload.request_rate == 4.0


def test_bench_with_details_samples() -> None:
    result = import_file(BENCH / "with_details.jsonl")
    (event,) = result.events
    table = result.samples[event.event_id]
    assert table.schema == SAMPLES_SCHEMA
    assert table.num_rows == event.metrics.completed == 8
    assert event.metrics.failed == 0 and event.workload.num_prompts == 8 and event.valid is True
    rows = table.to_pylist()
    # ttfts are seconds in the file: the ms values reproduce sglang's own mean.
    assert statistics.mean(r["ttft_ms"] for r in rows) == pytest.approx(
        event.metrics.mean_ttft_ms, abs=1e-6
    )
    raw = json.loads((BENCH / "with_details.jsonl").read_text())
    assert rows[0]["ttft_ms"] == pytest.approx(raw["ttfts"][0] * 1000)
    assert rows[0]["itl_ms"] == pytest.approx([x * 1000 for x in raw["itls"][0]])
    assert rows[0]["prompt_tokens"] == 192 and rows[0]["output_tokens"] == 32
    assert all(r["ok"] and r["error"] is None for r in rows)
    # E2E is rebuilt as TTFT + sum(ITL); TPOT = (E2E - TTFT) / (out - 1).
    first = rows[0]
    assert first["e2e_ms"] == pytest.approx(first["ttft_ms"] + sum(first["itl_ms"]))
    assert first["tpot_ms"] == pytest.approx((first["e2e_ms"] - first["ttft_ms"]) / 31)


def test_bench_failed_requests_make_the_run_invalid(tmp_path: Path) -> None:
    raw = json.loads((BENCH / "with_details.jsonl").read_text())
    raw["errors"][2] = "HTTP 500: boom"
    raw["completed"] = 7
    path = tmp_path / "failed.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    result = import_file(path)
    (event,) = result.events
    assert event.valid is False and event.metrics.failed == 1 and event.workload.num_prompts == 8
    assert "1 request(s) failed: HTTP 500: boom" in event.validity_notes[0]
    row = result.samples[event.event_id].to_pylist()[2]
    assert row["ok"] is False and row["ttft_ms"] is None and row["error"] == "HTTP 500: boom"


def test_bench_zero_output_requests_are_not_measurements(tmp_path: Path) -> None:
    """sglang's real c1.jsonl had 3 of 16 requests with TTFT 0.0, no ITL and empty
    text that sglang counted successes (with 32 output tokens): not measurements, so the run
    is not valid and those rows are failures, as our runner fails a stream with no content."""
    raw = json.loads((BENCH / "with_details.jsonl").read_text())
    for i in (1, 5):
        raw["ttfts"][i], raw["itls"][i], raw["generated_texts"][i] = 0.0, [], ""
    path = tmp_path / "zero.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    result = import_file(path)
    (event,) = result.events
    assert event.valid is False and event.metrics.failed == 2
    assert event.validity_notes[0].startswith("2 request(s) failed: no output streamed")
    rows = result.samples[event.event_id].to_pylist()
    assert [r["ok"] for r in rows].count(False) == 2 and rows[1]["ttft_ms"] is None


def test_bench_samples_and_events_go_into_the_store(store) -> None:
    result = import_file(BENCH / "with_details.jsonl", session_id="s1")
    first = store.append(result.events, samples=result.samples)
    again = store.append(import_file(BENCH / "with_details.jsonl", session_id="s1").events)
    assert not first[0].duplicate and again[0].duplicate and again[0].seq == first[0].seq
    count = store.query_arrow("SELECT count(*) AS n FROM bench_samples").to_pylist()[0]["n"]
    assert count == 8


# --- MoE configs ---------------------------------------------------------------------


def test_moe_down_file() -> None:
    path = (
        MOE
        / "triton_3_6_0"
        / "E=256,N=512,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition_down.json"
    )
    result = import_file(path)
    (event,) = result.events
    assert result.kind == "sglang-moe-config" and isinstance(event, MoeConfigRecorded)
    assert (event.E, event.N, event.down, event.dtype, event.block_shape) == (
        256,
        512,
        True,
        None,
        None,
    )
    assert event.device_name == "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition"
    assert event.triton_version == "3.6.0"
    assert event.configs["1"] == {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 4,
        "USE_TMA": False,
    }
    assert event.host.gpu_name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert event.host.compute_capability == "sm120"
    assert event.source == path.name and event.file_name == path.name


def test_moe_fp8_block_shape_and_other_gpus() -> None:
    (b200,) = import_file(
        MOE
        / "triton_3_4_0"
        / "E=256,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json"
    ).events
    assert (b200.dtype, b200.block_shape, b200.down, b200.triton_version) == (
        "fp8_w8a8",
        [128, 128],
        False,
        "3.4.0",
    )
    assert b200.host.compute_capability == "sm100"
    (rtx,) = import_file(
        MOE / "triton_3_1_0" / "E=64,N=640,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"
    ).events
    assert (rtx.E, rtx.N, rtx.dtype, rtx.block_shape) == (64, 640, "fp8_w8a8", None)
    assert rtx.host.compute_capability == "sm89"
    (maxq,) = import_file(
        MOE
        / "triton_3_5_1"
        / "E=161,N=192,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Max-Q_Workstation_Edition.json",
        host=Host(hostname="box1"),
    ).events
    assert (
        maxq.triton_version == "3.5.1"
        and maxq.host.compute_capability == "sm120"
        and maxq.host.hostname == "box1"
    )


def test_moe_name_with_per_channel_quant_outside_a_triton_folder(tmp_path: Path) -> None:
    source = MOE / "triton_3_1_0" / "E=64,N=640,device_name=NVIDIA_H200.json"
    path = (
        tmp_path
        / "E=64,N=640,device_name=NVIDIA_H200,dtype=int8_w8a8,per_channel_quant=True_down.json"
    )
    path.write_bytes(source.read_bytes())
    (event,) = import_file(path).events
    assert (event.dtype, event.per_channel_quant, event.down, event.triton_version) == (
        "int8_w8a8",
        True,
        True,
        None,
    )


def test_moe_bad_entry_names_file_and_key(tmp_path: Path) -> None:
    data = json.loads(
        (MOE / "triton_3_1_0" / "E=64,N=640,device_name=NVIDIA_H200.json").read_text()
    )
    data["16"]["BLOCK_SIZE_N"] = "64"
    path = tmp_path / "E=64,N=640,device_name=NVIDIA_H200.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert single_line(exc) == f"{path}: field '16.BLOCK_SIZE_N': expected an integer, got \"64\""
    del data["16"]["BLOCK_SIZE_N"]
    data["16"]["BLOCK_SIZE_N"] = 64
    data["16"]["USE_TMA"] = "yes"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match=r"field '16.USE_TMA'"):
        import_file(path)


def test_moe_content_under_a_foreign_name(tmp_path: Path) -> None:
    path = tmp_path / "my_config.json"
    path.write_bytes(
        (MOE / "triton_3_1_0" / "E=64,N=640,device_name=NVIDIA_H200.json").read_bytes()
    )
    with pytest.raises(
        InvalidInput, match=r"my_config.json: looks like an sglang MoE config, but the name"
    ):
        import_file(path)


# --- server logs -----------------------------------------------------------------------


def test_baseline_log_events() -> None:
    result = import_file(
        SERVER / "sm120_qwen35_baseline.log", config_name="baseline", host=Host(hostname="box1")
    )
    assert result.kind == "sglang-server-log"
    started, ready, *findings = result.events
    assert isinstance(started, ServerStarted) and isinstance(ready, ServerReady)
    assert started.engine == "sglang" and started.model == "/models/Qwen3.5-122B-A10B"
    assert started.config_name == "baseline" and started.port == 30000 and started.pid == 41234
    assert started.flags["tp-size"] == 4
    assert started.flags["enable-fused-moe-sum-all-reduce"] is True
    assert started.flags["attention-backend"] == "triton"
    assert started.flags["quantization"] is None
    assert started.source == "sm120_qwen35_baseline.log:1"
    assert ready.run_id == started.run_id and ready.source == "sm120_qwen35_baseline.log:26"
    assert ready.ready_after_s == 157.0
    s = ready.startup
    assert s.max_running_requests == 48 and s.cuda_graph_bs == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]
    assert s.piecewise_cuda_graph is True and s.moe_kernel_config == "default"
    assert (
        s.max_total_num_tokens == 412345
        and s.context_len == 262144
        and s.attention_backend == "triton"
    )
    host = started.host
    assert (host.gpu_name, host.compute_capability, host.gpu_count, host.engine, host.hostname) == (
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "sm120",
        4,
        "sglang",
        "box1",
    )
    assert {f.kind for f in findings} == {"default-moe-config"}
    assert all(
        isinstance(f, FindingRecorded) and f.server_run_id == started.run_id for f in findings
    )


def test_flashinfer_log_against_baseline() -> None:
    baseline = parse_server_log(
        (SERVER / "sm120_qwen35_baseline.log").read_text().splitlines()
    ).to_startup_facts()
    result = import_file(SERVER / "sm120_qwen35_flashinfer_fusion.log", previous_startup=baseline)
    started, ready, *findings = result.events
    assert started.flags["enable-flashinfer-allreduce-fusion"] is True
    assert ready.startup.max_running_requests == 26 and ready.startup.piecewise_cuda_graph is False
    messages = {f.kind: [] for f in findings}
    for f in findings:
        messages[f.kind].append(f)
    assert any("48 -> 26" in f.message for f in messages["capacity-reduced"])
    (flag,) = messages["flag-not-in-effect"]
    assert (
        flag.flag == "enable-flashinfer-allreduce-fusion"
        and flag.verdict == "not-activated"
        and flag.basis == "log"
    )
    assert "sm120" in flag.message
    assert flag.source == "sm120_qwen35_flashinfer_fusion.log:1"
    assert "piecewise-cuda-graph-off" in messages
    # Without a previous run there is nothing to compare capacity with.
    plain = import_file(SERVER / "sm120_qwen35_flashinfer_fusion.log")
    assert "capacity-reduced" not in {getattr(e, "kind", None) for e in plain.events}
    # The findings shared by both imports keep their ids (idempotent re-import).
    ids = {e.event_id for e in plain.events}
    assert ids <= {e.event_id for e in result.events}


def test_crash_log_events() -> None:
    result = import_file(SERVER / "sm120_qwen35_fp8_capture_crash.log")
    types = [e.type for e in result.events]
    assert types[:2] == ["server_started", "server_failed"] and "server_ready" not in types
    failed = result.events[1]
    assert isinstance(failed, ServerFailed) and failed.cause == "crash"
    assert "Required: 147456, Hardware limit: 101376" in failed.message
    assert failed.source == "sm120_qwen35_fp8_capture_crash.log:12"
    assert failed.log_tail[-1].endswith("It usually means the child failed.")
    assert result.events[0].model == "/models/Qwen3.5-122B-A10B-FP8"


def test_out_of_memory_crash(tmp_path: Path) -> None:
    path = tmp_path / "oom.log"
    path.write_text(
        "[2026-05-01 10:00:00 TP0] Load weight end. elapsed=5.00 s, type=X, avail mem=1.00 GB, mem usage=70.00 GB.\n"
        "[2026-05-01 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    (_, failed) = import_file(path).events
    assert failed.cause == "out-of-memory"
    assert failed.message.startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_newer_log_format_excerpt() -> None:
    # No "The server is fired up" line in the excerpt: no server_ready;
    # what it showed while starting stays on server_started.
    (started,) = import_file(SERVER / "native_api.launch_server.stdout.excerpt.log").events
    assert started.flags == {} and started.model is None
    assert started.startup is not None and started.startup.attention_backend == "fa3"


# --- bad input -------------------------------------------------------------------------


def test_truncated_jsonl_line(tmp_path: Path) -> None:
    lines = (BENCH / "vllm_1129_16_64_32.jsonl").read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n")
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert single_line(exc).startswith(f"{path}:2: not valid JSON")


def test_truncated_first_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text((BENCH / "with_details.jsonl").read_text()[:500])
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert single_line(exc).startswith(f"{path}:1: not valid JSON")


def test_wrong_type_field(tmp_path: Path) -> None:
    lines = (BENCH / "vllm_1129_16_64_32.jsonl").read_text().splitlines()
    obj = json.loads(lines[1])
    obj["output_throughput"] = "fast"
    path = tmp_path / "typed.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps(obj) + "\n")
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert (
        single_line(exc) == f"{path}:2: field 'output_throughput': expected a number, got \"fast\""
    )


def test_wrong_detail_lengths(tmp_path: Path) -> None:
    raw = json.loads((BENCH / "with_details.jsonl").read_text())
    raw["itls"] = raw["itls"][:-1]
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(raw))
    with pytest.raises(InvalidInput, match=r"d.jsonl:1: field 'itls': has 7 entries, ttfts has 8"):
        import_file(path)


def test_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_text("hello world\n")
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    kinds = [importer.kind for importer in registered_importers()]
    assert single_line(exc) == (
        f"{path}: not a known format (tried: {', '.join(kinds)}); "
        f"no engine log line in it (looked for {LOOKED_FOR})"
    )
    assert {"sglang-bench-serving", "sglang-moe-config", "sglang-server-log"} <= set(kinds)


def test_binary_garbage(tmp_path: Path) -> None:
    path = tmp_path / "garbage.log"
    data = os.urandom(4096)
    # Make sure it is not valid UTF-8 whatever urandom gave: a lone continuation byte on line 3.
    path.write_bytes(b"line one\nline two\n\x80" + data)
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    message = single_line(exc)
    assert message.startswith(f"{path}:3: not UTF-8 text")


def test_nul_bytes(tmp_path: Path) -> None:
    path = tmp_path / "nul.log"
    path.write_bytes(b"ok\n\x00\x00\x00")
    with pytest.raises(InvalidInput, match=r"nul.log:2: binary data"):
        import_file(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n  \n")
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert single_line(exc).startswith(f"{path}: empty file")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        import_file(tmp_path / "nope.jsonl")


def test_log_without_server_facts_is_an_excerpt_of_a_starting_run(tmp_path: Path) -> None:
    # One line SGLang writes, and nothing it can tell: a run seen starting, its facts left empty.
    path = tmp_path / "plain.log"
    path.write_text("[2026-05-01 10:00:00] Prefill batch, garbage\n")
    events = import_file(path).events
    assert [e.type for e in events] == ["server_started"]
    started = events[0]
    assert isinstance(started, ServerStarted) and started.flags == {} and started.startup is None


def test_log_with_no_engine_line_is_refused_naming_what_was_looked_for(tmp_path: Path) -> None:
    path = tmp_path / "plain.log"
    path.write_text("[2026-05-01 10:00:00] something else entirely\n")
    with pytest.raises(InvalidInput, match=r"plain.log: not a known format .* \(looked for "):
        import_file(path)
