"""Trust made explicit (docs/reliability.md): the MCP tools that start processes are served
only with ``--allow-run``; and a file an agent names is read as the CLI reads it (a device
is refused in one line, ``ledger.input_files``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import in_process, refused

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
    assert not names & PROCESS_TOOLS and "record_note_added" in names and "sql" in names
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
