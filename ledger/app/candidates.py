"""Propose, triage, decide: the board's use cases, for the CLI's verbs and the MCP's tools.

- ``propose`` opens the candidate's stream (``candidate_id`` defaults to ``kind:flag``); a
  candidate already on the board is a conflict (exit 4) carrying its board row, never a
  second proposal. A retry with the same ``event_id`` returns the stored proposal.
- ``triage`` at the version the caller read (``expected_version``), else at the board's current
  one; a stale one is a conflict carrying the candidate's new board row.
- ``decide`` cites its evidence by event id (a unique prefix of 8+ hex digits is enough); every
  id must name a stored event (exit 5 names the one that does not); the answer carries each
  cited event's summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ValidationError

from ledger.app.checks import Writer
from ledger.app.records import checked_append
from ledger.errors import ConcurrencyConflict, InvalidInput, NotFound
from ledger.read.json_values import jsonable
from schemas import CandidateProposed, CandidateTriaged, DecisionRecorded, Event, normalize_flag

if TYPE_CHECKING:
    from ledger.store import AppendResult, LedgerStore

Row = dict[str, Any]
E = TypeVar("E", bound=BaseModel)


class CandidateConflict(ConcurrencyConflict):
    """A conflict on a candidate's stream (exit 4) with the candidate's board row as it is now:
    the caller decides again from it and retries with its ``stream_version``."""

    def __init__(self, conflict: ConcurrencyConflict, candidate: Row | None) -> None:
        super().__init__(conflict.stream, conflict.expected, conflict.actual)
        self.candidate = candidate
        if candidate is not None:
            now = (
                f"; the candidate now: status {candidate.get('status') or 'proposed'}, "
                f"stream_version {candidate.get('stream_version')} (decide again, then retry "
                "with that version)"
            )
            self.args = (str(self) + now,)


@dataclass(frozen=True)
class Proposal:
    """A candidate to put on the board."""

    title: str
    kind: str = "flag"
    flag: str | None = None
    value: Any = None
    hypothesis: str | None = None
    priority: str | None = None
    candidate_id: str | None = None
    session_id: str | None = None
    event_id: UUID | None = None


@dataclass(frozen=True)
class Triage:
    """A triage of a candidate at the version its caller read (None: the current one)."""

    candidate_id: str
    status: str
    reason: str | None = None
    verdict: str | None = None
    expected_version: int | None = None
    event_id: UUID | None = None
    causation_id: UUID | None = None


@dataclass(frozen=True)
class Decision:
    """A decision with its rationale, alternatives and evidence (event ids or unique prefixes)."""

    decision: str
    rationale: str | None = None
    alternatives: Sequence[str] = ()
    evidence_event_ids: Sequence[str] = ()
    candidate_id: str | None = None
    session_id: str | None = None
    event_id: UUID | None = None


@dataclass(frozen=True)
class Written:
    """What a use case wrote: where the event landed, the event, and what the caller shows
    (the candidate's board row after the write; a decision's cited events)."""

    result: AppendResult
    event: Event
    candidate: Row | None = None
    evidence: list[Row] = field(default_factory=list)
    #: an event that repeats a stored one of its session (a re-run step): said, not refused
    warnings: list[str] = field(default_factory=list)


def written_json(written: Written) -> dict[str, Any]:
    """What a use case wrote, as the CLI's ``--json`` and the MCP tools answer it: where the
    event landed, the candidate's board row, a decision's cited events."""
    result = written.result
    return {
        "event_id": str(result.event_id),
        "type": written.event.type,
        "seq": result.seq,
        "stream": result.stream,
        "stream_version": result.stream_version,
        "duplicate": result.duplicate,
        "candidate": written.candidate,
        "evidence": written.evidence,
    }


def _validated(model: type[E], data: dict[str, Any], where: str) -> E:
    from ledger.write.jsonl import describe_validation_error

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {describe_validation_error(exc)}") from None


def _given(obj: Any, *leave_out: str) -> dict[str, Any]:
    return {
        k: (list(v) if isinstance(v, tuple) else v)
        for k, v in vars(obj).items()
        if v is not None and k not in leave_out
    }


def board_row(store: LedgerStore, candidate_id: str) -> Row | None:
    """One candidate's board row (with its latest delta), or None when it is not on the board."""
    from ledger.read import model as read_model

    with store.connect() as con:
        found = [r for r in read_model.board(con, None) if r["candidate_id"] == candidate_id]
    return jsonable(found[0]) if found else None


def _repeats(store: LedgerStore, event: Event) -> list[str]:
    """The repeat of a stored event of the session, as ``append`` says it; none where the event
    itself is stored (a retry with ``--event-id`` stores nothing)."""
    from ledger.write.append_warnings import repeat_warning  # DuckDB's reads: not at import

    if _stored(store, event.event_id):
        return []
    repeat = repeat_warning(store, event)
    return [repeat] if repeat is not None else []


def _stored(store: LedgerStore, event_id: UUID | None) -> bool:
    if event_id is None:
        return False
    try:
        store.get(event_id)
    except NotFound:
        return False
    return True


def propose(store: LedgerStore, proposal: Proposal, writer: Writer, where: str) -> Written:
    """Put ``proposal`` on the board.

    Raises:
        InvalidInput: neither a candidate id nor a flag to name it by; a field refused (exit 3).
        CandidateConflict: the candidate is on the board already (exit 4).
    """
    candidate_id = proposal.candidate_id
    if candidate_id is None:
        if not proposal.flag:
            raise InvalidInput(f"{where}: give a candidate id, or a flag to name it by")
        candidate_id = f"{proposal.kind}:{normalize_flag(proposal.flag)}"
    data = {**_given(proposal, "candidate_id"), "candidate_id": candidate_id}
    event = writer.stamp(_validated(CandidateProposed, data, where))
    existing = board_row(store, candidate_id)
    stream = event.stream or event.default_stream()
    if existing is not None and not _stored(store, proposal.event_id):
        conflict = ConcurrencyConflict(stream, 0, int(existing["stream_version"]))
        raise CandidateConflict(conflict, existing)
    # A candidate whose proposal was retracted is off the board but its stream goes on: a new
    # proposal expects the stream where it is (``commands.propose_candidate``).
    expected = None if existing is not None else store.stream_version(stream)
    try:
        result = checked_append(store, event, where, expected_version=expected)
    except ConcurrencyConflict as exc:  # proposed by someone else since it was read
        raise CandidateConflict(exc, board_row(store, candidate_id)) from None
    return Written(result, event, board_row(store, candidate_id))


def triage(store: LedgerStore, request: Triage, writer: Writer, where: str) -> Written:
    """Triage a candidate on the board.

    Raises:
        NotFound: no such candidate on the board (exit 5).
        InvalidInput: a field refused (exit 3).
        CandidateConflict: it was triaged since ``expected_version`` (exit 4).
    """
    row = board_row(store, request.candidate_id)
    if row is None:
        raise NotFound(
            f"{where}: no candidate {request.candidate_id!r} on the board "
            "(the board lists them; propose adds one)"
        )
    expected = request.expected_version or int(row["stream_version"])
    data = _given(request, "expected_version")
    event = writer.stamp(_validated(CandidateTriaged, data, where), row.get("session_id"))
    warnings = _repeats(store, event)  # before: after, the event is its own twin
    try:
        result = checked_append(store, event, where, expected_version=expected)
    except ConcurrencyConflict as exc:
        raise CandidateConflict(exc, board_row(store, request.candidate_id)) from None
    return Written(result, event, board_row(store, request.candidate_id), warnings=warnings)


def decide(store: LedgerStore, decision: Decision, writer: Writer, where: str) -> Written:
    """Record a decision citing stored events.

    Raises:
        NotFound: an evidence id that names no stored event (exit 5).
        InvalidInput: an ambiguous prefix, a field refused (exit 3).
    """
    cited = [store.get(ref) for ref in decision.evidence_event_ids]  # NotFound names the id
    data = {
        **_given(decision, "evidence_event_ids"),
        "evidence_event_ids": [e.event_id for e in cited],
    }
    event = writer.stamp(_validated(DecisionRecorded, data, where))
    warnings = _repeats(store, event)
    result = checked_append(store, event, where)
    from ledger.read.agent_reads import event_summaries  # DuckDB's: not at import

    with store.connect() as con:
        summaries = event_summaries(con, [str(e.event_id) for e in cited])
    evidence = [
        {"event_id": str(e.event_id), "type": e.type, "summary": summaries.get(str(e.event_id))}
        for e in cited
    ]
    return Written(result, event, evidence=jsonable(evidence), warnings=warnings)
