"""``tuneledger mcp``: the read tools, the resources and the prompt, through the SDK's client.

Each read answers what the CLI answers on the same ledger (``sql``, ``show``, ``export
markdown``), with the filters the issue asks for; the SQL tool is the same sandbox (writes
refused, exit 6); the decision-log resource is the CLI's export byte for byte; the legacy
handshake (clients of protocol versions before 2026-07-28) is served too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from ledger.app import RUNNER_TYPES
from ledger.store import LedgerStore
from ledger.write import commands
from ledger.write.jsonl import event_from_obj
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import call, in_process, refused

pytestmark = pytest.mark.anyio

SM120 = {
    "gpu_name": "NVIDIA RTX PRO 6000",
    "compute_capability": "12.0",
    "engine": "sglang",
    "engine_version": "0.5.9",
}
SM90 = {
    "gpu_name": "NVIDIA H200",
    "compute_capability": "9.0",
    "engine": "sglang",
    "engine_version": "0.5.9",
}


async def _record(
    client, event_type: str, fields: dict[str, Any], store: LedgerStore | None = None
) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Record through the ``record`` tool; a runner's event type (not the agent's to write) is
    appended by the command layer as a runner would, in the server's session."""
    if event_type not in RUNNER_TYPES:
        return await call(client, "record", {"type": event_type, "fields": fields})
    assert store is not None
    event = event_from_obj(
        {
            "type": event_type,
            "session_id": "s1",
            "actor": {"kind": "runner", "name": "test"},
            **fields,
        },
        "test",
    )
    (result,) = commands.append(store, event)
    return {"event_id": str(result.event_id), "seq": result.seq}


async def _flags(client) -> dict[str, str]:  # type: ignore[no-untyped-def]
    ids = {}
    for flag, verdict, host in (
        ("enable-flashinfer-allreduce-fusion", "not-activated", SM120),
        ("enable-flashinfer-allreduce-fusion", "effective", SM90),
        ("triton-attention-reduce-in-fp32", "no-op", SM120),
        ("cuda-graph-max-bs", "already-default", SM120),
    ):
        out = await _record(
            client, "flag_researched", {"flag": flag, "verdict": verdict, "host": host}
        )
        ids[f"{flag}@{host['compute_capability']}"] = out["event_id"]
    return ids


async def test_flag_verdicts_answer_which_flags_were_no_ops_on_sm120(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        await _flags(client)
        no_ops = (await call(client, "flag_verdicts", {"arch": "sm120", "no_effect": True}))["rows"]
        others = (await call(client, "flag_verdicts", {"arch": "sm120", "no_effect": False}))[
            "rows"
        ]
        everywhere = (
            await call(client, "flag_verdicts", {"flag": "enable-flashinfer-allreduce-fusion"})
        )["rows"]
        versioned = (await call(client, "flag_verdicts", {"engine_version": "0.5.10"}))["rows"]
    assert [(r["flag"], r["verdict"]) for r in no_ops] == [
        ("enable-flashinfer-allreduce-fusion", "not-activated"),
        ("triton-attention-reduce-in-fp32", "no-op"),
    ]
    assert [(r["flag"], r["verdict"]) for r in others] == [("cuda-graph-max-bs", "already-default")]
    assert {(r["arch"], r["verdict"]) for r in everywhere} == {
        ("sm120", "not-activated"),
        ("sm90", "effective"),
    }
    assert versioned == []
    cli = invoke(
        [
            "--ledger",
            store.path,
            "sql",
            "--format",
            "json",
            "SELECT flag, verdict FROM flag_verdicts WHERE arch = 'sm120' AND no_effect ORDER BY flag",
        ]
    )
    assert json.loads(cli.stdout) == [{"flag": r["flag"], "verdict": r["verdict"]} for r in no_ops]


async def test_the_flag_resource_is_its_verdict_history_with_evidence(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        ids = await _flags(client)
        later = await _record(
            client,
            "finding_recorded",
            {
                "kind": "flag-not-in-effect",
                "basis": "log",
                "flag": "enable-flashinfer-allreduce-fusion",
                "verdict": "not-activated",
                "message": "workspace disabled on SM120",
                "host": SM120,
                "source": "server.log:812",
            },
        )
        text = (
            await client.read_resource("tuneledger://flag/enable-flashinfer-allreduce-fusion")
        ).contents[0]
    assert text.mime_type == "application/json"
    body = json.loads(text.text)
    assert body["flag"] == "enable-flashinfer-allreduce-fusion"
    history = [
        (h["arch"], h["verdict"], h["basis"], h["evidence_event_id"]) for h in body["history"]
    ]
    assert history == [
        ("sm120", "not-activated", "researched", ids["enable-flashinfer-allreduce-fusion@12.0"]),
        ("sm90", "effective", "researched", ids["enable-flashinfer-allreduce-fusion@9.0"]),
        ("sm120", "not-activated", "log", later["event_id"]),
    ]
    assert body["history"][-1]["evidence_source"] == "server.log:812"
    assert body["history"][-1]["evidence_type"] == "finding_recorded"
    assert {r["arch"] for r in body["latest"]} == {"sm120", "sm90"}


async def test_server_runs_returns_only_what_differs(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        for run, flags, capped in (
            ("r1", {"tp": 4}, 48),
            ("r2", {"tp": 4, "enable-flashinfer-allreduce-fusion": True}, 26),
        ):
            await _record(
                client,
                "server_started",
                {
                    "run_id": run,
                    "engine": "sglang",
                    "config_name": run,
                    "flags": flags,
                    "host": SM120,
                },
                store,
            )
            await _record(
                client,
                "server_ready",
                {
                    "run_id": run,
                    "host": SM120,
                    "startup": {
                        "max_running_requests": capped,
                        "attention_backend": "triton",
                        "piecewise_cuda_graph": run == "r1",
                    },
                },
                store,
            )
        listing = (await call(client, "server_runs"))["runs"]
        diff = await call(client, "server_runs", {"run_b": "r2"})
        explicit = await call(client, "server_runs", {"run_a": "r2", "run_b": "r1"})
        missing = await refused(client, "server_runs", {"run_b": "r9"})
    assert [r["run_id"] for r in listing] == ["r1", "r2"]
    assert diff["run_a"]["run_id"] == "r1" and diff["run_b"]["run_id"] == "r2"
    changes = {d["field"]: (d["a"], d["b"]) for d in diff["differences"]}
    assert changes == {
        "config_name": ("r1", "r2"),
        "flags.enable-flashinfer-allreduce-fusion": (None, True),
        "max_running_requests": (48, 26),
        "piecewise_cuda_graph": (True, False),
    }
    assert {d["field"]: (d["b"], d["a"]) for d in explicit["differences"]} == changes
    assert missing["error"]["exit_code"] == 5


async def test_benchmark_deltas_board_and_next_step(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        await _record(client, "session_started", {"title": "CB on a tiny MoE", "model": "tiny"})
        await call(
            client,
            "propose_candidate",
            {
                "title": "continuous batching",
                "flag": "continuous-batching",
                "hypothesis": "batching raises throughput",
            },
        )
        for config, tput in (("baseline", 100.0), ("continuous-batching", 160.0)):
            await _record(
                client,
                "benchmark_completed",
                {
                    "run_id": config,
                    "config_name": config,
                    "is_baseline": config == "baseline",
                    "concurrency": 4,
                    "workload": {"input_len": 16, "output_len": 8},
                    "metrics": {"completed": 32, "output_throughput": tput},
                },
                store,
            )
        deltas = (await call(client, "benchmark_deltas", {"metric": "output_throughput"}))["rows"]
        board = (await call(client, "board"))["rows"]
        prompt = await client.get_prompt("next_step", {})
        board_resource = json.loads(
            (await client.read_resource("tuneledger://board")).contents[0].text
        )
    assert [(d["config_name"], round(d["change_pct"], 1), d["verdict"]) for d in deltas] == [
        ("continuous-batching", 60.0, "insufficient-data")
    ]
    assert [(b["candidate_id"], b["status"], b["stream_version"]) for b in board] == [
        ("flag:continuous-batching", "proposed", 1)
    ]
    assert board_resource == {"session_id": "s1", "rows": board}
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert "# Next step of session s1" in text and "CB on a tiny MoE (model tiny)" in text
    assert "| flag:continuous-batching | proposed |" in text
    assert "batching raises throughput" in text and "you record as agent:mcp" in text


async def test_show_and_events_since_poll_the_tail(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        note = await _record(client, "note_added", {"text": "first"})
        cite = await _record(client, "note_added", {"text": "second", "refs": [note["event_id"]]})
        page = await call(client, "events_since", {"after_seq": 0, "limit": 1})
        rest = await call(client, "events_since", {"after_seq": page["next_after_seq"]})
        empty = await call(client, "events_since", {"after_seq": rest["next_after_seq"]})
        shown = await call(client, "show", {"event_id": note["event_id"][:12]})
        ambiguous = await refused(client, "show", {"event_id": "zzzz"})
    assert [e["text"] for e in page["events"]] == ["first"] and page["head"] == 2
    assert [e["text"] for e in rest["events"]] == ["second"] and rest["next_after_seq"] == 2
    assert empty == {"events": [], "next_after_seq": 2, "head": 2}
    assert shown["event"]["event_id"] == note["event_id"] and shown["event"]["actor"] == {
        "kind": "agent",
        "name": "mcp",
    }
    assert [(link["event_id"], link["relation"]) for link in shown["links"]] == [
        (cite["event_id"], "cites this")
    ]
    assert ambiguous["error"]["exit_code"] == 5


async def test_sql_is_the_same_read_only_bounded_sandbox(store: LedgerStore) -> None:
    async with in_process(store.path) as client:
        for i in range(5):
            await _record(client, "note_added", {"text": f"n{i}"})
        some = await call(
            client, "sql", {"query": "SELECT seq, type FROM events ORDER BY seq", "max_rows": 3}
        )
        write = await refused(client, "sql", {"query": "DELETE FROM events"})
        files = await refused(client, "sql", {"query": "SELECT * FROM read_csv('/etc/passwd')"})
        broken = await refused(client, "sql", {"query": "SELECT nope FROM events"})
        too_many = await refused(client, "sql", {"query": "SELECT 1", "max_rows": 10**6})
    assert some == {
        "columns": ["seq", "type"],
        "truncated": True,
        "rows": [{"seq": i, "type": "note_added"} for i in (1, 2, 3)],
    }
    assert write["error"]["exit_code"] == 6 and files["error"]["exit_code"] == 6
    assert broken["error"]["exit_code"] == 3 and too_many["error"]["exit_code"] == 3
    assert store.head() == 5


async def test_the_decision_log_resource_is_the_cli_export(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1") as client:
        await _record(client, "session_started", {"title": "CB", "model": "tiny"})
        note = await _record(client, "note_added", {"text": "baseline measured"})
        await call(
            client,
            "record_decision",
            {"decision": "keep it", "evidence_event_ids": [note["event_id"]]},
        )
        listed = [r.uri for r in (await client.list_resources()).resources]
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        log = (await client.read_resource("tuneledger://session/s1/decision-log")).contents[0]
        with pytest.raises(MCPError) as unknown_session:
            await client.read_resource("tuneledger://session/s9/decision-log")
        with pytest.raises(MCPError):
            await client.read_resource("tuneledger://nothing")
    exported = invoke(["--ledger", store.path, "export", "markdown", "--session", "s1"])
    assert log.mime_type == "text/markdown" and log.text == exported.stdout
    assert "### 1. keep it" in log.text and "by agent:mcp" in log.text
    assert listed == ["tuneledger://board", "tuneledger://session/s1/decision-log"]
    assert templates == {
        "tuneledger://session/{id}/decision-log",
        "tuneledger://flag/{name}",
        "tuneledger://schema/{type}",
    }
    assert "exit 5" in unknown_session.value.error.message


async def test_list_tools_prints_what_tools_list_returns(store: LedgerStore) -> None:
    async with in_process(store.path) as client:
        listed = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True)
            for t in (await client.list_tools()).tools
        ]
    printed = invoke(["--ledger", store.path, "mcp", "--allow-run", "--list-tools"])
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == listed


async def test_a_legacy_handshake_client_is_served(store: LedgerStore) -> None:
    async with in_process(store.path, session="s1", mode="legacy") as client:
        assert client.protocol_version < "2026-07-28"
        out = await _record(client, "note_added", {"text": "from an older client"})
        assert (await refused(client, "sql", {"query": "DROP TABLE events"}))["error"][
            "exit_code"
        ] == 6
    assert store.get(out["event_id"]).text == "from an older client"


def test_an_impossible_ledger_name_is_refused_at_start(tmp_path: Path) -> None:
    out = invoke(["--ledger", tmp_path / "events.jsonl", "mcp", "--list-tools"])
    assert (
        out.returncode == 3
        and out.stderr.count("\n") == 1
        and "not a ledger file name" in out.stderr
    )
    bad_actor = invoke(
        ["--ledger", tmp_path / "l.duckdb", "mcp", "--actor", "robot:r2", "--list-tools"]
    )
    assert bad_actor.returncode == 2 and "--actor" in bad_actor.stderr


async def test_export_is_a_tool_and_a_job_with_the_clis_markdown(store: LedgerStore) -> None:
    """``export``: the CLI's ``export markdown`` (one use case, ``ledger.app.export``) as a tool
    (the text, capped in bytes; a new file written, an existing one refused) and as a job."""
    out_file = store.path.parent / "logs" / "s1.md"
    async with in_process(store.path, session="s1") as client:
        await _record(client, "session_started", {"title": "CB", "model": "tiny"})
        note = await _record(client, "note_added", {"text": "baseline measured"})
        await call(
            client,
            "record_decision",
            {"decision": "keep it", "evidence_event_ids": [note["event_id"]]},
        )
        whole = await call(client, "export", {})
        cut = await call(client, "export", {"session_id": "s1", "max_bytes": 100})
        written = await call(client, "export", {"output": str(out_file)})
        again = await refused(client, "export", {"output": str(out_file)})
        job = await call(client, "start_job", {"tool": "export", "arguments": {}})
        while job["state"] == "running":
            job = await call(client, "job_status", {"job_id": job["job_id"], "wait_s": 5})
    exported = invoke(["--ledger", store.path, "export", "markdown", "--session", "s1"]).stdout
    assert whole["markdown"] == exported and not whole["truncated"] and whole["written"] == []
    assert whole["bytes"] == len(exported.encode()) and "### 1. keep it" in exported
    assert cut["truncated"] and cut["markdown"] == exported.encode()[:100].decode()
    assert written["written"] == [str(out_file)] and out_file.read_text() == exported
    assert again["error"]["exit_code"] == 3 and "exists" in again["error"]["message"]
    assert job["state"] == "done" and job["result"]["markdown"] == exported
