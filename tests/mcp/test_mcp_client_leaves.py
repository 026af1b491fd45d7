"""A client that quits mid-plan leaves no engine server running and no ``starting``/``ready`` row.

Before: when the SDK's stdio client left while a call or job ran, it closed stdin,
waited 2 s and sent SIGTERM; that interrupted the shutdown, the stop-the-servers step never ran,
the engine server kept running and the ledger still said ``ready``. Here the official SDK's
stdio client drives ``tuneledger mcp`` as a subprocess against a real engine, ``transformers
serve`` of a tiny random-weight Qwen3-MoE (``examples/plan.toml``, the README's plan), and
leaves while the plan is measuring: once as a job (``start_job``), once as a ``run_plan`` call
still in flight. Whichever path stops the server (the cancelled call's own unwinding, the exit
hooks, or the watchdog of ``runners.server.supervise`` when the SIGTERM cut the unwinding
short), the server is gone and its stop is recorded.

Needs torch and transformers[serving] (the e2e extra), offline (the model is built locally).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from ledger.store import LedgerStore
from tests.support import needs
from tests.support.mcp_client import call, over_stdio

#: Process-based on purpose (an MCP server process, a real engine server), the engine tier: `make test-engines` runs it.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.engine("torch", "transformers", "fastapi"),
]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TUNELEDGER_RESIDENT": "0",
        }
    )
    return env


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: its parent (the MCP server) may not have reaped it yet
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:4]
    except OSError:
        return False


def _open_runs(store: LedgerStore) -> list[dict[str, object]]:
    return store.query_arrow(
        "SELECT run_id, status FROM server_runs WHERE status IN ('starting', 'ready')"
    ).to_pylist()


@pytest.mark.parametrize("how", ["job", "call"])
async def test_a_client_that_quits_mid_plan_leaves_no_server_running(
    tmp_path: Path, how: str
) -> None:
    needs.program("transformers", BIN)
    from tests.support.tiny_model import build_tiny_model

    build_tiny_model(tmp_path / "models" / "tiny-qwen3-moe")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    ledger = tmp_path / "quit.duckdb"
    LedgerStore(ledger).init()
    store = LedgerStore(ledger)
    arguments = {"plan_file": "examples/plan.toml"}
    async with over_stdio(ledger, cwd=tmp_path, env=_env(), timeout_s=900) as client:
        async with anyio.create_task_group() as group:
            if how == "job":
                job = await call(client, "start_job", {"tool": "run_plan", "arguments": arguments})
                assert job["state"] == "running"
            else:
                group.start_soon(client.call_tool, "run_plan", arguments)
            with anyio.fail_after(900):  # mid-plan: a server up and a run of it recorded
                while not store.read(types=["benchmark_completed"]):
                    await anyio.sleep(0.5)
            group.cancel_scope.cancel()  # the call in flight abandoned; then the client leaves
    started = store.read(types=["server_started"])
    assert started, "the plan started no server"
    pids = [int(e.pid) for e in started if e.pid is not None]  # type: ignore[attr-defined]
    assert len(pids) == len(started)
    with anyio.move_on_after(180):  # SIGTERM, the server's stop wait, then SIGKILL: well within
        while any(_alive(pid) for pid in pids) or _open_runs(store):
            await anyio.sleep(0.5)
    alive = [pid for pid in pids if _alive(pid)]
    assert not alive and not _open_runs(store), f"alive: {alive}, open: {_open_runs(store)}"
    stopped = {e.run_id for e in store.read(types=["server_stopped", "server_failed"])}  # type: ignore[attr-defined]
    assert stopped == {e.run_id for e in started}  # type: ignore[attr-defined]
