"""``tuneledger mcp``: the generated record tools and the verbs, through the SDK's own client.

The schema test: every registered event type has its ``record_<type>`` tool whose input schema
is the type's committed JSON Schema. Then what a write through a tool leaves in the ledger:
the same event as ``tuneledger append`` would store (validation, envelope defaults, write
rules), idempotent by event id, refusals as tool errors with the CLI's exit codes; triage at a
stale version comes back as a conflict with the new state, and is retried.
"""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

from ledger.app import RUNNER_TYPES
from ledger.store import LedgerStore
from schemas import EVENT_TYPES
from schemas.jsonschema import JSON_DIR
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import call, in_process, refused

pytestmark = pytest.mark.anyio


async def test_one_record_tool_takes_every_agent_type_with_its_schema_as_a_resource(
    ledger_path: Path,
) -> None:
    async with in_process(ledger_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        templates = {
            str(t.uri_template) for t in (await client.list_resource_templates()).resource_templates
        }
        schemas = {
            t: json.loads((await client.read_resource(f"tuneledger://schema/{t}")).contents[0].text)  # type: ignore[union-attr]
            for t in EVENT_TYPES
        }
    assert "tuneledger://schema/{type}" in templates
    for event_type in EVENT_TYPES:  # the committed JSON Schema of each type, unchanged
        committed = json.loads((JSON_DIR / f"{event_type}.json").read_text())
        assert schemas[event_type] == committed, event_type
    record = tools["record"]
    enum = record.input_schema["properties"]["type"]["enum"]
    # the runners' types and the verbs' are not offered: one way to write each thing
    assert set(enum) == set(EVENT_TYPES) - RUNNER_TYPES - {
        "candidate_proposed",
        "candidate_triaged",
        "decision_recorded",
    }
    assert "benchmark_completed" not in enum and "server_started" not in enum
    assert "note_added" in enum and "flag_researched" in enum
    assert not [n for n in tools if n.startswith("record_") and n != "record_decision"]
    assert record.output_schema is not None
    assert set(record.output_schema["required"]) >= {
        "seq",
        "event_id",
        "stream_version",
        "duplicate",
    }
    for name in (
        "propose_candidate",
        "triage_candidate",
        "record_decision",
        "board",
        "sql",
        "flag_verdicts",
        "benchmark_deltas",
        "server_runs",
        "show",
        "events_since",
        "start_server",
        "stop_server",
        "run_bench",
        "run_plan",
        "run_spec",
        "run_tune",
    ):
        assert name in tools, name
        assert tools[name].input_schema["type"] == "object"
        assert tools[name].output_schema is not None
    assert tools["board"].annotations.read_only_hint is True
    assert tools["run_plan"].annotations.read_only_hint is False


async def test_a_record_tool_stores_what_append_stores(tmp_path: Path, store: LedgerStore) -> None:
    event = {
        "flag": "--enable-foo",
        "verdict": "no-op",
        "what_it_does": "nothing on sm120",
        "host": {"gpu_name": "NVIDIA RTX PRO 6000", "compute_capability": "12.0"},
        "evidence": [{"kind": "source", "ref": "sglang/srt/server_args.py:1200"}],
    }
    async with in_process(store.path, session="s1", actor="agent:claude") as client:
        out = await call(client, "record", {"type": "flag_researched", "fields": event})
    assert out["seq"] == 1 and out["type"] == "flag_researched" and out["duplicate"] is False
    cli_ledger = LedgerStore(tmp_path / "cli.duckdb")
    cli_ledger.init()
    done = invoke(
        [
            "--ledger",
            cli_ledger.path,
            "--actor",
            "agent:claude",
            "--session",
            "s1",
            "append",
            "--json",
        ],
        stdin=json.dumps({"type": "flag_researched", **event}),
    )
    assert done.returncode == 0, done.stderr
    ours, theirs = store.get(out["event_id"]), cli_ledger.read()[0]
    volatile = {"event_id", "recorded_at"}
    assert ours.model_dump(exclude=volatile) == theirs.model_dump(exclude=volatile)
    assert ours.actor.kind == "agent" and ours.session_id == "s1" and ours.flag == "enable-foo"
    verdict = store.query_arrow("SELECT flag, arch, verdict FROM flag_verdicts").to_pylist()
    assert verdict == [{"flag": "enable-foo", "arch": "sm120", "verdict": "no-op"}]


async def test_event_id_makes_a_retry_idempotent_and_other_content_is_refused(
    store: LedgerStore,
) -> None:
    event_id = "01900000-0000-7000-8000-0000000000aa"
    async with in_process(store.path, session="s1") as client:
        once = {"type": "note_added", "fields": {"text": "once", "event_id": event_id}}
        first = await call(client, "record", once)
        again = await call(client, "record", once)
        twice = {"type": "note_added", "fields": {"text": "twice", "event_id": event_id}}
        other = await refused(client, "record", twice)
    assert first["duplicate"] is False and again["duplicate"] is True
    assert again["seq"] == first["seq"] == 1 and again["event_id"] == event_id
    assert other["error"]["exit_code"] == 8 and other["error"]["meaning"] == "event-id-reused"
    assert store.head() == 1


async def test_refusals_carry_the_cli_exit_codes(tmp_path: Path, store: LedgerStore) -> None:
    async with in_process(tmp_path / "none.duckdb") as client:
        missing = await refused(client, "record", {"type": "note_added", "fields": {"text": "x"}})
    assert missing["error"]["exit_code"] == 5 and "init_ledger" in missing["error"]["message"]
    assert not (tmp_path / "none.duckdb").exists()
    async with in_process(store.path) as client:
        bad = await refused(client, "record", {"type": "note_added", "fields": {"txt": "x"}})
        assert (
            bad["error"]["exit_code"] == 3 and "field 'text' is required" in bad["error"]["message"]
        )
        typed = await refused(
            client,
            "record",
            {"type": "session_started", "fields": {"title": "t", "model": "m", "tp": "lots"}},
        )
        assert typed["error"]["exit_code"] == 3 and "tp" in typed["error"]["message"]
        verb = await refused(
            client,
            "record",
            {
                "type": "candidate_triaged",
                "fields": {"candidate_id": "flag:x", "status": "accepted"},
            },
        )
        assert verb["error"]["exit_code"] == 3 and "triage_candidate" in verb["error"]["message"]
        gone = await refused(
            client,
            "record",
            {
                "type": "event_retracted",
                "fields": {
                    "retracted_event_id": "01900000-0000-7000-8000-0000000000ff",
                    "reason": "typo",
                },
            },
        )
        assert gone["error"]["exit_code"] == 5
        wrong_type = await refused(
            client,
            "record",
            {"type": "note_added", "fields": {"type": "session_started", "text": "x"}},
        )
        assert wrong_type["error"]["exit_code"] == 3
        unknown = await refused(client, "record", {"type": "nothing", "fields": {}})
        assert unknown["error"]["exit_code"] == 3
        no_tool = await refused(client, "record_note_added", {"text": "x"})
        assert no_tool["error"]["exit_code"] == 3
    assert store.head() == 0  # nothing half-written


async def test_a_secret_is_masked_as_append_masks_it(store: LedgerStore) -> None:
    async with in_process(store.path) as client:
        out = await call(
            client,
            "record",
            {
                "type": "note_added",
                "fields": {"text": "token hf_abcdefghijklmnopqrstuvwxyzABCDEF12"},
            },
        )
    assert store.get(out["event_id"]).text == "token ***"


async def test_init_ledger_creates_it_once_and_refuses_a_missing_folder(tmp_path: Path) -> None:
    async with in_process(tmp_path / "new.duckdb") as client:
        assert (await call(client, "init_ledger"))["created"] is True
        assert (await call(client, "init_ledger"))["created"] is False
    async with in_process(tmp_path / "no" / "such" / "l.duckdb") as client:
        folder = await refused(client, "init_ledger")
        assert folder["error"]["exit_code"] == 5
        assert (await call(client, "init_ledger", {"parents": True}))["created"] is True


async def test_triage_at_a_stale_version_comes_back_with_the_new_state(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        proposed = await call(
            client,
            "propose_candidate",
            {
                "title": "continuous batching",
                "flag": "continuous-batching",
                "hypothesis": "batching raises throughput at c > 1",
            },
        )
        assert proposed["candidate"]["candidate_id"] == "flag:continuous-batching"
        read = (await call(client, "board"))["rows"][0]
        assert read["stream_version"] == 1 and read["status"] == "proposed"
        # someone else (a person in the TUI) triages it first
        from ledger.write import commands
        from schemas import Actor

        commands.triage(
            store,
            candidate_id="flag:continuous-batching",
            status="deferred",
            expected_version=1,
            reason="GPU busy",
            actor=Actor.parse("person:ana"),
            session_id="s1",
        )
        stale = await refused(
            client,
            "triage_candidate",
            {
                "candidate_id": "flag:continuous-batching",
                "status": "accepted",
                "expected_version": read["stream_version"],
            },
        )
        assert stale["error"]["exit_code"] == 4 and stale["error"]["meaning"] == "conflict"
        assert (
            stale["candidate"]["status"] == "deferred" and stale["candidate"]["stream_version"] == 2
        )
        again = await call(
            client,
            "triage_candidate",
            {
                "candidate_id": "flag:continuous-batching",
                "status": "accepted",
                "reason": "GPU free now",
                "expected_version": stale["candidate"]["stream_version"],
            },
        )
        assert again["candidate"]["status"] == "accepted" and again["stream_version"] == 3
        # without a version, the board's current one
        closed = await call(
            client,
            "triage_candidate",
            {"candidate_id": "flag:continuous-batching", "status": "done"},
        )
        assert closed["candidate"]["status"] == "done"
        twice = await refused(
            client, "propose_candidate", {"title": "again", "flag": "continuous-batching"}
        )
        assert twice["error"]["exit_code"] == 4 and twice["candidate"]["status"] == "done"
        never = await refused(
            client, "triage_candidate", {"candidate_id": "flag:nope", "status": "accepted"}
        )
        assert never["error"]["exit_code"] == 5
        bad = await refused(
            client,
            "triage_candidate",
            {"candidate_id": "flag:continuous-batching", "status": "maybe"},
        )
        assert bad["error"]["exit_code"] == 3 and "status" in bad["error"]["message"]
    triages = store.read(types=["candidate_triaged"])
    assert [(e.status, e.actor.kind) for e in triages] == [
        ("deferred", "person"),
        ("accepted", "agent"),
        ("done", "agent"),
    ]


async def test_verbs_are_idempotent_with_an_event_id(store: LedgerStore) -> None:
    proposal = "01900000-0000-7000-8000-0000000000b1"
    triage = "01900000-0000-7000-8000-0000000000b2"
    async with in_process(store.path, session="s1") as client:
        args = {"title": "cb", "flag": "continuous-batching", "event_id": proposal}
        first = await call(client, "propose_candidate", args)
        retry = await call(client, "propose_candidate", args)
        assert (first["duplicate"], retry["duplicate"], retry["seq"]) == (False, True, first["seq"])
        t = {
            "candidate_id": "flag:continuous-batching",
            "status": "accepted",
            "event_id": triage,
            "expected_version": 1,
        }
        one = await call(client, "triage_candidate", t)
        two = await call(client, "triage_candidate", t)
        assert (one["duplicate"], two["duplicate"], two["seq"]) == (False, True, one["seq"])
    assert store.head() == 2


async def test_a_decision_cites_stored_evidence_by_prefix(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        note = await call(
            client, "record", {"type": "note_added", "fields": {"text": "c=4: +60% throughput"}}
        )
        decided = await call(
            client,
            "record_decision",
            {
                "decision": "keep continuous batching",
                "rationale": "faster at c=4",
                "alternatives": ["leave it off"],
                "evidence_event_ids": [note["event_id"][:13]],
                "candidate_id": "flag:continuous-batching",
            },
        )
        assert decided["evidence"] == [
            {
                "event_id": note["event_id"],
                "type": "note_added",
                "summary": "note: c=4: +60% throughput",
            }
        ]
        missing = await refused(
            client,
            "record_decision",
            {"decision": "x", "evidence_event_ids": ["01900000-0000-7000-8000-0000000000ff"]},
        )
        assert missing["error"]["exit_code"] == 5
    stored = store.get(decided["event_id"])
    assert stored.evidence_event_ids == [UUID(note["event_id"])]
    assert stored.actor.kind == "agent" and store.head() == 2


async def test_a_new_event_type_is_a_new_record_type_with_no_mcp_code(store: LedgerStore) -> None:
    from typing import ClassVar, Literal

    from schemas import CURRENT_VERSIONS, Event
    from schemas.jsonschema import schema_of

    try:

        class ThingMeasured(Event):
            """A test-only event type."""

            type: Literal["thing_measured"] = "thing_measured"
            schema_version: Literal[1] = 1
            summary_sql: ClassVar[str] = "'thing ' || p.name"
            candidate_link: ClassVar[tuple[str, ...]] = ()
            name: str
            size_bytes: int | None = None

        async with in_process(store.path, session="s1") as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "record")
            assert "thing_measured" in tool.input_schema["properties"]["type"]["enum"]
            schema = await client.read_resource("tuneledger://schema/thing_measured")
            assert json.loads(schema.contents[0].text) == schema_of("thing_measured")  # type: ignore[union-attr]
            fields = {"name": "a", "size_bytes": 3}
            out = await call(client, "record", {"type": "thing_measured", "fields": fields})
        assert out["type"] == "thing_measured" and store.get(out["event_id"]).name == "a"  # type: ignore[attr-defined]
    finally:
        EVENT_TYPES.pop("thing_measured", None)
        CURRENT_VERSIONS.pop("thing_measured", None)


async def test_run_tune_refuses_a_shape_and_a_machine_without_a_gpu(store: LedgerStore) -> None:
    async with in_process(store.path) as client:
        shape = await refused(client, "run_tune", {"experts": 64, "intermediate": 640})
        assert shape["error"]["exit_code"] == 3 and "top-k" in shape["error"]["message"]
        block = await refused(
            client,
            "run_tune",
            {
                "experts": 64,
                "intermediate": 640,
                "hidden": 3584,
                "topk": 8,
                "block_shape": [128, 128],
            },
        )
        assert block["error"]["exit_code"] == 3
        try:
            import torch

            has_gpu = torch.cuda.is_available()
        except ImportError:
            has_gpu = False
        if not has_gpu:
            gpu = await refused(
                client, "run_tune", {"experts": 64, "intermediate": 640, "hidden": 3584, "topk": 8}
            )
            assert gpu["error"]["exit_code"] == 11 and gpu["error"]["meaning"] == "not-installed"
    assert store.head() == 0


async def test_run_bench_with_a_tool_that_is_not_installed_is_exit_11(
    tmp_path: Path, store: LedgerStore
) -> None:
    async with in_process(store.path) as client:
        missing = await refused(
            client,
            "run_bench",
            {
                "url": "http://127.0.0.1:9",
                "tool": "aiperf",
                "tool_path": str(tmp_path / "no-aiperf"),
            },
        )
        caps = await refused(
            client,
            "run_bench",
            {"url": "http://127.0.0.1:9", "request_rate": 2.0, "concurrency": [1, 4]},
        )
    assert missing["error"]["exit_code"] == 11 and "no-aiperf" in missing["error"]["message"]
    assert caps["error"]["exit_code"] == 3 and "at most one concurrency" in caps["error"]["message"]
    assert store.head() == 0
