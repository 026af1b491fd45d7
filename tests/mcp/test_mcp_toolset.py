"""Tool sets an agent can hold: at most 30 tools and 40 KB of
``tools/list`` by default, every parameter described, verbs with enums, subsets by
``--tools``/``TUNELEDGER_MCP_TOOLS``, ``sql`` results capped in bytes, and the tools' imports
deferred past ``initialize``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.store import LedgerStore
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import call, in_process

pytestmark = pytest.mark.anyio


def _params(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(schema.get("properties", {}))


async def test_the_default_tool_list_fits_an_agents_context(ledger_path: Path) -> None:
    async with in_process(ledger_path) as client:
        listed = await client.list_tools()
    tools = listed.tools
    wire = json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert len(tools) <= 30
    assert len(wire.encode()) <= 40_000, len(wire.encode())
    undescribed = [
        f"{t.name}.{name}"
        for t in tools
        for name, schema in _params(t.input_schema).items()
        if not schema.get("description")
    ]
    assert undescribed == []
    by_name = {t.name: t for t in tools}
    triage = _params(by_name["triage_candidate"].input_schema)
    assert triage["status"]["enum"] == ["accepted", "rejected", "deferred", "done"]
    assert "effective" in triage["verdict"]["enum"]
    assert "high" in _params(by_name["propose_candidate"].input_schema)["priority"]["enum"]
    assert "note_added" in _params(by_name["record"].input_schema)["type"]["enum"]


def test_tools_profiles_serve_a_subset(ledger_path: Path) -> None:
    def names(*args: str, env: dict[str, str] | None = None) -> set[str]:
        out = invoke(
            ["--ledger", ledger_path, "mcp", "--list-tools", "--allow-run", *args], env=env
        )
        assert out.returncode == 0, out.stderr
        return {t["name"] for t in json.loads(out.stdout)}

    everything, core, runners = names(), names("--tools", "core"), names("--tools", "runners")
    assert "record" in core and "board" in core and "run_plan" not in core
    assert "run_plan" in runners and "start_job" in runners and "record" not in runners
    assert core | runners == everything and not core & runners
    assert names(env={"TUNELEDGER_MCP_TOOLS": "core"}) == core
    assert names("--tools", "core,runners") == everything
    bad = invoke(["--ledger", ledger_path, "mcp", "--tools", "most"])
    assert bad.returncode == 2 and "'most': expected core, runners, all" in bad.stderr


def test_the_counts_and_names_the_help_and_readme_give_are_the_served_ones(
    ledger_path: Path,
) -> None:
    """The README said 24 tools where a server without ``--allow-run`` serves 17, and ``mcp
    --help`` left two tools out."""

    def names(*args: str) -> set[str]:
        out = invoke(["--ledger", ledger_path, "mcp", "--list-tools", *args])
        assert out.returncode == 0, out.stderr
        return {t["name"] for t in json.loads(out.stdout)}

    served, allowed = names(), names("--allow-run")
    assert (len(served), len(allowed)) == (17, 24)
    help_text = " ".join(invoke(["mcp", "--help"]).stdout.split())
    assert all(name in help_text for name in allowed)
    assert "Tools (24)" in help_text and "17 tools without it" in help_text
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert "(24 tools with it, 17 without)" in readme


async def test_sql_results_are_capped_in_bytes_with_a_flag(store: LedgerStore) -> None:
    async with in_process(store.path) as client:
        big = await call(
            client,
            "sql",
            {"query": "SELECT repeat('x', 5000000) AS v", "max_bytes": 10_000},
        )
        many = await call(
            client,
            "sql",
            {"query": "SELECT range AS n, repeat('y', 100) AS pad FROM range(1000)"},
        )
        few = await call(client, "sql", {"query": "SELECT 1 AS one"})
    (row,) = big["rows"]
    assert big["truncated"] is True and 1000 < len(row["v"]) <= 10_000 and row["v"].endswith("…")
    assert many["truncated"] is False and len(many["rows"]) == 1000
    assert few == {"columns": ["one"], "rows": [{"one": 1}], "truncated": False}
    async with in_process(store.path) as client:
        capped = await call(
            client,
            "sql",
            {
                "query": "SELECT range AS n, repeat('y', 100) AS pad FROM range(1000)",
                "max_bytes": 5000,
            },
        )
    assert capped["truncated"] is True and 0 < len(capped["rows"]) < 1000
    assert len(json.dumps(capped["rows"])) <= 5000
    assert [r["n"] for r in capped["rows"]] == list(range(len(capped["rows"])))


def test_the_tools_imports_wait_until_after_initialize(tmp_path: Path) -> None:
    """Building the server imports neither DuckDB nor the runners: ``initialize`` is answered
    with the SDK alone, the tools are filled in the background (``LazyToolbox``)."""
    code = (
        "import sys; from pathlib import Path; from schemas import Actor;"
        "from ledger.mcp.command import build_app; from ledger.mcp.server import build_server;"
        f"app = build_app(Path({str(tmp_path / 'l.duckdb')!r}), Actor.parse('agent:x'), None, allow_run=True);"
        "build_server(app);"
        "print(sorted(m for m in ('duckdb', 'pyarrow', 'runners.server.runner', 'ledger.store') if m in sys.modules));"
        "print(len(app.toolbox) > 20)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "True"]


#: Modules ``initialize`` never waits for: the runners and their HTTP client, Arrow, DuckDB
#: and the store's connections (the ledger path is checked at start without them), the read
#: model, the tools' own modules (their pydantic argument models and JSON Schemas), rich.
DEFERRED = (
    "runners",
    "duckdb",
    "ledger.store.ledger_store",
    "ledger.store.connection",
    "httpx",
    "pyarrow",
    "rich",
    "ledger.engines",
    "ledger.read.model",
    "ledger.mcp.reads",
    "ledger.mcp.records",
    "ledger.mcp.verbs",
    "ledger.mcp.jobs",
)


def _imported(log: Path) -> set[str]:
    """The modules ``python -X importtime`` (``PYTHONPROFILEIMPORTTIME``) logged so far."""
    lines = log.read_text().splitlines()
    return {ln.rsplit("|", 1)[1].strip() for ln in lines if ln.startswith("import time:")}


def _deferred(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == d or m.startswith(d + ".") for d in DEFERRED))


def test_initialize_is_answered_before_the_tools_are_imported(tmp_path: Path) -> None:
    """``tuneledger mcp --allow-run`` as a client starts it: by the time ``initialize`` is
    answered, the process has imported none of ``DEFERRED`` (the import log, written before the
    answer, says so); they come with the first message after it (here ``tools/list``). Before:
    the tools were filled in a thread started with the server, which shared the interpreter
    lock with ``initialize`` (docs/mcp.md, Start-up)."""
    log = tmp_path / "imports.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    env.update({"PYTHONPROFILEIMPORTTIME": "1", "TUNELEDGER_RESIDENT": "0"})
    command = [str(Path(sys.executable).parent / "tuneledger"), "mcp", "--allow-run"]
    command += ["--ledger", str(tmp_path / "l.duckdb")]
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    with log.open("w") as err:
        server = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
        )
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write(json.dumps(messages[0]).encode() + b"\n")
            server.stdin.flush()
            answer = json.loads(server.stdout.readline())
            at_initialize = _imported(log)
            for message in messages[1:]:
                server.stdin.write(json.dumps(message).encode() + b"\n")
            server.stdin.flush()
            tools = json.loads(server.stdout.readline())
        finally:
            server.stdin.close()
            server.wait(timeout=120)
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "tuneledger"
    assert len(tools["result"]["tools"]) > 20
    assert _deferred(at_initialize) == []
    # the root group imports only the command it runs (ledger/cli/commands/__init__.py)
    assert sorted(m for m in at_initialize if m.startswith("ledger.cli.commands.")) == []
    later = _deferred(_imported(log))
    assert "runners.server.runner" in later and "ledger.mcp.reads" in later
