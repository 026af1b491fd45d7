"""``tuneledger append``: one event from options, or events as JSON / JSON lines on standard input."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from ledger.app.checks import FRONT_END_FIELDS, RUNNER_TYPES, Writer, refuse_runner_type
from ledger.cli.context import Context, first_error, ledger_option, pass_ctx
from ledger.cli.json_output import json_option, print_json
from ledger.cli.option_types import bigint
from ledger.errors import InvalidInput
from ledger.write.jsonl import event_from_obj, read_stdin_events, read_stdin_text
from schemas import EVENT_TYPES, Actor, Event, Host

if TYPE_CHECKING:
    from ledger.store import AppendResult


class _AppendCommand(click.Command):
    """``append``: ``append TYPE --help`` adds the fields of TYPE (names, types, units) to the help."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # --help is eager: it prints before TYPE is parsed, so note TYPE here.
        ctx.meta["append_type"] = next((a for a in args if a in EVENT_TYPES), None)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        event_type = ctx.meta.get("append_type")
        if event_type:
            from ledger.read.event_types import describe_type

            formatter.write("\n" + describe_type(event_type) + "\n")


def _fill_envelope(event: Event, ctx: Context, overrides: dict[str, Any]) -> Event:
    """Apply the command's defaults (actor, session) where the event left them unset."""
    update: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    if "actor" not in event.model_fields_set and "actor" not in update:
        update["actor"] = ctx.actor
    if event.session_id is None and "session_id" not in update and ctx.session:
        update["session_id"] = ctx.session
    if not update:
        return event
    # Validated (model_copy would not): a bad --causation is named, never stored or warned about.
    try:
        return type(event).model_validate({**event.model_dump(), **update})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        option = _OPTION_OF.get(field, field)
        raise InvalidInput(
            f"{option}: {first['msg']} (got {str(update.get(field, ''))[:60]!r})"
        ) from None


#: The ``append`` option that sets each envelope field (for error messages).
_OPTION_OF = {
    "causation_id": "--causation",
    "correlation_id": "--correlation",
    "event_id": "--event-id",
    "session_id": "--session",
    "stream": "--stream",
    "source": "--source",
    "host": "--host",
    "actor": "--actor",
}


#: Envelope fields ``append`` refuses in its input (``ledger.app.FRONT_END_FIELDS``): the actor
#: is the CLI's (``--actor``, ``TUNELEDGER_ACTOR``), ``recorded_at`` the store's clock, ``seq``
#: the store's. Two stay, as documented (docs/cli.md): ``stream`` (``--stream`` names one on
#: purpose) and ``stream_version``, a batch's event's expected version (a triage's check).
REFUSED_FIELDS = FRONT_END_FIELDS - {"stream", "stream_version"}
#: Where a refused field or a runner's type may be in a bulk input: only the lines it matches
#: are decoded to be sure (a string value cannot hold an unescaped quote; a nested key can).
_SUSPECT = re.compile(
    r'"(?:'
    + "|".join(sorted(REFUSED_FIELDS))
    + r')"\s*:|"type"\s*:\s*"(?:'
    + "|".join(sorted(RUNNER_TYPES))
    + ')"'
)


def refuse_overrides(data: Any, where: str, actor: Actor) -> None:
    """Refuse an event object that sets an envelope field only the CLI or the store sets, or
    is of a type only the runners write while ``actor`` (the CLI's) is no runner (exit 3, one
    line, nothing appended): ``ledger.app``'s rules, as the MCP ``record`` tool's.

    Raises:
        InvalidInput: naming the field or the type.
    """
    if not isinstance(data, dict):
        return  # not an event: the reader names it
    given = sorted(REFUSED_FIELDS & set(data))
    if given:
        raise InvalidInput(
            f"{where}: field '{given[0]}' is set by the ledger, not by the input (the actor is "
            "--actor or TUNELEDGER_ACTOR; recorded_at and seq the store's)"
        )
    if isinstance(data.get("type"), str):
        refuse_runner_type(data["type"], Writer(actor), where)


def _refuse_overrides_in_stdin(text: str, actor: Actor) -> None:
    """``refuse_overrides`` for standard input (one JSON value, an array, or JSON lines),
    decoding only what may hold a refused field: most input is read once, by the reader."""
    if not _SUSPECT.search(text):
        return
    from ledger.write.jsonl import jsonl_lines

    try:
        whole = json.loads(text)
    except RecursionError:
        return  # nested past the parser's limit: the reader refuses it in one line
    except ValueError:  # JSON lines (or not JSON: the reader says so, with its line)
        for number, line in enumerate(jsonl_lines(text), start=1):
            if _SUSPECT.search(line):
                try:
                    data = json.loads(line)
                except (ValueError, RecursionError):
                    continue  # the reader says what is wrong with this line
                refuse_overrides(data, f"<stdin>:{number}", actor)
        return
    if isinstance(whole, list):
        for index, item in enumerate(whole):
            refuse_overrides(item, f"<stdin>:[{index}]", actor)
    else:
        refuse_overrides(whole, "<stdin>", actor)


def _result_json(result: AppendResult) -> dict[str, Any]:
    return {
        "event_id": str(result.event_id),
        "seq": result.seq,
        "stream": result.stream,
        "stream_version": result.stream_version,
        "duplicate": result.duplicate,
    }


def _report_appended(
    results: Sequence[AppendResult],
    events: list[Any],
    as_json: bool,
    types: list[str] | None = None,
) -> None:
    if as_json:
        print_json([_result_json(r) for r in results], indent=None)  # a line per call
        return
    names = types if types is not None else [event.type for event in events]
    click.echo(
        "\n".join(
            f"{'already stored at' if result.duplicate else 'appended'} seq {result.seq}: {name} "
            f"{result.event_id} ({result.stream} v{result.stream_version})"
            for result, name in zip(results, names, strict=True)
        )
    )


#: JSON lines on standard input from which the bulk import (``ledger.write.bulk``: validation in
#: worker processes, one transaction) takes over; smaller inputs take the event-by-event path.
BULK_MIN_LINES = 1000


def _bulk_eligible(
    text: str, overrides: dict[str, Any], event_id: str | None, expected_version: int | None
) -> bool:
    """Many JSON lines and no option that changes each event (those take the general path)."""
    if (
        event_id is not None
        or expected_version is not None
        or any(v is not None for v in overrides.values())
    ):
        return False
    return not text.lstrip().startswith("[") and text.count("\n") >= BULK_MIN_LINES


@click.command(cls=_AppendCommand)
@click.argument("event_type", required=False, metavar="[TYPE]")
@click.option(
    "-f",
    "--field",
    "fields",
    multiple=True,
    metavar="KEY=VALUE",
    help="A payload field; VALUE is JSON when it parses (42, true, [1,2]) else text; KEY may be dotted (metrics.output_throughput).",
)
@click.option("--session", "session_id", help="Session id of the event.")
@click.option("--stream", help="Stream (default: the event type's aggregate, e.g. candidate:ID).")
@click.option("--event-id", help="Give the event id (makes a retry idempotent).")
@click.option("--causation", "causation_id", help="Id of the event that caused this one.")
@click.option("--correlation", "correlation_id", help="Id correlating a chain of events.")
@click.option("--source", help="Where this record comes from (file:line, URL, message).")
@click.option(
    "--host",
    "host_json",
    metavar="JSON",
    help='Host as JSON, e.g. \'{"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}\'.',
)
@click.option(
    "--expected-version",
    type=bigint(0),
    help="Fail with exit 4 unless the stream is at this version (0: new stream).",
)
@json_option
@click.option(
    "--create", is_flag=True, help="Create the ledger if it does not exist (else: exit 5)."
)
@ledger_option
@pass_ctx
def append(
    ctx: Context,
    event_type: str | None,
    fields: tuple[str, ...],
    session_id: str | None,
    stream: str | None,
    event_id: str | None,
    causation_id: str | None,
    correlation_id: str | None,
    source: str | None,
    host_json: str | None,
    expected_version: int | None,
    as_json: bool,
    create: bool,
) -> None:
    """Append one event from options, or events as JSON / JSON lines on standard input.

    \b
    From options:  tuneledger append note_added -f text="fused MoE sum: no change"
    From stdin:    echo '{"type": "note_added", "text": "hi"}' | tuneledger append --json
    A batch on stdin (JSON array or JSON lines) is appended atomically: all or nothing.
    Who and when are not input: an actor, recorded_at or seq in it is refused (the actor is
    --actor, recorded_at the store's clock), and so are the runners' event types unless the
    actor is a runner (exit 3).

    \b
    TYPE's fields, with their types and units: `tuneledger append TYPE --help`
    or `tuneledger types TYPE`.

    \b
    Exit codes: 0 ok, 3 invalid input, 4 version conflict, 5 not found,
    7 ledger busy, 8 event id reused with other content, 15 storage error
    (disk full, read-only file system; nothing of the call stored), 16 the
    resident process ended mid-call (it may be stored: an event with its own
    event_id can be retried safely).
    A ledger that does not exist is not created (exit 5: a mistyped path
    is not a new ledger) unless --create; --create makes no folders.
    """
    ctx.writable_store(create=create)
    overrides: dict[str, Any] = {
        "session_id": session_id,
        "stream": stream,
        "causation_id": causation_id,
        "correlation_id": correlation_id,
        "source": source,
    }
    if host_json is not None:
        try:
            overrides["host"] = Host.model_validate_json(host_json)
        except ValueError as exc:
            raise InvalidInput(f"--host: {first_error(exc)}") from None
    if event_type is None or event_type == "-":
        if fields:
            raise click.UsageError("-f/--field needs a TYPE")
        if sys.stdin.isatty():
            raise click.UsageError(
                "give a TYPE with -f fields, or pipe JSON / JSON lines on standard input"
            )
        text = read_stdin_text(sys.stdin)
        _refuse_overrides_in_stdin(text, ctx.actor)
        if _bulk_eligible(text, overrides, event_id, expected_version):
            from ledger.write.bulk import import_lines
            from ledger.write.jsonl import jsonl_lines

            lines = jsonl_lines(text)
            imported, types = import_lines(
                ctx.store(), lines, "<stdin>", actor=ctx.actor, session_id=ctx.session
            )
            _report_appended(imported, [], as_json, types=types)
            return
        events = read_stdin_events(io.StringIO(text))
        if event_id is not None:
            if len(events) != 1:
                # Ignoring it would make a retry append the whole batch again.
                raise click.UsageError(
                    f"--event-id names one event, but standard input held {len(events)}; "
                    'give each event its own "event_id" in the JSON instead'
                )
            overrides["event_id"] = event_id
    else:
        from ledger.write.fields import fields_object

        data = fields_object(event_type, fields)  # read against TYPE's JSON Schema
        refuse_overrides({**data, "type": event_type}, "options", ctx.actor)
        if event_id is not None:
            data["event_id"] = event_id
        events = [event_from_obj(data, "options")]
    events = [_fill_envelope(event, ctx, overrides) for event in events]
    from ledger.store import payloads  # DuckDB imported when a command writes (start-up time)

    for number, event in enumerate(events, start=1):  # name the input here, not in the store
        where = "options" if event_type not in (None, "-") else f"<stdin>: event {number}"
        payloads.check_text(event.model_dump(), where)
        payloads.payload_json(event, where)
        payloads.host_json(event, where)
    where = "options" if event_type not in (None, "-") else "<stdin>"
    from ledger.write import commands  # imported when a command writes (start-up time: see above)

    warnings: list[str] = []
    if event_type not in (None, "-") and event_id is None:  # a re-run, or no session: said
        from ledger.write.append_warnings import append_warnings

        warnings = append_warnings(ctx.store(), events)  # before: after, the event is its own twin
    results = commands.append(ctx.store(), events, expected_version=expected_version, where=where)
    for warning in warnings:  # only once stored: a refusal stays one line
        click.echo(f"tuneledger: warning: {warning}", err=True)
    _report_appended(results, events, as_json)
