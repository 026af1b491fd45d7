"""``tuneledger tui``: open the terminal UI (registered through the ``tuneledger.commands`` entry point)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="tui")
@click.option(
    "--ledger",
    "ledger_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The ledger file (default: the group's --ledger / TUNELEDGER_LEDGER).",
)
@click.option(
    "--session",
    "session_id",
    help="The session to show and write to (default: the group's --session, "
    "else the latest started session).",
)
@click.pass_obj
def tui_command(obj: object, ledger_path: Path | None, session_id: str | None) -> None:
    """Open the terminal UI: board, benchmarks, timeline, flags and SQL, updated live.

    \b
    Keys: a accept, r reject, d defer, n note, p propose, D decision, e export,
    1-5 panes, Ctrl+P command palette, F1 or ? help, q quit.
    """
    from ledger.errors import NotFound

    from .app import open_tui

    path = ledger_path or getattr(obj, "ledger", None) or Path("tuneledger.duckdb")
    if not Path(path).exists():
        raise NotFound(
            f"no ledger at {path} (create it with `tuneledger init`, or try `tuneledger demo`)"
        )
    if not has_terminal():
        # Without a terminal Textual would wait forever for one (a script, a pipe, CI).
        raise click.UsageError(
            "tui needs a terminal (stdin and stdout are not one); "
            "read the ledger with `tuneledger sql` or `tuneledger events` instead"
        )
    open_tui(path, session_id or getattr(obj, "session", None), actor=getattr(obj, "actor", None))


def has_terminal() -> bool:
    """Whether standard input and output are both a terminal (Textual needs one to draw on)."""
    import sys

    return sys.stdin.isatty() and sys.stdout.isatty()
