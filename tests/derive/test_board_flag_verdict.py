"""The board's verdict of a flag candidate is ``flag_verdicts``' (docs/views.md, ``board``):
one derivation, so the triage board and ``flag_verdicts`` never give two answers for one flag."""

from __future__ import annotations

from pathlib import Path

from ledger.cli.demo import build_demo
from ledger.store import LedgerStore
from schemas import CandidateProposed, CandidateTriaged, FindingRecorded, FlagResearched

BOARD_VS_FLAGS = """
SELECT b.candidate_id, b.status, b.verdict AS board, f.verdict AS flag_verdicts, f.basis
FROM board b LEFT JOIN flag_verdicts f ON f.flag = b.flag AND f.arch IS NOT DISTINCT FROM b.arch
ORDER BY b.candidate_id"""


def test_a_later_triage_verdict_does_not_hide_the_measured_one(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "b.duckdb")
    store.append(FlagResearched(flag="max-num-seqs", verdict="unknown", session_id="s"))
    store.append(
        CandidateProposed(
            candidate_id="flag:max-num-seqs", kind="flag", title="one", flag="max-num-seqs"
        )
    )
    store.append(
        FindingRecorded(
            kind="measured-change",
            basis="measured",
            flag="max-num-seqs",
            verdict="harmful",
            message="output_throughput regressed at every load",
        )
    )
    # triaged after the finding, with the verdict the triage rule saw (mixed metrics)
    store.append(
        CandidateTriaged(
            candidate_id="flag:max-num-seqs", status="deferred", verdict="unknown", reason="mixed"
        ),
        expected_version=1,
    )
    store.append(CandidateProposed(candidate_id="config:x", kind="config", title="x"))
    store.append(
        CandidateTriaged(candidate_id="config:x", status="accepted", verdict="effective"),
        expected_version=1,
    )
    assert store.query_arrow(BOARD_VS_FLAGS).to_pylist() == [
        # no flag: the triage's verdict
        {
            "candidate_id": "config:x",
            "status": "accepted",
            "board": "effective",
            "flag_verdicts": None,
            "basis": None,
        },
        # the status stays the triage's; the verdict is the flag's
        {
            "candidate_id": "flag:max-num-seqs",
            "status": "deferred",
            "board": "harmful",
            "flag_verdicts": "harmful",
            "basis": "measured",
        },
    ]


def test_the_vllm_cpu_demo_board_says_what_flag_verdicts_says(tmp_path: Path) -> None:
    store = build_demo(tmp_path / "v.duckdb", campaign="vllm-cpu")
    flagged = [r for r in store.query_arrow(BOARD_VS_FLAGS).to_pylist() if r["flag_verdicts"]]
    assert len(flagged) == 5
    assert all(r["board"] == r["flag_verdicts"] for r in flagged), flagged
    # the plan's measured finding (data/vllm_cpu_campaign.jsonl), triaged deferred afterwards
    by_id = {r["candidate_id"]: r for r in flagged}
    assert by_id["flag:max-num-seqs"] == {
        "candidate_id": "flag:max-num-seqs",
        "status": "deferred",
        "board": "harmful",
        "flag_verdicts": "harmful",
        "basis": "measured",
    }
