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
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE instead of standard output.",
)
@ledger_option
@pass_ctx
def export_markdown(ctx: Context, session_id: str | None, output: Path | None) -> None:
    """The decision log as Markdown: decisions, verdicts, triage, what differs, the Pareto front.

    With -o FILE and one session, the Pareto front's plot is drawn beside it (FILE's name with
    -pareto.svg; needs matplotlib) and linked from the document.
    """
    from ledger.export.markdown import render_report
    from ledger.read.model import read_report

    # An output file's missing folders are created (a report in a new folder loses nothing;
    # a ledger in a mistyped one would: that is refused, see ``writable_store``).
    report = read_report(ctx.store(), session_id)
    plot = None
    if output is not None and (output.is_file() or not output.exists()):  # not beside /dev/stdout
        from ledger.export.plot import write_session_plot

        plot = write_session_plot(report, output)
    text = render_report(report, plot=plot)
    if output is None:
        click.echo(text, nl=False)
    else:
        from ledger.store.safe_files import write_file

        write_file(output, text)  # whole file; a symlink written through, a device in place
        click.echo(f"wrote {output}", err=True)
