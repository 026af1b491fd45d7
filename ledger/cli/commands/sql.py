"""``tuneledger sql``, ``types`` and ``views``: one read-only query, the event types, the views."""

from __future__ import annotations

from typing import Any

import click

from ledger.cli.context import FORMATS, Context, ledger_option, pass_ctx, print_table, stream_rows
from ledger.cli.json_output import json_format_options, json_option, print_json
from ledger.cli.option_types import bigint, seconds


@click.command()
@click.argument("query")
@json_format_options(FORMATS, "table", "json: one array of row objects, streamed.")
@click.option(
    "--timeout",
    "timeout_s",
    type=seconds(),
    default=10.0,
    show_default=True,
    help="Stop the query, its fetching and printing after this many seconds (0: no limit); writers wait while it runs.",
)
@click.option(
    "--max-rows",
    type=bigint(1),
    default=1000,
    show_default=True,
    help="Rows shown by --format table (csv and json stream every row).",
)
@ledger_option
@pass_ctx
def sql(ctx: Context, query: str, fmt: str, timeout_s: float, max_rows: int) -> None:
    """Run one read-only SQL query over the ledger and its views.

    \b
    Example: tuneledger sql "SELECT flag, verdict FROM flag_verdicts WHERE arch = 'sm120' AND no_effect"
    Statements that write, attach, set options or touch files are refused (exit 6);
    a query stopped by --timeout exits 14. A table shows --max-rows rows and at most
    8 MiB of values (with a notice when there are more); csv and json stream every row.
    --timeout covers the query, fetching and printing.
    """
    from ledger.cli.sql_guard import hard_deadline, limit_memory
    from ledger.read.sql_sandbox import (
        MAX_ANSWER_BYTES,
        run_readonly_capped,
        stream_readonly,
        timeout_message,
    )

    limit_memory()
    with hard_deadline(timeout_s, timeout_message(timeout_s)):
        if fmt != "table":  # streamed: memory stays at one batch whatever the result's size
            stream_rows(stream_readonly(ctx.store(), query, timeout_s=timeout_s or None), fmt)
            return
        # capped in rows and bytes as it is fetched, before the table is built (as MCP's sql):
        # a few huge values would otherwise be held, then laid out, whole
        table, truncated = run_readonly_capped(
            ctx.store(),
            query,
            max_rows=max_rows,
            max_bytes=MAX_ANSWER_BYTES,
            timeout_s=timeout_s or None,
        )
        print_table(table, fmt)
    if truncated and table.num_rows < max_rows:
        click.echo(
            f"(the first {table.num_rows:,} rows: a table shows at most "
            f"{MAX_ANSWER_BYTES >> 20} MiB of values; --format csv or json streams them all)"
        )
    elif truncated:
        click.echo(
            f"(the first {max_rows:,} rows; --max-rows N shows more, --format csv or json streams them all)"
        )


@click.command(name="types")
@click.argument("event_type", required=False, metavar="[TYPE]")
@json_option
def list_types(event_type: str | None, as_json: bool) -> None:
    """List the event types, or TYPE's fields with their types, units and meaning.

    \b
    --json: TYPE's JSON Schema (the one the validator uses, schemas/json/TYPE.json) as one
    object; without TYPE, one array of {"type", "description", "schema"}.
    """
    from ledger.read.event_types import describe_all, describe_type, type_json, types_json

    if as_json:
        print_json(type_json(event_type) if event_type else types_json())
        return
    click.echo(describe_type(event_type) if event_type else describe_all())


@click.command(name="views")
@json_option
@ledger_option
@pass_ctx
def list_views(ctx: Context, as_json: bool) -> None:
    """List the derived views and their columns (no ledger needed: without one, a scratch
    ledger's views are described, the same for every ledger of this version).

    --json: one array of {"view", "columns": [{"name", "type"}...]}.
    """
    import tempfile
    from pathlib import Path

    from ledger.derive.views import VIEW_NAMES
    from ledger.store import LedgerStore

    views: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        store = ctx.store()
        if not ctx.ledger.exists():
            store = LedgerStore(Path(scratch) / "views.duckdb")
            store.init()
        with store.connect() as con:  # one connection, every view made on it once
            for name in VIEW_NAMES:
                described = con.execute(f"DESCRIBE {name}").fetchall()
                views.append(
                    {"view": name, "columns": [{"name": r[0], "type": r[1]} for r in described]}
                )
    if as_json:
        print_json(views)
        return
    for view in views:
        click.echo(f"{view['view']}: " + ", ".join(column["name"] for column in view["columns"]))
