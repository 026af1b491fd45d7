"""The ``next_step`` prompt's text: a session laid out for an agent to decide what comes next.

Read in one connection from the views: the session's start (title, model), its board, the open
candidates (proposed or accepted) with what the evidence says about each (the flag's verdicts
on every arch and engine version with their basis, the latest benchmark delta of the
configuration run for it), the last server runs and what changed between them, and the
session's decisions so far. Where the ledger holds nothing, it says so rather than guessing.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ledger.mcp.toolbox import Seat
from ledger.mcp.values import jsonable
from ledger.read import agent_reads
from ledger.read import model as read_model

#: Candidates still to act on.
OPEN_STATUSES = ("proposed", "accepted")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:+.1f}%" if abs(value) < 1e6 else f"{value:.3g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    if not rows:
        return ["None recorded."]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return lines


def next_step_text(seat: Seat, session_id: str | None) -> str:
    """The prompt for ``session_id`` (None: the ledger's latest session)."""
    with seat.store().connect() as con:
        session = session_id or read_model.default_session(con)
        head = agent_reads.session_head(con, session)
        board = jsonable(read_model.board(con, session))
        open_flags = sorted(
            {r["flag"] for r in board if r["status"] in OPEN_STATUSES and r.get("flag")}
        )
        verdicts = [asdict(v) for v in agent_reads.verdicts_of_flags(con, open_flags)]
        runs = [asdict(r) for r in agent_reads.recent_runs(con, session)]
        decisions = [asdict(d) for d in agent_reads.session_decisions(con, session)]
    opened = [r for r in board if r["status"] in OPEN_STATUSES]
    lines = [
        f"# Next step of session {session or '(none)'}",
        "",
        f"Ledger {seat.ledger}; you record as {seat.actor.kind}:{seat.actor.name}.",
        f"Session: {head.title or 'no session_started recorded'}"
        + (f" (model {head.model})" if head.model else ""),
        "",
        "## Board",
        *_table(
            board,
            [
                "candidate_id",
                "status",
                "verdict",
                "priority",
                "stream_version",
                "delta_pct",
                "delta_verdict",
            ],
        ),
        "",
        "## Open candidates (proposed or accepted) and their evidence",
        *_table(
            opened,
            ["candidate_id", "title", "hypothesis", "latest_evidence_type", "latest_evidence"],
        ),
        "",
        "Flag verdicts of the open candidates' flags (every arch and engine version):",
        *_table(
            jsonable(verdicts),
            ["flag", "arch", "engine", "engine_version", "verdict", "basis", "summary"],
        ),
        "",
        "## Last server runs (newest first)",
        *_table(jsonable(runs), ["run_id", "config_name", "status", "changes_vs_previous"]),
        "",
        "## Decisions so far",
        *_table(jsonable(decisions), ["decision", "rationale", "event_id"]),
        "",
        "## What next?",
        "Given this, what is the next step of the session? Options: research a flag before "
        "starting anything (research_flags reads the engine's source; record_flag_researched "
        "for what you found elsewhere); propose a candidate (propose_candidate); "
        "triage one (triage_candidate, at the stream_version above); measure (start_server and "
        "run_bench, or run_plan for a baseline-vs-candidate comparison with verdicts); or "
        "record a decision citing the evidence's event ids (record_decision). Say which, and why, "
        "in terms of the evidence above; where it is missing or inconclusive, say so.",
    ]
    return "\n".join(lines) + "\n"
