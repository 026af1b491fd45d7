"""``record``: one tool for every event type a person or an agent records, by ``type``.

Nothing here names an event type: the type enum is the registry less the runners' types
(``ledger.app.agent_types``), and each type's JSON Schema (``schemas.jsonschema``, the files
committed in ``schemas/json``) is the resource ``tuneledger://schema/{type}``, so a new event
type is a new enum value with no MCP code, and ``tools/list`` stays small (one tool, not one
per type: an agent's client holds a few dozen tools at most).

A call is ``ledger.app.record`` (``tuneledger append``'s validation, input checks and write
rules) as the client's writer: the actor is ``agent:<client name>``, never a field; the store
stamps ``recorded_at``; a runner's event type, a control character or a time out of bounds is
refused. Giving ``event_id`` makes a retry idempotent. Returns where the event landed (``seq``,
``event_id``, ``stream``, ``stream_version``, ``duplicate``), as ``append --json`` prints it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import BaseModel, Field

from ledger.app import Record, agent_types, record
from ledger.mcp.toolbox import Call, Tool, Toolbox, schema_of
from schemas import EVENT_TYPES, jsonschema

#: The types a verb writes, with its checks (a proposal once, a triage at a version, a decision
#: citing stored events): ``record`` points to the verb instead (one way to do each thing).
VERB_OF = {
    "candidate_proposed": "propose_candidate",
    "candidate_triaged": "triage_candidate",
    "decision_recorded": "record_decision",
}


def record_types() -> tuple[str, ...]:
    """The types ``record`` writes: the agent's, less the verbs'."""
    return tuple(t for t in agent_types() if t not in VERB_OF)


class AppendedEvent(BaseModel):
    """Where an appended event landed (``tuneledger append --json``'s object)."""

    event_id: str
    type: str
    seq: int
    stream: str
    stream_version: int
    duplicate: bool = Field(description="A retry of a stored event_id: nothing new written.")


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


def _first_sentence(event_type: str) -> str:
    doc = " ".join((EVENT_TYPES[event_type].__doc__ or event_type).split())
    return doc.split(". ")[0].rstrip(".")


def record_input_schema() -> dict[str, Any]:
    """``record``'s input: ``type`` (an enum of the agent's types) and ``fields`` (an object)."""
    types = record_types()
    return {
        "type": "object",
        "properties": {
            "type": {
                "type": "string",
                "enum": list(types),
                "description": "The event type: "
                + "; ".join(f"{t}: {_first_sentence(t)}" for t in types)
                + ".",
            },
            "fields": {
                "type": "object",
                "description": "The event's fields, as the type's JSON Schema (resource "
                "tuneledger://schema/{type}) says: its payload, and event_id (a retry with it "
                "is idempotent), session_id (default: the server's), occurred_at (from 2000 to "
                "a day ahead), causation_id, correlation_id, host, source. actor, recorded_at, "
                "seq, stream and stream_version are the ledger's: refused.",
            },
        },
        "required": ["type", "fields"],
        "additionalProperties": False,
    }


def _handler(arguments: dict[str, Any], call: Call) -> dict[str, Any]:
    from ledger.errors import InvalidInput

    extra = sorted(set(arguments) - {"type", "fields"})
    if extra:
        raise InvalidInput(f"record: '{extra[0]}' is not an argument of record (type, fields)")
    event_type = arguments.get("type")
    fields = arguments.get("fields", {})
    if not isinstance(event_type, str):
        raise InvalidInput("record: argument 'type' is required (an event type)")
    if not isinstance(fields, dict):
        raise InvalidInput("record: argument 'fields' must be an object")
    where = f"record {event_type}"
    if event_type in VERB_OF:
        raise InvalidInput(f"{where}: use the {VERB_OF[event_type]} tool (it checks the board)")
    result = record(call.seat.writable_store(), Record(event_type, fields), call.writer, where)
    return envelope(result, event_type)


def record_tool() -> Tool:
    """The ``record`` tool."""
    return Tool(
        name="record",
        title="Record an event",
        description="Append one event of `type` with its `fields` (the type's JSON Schema is "
        "the resource tuneledger://schema/{type}). What you learn: a note, a finding, a flag "
        "researched, a host, a session, a patch, a retraction. Measurements (servers, "
        "benchmarks, comparisons, tuning, spec trials) are the runners': run_bench, run_plan, "
        "start_server record them. Refusals are tool errors with the CLI's exit code.",
        input_schema=record_input_schema(),
        output_schema=schema_of(AppendedEvent),
        handler=_handler,
    )


def add_record_tools(toolbox: Toolbox) -> None:
    """The ``record`` tool."""
    toolbox.add(record_tool())
