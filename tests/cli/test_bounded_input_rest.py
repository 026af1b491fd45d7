"""The entry points ``tests/cli/test_bounded_input.py`` does not reach, each as a real process
under an address-space limit (``RLIMIT_AS``, as ``ulimit -v`` sets it): a server log, a wheel
found by version, and a path an MCP agent names (docs/reliability.md, "Memory bounded by
design"). Under the limit an unbounded read ends in a ``MemoryError`` traceback, never in one
line with the documented exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.input_files import LIMITS
from tests.cli.test_bounded_input import _limited, init, one_line, run_limited


def test_a_server_log_that_is_a_fifo_or_past_the_bound_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    done = run_limited(tmp_path, "import", fifo)
    assert done.returncode == 3
    assert one_line(done).startswith(f"tuneledger: error: {fifo}: not a regular file (a FIFO)")
    big = tmp_path / "big-server.log"
    with big.open("wb") as handle:
        handle.truncate(LIMITS["result"] + 1)
    done = run_limited(tmp_path, "import", big)
    assert done.returncode == 3
    assert f"{big}: too large (256.0 MiB)" in one_line(done)


def test_a_wheel_that_is_a_fifo_or_a_device_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    os.mkfifo(wheels / "sglang-0.0.0-py3-none-any.whl")
    (wheels / "vllm-0.0.0-py3-none-any.whl").symlink_to("/dev/zero")
    monkeypatch.setenv("TUNELEDGER_WHEELS", str(wheels))  # run_limited passes os.environ on
    for engine, kind in (("sglang", "a FIFO"), ("vllm", "a character device")):
        done = run_limited(
            tmp_path, "research", "--engine", f"{engine}==0.0.0", "--arch", "sm120", "--offline"
        )
        # InvalidInput (exit 3) as every other entry point: only a regular file is read
        # (ledger/input_files.py, open_regular)
        assert done.returncode == 3, done.stderr
        assert one_line(done) == (
            f"tuneledger: error: {wheels}/{engine}-0.0.0-py3-none-any.whl: "
            f"not a regular file ({kind})"
        )


def test_a_device_an_mcp_agent_names_is_one_error_under_a_memory_limit(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    init(ledger)
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "run_plan", "arguments": {"plan_file": "/dev/zero"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "start_server",
                "arguments": {"config": "x", "configs": "/dev/urandom"},
            },
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli", "--ledger", str(ledger), "mcp", "--allow-run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limited,
        env={**os.environ, "TUNELEDGER_RESIDENT": "0"},
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    proc.stdin.flush()
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < 3:
        answer = json.loads(proc.stdout.readline())
        answers[answer["id"]] = answer
    proc.stdin.close()
    proc.wait(timeout=120)
    assert "Traceback" not in proc.stderr.read()
    for key, device in ((2, "/dev/zero"), (3, "/dev/urandom")):
        result = answers[key]["result"]
        assert result["isError"] is True, result
        assert [c["text"] for c in result["content"]] == [
            f"exit 3 (invalid-input): {device}: not a regular file (a character device)"
        ]
