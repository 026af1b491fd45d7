"""``tuneledger init``: create the ledger file."""

from __future__ import annotations

import click

from ledger.cli.context import Context, ledger_option, pass_ctx, require_folder


@click.command()
@click.option(
    "--parents", is_flag=True, help="Create the ledger's directory (and its parents) if missing."
)
@ledger_option
@pass_ctx
def init(ctx: Context, parents: bool) -> None:
    """Create the ledger file (tables and views); harmless on an existing one.

    A ledger path in a directory that does not exist is refused (exit 5: a
    mistyped path is not a new ledger) unless ``--parents``.
    """
    store = ctx.store()
    store.check_path()  # a URL-like or otherwise impossible name first: it has no folder to find
    if not parents:
        require_folder(ctx.ledger, "ledger", "`--parents` creates it")
    created = store.init()
    click.echo(f"{'created' if created else 'updated'} ledger {ctx.ledger}")
