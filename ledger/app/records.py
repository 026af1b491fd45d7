"""``record``: one event a person or an agent records, as ``tuneledger append`` writes it.

The same validation (``ledger.write.jsonl.event_from_obj``), input checks
(``ledger.store.payloads``) and write rules (``ledger.write.commands.append``) as the CLI's
``append``; then what a front end may not leave to its input (``ledger.app.checks``): the
envelope fields the ledger sets, a runner's event type, control characters, times out of
bounds. Giving ``event_id`` makes a retry idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledger.app.checks import Writer, check_event, refuse_front_end_fields, refuse_runner_type
from ledger.errors import InvalidInput
from schemas import EVENT_TYPES, Event

if TYPE_CHECKING:
    from ledger.store import AppendResult, LedgerStore


@dataclass(frozen=True)
class Record:
    """One event to record: its type and its fields (payload, and the envelope fields a caller
    may set: ``event_id``, ``session_id``, ``occurred_at``, ``causation_id``, ``host``...)."""

    type: str
    fields: dict[str, Any] = field(default_factory=dict)


def checked_append(
    store: LedgerStore, event: Event, where: str, *, expected_version: int | None = None
) -> AppendResult:
    """Check ``event`` (strings, times, stored form) and append it by the command layer.

    Raises:
        InvalidInput, NotFound, ConcurrencyConflict, EventIdReused, LedgerBusy, StorageError:
            as ``tuneledger append``.
    """
    from ledger.store import payloads
    from ledger.write import commands

    data = event.model_dump()
    payloads.check_text(data, where)
    check_event(event, where, store.clock())
    payloads.payload_json(event, where)
    payloads.host_json(event, where)
    return commands.append(store, event, expected_version=expected_version, where=where)[0]


def record(store: LedgerStore, request: Record, writer: Writer, where: str) -> AppendResult:
    """Append ``request`` as ``writer``'s event; where it landed.

    Raises:
        InvalidInput: an unknown type, a runner's type, a field only the ledger sets, a field
            the event model refuses, a control character, a time out of bounds (exit 3).
        as ``checked_append`` otherwise.
    """
    from ledger.write.jsonl import event_from_obj

    if request.type not in EVENT_TYPES:
        raise InvalidInput(
            f"{where}: unknown event type {request.type!r} (tuneledger types lists them)"
        )
    refuse_runner_type(request.type, writer, where)
    given = request.fields.get("type", request.type)
    if given != request.type:
        raise InvalidInput(f"{where}: field 'type' must be {request.type!r}, got {given!r}")
    refuse_front_end_fields(request.fields, where)
    event = writer.stamp(event_from_obj({**request.fields, "type": request.type}, where))
    return checked_append(store, event, where)
