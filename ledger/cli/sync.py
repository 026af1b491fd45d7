"""The ``remote`` and ``sync`` commands (registered through the ``tuneledger.commands`` entry points).

``remote add NAME URL``   record a PostgreSQL hub (no password: see ``ledger.sync.remote``)
``remote list``           the configured remotes (URLs masked)
``remote remove NAME``    forget one (no event is touched anywhere)
``remote init NAME``      create the hub's append-only schema; ``--grant ROLE`` lets a role write
``sync [NAME]``           push what the hub lacks, then pull what the ledger lacks (a hub row
                          that fails an append's checks is held back, one stderr line each);
                          ``--dry-run`` prints the counts both ways and changes nothing;
                          ``--hold-back ID`` keeps an id's two versions apart (exit 8's way out)

Exit codes as ``ledger.errors``: 8 when one event id has two contents, 9 when the hub
cannot be reached, refuses the login, or is not initialised.
"""

from __future__ import annotations

import click

# pyarrow and rich (``ledger.cli.render``) only when a table is printed: `--help` stays light.
from ledger.cli.context import FORMATS, Context, ledger_option, pass_ctx, print_table
from ledger.cli.json_output import json_format_options, json_option, print_json


@click.group(name="remote")
def remote_group() -> None:
    """PostgreSQL hubs this ledger syncs with (credentials from PGPASSWORD, PGPASSFILE or a service file)."""


@remote_group.command(name="add")
@click.argument("name")
@click.argument("url")
@click.option(
    "--schema",
    help="The hub's schema (default: the URL's options=-csearch_path=..., else tuneledger).",
)
@click.option(
    "--as",
    "host_name",
    help="This ledger's name on hubs (default: TUNELEDGER_HOST_NAME or the host name).",
)
@ledger_option
@pass_ctx
def remote_add(
    ctx: Context, name: str, url: str, schema: str | None, host_name: str | None
) -> None:
    """Record the hub NAME at URL (postgresql://user@host:port/db, never with a password)."""
    from ledger.sync import remote
    from ledger.sync import replicate as sync

    parsed = remote.parse_remote(name, url, schema)
    if host_name:
        sync.check_name(host_name)  # before anything is written
    store = ctx.store()
    sync.ensure_tables(store)
    remote.add_remote(store, parsed)
    if host_name:
        sync.set_name(store, host_name)
    _, ledger_name = sync.identity(store)
    click.echo(
        f"added remote {parsed.name}: {parsed.display_url} schema {parsed.schema} (this ledger: {ledger_name})"
    )


@remote_group.command(name="list")
@json_format_options(FORMATS, "table")
@ledger_option
@pass_ctx
def remote_list(ctx: Context, fmt: str) -> None:
    """The configured remotes with their last sync (URLs masked)."""
    import pyarrow as pa

    from ledger.sync import remote
    from ledger.sync import replicate as sync

    store = ctx.store()
    rows = []
    for item in remote.list_remotes(store):
        state = sync.status(store, item)
        rows.append(
            {
                "name": item.name,
                "url": item.display_url,
                "schema": item.schema,
                "last_sync_at": state.last_sync_at,
                "hub_position": state.pulled_position,
                "to_push": state.to_push,
                # ids held back by `sync --hold-back` and hub rows held back as invalid, until
                # a sync applies them (they were named once, then shown as 0)
                "held_back": state.held + len(state.invalid_positions),
                "held_back_hub_positions": ",".join(map(str, state.invalid_positions)),
            }
        )
    table = pa.Table.from_pylist(rows) if rows else pa.table({"name": pa.array([], pa.string())})
    print_table(table, fmt)


@remote_group.command(name="remove")
@click.argument("name")
@ledger_option
@pass_ctx
def remote_remove(ctx: Context, name: str) -> None:
    """Forget the remote NAME (its configuration only; no event is deleted here or on the hub)."""
    from ledger.sync import remote

    remote.remove_remote(ctx.store(), name)
    click.echo(f"removed remote {name}")


@remote_group.command(name="init")
@click.argument("name")
@click.option(
    "--grant",
    "grants",
    multiple=True,
    metavar="ROLE",
    help="Let ROLE push and pull (SELECT, INSERT; repeatable).",
)
@click.option("--user", help="Connect as this (admin) user instead of the URL's.")
@ledger_option
@pass_ctx
def remote_init(ctx: Context, name: str, grants: tuple[str, ...], user: str | None) -> None:
    """Create the append-only hub schema of remote NAME (idempotent)."""
    from ledger.sync import hub, remote

    item = remote.get_remote(ctx.store(), name)
    hub.init_schema(item, grant=grants, user=user)
    granted = f"; granted to {', '.join(grants)}" if grants else ""
    click.echo(f"hub schema {item.schema} ready on {item.display_url}{granted}")


@click.command(name="sync")
@click.argument("name", required=False)
@click.option(
    "--dry-run", is_flag=True, help="Print how many events would go each way; change nothing."
)
@click.option(
    "--hold-back",
    "hold",
    multiple=True,
    metavar="EVENT_ID",
    help="Keep this event's two versions apart for good (the exit-8 case): it is neither pushed "
    "to nor pulled from NAME again; the rest syncs. Repeatable.",
)
@json_option
@ledger_option
@pass_ctx
def sync_command(
    ctx: Context, name: str | None, dry_run: bool, hold: tuple[str, ...], as_json: bool
) -> None:
    """Push what the hub NAME lacks, then pull what this ledger lacks (NAME: the only remote).

    Exit 8 when an event id is on the hub with other content than here: nothing of the
    sync is applied, and the message names the id; `--hold-back ID` keeps both versions
    (each side its own) and syncs the rest.
    """
    from ledger.sync import remote
    from ledger.sync import replicate as sync

    store = ctx.store()
    item = remote.get_remote(store, name)
    if hold and dry_run:
        raise click.UsageError("--hold-back records a choice; it cannot go with --dry-run")
    if hold:
        sync.hold_back(store, item, hold)
    if dry_run:
        counts = sync.counts(store, item)
        if as_json:
            print_json(
                {
                    "remote": item.name,
                    "to_push": counts.to_push,
                    "to_pull": counts.to_pull,
                    "refused": list(counts.refused),
                }
            )
        else:
            refused = (
                f"; a sync would be refused (exit 8): {', '.join(counts.refused)} "
                "on the hub with other content (see --hold-back)"
                if counts.refused
                else ""
            )
            click.echo(
                f"{item.name}: {counts.to_push} to push, {counts.to_pull} to pull{refused} "
                "(dry run: nothing changed)"
            )
        return
    report = sync.sync(store, item)
    if as_json:
        print_json(
            {
                "remote": report.remote,
                "pushed": report.pushed,
                "stored": report.stored,
                "pulled": report.pulled,
                "applied": report.applied,
                "position": report.position,
                "held": list(report.held),
                "invalid": [
                    {"position": row.position, "event_id": row.event_id, "reason": row.reason}
                    for row in report.invalid
                ],
                "invalid_total": report.invalid_total,
            }
        )
    else:
        held = f"; held back: {', '.join(report.held)}" if report.held else ""
        invalid = (
            f"; {report.invalid_total} hub row(s) held back as invalid "
            "(SELECT * FROM sync_invalid lists them; each sync tries them again)"
            if report.invalid_total
            else ""
        )
        click.echo(
            f"{report.remote}: pushed {report.pushed} ({report.stored} new on the hub), "
            f"pulled {report.pulled} ({report.applied} new here); hub position {report.position}"
            f"{held}{invalid}"
        )
    for row in report.invalid:  # one line each, as they are held back (stderr: a warning)
        click.echo(f"tuneledger: {row.line(report.remote)}", err=True)
