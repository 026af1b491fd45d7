"""What every command of the ``tuneledger`` CLI shares: the context object (the ledger path, the
default actor and session), ``--ledger`` accepted after a command too, the output formats and
the table printer (imported when printing), and the entry-point lookup of plugins.

Commands contributed by other packages (``run``, ``tui``, ``remote``, ``sync``) import their
context from here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.errors import NotFound
from schemas import Actor

if TYPE_CHECKING:
    from ledger.store import LedgerStore

# Start-up time matters (an agent calls `tuneledger append` in a loop): DuckDB (the store),
# pyarrow, rich (the table printer), the runners' and the TUI's commands are imported only
# when a command that needs them runs. See docs/performance.md.

#: The output formats of the table-printing commands (``ledger.cli.render``, imported when printing).
FORMATS = ("table", "csv", "json")


def print_table(*args: Any, **kwargs: Any) -> None:
    """``ledger.cli.render.print_table``, imported on first use (it brings rich and pyarrow)."""
    from ledger.cli.render import print_table as render

    render(*args, **kwargs)


def stream_rows(*args: Any, **kwargs: Any) -> int:
    """``ledger.cli.render.stream_rows``, imported on first use."""
    from ledger.cli.render import stream_rows as stream

    return stream(*args, **kwargs)


DEFAULT_LEDGER = "tuneledger.duckdb"


class Context:
    """What every command gets: the ledger path and the default actor and session."""

    def __init__(self, ledger: Path, actor: Actor, session: str | None) -> None:
        self.ledger = ledger
        self.actor = actor
        self.session = session

    def store(self) -> LedgerStore:
        """The ledger store at ``--ledger`` (DuckDB imported here: `--help` and `types` need none),
        with the derived tables it keeps current (``ledger.derive``)."""
        from ledger.store import LedgerStore

        return LedgerStore(self.ledger)

    def writable_store(self, *, create: bool = False) -> LedgerStore:
        """The store for a command that appends: a ledger that does not exist is not created
        (a mistyped path is not a new ledger) unless ``create``.

        Raises:
            InvalidInput: a name that cannot be a ledger (exit 3, before "missing").
            NotFound: no ledger at ``--ledger`` and not ``create``, or its folder is missing
                (exit 5: ``--create`` makes a file, not folders; ``init --parents`` does).
        """
        store = self.store()
        store.check_path()
        if not self.ledger.exists():
            if not create:
                # only a command that has --create is told to pass it (research has none)
                command = click.get_current_context(silent=True)
                has_create = command is not None and any(
                    p.name == "create" for p in command.command.params
                )
                hint = ", or pass --create" if has_create else ""
                raise NotFound(
                    f"no ledger at {self.ledger} (create it with `tuneledger init`{hint})"
                )
            require_folder(self.ledger, "ledger", "`tuneledger init --parents` creates it")
        return store


def require_folder(path: Path, what: str, remedy: str) -> None:
    """Refuse a path whose folder is missing: a mistyped folder is not a new one (exit 5).

    Raises:
        NotFound: ``path.parent`` is not a directory.
    """
    folder = path.parent
    if not folder.is_dir():
        raise NotFound(f"no directory {folder} for {what} {path} (mistyped? {remedy})")


pass_ctx = click.make_pass_decorator(Context)


def ledger_override(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        context = ctx.find_object(Context)
        if context is None:  # a command driven without the ``tuneledger`` group above it
            raise click.UsageError("--ledger needs the tuneledger command group", ctx)
        context.ledger = value


#: ``--ledger`` after the command name too (``tuneledger demo --ledger demo.duckdb``).
ledger_option = click.option(
    "--ledger",
    type=click.Path(dir_okay=False, path_type=Path),
    expose_value=False,
    callback=ledger_override,
    help="The ledger file (also accepted before the command).",
)


def default_actor_text() -> str:
    """``$TUNELEDGER_ACTOR``, else ``person:`` and the login name (``$USER`` may be empty or unset
    in containers and cron: ``getpass`` falls back to ``$LOGNAME`` and the password database)."""
    if os.environ.get("TUNELEDGER_ACTOR"):
        return os.environ["TUNELEDGER_ACTOR"]
    import getpass

    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no such uid in the password database (a bare container)
        name = ""
    return f"person:{name.strip() or 'unknown'}"


def first_error(exc: ValueError) -> str:
    """The first message of a pydantic error (or the exception's first line)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where + ': ' if where else ''}{first.get('msg', 'invalid')}"
    return str(exc).splitlines()[0]


def plugin(group: str) -> Any:
    """The first object registered under the entry point ``group``, or None."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=group):
        try:
            return entry.load()
        except (ImportError, AttributeError):  # a plugin not built (yet) is simply absent
            return None
    return None


def shown(text: object) -> str:
    """Stored or user text on one line of human-readable output: secrets masked, control
    characters escaped (``ledger.read.shown_text``), so a file name can neither show a token
    nor drive the terminal."""
    from ledger.read.shown_text import escape_controls
    from schemas.secrets import mask_text

    return escape_controls(mask_text(str(text)), one_line=True)
