"""Logs as users paste them (docs/engines.md, "Excerpts"): the tail around an error with no start
line, the decorations of launchers and CI, flattened and wrapped lines; one test per kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.engines.identify import LOOKED_FOR, identify
from ledger.engines.lines import strip_layers, unflatten
from ledger.engines.sglang_log import parse_server_log
from ledger.engines.vllm_log import parse_vllm_log
from ledger.errors import InvalidInput
from ledger.importers import import_file
from tests.support.cli_inprocess import invoke

SG_FRAME = '  File "/usr/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 2795, in run_scheduler_process'
VL_FRAME = '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core'
V1 = "(EngineCore_DP0 pid=17) ERROR 09-28 15:47:24 [core.py:718] "


# --- which engine wrote it -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "engine"),
    [
        ([SG_FRAME, "    scheduler = Scheduler("], "sglang"),
        (["[2025-01-01 10:00:00 TP3] Load weight end. type=X"], "sglang"),
        (["[23:17:01 TP7] Decode batch. #running-req: 1"], "sglang"),  # old SGLang: time only
        (["$ python -m sglang.launch_server --model-path m"], "sglang"),
        (["RuntimeError: Rank 0 scheduler died during initialization (exit code: -7)"], "sglang"),
        ([V1 + "EngineCore failed to start."], "vllm"),
        (["INFO 10-30 11:46:47 async_llm_engine.py:173] Added request 5."], "vllm"),  # before 0.8
        (["ERROR 11-04 18:02:56 [v1/executor/multiproc_executor.py:597] x"], "vllm"),
        ([VL_FRAME, "ValueError: x", VL_FRAME], "vllm"),
    ],
)
def test_an_excerpt_names_its_engine_by_any_line(lines: list[str], engine: str) -> None:
    assert identify(lines).engine == engine


@pytest.mark.parametrize(
    "lines",
    [
        ["ERROR: Could not find a version that satisfies the requirement vllm==9.9"],
        ["[2026-01-26 15:58:16] Starting vLLM Head Node Setup"] * 20,  # a wrapper's own lines
        ['  File "/home/u/client.py", line 3, in <module>', "httpx.ConnectError: refused"],
    ],
)
def test_text_with_nothing_an_engine_writes_names_no_engine(lines: list[str]) -> None:
    assert identify(lines).engine is None


def test_a_refusal_says_what_was_looked_for(tmp_path: Path) -> None:
    path = tmp_path / "pip.log"
    path.write_text("ERROR: No matching distribution found for sglang==9\n")
    with pytest.raises(InvalidInput) as exc:
        import_file(path)
    assert str(exc.value).endswith(f"no engine log line in it (looked for {LOOKED_FOR})")


# --- decorations, one normaliser -------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "2024-05-01T12:34:56.1234567Z ValueError: x",  # GitHub Actions, kubectl --timestamps
        "[2024-05-01T12:34:56Z] ValueError: x",  # Buildkite
        "[pod/sglang-0/server] ValueError: x",  # kubectl logs --prefix
        "sglang-1  | ValueError: x",  # docker compose
        "Mar 07 23:50:27 host python[811]: ValueError: x",  # journald
        "  | ValueError: x",  # a CI viewer's gutter
        "> ValueError: x",  # a quoted paste
        "\x1b[1;31mValueError: x\x1b[0m",  # ANSI colour
        "[1;36mValueError: x[0;0m",  # ANSI colour whose ESC a paste dropped
        "`ValueError: x`",  # Markdown inline code
        "^CValueError: x",  # a terminal's echo of Ctrl-C
    ],
)
def test_every_decoration_comes_off_by_one_normaliser(raw: str) -> None:
    assert strip_layers(raw)[0] == "ValueError: x"


def test_a_code_fence_is_no_line_and_an_autolinked_timestamp_is_a_timestamp() -> None:
    assert strip_layers("```python")[0] == ""
    assert (
        strip_layers("[[2025-11-19 14](tel:2025-11-19 14):41:27] x")[0] == "[2025-11-19 14:41:27] x"
    )


def test_an_old_time_only_prefix_is_sglangs() -> None:
    facts = parse_server_log(["[23:17:01 TP7] Decode batch. #running-req: 1, #token: 90"])
    assert facts.last_timestamp is not None and facts.last_timestamp.hour == 23


# --- the root cause on tracebacks as engines print them --------------------------------------


def _sglang_failure(lines: list[str]) -> tuple[str, str, str]:
    facts = parse_server_log(lines)
    assert facts.crash is not None
    return facts.outcome.state, facts.crash.cause, facts.crash.message


def test_a_tail_among_the_frames_fails_on_its_exception_not_the_raise_line() -> None:
    lines = [
        SG_FRAME,
        '    raise RuntimeError("CUDA error: an illegal memory access was encountered")',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[2026-03-03 14:53:15] Received sigquit from a child process. It usually means the child failed.",
    ]
    assert _sglang_failure(lines) == (
        "failed",
        "crash",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    )


def test_a_paste_that_lost_indentation_still_reads_its_frames() -> None:
    lines = [
        "Traceback (most recent call last):",
        SG_FRAME.strip(),
        'raise ValueError(f"Unsupported compute capability: {major}.{minor}")',
        "ValueError: Unsupported compute capability: 12.0",
    ]
    assert _sglang_failure(lines)[2] == "ValueError: Unsupported compute capability: 12.0"


def test_a_chain_gives_its_first_cause() -> None:
    lines = [
        "Traceback (most recent call last):",
        SG_FRAME,
        "    x = f()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        SG_FRAME,
        "RuntimeError: Failed to initialize the KV cache",
    ]
    assert _sglang_failure(lines) == (
        "failed",
        "out-of-memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )


def test_vllms_process_banner_is_never_the_cause() -> None:
    lines = [
        V1 + VL_FRAME,
        V1 + "    raise ValueError(",
        V1 + "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        "(EngineCore_DP0 pid=17) Process EngineCore_DP0:",
        "(EngineCore_DP0 pid=17) Traceback (most recent call last):",
    ]
    crash = parse_vllm_log(lines).facts.crash
    assert crash is not None and crash.cause == "out-of-memory"
    assert crash.message.startswith("ValueError: No available memory for the cache blocks")


@pytest.mark.parametrize(
    "exception",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: NPU out of memory. Tried to allocate 98.71 GiB",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
        "cuda error, Last error: Cuda failure 'out of memory'",
        "ValueError: Free memory on device (3.2/4.0 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 3.6 GiB).",
        "ValueError: No available memory for the cache blocks.",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ],
)
def test_every_oom_spelling_is_out_of_memory(exception: str) -> None:
    crash = parse_vllm_log([V1 + VL_FRAME, V1 + exception]).facts.crash
    assert crash is not None and (crash.cause, crash.message) == ("out-of-memory", exception)


def test_a_lone_exception_line_is_the_failure() -> None:
    line = "2025-10-23T10:40:45.044738408Z (EngineCore_DP0 pid=325) huggingface_hub.errors.HFValidationError: Repo id must be in the form 'namespace/repo_name'"
    crash = parse_vllm_log([line]).facts.crash
    assert crash is not None and crash.message.startswith(
        "huggingface_hub.errors.HFValidationError"
    )


def test_a_flattened_log_is_split_at_its_records() -> None:
    head = "ERROR 11-04 18:02:56 [v1/executor/multiproc_executor.py:597] "
    flat = " ".join(
        [
            head + "Traceback (most recent call last):",
            head + 'File "/x/vllm/distributed/pynccl.py", line 162, in all_reduce',
            head + "self.nccl.ncclAllReduce(buf)",
            head + 'raise RuntimeError(f"NCCL error: {error_str}")',
            head + "RuntimeError: NCCL error: unhandled cuda error",
        ]
    )
    assert len(unflatten([flat])) == 5
    crash = parse_vllm_log([flat]).facts.crash
    assert crash is not None and crash.message == "RuntimeError: NCCL error: unhandled cuda error"


def test_a_clean_shutdown_pasted_alone_is_a_stop() -> None:
    lines = [
        "^C(EngineCore pid=39) INFO 05-26 19:19:56 [core.py:1155] [shutdown] EngineCore: trigger "
        "received signal=SIGINT",
        "(APIServer pid=35) INFO 05-26 19:19:56 [launcher.py:100] [shutdown] API server: shutdown triggered",
    ]
    assert parse_vllm_log(lines).facts.outcome.state == "stopped"


# --- a paste on standard input -----------------------------------------------------------------


def test_an_excerpt_on_stdin_is_the_same_run_as_the_file(tmp_path: Path) -> None:
    text = "\n".join(
        [
            SG_FRAME,
            "    x()",
            "AssertionError: FlashAttention v3 Backend requires SM>=80 and SM<=90.",
        ]
    )
    path = tmp_path / "tail.log"
    path.write_text(text + "\n")
    sql = "SELECT run_id, engine, status, failure_cause, failure_message FROM server_runs"
    rows = []
    for name, args, stdin in (("a", [str(path)], None), ("b", ["-"], text + "\n")):
        ledger = str(tmp_path / f"{name}.duckdb")
        done = invoke(["--ledger", ledger, "import", "--create", *args], stdin=stdin)
        assert done.returncode == 0, done.stderr
        rows.append(invoke(["--ledger", ledger, "sql", "--format", "csv", sql]).stdout)
    assert rows[0] == rows[1]
    assert "sglang,failed,crash,AssertionError: FlashAttention v3" in rows[0]


def test_a_cloud_viewers_newest_first_export_is_read_oldest_first() -> None:
    rows = [
        "Traceback (most recent call last):",
        SG_FRAME.strip(),
        "x = y[name]",
        "KeyError: 'model.layers.55.mlp.gate_up_proj.input_scale'",
        "[2025-04-07 19:13:52] Received sigquit from a child process. It usually means the child failed.",
    ]
    export = [f"ERROR 2025-04-07T19:13:52.3178{60 + i}Z {row}" for i, row in enumerate(rows)]
    state, cause, message = _sglang_failure(export[::-1])
    assert (state, cause) == ("failed", "crash")
    assert message == "KeyError: 'model.layers.55.mlp.gate_up_proj.input_scale'"


def test_a_command_line_refusal_pasted_alone_is_the_engines_failure() -> None:
    lines = [
        "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...",
        "vllm: error: unrecognized arguments: --omni",
    ]
    assert identify(lines).engine == "vllm"
    crash = parse_vllm_log(lines).facts.crash
    assert crash is not None and crash.message == "vllm: error: unrecognized arguments: --omni"


def test_sglang_inside_a_ray_actors_prefix() -> None:
    lines = [
        "(WorkerDict pid=281552) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.84 GiB.",
        "(WorkerDict pid=281552) [2025-04-23 19:23:11] Received sigquit from a child process. It usually means the child failed.",
    ]
    assert _sglang_failure(lines)[:2] == ("failed", "out-of-memory")


def test_uvicorns_running_line_is_sglangs_readiness_where_its_own_is_not_shown() -> None:
    lines = [
        "[2024-12-09 16:10:09] INFO:     Uvicorn running on http://0.0.0.0:8008 (Press CTRL+C to quit)",
        '[2024-12-09 16:10:51] INFO:     10.0.0.1:46322 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]
    facts = parse_server_log(lines)
    assert facts.outcome.state == "ready" and facts.ready


def test_a_line_wrapped_mid_word_keeps_its_cause() -> None:
    lines = [
        "Traceback (most recent call last):",
        SG_FRAME,
        "torch.OutOfMemoryError: CUDA out of mem",
        "ory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB",
    ]
    state, cause, message = _sglang_failure(lines)
    assert (state, cause) == ("failed", "out-of-memory")
    assert message == "torch.OutOfMemoryError: CUDA out of mem"
