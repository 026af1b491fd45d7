"""``run bench --tool X``'s options as the shell gives them: relative paths resolve
against the caller's cwd, not the artifacts folder the tool runs in; an option the tool cannot
take is refused; what the tool's own file records wins over what was asked, and a disagreement
is noted. In-process CLI, a real (failing) program as the tool."""

from __future__ import annotations

import subprocess
from pathlib import Path

from runners.bench.external import ToolWorkload, recorded_workload
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


def test_no_ignore_eos_is_refused_for_vllm_whose_random_dataset_sends_it_anyway(
    tmp_path: Path,
) -> None:
    """``vllm bench serve`` 0.32.0 sets ``ignore_eos`` for its random dataset whatever it is
    told (seen on the wire by docs/vllm-cpu.md's transformers serve pairing: ``"ignore_eos":
    true`` in a run asked ``--no-ignore-eos``): recording the run as without it would record
    what was asked, not what the tool did, so the option is refused before anything runs."""
    out = _bench_with(tmp_path, "vllm", "--no-ignore-eos")
    assert out.returncode == 3, out.stderr  # invalid input (ledger/errors.py)
    assert "--no-ignore-eos: vllm bench serve sends ignore_eos" in out.stderr
    assert not (tmp_path / "l.artifacts" / "bench").exists()  # the tool never ran
