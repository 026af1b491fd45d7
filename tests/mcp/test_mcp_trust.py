"""Trust made explicit (docs/reliability.md): the MCP tools that start processes are served
only with ``--allow-run``; and a file an agent names is read as the CLI reads it (a device
is refused in one line, ``ledger.input_files``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import call, in_process, refused

pytestmark = pytest.mark.anyio

PROCESS_TOOLS = {"start_server", "run_bench", "run_plan", "run_spec", "run_tune"}


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    LedgerStore(path).init()
    return path


async def test_tools_that_start_processes_are_off_without_allow_run(ledger: Path) -> None:
    async with in_process(ledger, allow_run=False) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert not names & PROCESS_TOOLS and "record" in names and "sql" in names
    async with in_process(ledger, allow_run=True) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert PROCESS_TOOLS <= names
    listed = invoke(["--ledger", ledger, "mcp", "--list-tools"])
    assert listed.returncode == 0
    assert not {t["name"] for t in json.loads(listed.stdout)} & PROCESS_TOOLS


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("run_plan", {"plan_file": "/dev/zero"}),
        ("run_spec", {"spec_file": "/dev/urandom"}),
        ("start_server", {"config": "x", "configs": "/dev/zero"}),
    ],
)
async def test_a_device_named_by_an_agent_is_one_line(
    ledger: Path, tool: str, arguments: dict[str, str]
) -> None:
    async with in_process(ledger) as client:
        error = (await refused(client, tool, arguments))["error"]
    assert error["exit_code"] == 3
    assert error["message"].endswith("not a regular file (a character device)")


async def test_sql_answers_are_capped_in_bytes_before_they_are_built(ledger: Path) -> None:
    """A 100 MB value held the server for minutes (20 MB: 23 s); now the answer is cut at
    ``MAX_ANSWER_BYTES`` as it is fetched, and says so; the server answers the next call."""
    from ledger.read.sql_sandbox import MAX_ANSWER_BYTES

    async with in_process(ledger) as client:
        one = await call(client, "sql", {"query": "SELECT repeat('x', 100000000) AS v"})
        assert one["rows"] == [] and one["truncated"] is True and one["columns"] == ["v"]
        many = await call(
            client,
            "sql",
            {
                "query": "SELECT i, repeat('y', 10000) AS v FROM range(10000) r(i)",
                "max_rows": 10000,
            },
        )
        assert many["truncated"] is True
        assert 0 < len(many["rows"]) * 10000 <= MAX_ANSWER_BYTES
        assert [row["i"] for row in many["rows"]] == list(range(len(many["rows"])))
        small = await call(client, "sql", {"query": "SELECT 1 AS one"})
        assert small == {"columns": ["one"], "rows": [{"one": 1}], "truncated": False}


def test_malformed_and_over_deep_messages_get_a_json_rpc_error(ledger: Path) -> None:
    """Each line that is no JSON-RPC message is answered (id null, -32700 or -32600), and the
    server goes on answering: before, it dropped them in silence."""
    import os
    import subprocess
    import sys

    lines = [
        "not json",
        "[" * 100_000 + "]" * 100_000,
        '{"jsonrpc": "2.0", "id": 7, "method": "ping"}',
        "[1, 2]",
        '{"jsonrpc": "2.0", "id": 8, "method": "ping"}',
    ]
    # as a client does: the answers are read before standard input is closed (at end of input
    # the SDK abandons the requests still in flight)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli", "--ledger", str(ledger), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TUNELEDGER_RESIDENT": "0"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in lines]
    proc.stdin.close()
    proc.wait(timeout=120)
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    # The malformed lines' errors (id null) come in the lines' order, written by the one task
    # that reads the wire; a request's answer comes from the task that serves it, so it may
    # come before or after the error of a line read after it (JSON-RPC 2.0 lets a server answer
    # in any order: a client matches answers by id). Seen on a loaded machine:
    # docs/performance.md, *The test suite*.
    errors = [a.get("error", {}).get("code") for a in answers if a["id"] is None]
    assert errors == [-32700, -32700, -32600], answers
    answered = {a["id"]: a.get("error") for a in answers if a["id"] is not None}
    assert answered == {7: None, 8: None}, answers
    assert "Traceback" not in stderr
