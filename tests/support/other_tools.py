"""The real files of the field's other tools (tests/fixtures/other_tools/, tests/fixtures/vllm_cases/)
and what each imports as: listed once, for the importer tests (tests/importers/) and the fuzzing
of every input path (tests/write/test_fuzz.py)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
OTHER = TESTS / "fixtures" / "other_tools"
SHARED = OTHER / "shared"  # copies of ../shared/fixtures/other_tools
CASES = TESTS / "fixtures" / "vllm_cases"  # copies of ../shared/cases/vllm-*
GUIDELLM_RUN = OTHER / "guidellm_run"
AIPERF_RUN = OTHER / "aiperf_run"
VLLM_RESULT = CASES / "vllm-pr40852-bench-serve-result"
MOE_CASE = CASES / "vllm-39183-moe-config-triton-version"
MOE_NAME = "E=256,N=512,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=fp8_w8a8,block_shape=[128,128].json"
VLLM_LOG = CASES / "vllm-44688-default-moe-log" / "vllm_server.log"

#: (file, importer kind, number of benchmark/other events)
IMPORTABLE = [
    (VLLM_RESULT / "min_vllm_result.json", "vllm-bench-serve", 1),
    (
        VLLM_RESULT / "openai-chat-infqps-concurrency10-DeepSeek-V4-Flash-20260425-101512.json",
        "vllm-bench-serve",
        1,
    ),
    (
        SHARED / "vllm" / "2024-08-23_18-47-20_vllm_055_nightly_results.json",
        "vllm-nightly-results",
        15,
    ),
    (MOE_CASE / MOE_NAME, "vllm-moe-config", 1),
    (MOE_CASE / "no_version_key" / MOE_NAME, "sglang-moe-config", 1),
    (VLLM_LOG, "vllm-server-log", 3),
    (SHARED / "guidellm" / "benchmarks_stripped.json", "guidellm-benchmarks", 1),
    (SHARED / "guidellm" / "benchmarks_stripped.yaml", "guidellm-benchmarks", 1),
    (SHARED / "guidellm" / "benchmarks_stripped_output.txt", "guidellm-console", 1),
    (GUIDELLM_RUN / "benchmarks.json", "guidellm-benchmarks", 2),
    (GUIDELLM_RUN / "benchmarks.yaml", "guidellm-benchmarks", 2),
    (SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur1_550_150_summary.json", "llmperf-summary", 1),
    (SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur64_550_150_summary.json", "llmperf-summary", 1),
    (
        SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur1_550_150_individual_responses.json",
        "llmperf-individual-responses",
        1,
    ),
    (SHARED / "llmperf" / "vllm_Yi-1.5-34B_cur_64.json", "llmperf-aggregate", 1),
    (
        SHARED / "llmperf" / "a10g_vllm-meta-llama_Meta-Llama-3-8B-Instruct.csv",
        "llmperf-sweep-csv",
        7,
    ),
    (AIPERF_RUN / "profile_export_aiperf.json", "aiperf-json", 1),
    (AIPERF_RUN / "profile_export_aiperf.csv", "aiperf-csv", 1),
    (AIPERF_RUN / "profile_export.jsonl", "aiperf-records", 1),
    (OTHER / "aiperf_fine_run" / "profile_export_aiperf.json", "aiperf-json", 1),
    (OTHER / "aiperf_fine_run" / "profile_export_aiperf.csv", "aiperf-csv", 1),
    (OTHER / "aiperf_fine_run" / "profile_export.jsonl", "aiperf-records", 1),
    (OTHER / "guidellm_coarse_run" / "benchmarks.json", "guidellm-benchmarks", 2),
    (OTHER / "guidellm_fine_run" / "benchmarks.json", "guidellm-benchmarks", 1),
    (OTHER / "vllm_run" / "vllm_short.json", "vllm-bench-serve", 1),
    (OTHER / "vllm_cpu_bursts" / "all_bursts.json", "vllm-bench-serve", 1),
    (OTHER / "vllm_cpu_bursts" / "mixed_bursts.json", "vllm-bench-serve", 1),
    (SHARED / "sglang_repo" / "double_sparsity_smoke_16k_native_off.json", "sglang-script-ab", 2),
    (SHARED / "sglang_repo" / "double_sparsity_smoke_16k_native_on.json", "sglang-script-ab", 2),
    (SHARED / "sglang_repo" / "moe_tp_ep_e2e_none_r1_in1024.json", "sglang-script-run", 1),
    (SHARED / "sglang_repo" / "moe_tp_ep_serving-summary.json", "sglang-script-summary", 18),
]
#: Console captures, prompts and READMEs: not results, refused as unknown.
NOT_IMPORTABLE = [
    GUIDELLM_RUN / "console.txt",
    GUIDELLM_RUN / "prompts.jsonl",
    AIPERF_RUN / "console.txt",
    *sorted(CASES.glob("*/README.md")),
    # not supported (docs/importers.md), tests/importers/test_import_runs.py
    OTHER / "guidellm_coarse_run" / "benchmarks.csv",
    OTHER / "guidellm_coarse_run" / "console.txt",
    OTHER / "aiperf_fine_run" / "profile_export_console.txt",
    *sorted((OTHER / "inference_perf_run").glob("*.json")),
]
