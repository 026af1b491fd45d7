"""Parallel tool calls: agents send several calls at once, and one MCP
server answers them all. Writes take the server's one-writer queue in turn (DuckDB lets one
writer at a time), reads run beside them on their own connections; a call that still meets a
busy file answers exit 7 with a retry hint, never exit 1. Here: 20 writes and 40 reads at once,
with a kept-open writer (a plan's) appending in another thread all along."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ledger.store import LedgerStore
from ledger.write import commands
from schemas import Actor, NoteAdded
from tests.support.mcp_client import in_process, over_stdio

pytestmark = pytest.mark.anyio

READS: list[tuple[str, dict[str, Any]]] = [
    ("board", {}),
    ("sql", {"query": "SELECT count(*) AS n FROM event_log"}),
    ("flag_verdicts", {}),
    ("benchmark_deltas", {}),
    ("events_since", {}),
]


def _write(i: int) -> tuple[str, dict[str, Any]]:
    if i % 2:
        return "record", {"type": "note_added", "fields": {"text": f"note {i}"}}
    return "propose_candidate", {"title": f"try {i}", "flag": f"flag-{i}"}


async def test_twenty_writes_and_forty_reads_at_once_all_answer(store: LedgerStore) -> None:
    stop = threading.Event()
    held: list[int] = []

    def plan_writer() -> None:  # a runner in the same process, holding the file between appends
        writer = LedgerStore(store.path).kept_open()
        try:
            while not stop.is_set() and len(held) < 200:
                result = commands.record(
                    writer, NoteAdded(text="plan", actor=Actor.parse("runner:plan"))
                )
                held.append(result.seq)
        finally:
            writer.close()

    thread = threading.Thread(target=plan_writer)
    thread.start()
    try:
        async with in_process(store.path, session="s1") as client:
            calls = [_write(i) for i in range(20)] + [READS[i % len(READS)] for i in range(40)]
            results = await asyncio.gather(*(client.call_tool(n, a) for n, a in calls))
    finally:
        stop.set()
        thread.join()
    answered: dict[int, int] = {}
    written = 0
    for (name, _args), result in zip(calls, results, strict=True):
        if not result.is_error:
            answered[0] = answered.get(0, 0) + 1
            written += name in ("record", "propose_candidate")
            continue
        error = result.structured_content["error"]  # type: ignore[index]
        answered[error["exit_code"]] = answered.get(error["exit_code"], 0) + 1
        assert error["exit_code"] == 7 and "retry" in error["message"], (name, error)
    assert set(answered) <= {0, 7} and sum(answered.values()) == 60
    # nothing lost, nothing doubled: seq gapless, every answered write and the plan's stored
    seqs = [e.seq for e in store.read()]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) == written + len(held)
    assert len(store.read(types=["candidate_proposed"])) == sum(
        1
        for (n, _), r in zip(calls, results, strict=True)
        if n == "propose_candidate" and not r.is_error
    )


async def test_parallel_calls_over_the_sdks_stdio_client(tmp_path: Path) -> None:
    """The same 20 writes and 40 reads at once, sent by the official SDK's stdio client to a
    ``tuneledger mcp`` process (as an agent's client sends parallel tool calls), while a CLI
    process appends beside it: every call answers, each error is exit 7 with a retry hint
    (never exit 1), and every answered write is stored once (docs/mcp.md, Parallel calls)."""
    ledger = tmp_path / "p.duckdb"
    store = LedgerStore(ledger)
    store.init()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    env["TUNELEDGER_RESIDENT"] = "0"
    async with over_stdio(ledger, "--session", "s1", env=env, timeout_s=600) as client:
        beside = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "tuneledger"),
            "--ledger",
            str(ledger),
            "append",
            "note_added",
            "-f",
            "text=cli beside",
            env=env,
        )
        calls = [_write(i) for i in range(20)] + [READS[i % len(READS)] for i in range(40)]
        results = await asyncio.gather(*(client.call_tool(n, a) for n, a in calls))
        cli_code = await beside.wait()
    codes = []
    for (name, _args), result in zip(calls, results, strict=True):
        if not result.is_error:
            codes.append(0)
            continue
        error = result.structured_content["error"]  # type: ignore[index]
        assert error["exit_code"] == 7 and "retry" in error["message"], (name, error)
        codes.append(7)
    assert len(codes) == 60 and set(codes) <= {0, 7}
    answered_writes = sum(
        1
        for (n, _), c in zip(calls, codes, strict=True)
        if c == 0 and n in ("record", "propose_candidate")
    )
    stored = store.read()
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert len(stored) == answered_writes + (cli_code == 0)


def test_a_storage_error_the_store_did_not_map_is_retried_then_exit_7_with_a_hint(
    store: LedgerStore,
) -> None:
    import duckdb

    from ledger.errors import LedgerBusy
    from ledger.mcp.errors import error_payload
    from ledger.mcp.server import RETRIES, _retried
    from ledger.mcp.toolbox import Call, Seat, Tool

    tries: list[int] = []

    def flaky(arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        tries.append(1)
        if len(tries) < 3:
            raise duckdb.IOException("Could not set lock on file")
        return {"ok": True}

    def broken(arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        tries.append(1)
        raise duckdb.IOException("Unique file handle conflict")

    call = Call(Seat(store.path, Actor.parse("agent:t"), None))
    tool = Tool("t", "t", {"type": "object"}, {"type": "object"}, flaky, read_only=True)
    assert _retried(tool, {}, call) == {"ok": True} and len(tries) == 3
    tries.clear()
    write = Tool("w", "w", {"type": "object"}, {"type": "object"}, broken)
    with pytest.raises(LedgerBusy) as busy:
        _retried(write, {}, call)
    assert len(tries) == RETRIES + 1
    text, structured = error_payload(busy.value)
    assert text.startswith("exit 7 (busy): w: the ledger was busy (IOException")
    assert "retry the call (give event_id" in structured["error"]["message"]
    tries.clear()
    plan = Tool("p", "p", {"type": "object"}, {"type": "object"}, broken, long_running=True)
    with pytest.raises(LedgerBusy):
        _retried(plan, {}, call)
    assert len(tries) == 1  # a long-running tool is never run twice
