"""``run bench --tool X``'s options as the shell gives them: relative paths resolve
against the caller's cwd, not the artifacts folder the tool runs in; an option the tool cannot
take is refused; what the tool's own file records wins over what was asked, and a disagreement
is noted. In-process CLI, a real (failing) program as the tool."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from runners.bench.external import ToolWorkload, recorded_workload, tool_argv
from runners.bench.workload import WorkloadSpec, build_workload
from schemas.parts import Workload
from tests.support.cli_inprocess import invoke


def _tool(tmp_path: Path) -> Path:
    """A program that exits 1 (the command line it was given is what the test reads)."""
    tool = tmp_path / "bin" / "fake-aiperf"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexit 1\n")
    tool.chmod(0o755)
    return tool


def test_relative_tool_path_and_tokenizer_resolve_against_the_callers_cwd(tmp_path: Path) -> None:
    _tool(tmp_path)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    out = invoke(
        [
            "--ledger",
            tmp_path / "l.duckdb",
            "run",
            "bench",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--tool",
            "aiperf",
            "--tool-path",
            "bin/fake-aiperf",
            "--tokenizer",
            "tok",
        ],  # fmt: skip
        cwd=tmp_path,
    )
    # the tool ran (from the artifacts folder) and failed: not "not an executable file", not
    # a traceback; it was given the tokenizer folder by its absolute path, not a hub id
    assert out.returncode == 13, out.stderr
    assert f"{tmp_path / 'bin' / 'fake-aiperf'} profile" in out.stderr
    assert f"--tokenizer {tmp_path / 'tok'}" in out.stderr
    assert "not an executable file" not in out.stderr


def _bench_with(tmp_path: Path, tool_name: str, option: str) -> subprocess.CompletedProcess[str]:
    """``run bench --tool NAME`` (a stand-in program at ``--tool-path``) with one more option,
    against a port nothing serves: a refusal comes before anything is asked of it."""
    argv: list[str | Path] = [
        "--ledger",
        tmp_path / "l.duckdb",
        "run",
        "bench",
        "--url",
        "http://127.0.0.1:9",
    ]
    argv += ["--model", "m", "--tool", tool_name, "--tool-path", _tool(tmp_path), option]
    return invoke(argv)


def test_an_option_the_tool_cannot_take_is_refused(tmp_path: Path) -> None:
    out = _bench_with(tmp_path, "aiperf", "--server-metrics")
    assert out.returncode == 2 and "--server-metrics is for the built-in client only" in out.stderr


def test_the_tools_own_record_wins_and_a_disagreement_is_noted() -> None:
    asked = ToolWorkload(
        url="http://x", endpoint="chat", model="m", input_len=64, output_len=32,
        num_prompts=8, seed=0, warmup=1, tokenizer=None, ignore_eos=True,
    )  # fmt: skip
    own = Workload(dataset="random", input_len=64, output_len=None, seed=7, endpoint="chat")
    workload, notes = recorded_workload(own, asked)
    assert workload.seed == 7 and workload.output_len == 32 and workload.ignore_eos is True
    assert notes == ["the tool's file records seed 7, 0 was asked: the file's kept"]


def _asked(*, ignore_eos: bool) -> ToolWorkload:
    return ToolWorkload(
        url="http://x", endpoint="chat", model="m", input_len=16, output_len=8,
        num_prompts=5, seed=3, warmup=1, tokenizer=None, ignore_eos=ignore_eos,
    )  # fmt: skip


def test_no_ignore_eos_runs_vllm_on_our_prompts_as_a_sharegpt_file(tmp_path: Path) -> None:
    """``vllm bench serve`` 0.32.0 sets ``ignore_eos`` for its random dataset whatever it is
    told (vllm/benchmarks/serve.py: "when using random datasets, default to ignoring EOS"),
    and ``transformers serve`` answers 422 to the field (docs/vllm-cpu.md). With
    ``--no-ignore-eos`` the tool gets the built-in client's own prompts as a ShareGPT file,
    a dataset that sends the field only when asked: no ``--ignore-eos``, no random dataset."""
    argv, _ = tool_argv("vllm", ["vllm"], _asked(ignore_eos=False), concurrency=2,
                        request_rate=None, out_dir=tmp_path)  # fmt: skip
    assert "--ignore-eos" not in argv and "random" not in argv
    at = argv.index("--dataset-name")
    assert argv[at : at + 3] == ["--dataset-name", "sharegpt", "--dataset-path"]
    assert argv[argv.index("--sharegpt-output-len") + 1] == "8" and "--disable-shuffle" in argv
    turns = json.loads(Path(argv[at + 3]).read_text())
    ours = build_workload(WorkloadSpec(input_len=16, output_len=8, num_prompts=5, seed=3))
    assert [t["conversations"][0]["value"] for t in turns] == [p.text for p in ours.prompts]
    # asked to ignore EOS, it keeps its random dataset of the asked lengths
    argv, _ = tool_argv("vllm", ["vllm"], _asked(ignore_eos=True), concurrency=2,
                        request_rate=None, out_dir=tmp_path)  # fmt: skip
    assert "--ignore-eos" in argv and argv[argv.index("--dataset-name") + 1] == "random"
    assert argv[argv.index("--random-output-len") + 1] == "8"
