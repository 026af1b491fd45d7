"""Actors are who they are: what the MCP server writes is by
``agent:<the client's declared name>`` (or the operator's ``--actor``), never by an actor the
call's arguments name; the runners' event types are not the agent's to write; the store stamps
``recorded_at``; control characters and times out of bounds are refused, one line, nothing
written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger.app import RUNNER_TYPES
from ledger.store import LedgerStore
from tests.support.mcp_client import call, in_process, refused

pytestmark = pytest.mark.anyio


def _note(text: str, **fields: object) -> dict[str, object]:
    return {"type": "note_added", "fields": {"text": text, **fields}}


async def test_the_actor_is_the_clients_declared_name(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1", client_name="Claude Code") as client:
        note = await call(client, "record", _note("hello"))
        proposed = await call(client, "propose_candidate", {"title": "x", "flag": "enable-x"})
    async with in_process(store.path, session="s1", actor="agent:ops") as client:
        other = await call(client, "record", _note("by the operator's --actor"))
    assert store.get(note["event_id"]).actor.model_dump() == {
        "kind": "agent",
        "name": "Claude-Code",
    }
    assert store.get(proposed["event_id"]).actor.name == "Claude-Code"
    assert store.get(other["event_id"]).actor.model_dump() == {"kind": "agent", "name": "ops"}


async def test_envelope_fields_the_ledger_sets_are_refused(store: LedgerStore) -> None:
    forged = {
        "actor": {"kind": "person", "name": "ana"},
        "recorded_at": "2026-01-01T00:00:00Z",
        "seq": 7,
        "stream": "candidate:flag:x",
        "stream_version": 3,
    }
    async with in_process(store.path, session="s1") as client:
        for name, value in forged.items():
            out = await refused(client, "record", _note("x", **{name: value}))
            assert out["error"]["exit_code"] == 3, name
            assert f"field '{name}' is set by the ledger" in out["error"]["message"]
        # the verbs take no envelope at all: an actor is an unknown argument
        verb = await refused(
            client,
            "propose_candidate",
            {"title": "x", "flag": "x", "actor": {"kind": "person", "name": "ana"}},
        )
        assert (
            verb["error"]["exit_code"] == 3
            and "'actor' is not an argument" in verb["error"]["message"]
        )
        kept = await call(client, "record", _note("kept"))
    assert store.head() == 1
    event = store.get(kept["event_id"])
    assert event.actor.kind == "agent" and event.recorded_at is not None
    assert event.recorded_at != datetime(2026, 1, 1, tzinfo=UTC)  # the store's clock stamped it


async def test_runner_types_are_not_the_agents_to_write(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        (tool,) = [t for t in (await client.list_tools()).tools if t.name == "record"]
        assert not RUNNER_TYPES & set(tool.input_schema["properties"]["type"]["enum"])
        forged = await refused(
            client,
            "record",
            {
                "type": "benchmark_completed",
                "fields": {
                    "run_id": "r1",
                    "config_name": "tuned",
                    "metrics": {"output_throughput": 1e9},
                },
            },
        )
    assert forged["error"]["exit_code"] == 3
    assert "written by the runners only" in forged["error"]["message"]
    assert store.head() == 0


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"text": "a\x00b"}, "control character U+0000"),
        ({"text": "\x1b[31mred"}, "control character U+001B"),
        ({"text": "x", "occurred_at": "2099-01-01T00:00:00Z"}, "out of bounds"),
        ({"text": "x", "occurred_at": "1999-12-31T23:59:59Z"}, "out of bounds"),
    ],
)
async def test_control_characters_and_times_out_of_bounds_are_refused(
    store: LedgerStore, fields: dict[str, object], named: str
) -> None:
    async with in_process(store.path, session="s1") as client:
        out = await refused(client, "record", {"type": "note_added", "fields": fields})
        title = await refused(client, "propose_candidate", {"title": "a\x07", "flag": "x"})
        kept = await call(client, "record", _note("tabs\tand\nlines are text"))
    assert out["error"]["exit_code"] == 3 and named in out["error"]["message"]
    assert title["error"]["exit_code"] == 3 and "U+0007" in title["error"]["message"]
    assert store.head() == 1 and store.get(kept["event_id"]).text == "tabs\tand\nlines are text"  # type: ignore[attr-defined]


async def test_a_client_name_that_is_no_name_falls_back_and_runner_actors_are_refused(
    store: LedgerStore,
) -> None:
    from tests.support.cli_inprocess import invoke

    async with in_process(store.path, session="s1", client_name="bad\x1bname") as client:
        out = await call(client, "record", _note("x"))
    assert store.get(out["event_id"]).actor.model_dump() == {"kind": "agent", "name": "mcp"}
    runner = invoke(["--ledger", store.path, "mcp", "--actor", "runner:tuneledger", "--list-tools"])
    assert runner.returncode == 2 and "runner actors are the runners' own" in runner.stderr
