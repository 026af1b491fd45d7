"""The MCP stdio server reads a message line of at most 8 MiB (docs/reliability.md, deep input
and MCP): a longer line is dropped as it streams and answered with a JSON-RPC parse error (id
null), and the server goes on serving. Before, the SDK's reader held the whole line: a client
sending gigabytes without a newline grew the server's memory without bound."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.mcp.wire import MAX_MESSAGE_BYTES
from ledger.store import LedgerStore

#: Enough for the interpreter and the server to start (its address space is ~0.4 GiB); less
#: than the line sent, so a reader that held the line whole would fail. The line was 4 GiB
#: beside a 3 GiB cap: 31 s of a worker, for the same question (docs/performance.md).
ADDRESS_SPACE = 1 << 30
LINE_BYTES = 3 << 29


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.mark.slow  # a real process fed tens of MB or more: seconds of CPU
def test_a_line_past_the_bound_is_answered_and_dropped_as_it_streams(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli", "--ledger", str(ledger), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TUNELEDGER_RESIDENT": "0"},
        preexec_fn=_limited,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    ping = b'{"jsonrpc": "2.0", "id": %d, "method": "ping"}\n'
    proc.stdin.write(ping % 1)
    # a request's start, then 4 GiB more without a newline: more than the process may map
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "')
    block = b"x" * (8 << 20)
    for _ in range(LINE_BYTES // len(block)):
        proc.stdin.write(block)
    proc.stdin.write(b'"}}\n')
    # one line just within the bound is still read (and, not JSON, answered as any such line)
    proc.stdin.write(b"y" * MAX_MESSAGE_BYTES + b"\n")
    proc.stdin.write(ping % 3)
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(4)]
    proc.stdin.close()
    proc.wait(timeout=120)
    stderr = proc.stderr.read().decode()
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert set(by_id) == {1, 3} and all("error" not in a for a in by_id.values()), answers
    errors = [a["error"] for a in answers if a["id"] is None]
    assert [e["code"] for e in errors] == [-32700, -32700], answers
    assert errors[0]["message"] == "Parse error: a message line over 8 MiB"
    assert errors[1]["message"].startswith("Parse error: Invalid JSON")
    assert "Traceback" not in stderr and "MemoryError" not in stderr
    assert proc.returncode == 0
