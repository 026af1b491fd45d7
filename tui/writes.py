"""What the TUI writes: each user action becomes ONE appended event; nothing is edited.

No Textual here: the app calls these from thread workers, tests call them
directly. The forms' fields become events here; the writes and their rules are
the command layer's (``ledger.write.commands``), as for every other front end: triage
appends with ``expected_version`` (the candidate stream's version when the board
was read), so a triage made on a stale board raises
``ledger.errors.ConcurrencyConflict`` instead of silently overriding someone
else's decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from ledger.store import AppendResult, LedgerStore
from ledger.write import commands
from schemas.envelope import Actor
from schemas.events import (
    CandidateProposed,
    DecisionRecorded,
    NoteAdded,
    normalize_flag,
)


@dataclass(frozen=True)
class Author:
    """Who writes from this TUI and into which session."""

    actor: Actor
    session_id: str | None


def triage(
    store: LedgerStore,
    author: Author,
    candidate: dict[str, Any],
    status: str,
    reason: str | None = None,
) -> AppendResult:
    """Append ``candidate_triaged`` for a board row, expecting its stream at the version read.

    ``candidate`` is a board row (``candidate_id``, ``stream_version``).

    Raises:
        ConcurrencyConflict: the candidate changed since the board was read.
    """
    return commands.triage(
        store,
        candidate_id=candidate["candidate_id"],
        status=status,
        expected_version=int(candidate["stream_version"]),
        reason=reason,
        actor=author.actor,
        session_id=candidate.get("session_id") or author.session_id,
    )


def add_note(
    store: LedgerStore,
    author: Author,
    text: str,
    *,
    candidate_id: str | None = None,
    refs: list[str] | None = None,
) -> AppendResult:
    """Append ``note_added`` (about a candidate and/or citing events by id)."""
    event = NoteAdded(
        text=text,
        candidate_id=candidate_id,
        refs=[UUID(r) for r in refs or []],
        actor=author.actor,
        session_id=author.session_id,
    )
    return commands.add_note(store, event)


def propose(store: LedgerStore, author: Author, fields: dict[str, Any]) -> AppendResult:
    """Append ``candidate_proposed`` from the propose form's fields.

    ``candidate_id`` defaults to ``kind:flag`` (or ``kind:`` + a slug of the
    title); the new stream must not exist yet (``expected_version=0``), so
    proposing an id twice is a conflict, not a silent overwrite.

    Raises:
        ValueError: a field does not validate (pydantic's message).
        ConcurrencyConflict: a candidate with this id exists.
    """
    data = {k: v for k, v in fields.items() if v not in (None, "")}
    kind = data.get("kind", "flag")
    if "candidate_id" not in data:
        data["candidate_id"] = derived_candidate_id(kind, data.get("flag"), data.get("title"))
    event = CandidateProposed.model_validate(
        {**data, "kind": kind, "actor": author.actor, "session_id": author.session_id}
    )
    return commands.propose_candidate(store, event)


def derived_candidate_id(kind: str, flag: str | None, title: str | None) -> str:
    """The id a proposal gets when none is typed: ``kind:flag`` (the flag as the ledger spells
    it), else ``kind:`` + a slug of the title (the propose form shows it as it is typed)."""
    if flag:
        try:
            return f"{kind}:{normalize_flag(flag)}"
        except ValueError:
            pass  # a flag that cannot be one: the form's check names it
    return f"{kind}:{slug(title or '')}"


def check_proposal(fields: dict[str, Any]) -> None:
    """Validate the propose form's fields as ``propose`` would, without writing.

    Raises:
        ValueError: pydantic's error (its ``loc`` names the field).
    """
    data = {k: v for k, v in fields.items() if v not in (None, "")}
    data.setdefault("candidate_id", "check:only")
    CandidateProposed.model_validate({**data, "kind": data.get("kind", "flag")})


def check_decision(fields: dict[str, Any]) -> None:
    """Validate the decision form's fields as ``record_decision`` would, without writing.

    Raises:
        ValueError: pydantic's error (its ``loc`` names the field: an evidence id that is not a UUID).
    """
    data = {k: v for k, v in fields.items() if v not in (None, "")}
    for name in ("alternatives", "evidence_event_ids"):
        if isinstance(data.get(name), str):
            data[name] = split_list(data[name])
    DecisionRecorded.model_validate(data)


def record_decision(store: LedgerStore, author: Author, fields: dict[str, Any]) -> AppendResult:
    """Append ``decision_recorded`` from the decision form's fields.

    ``alternatives`` and ``evidence_event_ids`` may be given as text, one per
    line or separated by ``;``.

    Raises:
        ValueError: a field does not validate (e.g. an evidence id is not a UUID).
    """
    data = {k: v for k, v in fields.items() if v not in (None, "")}
    for name in ("alternatives", "evidence_event_ids"):
        if isinstance(data.get(name), str):
            data[name] = split_list(data[name])
    event = DecisionRecorded.model_validate(
        {**data, "actor": author.actor, "session_id": author.session_id}
    )
    return commands.record_decision(store, event)


def split_list(text: str) -> list[str]:
    """``"a; b\\nc"`` -> ``["a", "b", "c"]`` (empty items dropped)."""
    return [part.strip() for line in text.splitlines() for part in line.split(";") if part.strip()]


def slug(text: str) -> str:
    """A lower-case, dash-separated slug of ``text`` (at most 48 characters)."""
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(filter(None, out.split("-")))[:48] or "unnamed"
