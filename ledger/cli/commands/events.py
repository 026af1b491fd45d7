"""``tuneledger events`` and ``show``: the log, filtered, and one event with what links to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ledger.cli.context import FORMATS, Context, ledger_option, pass_ctx, print_table, shown
from ledger.cli.json_output import json_format_options, print_json, print_json_array
from ledger.cli.option_types import bigint
from ledger.errors import InvalidInput
from ledger.write.jsonl import event_to_json
from schemas import EVENT_TYPES

if TYPE_CHECKING:
    from datetime import datetime


@click.command()
@click.option("--type", "types", multiple=True, help="Only this event type (repeatable).")
@click.option("--session", "session_id", help="Only this session.")
@click.option("--stream", help="Only this stream.")
@click.option("--actor", help="Only this actor: kind:name (agent:claude) or a name.")
@click.option(
    "--since",
    type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]),
    help="Only events recorded at or after this UTC time (2026-01-02 or 2026-01-02T03:04:05).",
)
@click.option("--after", "after_seq", type=bigint(0), default=0, help="Only events after this seq.")
@click.option("--limit", type=bigint(0), help="At most this many (the newest when --newest).")
@click.option("--newest", is_flag=True, help="Newest first.")
@json_format_options(FORMATS, "table", "json: one array of full events (envelope and payload).")
@ledger_option
@pass_ctx
def events(
    ctx: Context,
    types: tuple[str, ...],
    session_id: str | None,
    stream: str | None,
    actor: str | None,
    since: datetime | None,
    after_seq: int,
    limit: int | None,
    newest: bool,
    fmt: str,
) -> None:
    """List events (retracted ones too, marked); json prints the full events as one JSON array."""
    from ledger.read import model as read_model

    unknown = [t for t in types if t not in EVENT_TYPES]
    if unknown:
        raise InvalidInput(
            f"--type {unknown[0]!r}: unknown event type (known: {', '.join(sorted(EVENT_TYPES))})"
        )
    flt = read_model.EventFilter(
        types=types,
        session_id=session_id,
        stream=stream,
        actor=actor,
        since=since,
        after_seq=after_seq,
    )
    store = ctx.store()
    if fmt == "json":  # one array, streamed: an event per line
        found = read_model.read_events(store, flt, limit=limit, newest_first=newest)
        print_json_array(event_to_json(event) for event in found)
        return
    with store.connect(views=("event_log",)) as con:
        table = read_model.event_log(con, flt, limit=limit, newest_first=newest)
    print_table(table, fmt)


@click.command()
@click.argument("event_id")
@json_format_options(
    ("text", "json"),
    "text",
    "text: the event's JSON, then what links to it as lines; json: one JSON object, "
    '{"event": {...}, "linked": [{"seq", "event_id", "relation", "type", "summary"}...]}.',
)
@ledger_option
@pass_ctx
def show(ctx: Context, event_id: str, fmt: str) -> None:
    """Show one event (its id, or a unique prefix of it), with what links to it.

    A prefix is 8 hex digits or more, and must name one event of the ledger: a UUIDv7's first
    12 hex digits are the millisecond it was recorded, so events recorded together share them;
    the digits after the version digit (the 13th, a 7) are random. An ambiguous prefix is
    refused (exit 3): give more digits.
    """
    import json

    from ledger.read import model as read_model

    store = ctx.store()
    event = store.get(event_id)
    with store.connect(views=("event_log", "all_events")) as con:
        linked = read_model.linked_events(con, event)
    if fmt == "json":  # one document an agent parses whole: the links inside it
        links = [
            {
                "seq": row["seq"],
                "event_id": str(row["event_id"]),
                "relation": row["relation"],
                "type": row["type"],
                "summary": row["summary"],
            }
            for row in linked
        ]
        print_json({"event": json.loads(event_to_json(event)), "linked": links})
        return
    click.echo(event_to_json(event, indent=2))
    if linked:
        click.echo("\nlinked events (its cause, what it cites, and events citing or caused by it):")
        for row in linked:
            click.echo(
                f"  seq {row['seq']:>6}  {row['event_id']}  {row['relation']}: "
                f"{row['type']}: {shown(row['summary'])}"
            )
