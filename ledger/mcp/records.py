"""``record_<event_type>``: one tool per registered event type, generated from the registry.

Nothing here names an event type: the tools are made from ``schemas.EVENT_TYPES`` and each
type's JSON Schema (``schemas.jsonschema``, the files committed in ``schemas/json``), so a new
event type is a new tool with no MCP code. A call is ``tuneledger append TYPE`` with the event as
JSON: the same validation (``ledger.write.jsonl.event_from_obj``), input checks
(``ledger.store.payloads``) and write rules (``ledger.write.commands.append``: a triage needs
its ``stream_version``, a retraction names a stored event). The envelope defaults are the
server's: ``actor`` its ``--actor`` (``agent:mcp``), ``session_id`` its ``--session``. Giving
``event_id`` makes a retry idempotent: the same event comes back with ``duplicate: true``.
Returns where the event landed (``seq``, ``event_id``, ``stream``, ``stream_version``,
``duplicate``), as ``append --json`` prints it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import BaseModel

from ledger.errors import InvalidInput
from ledger.mcp.toolbox import Call, Tool, Toolbox, schema_of
from ledger.read.event_types import unit_of
from ledger.write.jsonl import event_from_obj
from schemas import EVENT_TYPES, Event, jsonschema


class AppendedEvent(BaseModel):
    """Where an appended event landed (``tuneledger append --json``'s object)."""

    event_id: str
    type: str
    seq: int
    stream: str
    stream_version: int
    duplicate: bool


def envelope(result: Any, event_type: str) -> dict[str, Any]:
    """An ``AppendResult`` as the ``AppendedEvent`` JSON object."""
    return {
        "event_id": str(result.event_id),
        "type": event_type,
        "seq": result.seq,
        "stream": result.stream,
        "stream_version": result.stream_version,
        "duplicate": result.duplicate,
    }


def event_schema(event_type: str) -> dict[str, Any]:
    """The type's JSON Schema, exactly as committed in ``schemas/json/<type>.json``."""
    return cast(dict[str, Any], json.loads(json.dumps(jsonschema.schema_of(event_type))))


def with_defaults(event: Event, call: Call) -> Event:
    """``event`` with the server's actor and session where the caller left them unset
    (``tuneledger append``'s ``--actor`` and ``--session`` defaults)."""
    update: dict[str, Any] = {}
    if "actor" not in event.model_fields_set:
        update["actor"] = call.seat.actor
    if event.session_id is None and call.seat.session_id:
        update["session_id"] = call.seat.session_id
    if not update:
        return event
    return type(event).model_validate({**event.model_dump(), **update})


def append_one(event: Event, call: Call, where: str, *, expected_version: int | None = None) -> Any:
    """Check and append one event as ``tuneledger append`` does; return its ``AppendResult``.

    Raises:
        InvalidInput, NotFound, ConcurrencyConflict, EventIdReused, LedgerBusy, StorageError:
            as the CLI's ``append``.
    """
    from ledger.store import payloads
    from ledger.write import commands

    store = call.seat.writable_store()
    payloads.check_text(event.model_dump(), where)
    payloads.payload_json(event, where)
    payloads.host_json(event, where)
    return commands.append(store, event, expected_version=expected_version, where=where)[0]


def _units(model: type[BaseModel], prefix: str = "") -> list[str]:
    """``field unit`` for every field (nested models' too) whose unit is known."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        nested = annotation if isinstance(annotation, type) else None
        if nested is not None and issubclass(nested, BaseModel):
            out += _units(nested, f"{prefix}{name}.")
            continue
        unit = unit_of(name)
        if unit and name not in ("seq",):
            out.append(f"{prefix}{name} {unit}")
    return out


def _description(event_type: str) -> str:
    model = EVENT_TYPES[event_type]
    doc = " ".join((model.__doc__ or event_type).split())
    units = _units(model)
    return (
        f"Append one {event_type} event. {doc}"
        + (f" Units: {', '.join(units)}." if units else "")
        + " Envelope defaults: actor and session_id of this server. Give event_id to make a"
        " retry idempotent (duplicate: true). Refusals are tool errors with the CLI's exit code."
    )


def record_tool(event_type: str) -> Tool:
    """The ``record_<event_type>`` tool."""
    name = f"record_{event_type}"

    def handler(arguments: dict[str, Any], call: Call) -> dict[str, Any]:
        given = arguments.get("type", event_type)
        if given != event_type:
            raise InvalidInput(f"{name}: field 'type' must be {event_type!r}, got {given!r}")
        event = with_defaults(event_from_obj({**arguments, "type": event_type}, name), call)
        return envelope(append_one(event, call, name), event_type)

    return Tool(
        name=name,
        title=f"Record {event_type.replace('_', ' ')}",
        description=_description(event_type),
        input_schema=event_schema(event_type),
        output_schema=schema_of(AppendedEvent),
        handler=handler,
    )


def add_record_tools(toolbox: Toolbox) -> None:
    """One ``record_<event_type>`` tool per registered event type, in name order."""
    for event_type in sorted(EVENT_TYPES):
        toolbox.add(record_tool(event_type))
