"""``tuneledger export markdown``: the decision log as Markdown."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.context import Context, ledger_option, pass_ctx


@click.group()
def export() -> None:
    """Export views of the ledger."""


@export.command(name="markdown")
@click.option(
    "--session",
    "session_id",
    help="Only this session (default: the global --session or TUNELEDGER_SESSION; without one, every session).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write to FILE instead of standard output ('-': standard output; ./- for a file named '-').",
)
@ledger_option
@pass_ctx
def export_markdown(ctx: Context, session_id: str | None, output: Path | None) -> None:
    """The decision log as Markdown: decisions, verdicts, triage, what differs, the Pareto front.

    With -o FILE and one session, the Pareto front's plot is drawn beside it (FILE's name with
    -pareto.svg; needs matplotlib) and linked from the document.
    """
    from ledger.app.export import Export, export_markdown

    # An output file's missing folders are created (a report in a new folder loses nothing;
    # a ledger in a mistyped one would: that is refused, see ``writable_store``).
    to_stdout = output is None or str(output) == "-"
    session = session_id or ctx.session  # as every command reads its session
    done = export_markdown(ctx.store(), Export(session, None if to_stdout else output))
    if to_stdout:
        click.echo(done.markdown, nl=False)
    else:
        click.echo(f"wrote {output}", err=True)
