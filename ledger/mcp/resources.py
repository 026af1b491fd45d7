"""The resources and the prompt of ``tuneledger mcp``.

Resources (read-only, read at the moment they are asked for):

- ``tuneledger://board``: the board of the server's session (every session's without one), JSON.
- ``tuneledger://session/{id}/decision-log``: the session's decision log, the Markdown of
  ``tuneledger export markdown --session ID`` (``ledger.export.markdown``), byte for byte.
- ``tuneledger://flag/{name}``: a flag's verdict history on every engine, version and arch,
  each verdict with its basis and the event that gave it (type, summary, source), JSON.

The prompt ``next_step`` lays out a session for the agent: the board, the open candidates and
what the evidence says about them (flag verdicts, benchmark deltas, the last server runs'
changes), and asks for the next step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate

from ledger.errors import LedgerError
from ledger.mcp.errors import error_payload
from ledger.mcp.toolbox import Call, Seat

#: The resource template of an event type's JSON Schema (``record``'s ``fields``).
SCHEMA_URI = "tuneledger://schema/{type}"

BOARD_URI = "tuneledger://board"
DECISION_LOG = "tuneledger://session/{id}/decision-log"
FLAG = "tuneledger://flag/{name}"
PROMPT = "next_step"

Reader = Callable[[Seat, dict[str, str]], tuple[str, str]]


def _read_error(uri: str, exc: LedgerError) -> MCPError:
    """A resource read that failed, as a JSON-RPC error carrying the CLI's exit code."""
    text, structured = error_payload(exc)
    return MCPError(code=types.INVALID_PARAMS, message=text, data={"uri": uri, **structured})


def board_json(seat: Seat, _params: dict[str, str]) -> tuple[str, str]:
    from ledger.mcp.reads import board_rows

    rows = board_rows(Call(seat), seat.session_id)
    return json.dumps({"session_id": seat.session_id, "rows": rows}), "application/json"


def type_schema(_seat: Seat, params: dict[str, str]) -> tuple[str, str]:
    """An event type's committed JSON Schema (``record``'s ``fields``)."""
    from ledger.errors import NotFound
    from ledger.mcp.records import event_schema
    from schemas import EVENT_TYPES

    if params["type"] not in EVENT_TYPES:
        raise NotFound(f"no event type {params['type']!r} (record's type enum lists them)")
    return json.dumps(event_schema(params["type"]), indent=1), "application/schema+json"


def decision_log(seat: Seat, params: dict[str, str]) -> tuple[str, str]:
    from ledger.app.export import Export, export_markdown

    return export_markdown(seat.store(), Export(params["id"])).markdown, "text/markdown"


def flag_history(seat: Seat, params: dict[str, str]) -> tuple[str, str]:
    from ledger.mcp.values import jsonable
    from ledger.read import agent_reads
    from schemas import normalize_flag

    flag = normalize_flag(params["name"])
    with seat.store().connect() as con:
        history = agent_reads.flag_history_rows(con, flag)
        latest = agent_reads.flag_latest_rows(con, flag)
    body = {"flag": flag, "latest": jsonable(latest), "history": jsonable(history)}
    return json.dumps(body), "application/json"


@dataclass(frozen=True)
class _Template:
    template: UriTemplate
    name: str
    description: str
    mime_type: str
    read: Reader


class Library:
    """What the server lists and reads besides its tools: resources, templates, the prompt."""

    def __init__(self) -> None:
        self._templates = [
            _Template(
                UriTemplate.parse(DECISION_LOG),
                "decision-log",
                "A session's decision log (Markdown), as `tuneledger export markdown --session ID`.",
                "text/markdown",
                decision_log,
            ),
            _Template(
                UriTemplate.parse(SCHEMA_URI),
                "event-schema",
                "An event type's JSON Schema: the fields the record tool takes for that type.",
                "application/schema+json",
                type_schema,
            ),
            _Template(
                UriTemplate.parse(FLAG),
                "flag",
                "A flag's verdict history with the evidence of each verdict (JSON).",
                "application/json",
                flag_history,
            ),
        ]

    def resources(self, seat: Seat) -> list[types.Resource]:
        """The board, and each session's decision log."""
        listed = [
            types.Resource(
                uri=BOARD_URI,
                name="board",
                description="The triage board of this server's session (JSON).",
                mime_type="application/json",
            )
        ]
        if seat.ledger.exists():
            from ledger.read import model as read_model

            with seat.store().connect() as con:
                sessions = read_model.sessions(con)
            listed += [
                types.Resource(
                    uri=self._templates[0].template.expand({"id": session}),
                    name=f"decision-log {session}",
                    mime_type="text/markdown",
                )
                for session in sessions
            ]
        return listed

    def templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uri_template=str(t.template),
                name=t.name,
                description=t.description,
                mime_type=t.mime_type,
            )
            for t in self._templates
        ]

    def read(self, seat: Seat, uri: str) -> types.ReadResourceResult:
        """Read ``uri``.

        Raises:
            MCPError: no such resource, or the read was refused (exit code in its data).
        """
        reader: Reader | None = board_json if uri == BOARD_URI else None
        params: dict[str, str] = {}
        for template in self._templates:
            if reader is not None:
                break
            matched = template.template.match(uri)
            if matched is not None:
                reader = template.read
                params = {k: str(v) for k, v in matched.items()}
        if reader is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no resource {uri}")
        try:
            text, mime = reader(seat, params)
        except LedgerError as exc:
            raise _read_error(uri, exc) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)]
        )

    def prompts(self) -> list[types.Prompt]:
        return [
            types.Prompt(
                name=PROMPT,
                title="Next step of this session",
                description="The board, the open candidates and what the evidence says, then: "
                "what should be done next?",
                arguments=[
                    types.PromptArgument(
                        name="session_id",
                        description="The session (default: the server's --session).",
                        required=False,
                    )
                ],
            )
        ]

    def prompt(self, seat: Seat, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        """The ``next_step`` prompt.

        Raises:
            MCPError: another prompt name, or the ledger could not be read.
        """
        if name != PROMPT:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no prompt {name!r} (next_step is)")
        from ledger.mcp.next_step import next_step_text

        try:
            text = next_step_text(seat, arguments.get("session_id") or seat.session_id)
        except LedgerError as exc:
            raise _read_error(f"prompt:{name}", exc) from None
        return types.GetPromptResult(
            description="Next step of this session",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )
