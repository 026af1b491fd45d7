"""The verbs an agent runs a session with: create the ledger, propose, triage, decide.

Each is one event through the command layer (``ledger.write.commands``, the rules every front
end shares), made for an agent:

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

from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field, ValidationError

from ledger.errors import ConcurrencyConflict, InvalidInput, NotFound
from ledger.mcp.errors import Refusal
from ledger.mcp.reads import board_row
from ledger.mcp.records import AppendedEvent, append_one, envelope, with_defaults
from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models
from ledger.mcp.values import jsonable
from ledger.write.jsonl import describe_validation_error
from schemas import CandidateProposed, CandidateTriaged, DecisionRecorded, normalize_flag
from schemas.vocab import VERDICTS

_EVENT_ID = Field(
    None, description="Give the event id to make a retry idempotent (duplicate: true)."
)


E = TypeVar("E", bound=BaseModel)


def _validated(model: type[E], data: dict[str, Any], tool: str) -> E:
    """``data`` as a ``model`` event (the server's defaults not yet applied).

    Raises:
        InvalidInput: the first field the event model refuses, named (exit 3).
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{tool}: {describe_validation_error(exc)}") from None


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
    kind: str = Field("flag", description="flag, config, kernel-tune, spec-decoding, other...")
    flag: str | None = Field(None, description="The server flag (without dashes) for kind flag.")
    value: Any = Field(None, description="The flag's value to try (true for a bare switch).")
    hypothesis: str | None = Field(None, description="What should change, and why.")
    priority: str | None = Field(None, description="high, medium or low.")
    candidate_id: str | None = Field(
        None, description="Stable id (default: kind:flag, e.g. flag:enable-foo)."
    )
    session_id: str | None = Field(None, description="Default: the server's --session.")
    event_id: UUID | None = _EVENT_ID


class CandidateOut(AppendedEvent):
    candidate: dict[str, Any] | None = Field(
        description="The candidate's board row after the write."
    )


def _propose(args: ProposeArgs, call: Call) -> dict[str, Any]:
    candidate_id = args.candidate_id
    if candidate_id is None:
        if not args.flag:
            raise InvalidInput("propose_candidate: give candidate_id, or a flag to name it by")
        candidate_id = f"{args.kind}:{normalize_flag(args.flag)}"
    data = args.model_dump(exclude_none=True, exclude={"candidate_id"})
    event = with_defaults(
        _validated(CandidateProposed, {**data, "candidate_id": candidate_id}, "propose_candidate"),
        call,
    )
    store = call.seat.writable_store()
    existing = board_row(call, candidate_id)
    stream = event.stream or event.default_stream()
    if existing is not None and not _stored(call, args.event_id):
        raise Refusal(
            ConcurrencyConflict(stream, 0, int(existing["stream_version"])),
            candidate=existing,
        )
    # A candidate whose proposal was retracted is off the board but its stream goes on: a new
    # proposal expects the stream where it is (``commands.propose_candidate``).
    expected = None if existing is not None else store.stream_version(stream)
    try:
        result = append_one(event, call, "propose_candidate", expected_version=expected)
    except ConcurrencyConflict as exc:  # proposed by someone else since it was read
        raise Refusal(exc, candidate=board_row(call, candidate_id)) from None
    return {**envelope(result, event.type), "candidate": board_row(call, candidate_id)}


def _stored(call: Call, event_id: UUID | None) -> bool:
    """Whether ``event_id`` is stored (a retry of a call that went through)."""
    if event_id is None:
        return False
    try:
        call.seat.store().get(event_id)
    except NotFound:
        return False
    return True


# --- triage ---------------------------------------------------------------------------------


class TriageArgs(Arguments):
    candidate_id: str = Field(description="The board's candidate_id, e.g. flag:enable-foo.")
    status: str = Field(description="accepted, rejected, deferred or done.")
    reason: str | None = Field(None, description="Why (shown on the board and in the log).")
    verdict: str | None = Field(
        None, description=f"The flag's verdict, one of {', '.join(VERDICTS)}."
    )
    expected_version: int | None = Field(
        None,
        ge=1,
        description="The candidate's stream_version as you read it on the board: the triage is "
        "refused (exit 4, with the new state) if it changed since. Default: the current one.",
    )
    event_id: UUID | None = _EVENT_ID


def _triage(args: TriageArgs, call: Call) -> dict[str, Any]:
    call.seat.writable_store()
    row = board_row(call, args.candidate_id)
    if row is None:
        raise NotFound(
            f"triage_candidate: no candidate {args.candidate_id!r} on the board "
            "(the board tool lists them; propose_candidate adds one)"
        )
    expected = args.expected_version or int(row["stream_version"])
    data = args.model_dump(exclude_none=True, exclude={"expected_version"})
    session = row.get("session_id") or call.seat.session_id
    event = with_defaults(
        _validated(CandidateTriaged, {**data, "session_id": session}, "triage_candidate"), call
    )
    try:
        result = append_one(event, call, "triage_candidate", expected_version=expected)
    except ConcurrencyConflict as exc:
        raise Refusal(exc, candidate=board_row(call, args.candidate_id)) from None
    return {**envelope(result, event.type), "candidate": board_row(call, args.candidate_id)}


# --- decide ---------------------------------------------------------------------------------


class DecisionArgs(Arguments):
    decision: str = Field(description="What was decided.")
    rationale: str | None = Field(None, description="Why, in the evidence's terms.")
    alternatives: list[str] = Field(default_factory=list, description="What else was considered.")
    evidence_event_ids: list[str] = Field(
        default_factory=list,
        description="Ids (or unique 8+ digit prefixes) of the events that support it: a "
        "comparison, a finding, a flag verdict, a benchmark run.",
    )
    candidate_id: str | None = Field(None, description="The candidate it settles, if one.")
    session_id: str | None = Field(None, description="Default: the server's --session.")
    event_id: UUID | None = _EVENT_ID


class DecisionOut(AppendedEvent):
    evidence: list[dict[str, Any]] = Field(
        description="Each cited event: {event_id, type, summary}."
    )


def _decide(args: DecisionArgs, call: Call) -> dict[str, Any]:
    store = call.seat.writable_store()
    cited = [store.get(ref) for ref in args.evidence_event_ids]  # NotFound names the id
    data = args.model_dump(exclude_none=True, exclude={"evidence_event_ids"})
    event = with_defaults(
        _validated(
            DecisionRecorded,
            {**data, "evidence_event_ids": [e.event_id for e in cited]},
            "record_decision",
        ),
        call,
    )
    result = append_one(event, call, "record_decision")
    with store.connect() as con:
        summaries = dict(
            con.execute(
                "SELECT event_id::VARCHAR, coalesce(summary, type) FROM event_log "
                "WHERE event_id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
                [[str(e.event_id) for e in cited] or [""]],
            ).fetchall()
        )
    evidence = [
        {"event_id": str(e.event_id), "type": e.type, "summary": summaries.get(str(e.event_id))}
        for e in cited
    ]
    return {**envelope(result, event.type), "evidence": jsonable(evidence)}


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
            "Accept, reject, defer or close a candidate, at the version you read (expected_version; "
            "default: the board's current one). If someone triaged it since, the answer is a "
            "conflict (exit 4) carrying the candidate's new board row: decide again and retry "
            "with its stream_version.",
            TriageArgs,
            CandidateOut,
            _triage,
        )
    )
    toolbox.add(
        tool_from_models(
            "record_decision",
            "Record a decision with its rationale, the alternatives and the evidence (event ids "
            "or unique prefixes, each checked to exist); the decision log shows it with each "
            "cited event's summary.",
            DecisionArgs,
            DecisionOut,
            _decide,
        )
    )
