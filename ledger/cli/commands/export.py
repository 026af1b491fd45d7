"""``tuneledger export markdown``: the decision log as Markdown."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.context import Context, ledger_option, pass_ctx


@click.group()
def export() -> None:
    """Export views of the ledger."""


@export.command(name="markdown")
@click.option("--session", "session_id", help="Only this session (default: every session).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write to FILE instead of standard output ('-': standard output; ./- for a file named '-').",
)
@ledger_option
@pass_ctx
def export_markdown(ctx: Context, session_id: str | None, output: Path | None) -> None:
    """The decision log as Markdown: hardware, decisions with evidence, triage, verdicts, deltas."""
    from ledger.export.markdown import render_markdown

    # An output file's missing folders are created (a report in a new folder loses nothing;
    # a ledger in a mistyped one would: that is refused, see ``writable_store``).
    text = render_markdown(ctx.store(), session_id=session_id)
    if output is None or str(output) == "-":
        click.echo(text, nl=False)
    else:
        from ledger.store.safe_files import write_file

        # never more than `> FILE` could do: see ledger/store/safe_files.py
        write_file(output, text)
        click.echo(f"wrote {output}", err=True)
