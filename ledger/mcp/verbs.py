"""The verbs an agent runs a session with: create the ledger, propose, triage, decide.

Each is one call of the application layer (``ledger.app``: the same use cases as the CLI's
``propose``, ``triage`` and ``decide``), as the client's writer:

- ``propose_candidate`` opens the candidate's stream (``candidate_id`` defaults to
  ``kind:flag``); a candidate already on the board is a conflict (exit 4) that comes back with
  its board row, never a second proposal.
- ``triage_candidate`` handles the expected version: it triages at the version the agent read
  (``expected_version``) or, when none is given, at the board's current one. A triage made on
  a stale read is a conflict (exit 4) whose error carries the candidate's new board row (its
  status, who triaged it, its ``stream_version``): decide again, then retry with that version.
- ``record_decision`` cites its evidence by event id (a unique prefix of 8+ hex digits is
  enough); every id must name a stored event (exit 5 names the one that does not), and the
  answer lists what each cites.

``event_id`` makes any of them idempotent, as for the ``record_<type>`` tools.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from ledger import app
from ledger.errors import NotFound
from ledger.mcp.errors import Refusal
from ledger.mcp.records import AppendedEvent, envelope
from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models
from schemas.vocab import CandidateKind, Priority, TriageStatus, Verdict

_EVENT_ID = Field(
    None, description="Give the event id to make a retry idempotent (duplicate: true)."
)


# --- init ---------------------------------------------------------------------------------


class InitArgs(Arguments):
    parents: bool = Field(False, description="Create the ledger's folder (and its parents) too.")


class InitOut(BaseModel):
    ledger: str
    created: bool = Field(
        description="false: it existed (its tables and views brought up to date)."
    )


def _init(args: InitArgs, call: Call) -> dict[str, Any]:
    store = call.seat.store()
    store.check_path()
    folder = call.seat.ledger.parent
    if not folder.is_dir():
        if not args.parents:
            raise NotFound(
                f"no directory {folder} for ledger {call.seat.ledger} (mistyped? parents=true creates it)"
            )
        folder.mkdir(parents=True, exist_ok=True)
    return {"ledger": str(call.seat.ledger), "created": store.init()}


# --- propose ------------------------------------------------------------------------------


class ProposeArgs(Arguments):
    title: str = Field(description="What to try, in a few words.")
    kind: CandidateKind = Field("flag", description="What the candidate changes.")
    flag: str | None = Field(None, description="The server flag (without dashes) for kind flag.")
    value: Any = Field(None, description="The flag's value to try (true for a bare switch).")
    hypothesis: str | None = Field(None, description="What should change, and why.")
    priority: Priority | None = Field(None, description="How soon to try it.")
    candidate_id: str | None = Field(
        None, description="Stable id (default: kind:flag, e.g. flag:enable-foo)."
    )
    session_id: str | None = Field(None, description="Default: the server's --session.")
    event_id: UUID | None = _EVENT_ID


class CandidateOut(AppendedEvent):
    candidate: dict[str, Any] | None = Field(
        description="The candidate's board row after the write."
    )


def _refusal(exc: app.CandidateConflict) -> Refusal:
    return Refusal(exc, candidate=exc.candidate)


def _written(written: app.Written) -> dict[str, Any]:
    return {**envelope(written.result, written.event.type), "candidate": written.candidate}


def _propose(args: ProposeArgs, call: Call) -> dict[str, Any]:
    proposal = app.Proposal(**args.model_dump())
    try:
        written = app.propose(
            call.seat.writable_store(), proposal, call.writer, "propose_candidate"
        )
    except app.CandidateConflict as exc:
        raise _refusal(exc) from None
    return _written(written)


# --- triage ---------------------------------------------------------------------------------


class TriageArgs(Arguments):
    candidate_id: str = Field(description="The board's candidate_id, e.g. flag:enable-foo.")
    status: TriageStatus | None = Field(None, description="The new status.")
    reason: str | None = Field(None, description="Why (on the board and in the log).")
    verdict: Verdict | None = Field(None, description="The flag's verdict, if settled.")
    expected_version: int | None = Field(
        None,
        ge=1,
        description="The stream_version you read on the board (default: the current one).",
    )
    by_verdict: str | None = Field(
        None,
        description="Instead of status: a metric; its measured verdict sets it.",
    )
    concurrency: int | None = Field(None, description="With by_verdict.")
    event_id: UUID | None = _EVENT_ID


def _triage(args: TriageArgs, call: Call) -> dict[str, Any]:
    ask = app.TriageAsk(**args.model_dump())
    try:
        written = app.triage_asked(call.seat.writable_store(), ask, call.writer, "triage_candidate")
    except app.CandidateConflict as exc:
        raise _refusal(exc) from None
    return _written(written)


# --- decide ---------------------------------------------------------------------------------


class DecisionArgs(Arguments):
    decision: str = Field(description="What was decided.")
    rationale: str | None = Field(None, description="Why, in the evidence's terms.")
    alternatives: list[str] = Field(default_factory=list, description="What else was considered.")
    evidence_event_ids: list[str] = Field(
        default_factory=list,
        description="Ids (or 8+ digit prefixes) of the events supporting it: a comparison, "
        "a finding, a flag verdict.",
    )
    candidate_id: str | None = Field(None, description="The candidate it settles, if one.")
    session_id: str | None = Field(None, description="Default: the server's --session.")
    follow_triage: bool = Field(
        False,
        description="Decide as candidate_id's latest triage did.",
    )
    event_id: UUID | None = _EVENT_ID


class DecisionOut(AppendedEvent):
    evidence: list[dict[str, Any]] = Field(
        description="Each cited event: {event_id, type, summary}."
    )


def _decide(args: DecisionArgs, call: Call) -> dict[str, Any]:
    decision = app.Decision(**args.model_dump(exclude={"follow_triage"}))
    written = app.decide_asked(
        call.seat.writable_store(),
        decision,
        call.writer,
        "record_decision",
        follow=args.follow_triage,
    )
    return {**envelope(written.result, written.event.type), "evidence": written.evidence}


def add_verbs(toolbox: Toolbox) -> None:
    """``init_ledger``, ``propose_candidate``, ``triage_candidate``, ``record_decision``."""
    toolbox.add(
        tool_from_models(
            "init_ledger",
            "Create the ledger file of this server (tables and views); harmless on an existing "
            "one. A missing folder is refused (exit 5) unless parents=true.",
            InitArgs,
            InitOut,
            _init,
            idempotent=True,
        )
    )
    toolbox.add(
        tool_from_models(
            "propose_candidate",
            "Put a candidate (a flag or configuration to try) on the board. One already on the "
            "board is a conflict (exit 4) returned with its board row.",
            ProposeArgs,
            CandidateOut,
            _propose,
        )
    )
    toolbox.add(
        tool_from_models(
            "triage_candidate",
            "Accept, reject, defer or close a candidate (status, or by_verdict). Triaged since "
            "expected_version: exit 4 with the new board row; decide again, retry.",
            TriageArgs,
            CandidateOut,
            _triage,
        )
    )
    toolbox.add(
        tool_from_models(
            "record_decision",
            "Record a decision with its rationale, alternatives and evidence (event ids or "
            "prefixes, each checked); the decision log shows each cited event's summary.",
            DecisionArgs,
            DecisionOut,
            _decide,
        )
    )
