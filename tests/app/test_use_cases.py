"""One application layer under the CLI and the MCP server.

``tuneledger propose | triage | decide`` and the MCP's ``propose_candidate``,
``triage_candidate``, ``record_decision`` call the same use cases (``ledger.app``) with the
same value objects: the events they leave are the same, field for field. Triage by the measured
verdict and the decision that follows it replace the walkthrough's ``sql | tail | tr`` and shell
``case``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.store import LedgerStore
from schemas import Actor, BenchmarkCompleted, CandidateProposed
from schemas.events import Workload
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import call, in_process

VOLATILE = {"event_id", "recorded_at", "seq", "actor", "evidence_event_ids", "causation_id"}


def _cli(ledger: Path, *args: str) -> Any:
    return invoke(["--ledger", ledger, "--session", "s1", "--actor", "person:ana", *args])


def _events(store: LedgerStore) -> list[dict[str, Any]]:
    return [e.model_dump(exclude=VOLATILE) for e in store.read()]


@pytest.mark.anyio
async def test_the_cli_verbs_and_the_mcp_tools_write_the_same_events(tmp_path: Path) -> None:
    by_cli, by_mcp = LedgerStore(tmp_path / "cli.duckdb"), LedgerStore(tmp_path / "mcp.duckdb")
    by_cli.init()
    by_mcp.init()
    for args in (
        ["propose", "Try foo", "--flag", "enable-foo", "--value", "4096", "--priority", "high"],
        [
            "triage",
            "flag:enable-foo",
            "accepted",
            "--reason",
            "worth a run",
            "--expected-version",
            "1",
        ],
        ["note"],  # a note to cite, below
    ):
        if args == ["note"]:
            out = invoke(
                ["--ledger", by_cli.path, "--session", "s1", "append", "note_added", "-f", "text=n"]
            )
        else:
            out = _cli(by_cli.path, *args)
        assert out.returncode == 0, out.stderr
    note_cli = by_cli.read(types=["note_added"])[0].event_id
    out = _cli(
        by_cli.path, "decide", "Keep foo", "--rationale", "n says so", "--alternative", "drop it",
        "--evidence", str(note_cli)[:13], "--candidate", "flag:enable-foo", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    decided = json.loads(out.stdout)
    assert decided["evidence"][0]["event_id"] == str(note_cli) and decided["duplicate"] is False

    async with in_process(by_mcp.path, session="s1") as client:
        await call(
            client,
            "propose_candidate",
            {"title": "Try foo", "flag": "enable-foo", "value": 4096, "priority": "high"},
        )
        await call(
            client,
            "triage_candidate",
            {"candidate_id": "flag:enable-foo", "status": "accepted", "reason": "worth a run",
             "expected_version": 1},
        )  # fmt: skip
        note = await call(client, "record", {"type": "note_added", "fields": {"text": "n"}})
        await call(
            client,
            "record_decision",
            {"decision": "Keep foo", "rationale": "n says so", "alternatives": ["drop it"],
             "evidence_event_ids": [note["event_id"][:13]], "candidate_id": "flag:enable-foo"},
        )  # fmt: skip
    assert _events(by_cli) == _events(by_mcp)
    assert [e.actor.kind for e in by_cli.read()] == ["person"] * 4
    assert [e.actor.kind for e in by_mcp.read()] == ["agent"] * 4


def test_a_stale_triage_and_a_second_proposal_are_conflicts_naming_the_new_state(
    store: LedgerStore,
) -> None:
    assert _cli(store.path, "propose", "Try foo", "--flag", "enable-foo").returncode == 0
    again = _cli(store.path, "propose", "Try foo", "--flag", "enable-foo")
    assert again.returncode == 4 and "status proposed, stream_version 1" in again.stderr
    assert _cli(store.path, "triage", "flag:enable-foo", "accepted").returncode == 0
    stale = _cli(store.path, "triage", "flag:enable-foo", "rejected", "--expected-version", "1")
    assert stale.returncode == 4 and stale.stderr.count("\n") == 1
    assert "status accepted, stream_version 2" in stale.stderr
    neither = _cli(store.path, "triage", "flag:enable-foo")
    assert neither.returncode == 3 and "a status or a metric" in neither.stderr
    bad = _cli(store.path, "decide", "x\x1b[2J")
    assert bad.returncode == 3 and "U+001B" in bad.stderr
    assert store.head() == 2


def _bench(config: str, value: float, candidate: str | None = None) -> BenchmarkCompleted:
    return BenchmarkCompleted(
        session_id="s1",
        run_id=str(uuid.uuid4()),
        config_name=config,
        concurrency=4,
        is_baseline=config == "baseline",
        candidate_id=candidate,
        workload=Workload(dataset="random", input_len=16, output_len=8),
        metrics={"output_throughput": value},
        actor=Actor.parse("runner:plan"),
    )


@pytest.mark.parametrize(("tuned", "status"), [(130.0, "accepted"), (70.0, "rejected")])
def test_triage_by_the_measured_verdict_and_the_decision_that_follows_it(
    store: LedgerStore, tuned: float, status: str
) -> None:
    cid = "flag:continuous-batching"
    _measured(store, cid, tuned)
    (delta,) = store.query_arrow(
        "SELECT verdict, seq FROM benchmark_deltas WHERE metric = 'output_throughput'"
    ).to_pylist()
    out = _cli(store.path, "triage", cid, "--by-verdict", "output_throughput", "--concurrency", "4")
    assert out.returncode == 0, out.stderr
    verdict = delta["verdict"]
    assert out.stdout.startswith(f"{cid} -> {status}: output throughput at c=4: {verdict}")
    (board,) = store.query_arrow(
        f"SELECT status, reason FROM board WHERE candidate_id = '{cid}'"
    ).to_pylist()
    assert board == {"status": status, "reason": f"output throughput at c=4: {verdict}"}
    (triaged,) = store.read(types=["candidate_triaged"])
    cause = store.get(str(triaged.causation_id))
    assert cause.seq == delta["seq"]  # the triage cites the measurement it follows

    decided = _cli(
        store.path, "decide", "Continuous batching", "--candidate", cid, "--follow-triage"
    )
    assert decided.returncode == 0, decided.stderr
    (decision,) = store.read(types=["decision_recorded"])
    assert decision.decision == f"Continuous batching: {status}"  # type: ignore[attr-defined]
    assert decision.rationale == f"The triage: output throughput at c=4: {verdict}."  # type: ignore[attr-defined]
    assert decision.evidence_event_ids == [cause.event_id]  # type: ignore[attr-defined]
    missing = _cli(store.path, "triage", cid, "--by-verdict", "median_ttft_ms")
    assert missing.returncode == 5 and "no median_ttft_ms comparison" in missing.stderr
    # a mistyped metric is named as such, not as a comparison no plan made yet
    typo = _cli(store.path, "triage", cid, "--by-verdict", "output_thruput")
    assert typo.returncode == 3 and "'output_thruput' is no metric" in typo.stderr
    assert "did you mean output_throughput" in typo.stderr


def _measured(store: LedgerStore, cid: str, tuned: float) -> None:
    events: list[Any] = [
        CandidateProposed(
            candidate_id=cid, kind="flag", flag="continuous-batching", title="CB", session_id="s1"
        )
    ]
    for base_value, cand_value in ((100.0, tuned), (101.0, tuned + 1), (99.0, tuned - 1)):
        events += [_bench("baseline", base_value), _bench("continuous-batching", cand_value, cid)]
    store.append(events)


@pytest.mark.anyio
async def test_the_mcp_triages_by_verdict_and_follows_it_as_the_cli_does(tmp_path: Path) -> None:
    """``triage_candidate(by_verdict=...)`` and ``record_decision(follow_triage=true)`` are the
    CLI's ``triage --by-verdict`` and ``decide --follow-triage``: one use case each
    (``ledger.app.triage_asked``, ``decide_asked``), the same events."""
    cid = "flag:continuous-batching"
    by_cli, by_mcp = LedgerStore(tmp_path / "cli.duckdb"), LedgerStore(tmp_path / "mcp.duckdb")
    for store in (by_cli, by_mcp):
        store.init()
        _measured(store, cid, 130.0)
    args = ["--by-verdict", "output_throughput", "--concurrency", "4"]
    assert _cli(by_cli.path, "triage", cid, *args).returncode == 0
    decided = _cli(by_cli.path, "decide", "CB", "--candidate", cid, "--follow-triage")
    assert decided.returncode == 0, decided.stderr
    async with in_process(by_mcp.path, session="s1") as client:
        triaged = await call(
            client,
            "triage_candidate",
            {"candidate_id": cid, "by_verdict": "output_throughput", "concurrency": 4},
        )
        assert triaged["candidate"]["status"] == "accepted", triaged
        await call(
            client,
            "record_decision",
            {"decision": "CB", "candidate_id": cid, "follow_triage": True},
        )
        both = await client.call_tool(
            "triage_candidate", {"candidate_id": cid, "status": "rejected", "by_verdict": "x"}
        )
    assert both.is_error and both.structured_content["error"]["exit_code"] == 3  # type: ignore[index]
    skip = {"actor", "event_id", "recorded_at", "causation_id", "evidence_event_ids", "run_id"}
    shown = [
        {k: v for k, v in e.model_dump(exclude=VOLATILE).items() if k not in skip}
        for e in by_cli.read(types=["candidate_triaged", "decision_recorded"])
    ]
    assert shown == [
        {k: v for k, v in e.model_dump(exclude=VOLATILE).items() if k not in skip}
        for e in by_mcp.read(types=["candidate_triaged", "decision_recorded"])
    ]
    (decision,) = by_mcp.read(types=["decision_recorded"])
    assert decision.decision == "CB: accepted"  # type: ignore[attr-defined]
    (triage,) = by_mcp.read(types=["candidate_triaged"])
    assert decision.evidence_event_ids == [triage.causation_id]  # type: ignore[attr-defined]
