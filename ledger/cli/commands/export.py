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
    """The decision log as Markdown: decisions, verdicts, triage, what differs, the Pareto front.

    With -o FILE and one session, the Pareto front's plot is drawn beside it (FILE's name with
    -pareto.svg; needs matplotlib) and linked from the document.
    """
    from ledger.export.markdown import render_report
    from ledger.read.model import read_report
    from ledger.store.safe_files import descriptor_of, write_file

    # An output file's missing folders are created (a report in a new folder loses nothing;
    # a ledger in a mistyped one would: that is refused, see ``writable_store``).
    report = read_report(ctx.store(), session_id)
    to_stdout = output is None or str(output) == "-"
    plot = None
    regular = output is not None and (output.is_file() or not output.exists())
    if output is not None and not to_stdout and regular and descriptor_of(output) is None:
        from ledger.export.plot import session_plot

        plot = session_plot(report, output)  # never beside /dev/stdout or /dev/fd/N
    text = render_report(report, plot=None if plot is None else plot[0].name)
    if output is None or to_stdout:
        click.echo(text, nl=False)
    else:
        # never more than `> FILE` could do: see ledger/store/safe_files.py; the log first, so
        # a log refused leaves no plot behind
        write_file(output, text)
        if plot is not None:
            write_file(*plot)
        click.echo(f"wrote {output}", err=True)
