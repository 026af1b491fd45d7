"""What an append from options should say before it stores.

Re-running a walkthrough block appended a second ``session_started`` and the same
``flag_researched`` again, silently; an append without a session landed in stream ``ledger``,
where no session view or decision log shows it, silently. Neither is refused (a second
observation can be meant), but both are said, with the way out: ``--event-id`` makes a
re-run idempotent, ``--session`` (or ``TUNELEDGER_SESSION``) files the event under a session.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.read import lookups
from ledger.store.payloads import payload_json
from schemas import Event

if TYPE_CHECKING:
    from ledger.store import LedgerStore


def append_warnings(store: LedgerStore, events: Sequence[Event]) -> list[str]:
    """One line per event that repeats a stored one or has no session (none for a missing ledger)."""
    out: list[str] = []
    for event in events:
        if event.session_id is None:
            if (event.stream or event.default_stream()) == "ledger":
                out.append(
                    f"{event.type} has no session: it is stored in stream ledger, where no "
                    "session's views or decision log show it (give --session or set "
                    "TUNELEDGER_SESSION)"
                )
            continue
        repeat = repeat_warning(store, event)
        if repeat is not None:
            out.append(repeat)
    return out


def repeat_warning(store: LedgerStore, event: Event) -> str | None:
    """The line for an event that repeats a stored one of its session (a re-run step: the
    CLI's ``append``, ``triage`` and ``decide`` say it), else None."""
    if event.session_id is None or not store.path.exists():
        return None
    same = _stored_twin(store, event)
    if same is None:
        return None
    seq, event_id, what = same
    return (
        f"{what} (seq {seq}, event {event_id}): appended again; "
        "give --event-id to make a re-run store it once"
    )


def _stored_twin(store: LedgerStore, event: Event) -> tuple[int, str, str] | None:
    """A live event this one repeats: the session's ``session_started``, or one of the same type,
    session and payload."""
    rows = lookups.live_of_type(store, event.type, event.session_id)
    if not rows:
        return None
    if event.type == "session_started":
        first = rows[0]
        return first.seq, first.event_id, f"session {event.session_id} was already started"
    mine = json.loads(payload_json(event))
    for row in rows:
        if json.loads(row.payload) == mine:
            return (
                row.seq,
                row.event_id,
                f"the same {event.type} is already in session {event.session_id}",
            )
    return None
