"""Every SGLang log and bench case of ../shared/cases (copied to tests/fixtures/cases/), imported as a
user would, with its README's right values asserted. Each test names its case."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.importers import import_file
from ledger.store import LAYOUT_VERSION, LedgerStore
from schemas import FindingRecorded, Host, ServerFailed, ServerReady, ServerStarted
from tests.support.cli_inprocess import invoke

CASES = Path(__file__).parents[1] / "fixtures" / "cases"


def events_of(case: str, name: str, **kwargs):
    return import_file(CASES / case / name, session_id="s1", **kwargs).events


def findings(events) -> list[FindingRecorded]:
    return [e for e in events if isinstance(e, FindingRecorded)]


def one(events, cls):
    (found,) = [e for e in events if isinstance(e, cls)]
    return found


def runs_of(tmp_path: Path, *paths: Path, host: Host | None = None) -> list[dict]:
    """Import ``paths`` into a real ledger in order (each compared with the one before, as the
    CLI does) and return the ``server_runs`` rows."""
    store = LedgerStore(tmp_path / "cases.duckdb")
    previous = None
    for path in paths:
        result = import_file(path, session_id="s1", host=host, previous_startup=previous)
        store.append(result.events)
        for event in result.events:
            if isinstance(event, ServerReady):
                previous = event.startup
    table = store.query_arrow("SELECT * FROM server_runs ORDER BY started_seq")
    return table.to_pylist()


def start_sm120_session(ledger: Path) -> str:
    """Append session ``s1`` on an RTX PRO 6000 (sm120); return its ``--host`` JSON."""
    host = '{"gpu_name": "NVIDIA RTX PRO 6000 Blackwell", "compute_capability": "12.0"}'
    out = cli(
        ledger, "append", "session_started", "--session", "s1", "-f", "title=x", "--host", host
    )
    assert out.returncode == 0, out.stderr
    return host


def cli(ledger: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not ledger.exists():
        LedgerStore(ledger).init()
    return invoke(["--ledger", str(ledger), *args])


# --- 1. per-rank repeats (sglang-10521-default-moe-tp1) ---------------------------------------


@pytest.mark.parametrize("name", ["min.log", "server.log"])
def test_10521_default_moe_logged_by_each_rank_is_one_finding(tmp_path: Path, name: str) -> None:
    events = events_of("sglang-10521-default-moe-tp1", name)
    (moe,) = findings(events)
    assert moe.kind == "default-moe-config"
    assert "E=512,N=128,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition" in moe.message
    assert moe.host.compute_capability == "sm120"
    # and the CLI imports it (it failed with exit 8, "the same event_id twice", importing nothing)
    ledger = tmp_path / "l.duckdb"
    out = cli(ledger, "import", str(CASES / "sglang-10521-default-moe-tp1" / name))
    assert out.returncode == 0, out.stderr
    (run,) = LedgerStore(ledger).query_arrow("SELECT * FROM server_runs").to_pylist()
    assert run["moe_kernel_config"] == "default" and run["arch"] == "sm120"
    if name == "server.log":
        assert run["cuda_graph_max_bs"] == 160


# --- 2. newer formats (sglang-33483-eager-decode) ---------------------------------------------


@pytest.mark.parametrize(
    ("name", "eager_lines", "peak"), [("min.log", 1, 67), ("server.log", 3, 103)]
)
def test_33483_0523_capture_lines_and_eager_decode(
    tmp_path: Path, name: str, eager_lines: int, peak: int
) -> None:
    events = events_of("sglang-33483-eager-decode", name)
    ready = one(events, ServerReady)
    assert ready.startup.cuda_graph_bs == [1, 2, 4, 8, 12, 16, 24, 32]
    (eager,) = [f for f in findings(events) if f.kind == "decode-without-cuda-graph"]
    assert (
        f"{eager_lines} decode batch line(s)" in eager.message and f"up to {peak}" in eager.message
    )
    assert "largest captured batch size 32" in eager.message
    assert "--cuda-graph-max-bs-decode" in eager.message  # the flag as 0.5.23 spells it
    # 0.5.23 logs "Disable prefill CUDA graph because ..." when it is off: no such line, no finding
    assert "piecewise-cuda-graph-off" not in {f.kind for f in findings(events)}
    if name == "server.log":
        assert ready.startup.kv_cache_tokens == 2980168 and ready.startup.kv_cache_gb == 31.83
        (run,) = runs_of(tmp_path, CASES / "sglang-33483-eager-decode" / name)
        assert run["cuda_graph_bs"] == [1, 2, 4, 8, 12, 16, 24, 32]
        assert run["cuda_graph_max_bs"] == 32 and run["max_running_requests"] == 4096


# --- 3. and 4. flashinfer allreduce fusion (sglang-15650-trt-fusion-sm120) ----------------------


@pytest.mark.parametrize("name", ["min_fusion_crash.log", "server_with_moe_line.log"])
def test_15650_fusion_that_crashed_the_server_is_incompatible(name: str) -> None:
    events = events_of("sglang-15650-trt-fusion-sm120", name)
    (verdict,) = [f for f in findings(events) if f.flag == "enable-flashinfer-allreduce-fusion"]
    assert verdict.verdict == "incompatible" and verdict.kind == "crash"
    assert verdict.host.compute_capability == "sm120"
    assert "No supported CUDA architectures found for major versions [9, 10]" in verdict.message
    assert any(e.ref.endswith(":1") for e in verdict.evidence)  # the arg that turned it on


def test_15650_fusion_crash_verdict_is_not_no_effect(tmp_path: Path) -> None:
    runs_of(tmp_path, CASES / "sglang-15650-trt-fusion-sm120" / "server_with_moe_line.log")
    row = (
        LedgerStore(tmp_path / "cases.duckdb")
        .query_arrow(
            "SELECT verdict, no_effect, arch FROM flag_verdicts WHERE flag = 'enable-flashinfer-allreduce-fusion'"
        )
        .to_pylist()
    )
    assert row == [{"verdict": "incompatible", "no_effect": False, "arch": "sm120"}]


def test_15650_server_log_failure_message() -> None:
    events = events_of("sglang-15650-trt-fusion-sm120", "server.log")
    failed = one(events, ServerFailed)
    assert failed.cause == "crash"
    assert (
        failed.message
        == "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."
    )
    assert any("Capture cuda graph failed" in line for line in failed.log_tail)
    assert failed.startup is not None and failed.startup.cuda_graph_bs[-1] == 256


@pytest.mark.parametrize("name", ["min_fusion_auto.log", "server_0523_backend_auto.log"])
def test_15650_0523_backend_spelling_on_sm120_is_not_activated(name: str) -> None:
    events = events_of("sglang-15650-trt-fusion-sm120", name)
    (fusion,) = [f for f in findings(events) if f.flag == "flashinfer-allreduce-fusion-backend"]
    assert fusion.kind == "flag-not-in-effect" and fusion.verdict == "not-activated"
    assert fusion.host.compute_capability == "sm120"
    assert "--flashinfer-allreduce-fusion-backend auto" in fusion.message
    if name == "server_0523_backend_auto.log":
        assert one(events, ServerReady).startup.cuda_graph_bs == [
            1,
            2,
            4,
            8,
            12,
            16,
            24,
            32,
            40,
            48,
            56,
            64,
        ]


# --- 5. facts survive a crash; readiness needs the ready line ----------------------------------


def test_24633_failed_run_keeps_its_startup_facts(tmp_path: Path) -> None:
    path = CASES / "sglang-24633-trtllm-mla-sm120" / "min_failed_facts.log"
    events = events_of("sglang-24633-trtllm-mla-sm120", "min_failed_facts.log")
    assert not any(isinstance(e, ServerReady) for e in events)
    failed = one(events, ServerFailed)
    assert failed.startup.attention_backend == "trtllm_mla"
    assert (
        failed.startup.max_running_requests == 4096
        and failed.startup.max_total_num_tokens == 1602355
    )
    (run,) = runs_of(tmp_path, path)
    assert run["status"] == "failed" and run["attention_backend"] == "trtllm_mla"
    assert (run["max_running_requests"], run["max_total_num_tokens"]) == (4096, 1602355)


def test_24633_server_log_crash_and_arch() -> None:
    events = events_of("sglang-24633-trtllm-mla-sm120", "server.log")
    failed = one(events, ServerFailed)
    assert failed.message == (
        "RuntimeError: Error in function 'TllmGenFmhaRunner' at "
        "/workspace/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:30: Unsupported architecture"
    )
    assert failed.host.compute_capability == "sm120"
    assert not any(isinstance(e, ServerReady) for e in events)
    (backend,) = [f for f in findings(events) if f.flag == "attention-backend"]
    assert backend.verdict == "incompatible" and "trtllm_mla" in backend.message


def test_8081_no_ready_line_no_server_ready(tmp_path: Path) -> None:
    path = CASES / "sglang-8081-attention-not-set" / "min_false_ready.log"
    events = events_of("sglang-8081-attention-not-set", "min_false_ready.log")
    assert [type(e) for e in events] == [ServerStarted]
    (run,) = runs_of(tmp_path, path)
    assert run["status"] == "starting" and run["attention_backend"] == "fa3"


@pytest.mark.parametrize(
    ("name", "status"), [("min_not_set.log", "ready"), ("server.log", "starting")]
)
def test_8081_attention_backend_not_set_wording(tmp_path: Path, name: str, status: str) -> None:
    (run,) = runs_of(tmp_path, CASES / "sglang-8081-attention-not-set" / name)
    assert run["attention_backend"] == "flashinfer" and run["status"] == status


# --- crashes of the other cases ----------------------------------------------------------------


def test_12178_fa3_on_sm120_crash_is_incompatible() -> None:
    events = events_of(
        "sglang-12178-fa3-sm120",
        "server.log",
        host=Host(
            gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition", compute_capability="sm120"
        ),
    )
    failed = one(events, ServerFailed)
    assert failed.cause == "crash" and failed.message == (
        "AssertionError: FlashAttention v3 Backend requires SM>=80 and SM<=90. Please use `--attention-backend flashinfer`."
    )
    assert failed.startup.attention_backend == "fa3"
    (backend,) = [f for f in findings(events) if f.flag == "attention-backend"]
    assert backend.verdict == "incompatible" and backend.host.compute_capability == "sm120"
    assert "attention backend fa3" in backend.message


def test_7249_rmsnorm_no_kernel_image_is_a_crash_not_oom() -> None:
    events = events_of("sglang-7249-rmsnorm-no-kernel-image", "server.log")
    failed = one(events, ServerFailed)
    assert failed.cause == "crash"
    assert (
        failed.message
        == "RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device"
    )
    assert failed.startup.cuda_graph_bs == [
        1,
        2,
        4,
        8,
        16,
        24,
        32,
        40,
        48,
        56,
        64,
        72,
        80,
        88,
        96,
        104,
        112,
        120,
        128,
        136,
        144,
        152,
        160,
    ]


def test_18870_deepgemm_crash() -> None:
    failed = one(events_of("sglang-18870-minimax-sm120-warmup", "deepgemm_crash.log"), ServerFailed)
    assert (
        failed.cause == "crash"
        and failed.message
        == "RuntimeError: Assertion error (kernel_runtime.hpp:45): exit_code == 0"
    )


def test_28077_moe_shared_memory_crash() -> None:
    events = events_of("sglang-pr28077-moe-smem-sm120", "server.log")
    failed = one(events, ServerFailed)
    assert failed.message.startswith(
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: 101376"
    )
    (moe,) = findings(events)
    assert moe.kind == "default-moe-config" and moe.host.compute_capability == "sm120"


def test_28077_a_config_for_an_sm120_card_is_checked_against_sm120_without_asking(
    tmp_path: Path,
) -> None:
    """The config was tuned for an RTX PRO 6000 (sm120): its own device's arch is checked on import,
    no --check-arch needed. Its M >= 256 entries (64/128/128 at 3 stages) need 2 x 49,152 B under
    SM120's mma.sync pipeline (no wgmma: num_stages - 1 stages held), within 101,376 B: they run,
    and no finding says otherwise (the last round's 3 x 49,152 was the wgmma rule, which SM120 does
    not have). The server log's "Required: 147456" is (4 - 1) x 49,152: a 4-stage config."""
    from ledger.engines.gpu_arch import moe_shared_memory

    config = next((CASES / "sglang-pr28077-moe-smem-sm120" / "triton_3_6_0").glob("E=128*.json"))
    entries = json.loads(config.read_text())
    assert moe_shared_memory(entries["256"], "sm120").low == 98_304
    assert moe_shared_memory(dict(entries["256"], num_stages=4), "sm120").low == 147_456
    ledger = tmp_path / "l.duckdb"
    out = cli(ledger, "import", str(config))
    assert out.returncode == 0, out.stderr
    assert LedgerStore(ledger).read(types=["finding_recorded"]) == []


def test_a_config_imported_into_a_session_is_checked_against_the_sessions_arch(
    tmp_path: Path,
) -> None:
    """An H200 (sm90) config imported into an sm120 session: the session's arch is checked too."""
    h200 = (
        Path(__file__).parents[1]
        / "fixtures/sglang/moe_configs/triton_3_1_0/E=64,N=640,device_name=NVIDIA_H200.json"
    )
    ledger = tmp_path / "l.duckdb"
    start_sm120_session(ledger)
    assert cli(ledger, "import", "--session", "s1", str(h200)).returncode == 0
    archs = {
        f.host.compute_capability for f in LedgerStore(ledger).read(types=["finding_recorded"])
    }
    assert archs == {"sm120"}  # sm90 (the file's own device) has room for every entry


# --- 6. overrides, 7. wrapped logs ------------------------------------------------------------


def test_olmocr_105_wrapped_log_is_unwrapped(tmp_path: Path) -> None:
    events = events_of("olmocr-105-wrapped-sglang-log", "server.log")
    started = one(events, ServerStarted)
    assert not any(isinstance(e, (ServerReady, ServerFailed)) for e in events)  # never became ready
    assert started.startup is not None and started.startup.kv_cache_gb == 2.04
    assert started.occurred_at == datetime(2025, 3, 7, 23, 50, 27, tzinfo=UTC)
    overrides = {o.flag: o for o in started.startup.overrides}
    assert overrides["mem-fraction-static"].effective == 0.76
    assert overrides["mem-fraction-static"].reason == "this is a multimodal model"
    assert overrides["chunked-prefill-size"].source == "server.log:2"
    refs = {f.flag: f.evidence[-1].ref for f in findings(events)}
    assert refs == {"mem-fraction-static": "server.log:1", "chunked-prefill-size": "server.log:2"}
    (run,) = runs_of(tmp_path, CASES / "olmocr-105-wrapped-sglang-log" / "server.log")
    assert run["status"] == "starting"


# --- capacity against the previous run (sglang-pr29927-spec-capacity-drop) -----------------------


def test_29927_eagle_capacity_drop_against_run1(tmp_path: Path) -> None:
    case = CASES / "sglang-pr29927-spec-capacity-drop"
    first, second = runs_of(tmp_path, case / "run1_no_spec.log", case / "run2_eagle.log")
    assert second["previous_run_id"] == first["run_id"]
    assert "speculative-algorithm" in second["flags_changed"]
    assert "speculative-algorithm None -> EAGLE" in second["flag_changes"]  # the case's words
    assert "max_total_num_tokens 405504 -> 110592" in second["changes_vs_previous"]
    assert first["max_running_requests"] == second["max_running_requests"] == 16
    assert second["cuda_graph_bs"] == [1, 2, 4, 8, 12, 16]  # the target verify graph of EAGLE
    store = LedgerStore(tmp_path / "cases.duckdb")
    messages = [
        r["m"]
        for r in store.query_arrow(
            "SELECT payload->>'message' AS m FROM live_events WHERE payload->>'kind' = 'capacity-reduced'"
        ).to_pylist()
    ]
    assert messages == ["max_total_num_tokens 405504 -> 110592 (-73%) against the previous run"]


# --- bad values in these files: one line, exit 3, file:line and field, nothing appended


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[2026-02-30 10:00:00] server_args=ServerArgs(tp_size=1)\n", ":1: field timestamp:"),
        (
            "[2026-05-01 10:00:00] server_args=ServerArgs(tp_size=1)\n"
            "[2026-05-01 24:00:00] The server is fired up and ready to roll!\n",
            ":2: field timestamp:",
        ),
        ("[0000-01-01 10:00:00] server_args=ServerArgs(tp_size=1)\n", ":1: field timestamp:"),
        (
            "[2026-05-01 10:00:00] server_args=ServerArgs(tp_size=2, pp_size='2')\n",
            ":1: field server_args.pp_size:",
        ),
    ],
)
def test_impossible_values_exit_3_naming_file_line_field(
    tmp_path: Path, text: str, where: str
) -> None:
    good = CASES / "sglang-33483-eager-decode" / "min.log"
    bad = tmp_path / "bad.log"
    bad.write_text(text)
    ledger = tmp_path / "l.duckdb"
    out = cli(ledger, "import", str(good), str(bad))
    assert out.returncode == 3
    assert out.stderr.strip().count("\n") == 0 and f"{bad}{where}" in out.stderr
    assert not ledger.exists() or LedgerStore(ledger).query_arrow(
        "SELECT count(*) AS n FROM events"
    ).to_pylist() == [{"n": 0}]


def test_capacity_zero_then_negative_exit_3(tmp_path: Path) -> None:
    limits = (
        "[2026-05-01 10:00:00] max_total_num_tokens=100, chunked_prefill_size=8, max_prefill_tokens=8, "
        "max_running_requests={}, context_len=8\n[2026-05-01 10:00:01] The server is fired up and ready to roll!\n"
    )
    first, second = tmp_path / "zero.log", tmp_path / "negative.log"
    first.write_text(limits.format(0))
    second.write_text(limits.format(-1))
    ledger = tmp_path / "l.duckdb"
    for path in (first, second):
        out = cli(ledger, "import", str(path))
        assert out.returncode == 3, out.stderr
        assert f"{path}:1: field max_running_requests: max_running_requests=" in out.stderr
        assert "ZeroDivisionError" not in out.stderr and out.stderr.strip().count("\n") == 0


# --- 11. warm-up outliers (sglang-18870-minimax-sm120-warmup) ------------------------------------


def test_18870_cold_first_run_is_set_aside_and_the_comparison_is_no_change(tmp_path: Path) -> None:
    case = CASES / "sglang-18870-minimax-sm120-warmup"
    baseline = import_file(case / "baseline_default_moe.jsonl").events
    assert [e.repeat for e in baseline] == [1, 2, 3]
    assert [e.valid for e in baseline] == [False, True, True]
    assert (
        "cold first run set aside" in baseline[0].validity_notes[0]
        and "1000.4" in baseline[0].validity_notes[0]
    )
    assert all(
        e.valid for e in import_file(case / "tuned_moe.jsonl").events
    )  # its own noise is not a cold start
    ledger = tmp_path / "l.duckdb"
    assert (
        cli(
            ledger,
            "import",
            "--session",
            "s",
            "--config-name",
            "baseline",
            str(case / "baseline_default_moe.jsonl"),
        ).returncode
        == 0
    )
    assert (
        cli(
            ledger,
            "import",
            "--session",
            "s",
            "--config-name",
            "tuned",
            str(case / "tuned_moe.jsonl"),
        ).returncode
        == 0
    )
    (row,) = (
        LedgerStore(ledger)
        .query_arrow(
            "SELECT change_pct, verdict, baseline_runs, runs FROM benchmark_deltas "
            "WHERE config_name = 'tuned' AND concurrency = 64 AND metric = 'output_throughput'"
        )
        .to_pylist()
    )
    assert row["verdict"] == "no-measurable-change" and (row["baseline_runs"], row["runs"]) == (
        2,
        3,
    )
    # Geometric means, as every comparison (runners.compare): the log-ratio change.
    assert row["change_pct"] == pytest.approx(
        100 * ((1445.0 * 1450.3 * 1441.6) ** (1 / 3) / (1440.2 * 1438.1) ** (1 / 2) - 1)
    )
    assert 0.4 < row["change_pct"] < 0.5  # the README's +0.4% steady state, not +11.8% "improved"


def test_cold_first_run_rule() -> None:
    from ledger.derive.warmup import cold_first_run

    assert cold_first_run([1000.4, 1440.2, 1438.1]) is not None
    assert cold_first_run([1445.0, 1450.3, 1441.6]) is None  # noise
    assert cold_first_run([1440.0, 1440.0, 1440.0, 1410.0]) is None  # -2.1% but not the first run
    assert cold_first_run([1420.0, 1440.0, 1440.0]) is None  # within the 2% floor although MAD is 0
    assert cold_first_run([1000.0, 1440.0]) is None  # two runs tell nothing
    assert cold_first_run([1600.0, 1440.0, 1438.0]) is None  # faster first run: not a warm-up


def test_5360_bench_jsonl_sweep() -> None:
    events = import_file(
        CASES / "sglang-pr5360-bench-jsonl-sweep" / "llama_405b_results.jsonl"
    ).events
    assert len(events) == 7
    closed = events[:6]
    assert [e.concurrency for e in closed] == [1, 2, 4, 8, 16, 24]
    assert [e.metrics.completed for e in closed] == [5, 10, 20, 32, 48, 72]
    assert all(e.workload.load == "closed-loop" and e.workload.request_rate is None for e in closed)
    assert events[6].workload.request_rate == 4.0 and events[6].concurrency is None
    assert {(e.workload.input_len, e.workload.output_len, e.workload.dataset) for e in events} == {
        (8192, 1024, "random")
    }
    assert all(
        e.repeat is None and e.valid for e in events
    )  # one run per workload: no series, nothing set aside


# --- 9. the time of the fact -------------------------------------------------------------------


def test_imported_events_keep_the_log_time_apart_from_recorded_at(tmp_path: Path) -> None:
    path = CASES / "sglang-33483-eager-decode" / "server.log"
    events = events_of("sglang-33483-eager-decode", "server.log")
    started, ready = one(events, ServerStarted), one(events, ServerReady)
    assert started.occurred_at == datetime(2026, 8, 2, 11, 40, 3, tzinfo=UTC)
    assert ready.occurred_at == datetime(2026, 8, 2, 11, 40, 25, tzinfo=UTC)
    (eager,) = [f for f in findings(events) if f.kind == "decode-without-cuda-graph"]
    assert eager.occurred_at == datetime(
        2026, 8, 2, 11, 40, 22, tzinfo=UTC
    )  # its first evidence line
    (run,) = runs_of(tmp_path, path)
    assert run["occurred_at"] == datetime(2026, 8, 2, 11, 40, 3, tzinfo=UTC)
    assert (
        run["started_at"] > datetime(2026, 11, 1, tzinfo=UTC)
        or run["started_at"] != run["occurred_at"]
    )
    store = LedgerStore(tmp_path / "cases.duckdb")
    times = store.query_arrow("SELECT type, occurred_at FROM timeline ORDER BY seq").to_pylist()
    assert times[0] == {
        "type": "server_started",
        "occurred_at": datetime(2026, 8, 2, 11, 40, 3, tzinfo=UTC),
    }
    assert store.read()[0].occurred_at == datetime(2026, 8, 2, 11, 40, 3, tzinfo=UTC)  # round trip


def test_demo_runs_show_their_logs_dates_and_export_shows_them(tmp_path: Path) -> None:
    from ledger.cli.demo import build_demo
    from ledger.export.markdown import render_markdown

    store = build_demo(tmp_path / "demo.duckdb")
    runs = store.query_arrow(
        "SELECT config_name, occurred_at FROM server_runs ORDER BY started_seq"
    ).to_pylist()
    # the two runs whose logs the demo cites; the seeds' messages carry no dates
    assert [r["occurred_at"] for r in runs if r["occurred_at"]] == [
        datetime(2026, 11, 20, 14, 2, 11, tzinfo=UTC),
        datetime(2026, 11, 20, 15, 10, 3, tzinfo=UTC),
    ]
    text = render_markdown(store, session_id="qwen35-sm120")
    assert "Started (log time, UTC)" in text and "2026-11-20 14:02:11" in text
    full = render_markdown(store, session_id="qwen35-sm120", timeline_max_rows=1000)
    assert "Occurred (UTC)" in full and "2026-11-20 15:12:10" in full  # the fusion run's ready line


def test_a_ledger_of_layout_1_gets_the_occurred_at_column(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "old.duckdb"
    LedgerStore(path).init()
    con = duckdb.connect(str(path))
    con.execute("DROP VIEW IF EXISTS timeline; DROP VIEW IF EXISTS event_log")
    for view in [
        r[0]
        for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    ]:
        con.execute(f'DROP VIEW IF EXISTS "{view}"')
    con.execute("ALTER TABLE events DROP COLUMN occurred_at")
    con.execute("UPDATE ledger_meta SET value = '17' WHERE key = 'views_version'")
    con.execute("UPDATE ledger_meta SET value = '1' WHERE key = 'layout_version'")
    con.close()
    store = LedgerStore(path)
    store.append(import_file(CASES / "sglang-33483-eager-decode" / "min.log").events)
    (row,) = store.query_arrow("SELECT occurred_at FROM server_runs").to_pylist()
    assert row["occurred_at"] == datetime(2026, 8, 2, 11, 40, 22, tzinfo=UTC)
    assert store.query_arrow(
        "SELECT value FROM ledger_meta WHERE key = 'layout_version'"
    ).to_pylist() == [{"value": str(LAYOUT_VERSION)}]


# --- 8. flags already known to do nothing -------------------------------------------------------

_NCDS_LOG = (
    "[2026-09-01 10:00:00] server_args={{'model_path': '/m', 'tp_size': 2, 'num_continuous_decode_steps': {steps}}}\n"
    "[2026-09-01 10:00:40 TP0] Using default MoE kernel config. Performance might be sub-optimal! Config file not "
    "found at /x/triton_3_6_0/E=128,N=384,device_name={device}.json, you can create them with https://x\n"
    "[2026-09-01 10:00:50] The server is fired up and ready to roll!\n"
)


def _dead_code_verdict(ledger: Path, version: str) -> str:
    host = json.dumps(
        {"compute_capability": "sm120", "engine": "sglang", "engine_version": version}
    )
    out = cli(
        ledger,
        "append",
        "flag_researched",
        "-f",
        "flag=num-continuous-decode-steps",
        "-f",
        "verdict=dead-code",
        "-f",
        "what_it_does=defined in ServerArgs, never read",
        "--host",
        host,
        "--json",
    )
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    return row["event_id"]


@pytest.mark.parametrize(
    ("steps", "device", "expected"),
    [
        (4, "NVIDIA_GeForce_RTX_5090", True),  # set, on the arch of the verdict
        (1, "NVIDIA_GeForce_RTX_5090", False),  # its default: not "set"
        (4, "NVIDIA_H100_80GB_HBM3", False),  # another arch: the verdict does not apply
    ],
)
def test_a_flag_known_to_do_nothing_gets_a_finding_citing_the_verdict(
    tmp_path: Path, steps: int, device: str, expected: bool
) -> None:
    ledger = tmp_path / "l.duckdb"
    verdict_id = _dead_code_verdict(ledger, "0.5.23")
    log = tmp_path / "run.log"
    log.write_text(_NCDS_LOG.format(steps=steps, device=device))
    out = cli(ledger, "import", str(log))
    assert out.returncode == 0, out.stderr
    rows = (
        LedgerStore(ledger)
        .query_arrow(
            "SELECT payload->>'message' AS message, payload->'evidence'->0->>'ref' AS ref, source "
            "FROM live_events WHERE payload->>'kind' = 'known-no-effect'"
        )
        .to_pylist()
    )
    if not expected:
        assert rows == []
        return
    (row,) = rows
    assert row["ref"] == verdict_id and row["source"] == "run.log"
    assert (
        "--num-continuous-decode-steps 4 is set" in row["message"]
        and "'dead-code' (researched)" in row["message"]
    )
    assert "sm120, sglang 0.5.23" in row["message"]


def test_the_server_runner_says_it_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runners.server.runner import ServerRunner
    from tests.support.fake_sglang import FAKE_SMI, fake_config

    monkeypatch.setenv(
        "TUNELEDGER_NVIDIA_SMI", str(FAKE_SMI)
    )  # an RTX PRO 6000 host (sm120), as in the runner tests
    monkeypatch.setenv("FAKE_GPU", "rtx6000")
    store = LedgerStore(tmp_path / "r.duckdb")
    verdict_id = _dead_code_verdict(store.path, "0.5.12")
    runner = ServerRunner(
        store,
        session_id="s1",
        poll_interval_s=0.05,
        sigint_wait_s=1.0,
        sigterm_wait_s=1.0,
        sigkill_wait_s=5.0,
    )
    run = runner.start(fake_config("steps", **{"num-continuous-decode-steps": 4}))
    runner.stop(run)
    (finding,) = [e for e in store.read(types=["finding_recorded"]) if e.kind == "known-no-effect"]
    assert finding.server_run_id == run.run_id and finding.evidence[0].ref == verdict_id
    assert finding.flag == "num-continuous-decode-steps"


def test_the_same_log_given_twice_is_stored_once(tmp_path: Path) -> None:
    log = CASES / "sglang-10521-default-moe-tp1" / "min.log"
    ledger = tmp_path / "l.duckdb"
    out = cli(ledger, "import", str(log), str(log), "--json")
    assert out.returncode == 0, out.stderr
    assert [row["events"] for row in json.loads(out.stdout)] == [2, 2]
    assert LedgerStore(ledger).query_arrow("SELECT count(*) AS n FROM events").to_pylist() == [
        {"n": 2}
    ]


def test_one_log_under_two_names_or_with_a_byte_order_mark_is_stored_once(tmp_path: Path) -> None:
    """A copy of a log under another name is the same run: one call stores it once (as two
    calls do), and a UTF-8 byte-order mark at the start is not read as a line prefix."""
    log = CASES / "sglang-10521-default-moe-tp1" / "min.log"
    copy = tmp_path / "copy.log"
    copy.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    ledger = tmp_path / "l.duckdb"
    out = cli(ledger, "import", str(log), str(copy))
    assert out.returncode == 0, out.stderr
    assert LedgerStore(ledger).query_arrow("SELECT count(*) AS n FROM events").to_pylist() == [
        {"n": 2}
    ]


def test_a_wrapper_not_recognised_is_refused_not_half_parsed(tmp_path: Path) -> None:
    lines = (CASES / "olmocr-105-wrapped-sglang-log" / "server.log").read_text().splitlines()
    odd = tmp_path / "odd.log"
    # a host prefix with neither a time, a level nor a column bar
    odd.write_text(
        "[2025-03-07 23:50:20] server_args=ServerArgs(tp_size=1)\n"
        + "\n".join("olmocr>> " + line.split(" - ", 3)[-1] for line in lines)
        + "\n"
    )
    out = cli(tmp_path / "l.duckdb", "import", str(odd))
    assert out.returncode == 3
    assert (
        f"{odd}:2: field line prefix: SGLang line after an unrecognised prefix 'olmocr>>'"
        in out.stderr
    )


def test_imported_logs_take_the_host_given_or_the_sessions(tmp_path: Path) -> None:
    """sglang#12178's log names no GPU: the arch comes from --host, or from the session's own host."""
    log = CASES / "sglang-12178-fa3-sm120" / "server.log"
    ledger = tmp_path / "l.duckdb"
    assert cli(ledger, "init").returncode == 0
    host = start_sm120_session(ledger)
    assert cli(ledger, "import", "--session", "s1", str(log)).returncode == 0
    rows = (
        LedgerStore(ledger)
        .query_arrow("SELECT flag, value, verdict, arch FROM flag_verdicts")
        .to_pylist()
    )
    # The verdict is on the backend that crashed (fa3), not on every attention backend.
    assert rows == [
        {"flag": "attention-backend", "value": "fa3", "verdict": "incompatible", "arch": "sm120"}
    ]
    # A verdict on the flag as a whole stands beside it: neither replaces the other.
    assert (
        cli(
            ledger,
            "append",
            "flag_researched",
            "--session",
            "s1",
            "-f",
            "flag=attention-backend",
            "-f",
            "verdict=effective",
            "--host",
            host,
        ).returncode
        == 0
    )
    both = LedgerStore(ledger).query_arrow(
        "SELECT value, verdict FROM flag_verdicts WHERE flag = 'attention-backend' ORDER BY value"
    )
    assert both.to_pylist() == [
        {"value": "fa3", "verdict": "incompatible"},
        {"value": None, "verdict": "effective"},
    ]
    other = tmp_path / "m.duckdb"
    assert (
        cli(other, "import", "--host", '{"compute_capability": "12.0"}', str(log)).returncode == 0
    )
    assert LedgerStore(other).query_arrow("SELECT arch FROM flag_verdicts").to_pylist() == [
        {"arch": "sm120"}
    ]
    bad = cli(other, "import", "--host", "{bad", str(log))
    assert bad.returncode == 3 and bad.stderr.startswith("tuneledger: error: --host:")


def test_one_log_imported_into_two_sessions_is_two_server_runs(tmp_path: Path) -> None:
    log = CASES / "sglang-7249-rmsnorm-no-kernel-image" / "server.log"
    ledger = tmp_path / "l.duckdb"
    assert cli(ledger, "import", str(log)).returncode == 0
    assert cli(ledger, "import", "--session", "other", str(log)).returncode == 0
    rows = (
        LedgerStore(ledger)
        .query_arrow("SELECT run_id, session_id FROM server_runs ORDER BY session_id")
        .to_pylist()
    )
    assert len(rows) == 2 and len({r["run_id"] for r in rows}) == 2


def test_importing_a_log_again_with_another_host_says_why_it_is_refused(tmp_path: Path) -> None:
    """Exit 8 names the file and the way out, not only an event id."""
    log = CASES / "sglang-7249-rmsnorm-no-kernel-image" / "server.log"
    ledger = tmp_path / "l.duckdb"
    assert cli(ledger, "import", str(log)).returncode == 0
    again = cli(ledger, "import", "--host", '{"compute_capability": "12.0"}', str(log))
    assert again.returncode == 8
    assert again.stderr.startswith(f"tuneledger: error: {log}: event_id ")
    assert "imported before with other options" in again.stderr and again.stderr.count("\n") == 1
