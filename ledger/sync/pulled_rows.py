"""Hub rows checked as an append checks its input, before a pull stores them (docs/reliability.md).

The hub is input like any other: any role with INSERT on it (another tool, plain SQL, a
buggy or hostile client) can write rows no tuneledger would. Before this check a pull stored
them as they were: a payload ``[1, 2]`` or ``{"text": 5}``, an actor kind ``robot``, a token
as a session id; ``show`` on one was a traceback. Each pulled row now passes what an
``append`` of the same event would:

- the event model of its type, at its schema version (upcast like a stored row): fields,
  types, vocabulary, actor kinds; the payload a JSON object without envelope fields;
- the stored bounds (``ledger.store.payloads``: 1 MiB of payload, a ``source`` of 4,096 characters,
  integers within BIGINT);
- identifiers free of secrets (``ledger.store.payloads.no_secret_ids``: a token as a session id,
  stream or actor name is refused, never stored; secrets in text are masked by the store);
- a retraction names an event this ledger holds (or one earlier in the batch) that is not
  itself a retraction;
- its origin ledger is one the hub knows (a ``ledgers`` row, as every push writes).

A row that fails is *held back*: not stored, named in one line (hub position, event id and
why), recorded in ``sync_invalid`` with the sync's other bookkeeping, and tried again by
every later sync (an upgraded tuneledger may read a newer schema version). The rest of the
batch is applied. So the pull's position passes only rows that were applied or held back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from pydantic import ValidationError

from ledger.errors import InvalidInput
from ledger.read.shown_text import escape_controls
from ledger.store.payloads import (
    MAX_PAYLOAD_BYTES,
    check_ints,
    check_source,
    no_secret_ids,
    too_large,
)
from ledger.sync.hub import PULL_COLUMNS
from schemas import EventEnvelope, EventRetracted, parse_event
from schemas.secrets import mask_text

_INDEX = {name: i for i, name in enumerate(PULL_COLUMNS)}
#: A hub row as ``hub.pull`` returns it (``PULL_COLUMNS`` order).
Row = TypeVar("Row", bound=Sequence[Any])


@dataclass(frozen=True)
class HeldRow:
    """A hub row held back from this ledger: its hub ``position``, ``event_id`` (text, as the
    hub has it) and the one-line ``reason``."""

    position: int
    event_id: str
    reason: str

    def line(self, remote: str) -> str:
        """The one-line report of it (control characters escaped, secrets masked)."""
        return escape_controls(
            mask_text(
                f"{remote}: held back hub position {self.position} (event {self.event_id}): {self.reason}"
            ),
            one_line=True,
        )


def _value(row: Sequence[Any], name: str) -> Any:
    return row[_INDEX[name]]


def _why(exc: Exception) -> str:
    """The first problem an event's validation found, as one short phrase."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())[1:])
        if first.get("type") == "union_tag_invalid":
            return "unknown event type"
        return f"field '{where or 'type'}': {first.get('msg', 'invalid')}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_row(row: Sequence[Any]) -> Any:
    """The event a hub row (``hub.PULL_COLUMNS`` order) holds, validated as an append would be.

    Raises:
        InvalidInput: why the row cannot be stored here (one line, no row data beyond names).
    """
    kind = _value(row, "type")
    label = f"{kind}" if isinstance(kind, str) else "event"
    if _value(row, "origin_name") is None:
        raise InvalidInput(
            f"origin ledger {_value(row, 'origin_ledger')} is unknown to the hub (no ledgers row: "
            "not written by a tuneledger push)"
        )
    text = _value(row, "payload")
    payload = json.loads(text)
    if not isinstance(payload, dict):
        raise InvalidInput(
            f"{label}: the payload is a JSON {type(payload).__name__}, not an object"
        )
    clashing = sorted(set(payload) & EventEnvelope.ENVELOPE_FIELDS)
    if clashing:
        raise InvalidInput(f"{label}: the payload holds the envelope field '{clashing[0]}'")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_PAYLOAD_BYTES:
        raise too_large(payload, size, label)
    check_source(_value(row, "source"), label)
    check_ints(text, label, "")
    host_text = _value(row, "host")
    host = json.loads(host_text) if host_text is not None else None
    if host_text is not None:
        check_ints(host_text, label, "host.")
    data = {
        **payload,
        "type": kind,
        "schema_version": _value(row, "schema_version"),
        "event_id": _value(row, "event_id"),
        "stream": _value(row, "stream"),
        "recorded_at": _value(row, "recorded_at"),
        "actor": {"kind": _value(row, "actor_kind"), "name": _value(row, "actor_name")},
        "session_id": _value(row, "session_id"),
        "causation_id": _value(row, "causation_id"),
        "correlation_id": _value(row, "correlation_id"),
        "source": _value(row, "source"),
        "host": host,
        "occurred_at": _value(row, "occurred_at"),
    }
    try:
        event = parse_event(data)
    except (ValueError, TypeError) as exc:  # ValidationError, UpcastError among them
        raise InvalidInput(f"{label}: {_why(exc)}") from None
    no_secret_ids(event, "")
    return event


def check_rows(
    rows: Iterable[Row], stored_types: Callable[[list[UUID]], dict[UUID, str]]
) -> tuple[list[Row], list[HeldRow]]:
    """Split hub rows into those to apply and those held back (``check_row``; retractions must
    name an event held here or kept earlier in ``rows``, and not a retraction).
    ``stored_types(ids)``: the type of each id this ledger holds."""
    kept: list[Row] = []
    held: list[HeldRow] = []
    retractions: list[tuple[Row, UUID]] = []
    for row in rows:
        try:
            event = check_row(row)
        except (InvalidInput, ValueError, TypeError) as exc:
            held.append(HeldRow(_value(row, "position"), str(_value(row, "event_id")), _why(exc)))
            continue
        kept.append(row)
        if isinstance(event, EventRetracted):
            retractions.append((row, event.retracted_event_id))
    if not retractions:
        return kept, held
    types = {UUID(str(_value(row, "event_id"))): str(_value(row, "type")) for row in kept}
    missing = [target for _, target in retractions if target not in types]
    types.update(stored_types(missing) if missing else {})
    refused: set[int] = set()
    for row, target in retractions:
        why = (
            f"event_retracted: no event {target} to retract here"
            if target not in types
            else f"event_retracted: {target} is itself a retraction, and a retraction is final"
            if types[target] == "event_retracted"
            else None
        )
        if why is not None:
            refused.add(id(row))
            held.append(HeldRow(_value(row, "position"), str(_value(row, "event_id")), why))
    if refused:
        kept = [row for row in kept if id(row) not in refused]
        held.sort(key=lambda item: item.position)
    return kept, held
