"""The ``tuneledger`` command line: the root group, the commands registered on it, and the way a
call ends (an exit code and at most one line).

Every command takes ``--ledger PATH`` (or ``TUNELEDGER_LEDGER``; default
``./tuneledger.duckdb``). Errors print one line, ``tuneledger: error: ...``,
on standard error and exit with the stable codes of ``ledger.errors``; usage
errors exit 2. Each command is a module of ``ledger.cli.commands`` (options, one
library call, print); commands contributed by other packages (the TUI's ``tui``)
are found through the ``tuneledger.commands`` entry point group, so this core
never imports the UI.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from ledger.cli import commands as core
from ledger.cli.context import DEFAULT_LEDGER, Context, default_actor_text, ledger_override
from ledger.errors import LedgerError
from schemas import Actor

#: Held while a core command is imported and registered (``_LazyPluginGroup.get_command``).
_LOADING = threading.Lock()


class _LazyPluginGroup(click.Group):
    """The root group: the core commands (``ledger.cli.commands.COMMANDS``) and the commands
    of other packages (entry points ``tuneledger.commands``) are listed by name and imported
    only when one of them runs or help lists them."""

    def _plugins(self) -> dict[str, Any]:
        from importlib.metadata import entry_points

        return {entry.name: entry for entry in entry_points(group="tuneledger.commands")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *core.COMMANDS, *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        if cmd_name in core.COMMANDS:
            with _LOADING:  # the resident serves calls in threads: one loads a command once
                command = super().get_command(ctx, cmd_name)
                if command is None:
                    command = core.load(cmd_name)
                    _accept_ledger_everywhere(command)
                    self.add_command(command, cmd_name)
            return command
        entry = self._plugins().get(cmd_name)
        if entry is None:
            return None
        try:
            command = entry.load()
        except (ImportError, AttributeError):  # a plugin not built (yet) is simply absent
            return None
        if not isinstance(command, click.Command):  # an entry point that names something else
            return None
        _accept_ledger_everywhere(command)
        self.add_command(command, cmd_name)
        return command


@click.group(
    cls=_LazyPluginGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--ledger",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="TUNELEDGER_LEDGER",
    default=DEFAULT_LEDGER,
    show_default=True,
    help="The ledger file (env TUNELEDGER_LEDGER).",
)
@click.option(
    "--actor",
    default=default_actor_text,
    help="Who appends: person:NAME, agent:NAME or runner:NAME (env TUNELEDGER_ACTOR).",
)
@click.option(
    "--session",
    envvar="TUNELEDGER_SESSION",
    help="Default session id for new events (env TUNELEDGER_SESSION).",
)
@click.version_option(package_name="tuneledger")
@click.pass_context
def cli(ctx: click.Context, ledger: Path, actor: str, session: str | None) -> None:
    """tuneledger: an event-sourced ledger of an inference-server tuning session."""
    try:
        parsed_actor = Actor.parse(actor)
    except ValueError:
        raise click.BadParameter(
            f"{actor!r}: expected KIND:NAME with KIND person, agent or runner (e.g. agent:claude)",
            param_hint="--actor",
        ) from None
    ctx.obj = Context(ledger, parsed_actor, session)
    _RUNNING[0] = ctx.obj  # for the error handler of ``main`` (a damaged file's name)


#: The context of the command running (one at a time per process: the resident serves calls
#: one by one), so ``main`` can name the ledger in an error raised from deep inside DuckDB.
_RUNNING: list[Context | None] = [None]


def run() -> None:
    """The ``tuneledger`` command in this process (what the console script, ``ledger.frontdoor.launcher.run``,
    runs for every call it does not forward to the resident process): ``main``, then exit
    without the interpreter's teardown.

    Everything the interpreter's own exit does that matters runs first, in its order: other
    non-daemon threads are waited for, the atexit handlers run (kept-open ledgers are caught
    up, closed and checkpointed there: ``ledger.store``), and standard output and error are
    flushed. Only then does ``os._exit`` end the process, skipping module and object
    finalisation, which costs tens of ms a call and does nothing for a process about to end
    (tests/cli/test_startup.py checks that nothing written is lost). In-process callers (tests)
    use ``main``.
    """
    import atexit
    import threading

    _skip_pydantic_plugin_scan()
    from ledger.cli.sql_guard import PROCESS_OWNED

    PROCESS_OWNED[0] = True  # this process is the command's: `sql` may cap and end it
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    # Private hooks of CPython, each pinned by tests/cli/test_private_hooks.py. An interpreter
    # without them exits the usual way (slower, the same outcome).
    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None:
        sys.exit(code)
    # What the interpreter's exit does first (``threading._shutdown``): the threading module's
    # exit hooks (a thread pool's workers are told to stop), then every non-daemon thread is
    # waited for.
    shutdown()
    _flush_stdio()
    run_exitfuncs()
    _flush_stdio()  # what an exit handler printed
    os._exit(code)


def _skip_pydantic_plugin_scan() -> None:
    """Tell pydantic this process has no plugins, before it looks.

    The first validator pydantic builds looks for its plugins among the entry points of every
    installed distribution (``pydantic.plugin._loader.get_plugins``): a read of each
    distribution's metadata in every CLI call (its cost: docs/performance.md). The
    ledger's models use no plugin. ``PYDANTIC_DISABLE_PLUGINS``, when set (even empty), is left
    to pydantic: set it to use a plugin (e.g. instrumentation) with the CLI. An environment
    variable is not used here because the runners' servers and tools inherit the environment.
    """
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        return
    try:
        from pydantic.plugin import _loader
    except ImportError:  # another pydantic layout: it scans as usual
        return
    # pydantic's private cache, pinned by tests/cli/test_private_hooks.py
    if getattr(_loader, "_plugins", ()) is None:  # not looked for yet
        _loader._plugins = {}


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # reader gone, or stream closed: nothing to keep
            pass


def _one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``): an error
    message quoting user input stays one line; and secrets it quotes masked (a token given
    as a field name or an event type was echoed to the terminal and its logs)."""
    from schemas.secrets import mask_text

    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in mask_text(text)
    )


def _accept_ledger_everywhere(command: click.Command) -> None:
    """Give every subcommand (plugins' too: ``run bench``, ``run plan``) a ``--ledger`` option,
    so the ledger can be named after the command as well as before it."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_ledger_everywhere(sub)
        return
    if any("--ledger" in getattr(param, "opts", ()) for param in command.params):
        return
    command.params.append(
        click.Option(
            ["--ledger"],
            type=click.Path(dir_okay=False, path_type=Path),
            expose_value=False,
            callback=ledger_override,
            help="The ledger file (also accepted before the command).",
        )
    )


def _register_plugin_commands() -> None:
    """Load every command now, core and plugin (for code that drives ``cli.commands``
    directly); the CLI itself loads a command only when it is used."""
    context = click.Context(cli)
    for name in cli.list_commands(context):
        cli.get_command(context, name)


#: A group called without a command (click 8.2+): its help, not a one-line error.
_NoArgsIsHelp: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_Never", (click.UsageError,), {})
)


@contextmanager
def _noting_interrupts() -> Iterator[list[bool]]:
    """While the CLI runs, SIGINT raises ``KeyboardInterrupt`` as usual and also leaves a mark
    (the list yielded is non-empty once one came): DuckDB turns an interrupt during a query
    into an error of its own, which ``main`` then reports as the interrupt it was (exit 130).
    The handler before is put back on the way out. Only in the main thread (a resident
    process serves calls in others: they get no signals) and over Python's default handler
    (someone else's, a test harness's or an embedding program's, is left alone)."""
    import signal
    import threading

    seen: list[bool] = []
    before = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not (
        before is signal.default_int_handler or getattr(before, "tuneledger_startup", False)
    ):
        yield seen
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        seen.append(True)
        if _importing(frame):
            # Mid-import (a command's lazy imports: DuckDB, pyarrow): raising here can cross
            # an extension module's init and abort the process (exit 134, no message). An
            # import writes nothing of the ledger: end in one line, as an interrupt does.
            _flush_stdio()
            os.write(2, b"\ntuneledger: aborted\n")
            os._exit(130)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _importing(frame: Any) -> bool:
    """Whether the interrupted code is inside an import (importlib's frames on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; ``LedgerError`` becomes one line on stderr and its exit code."""
    with _noting_interrupts() as interrupted:
        _main(argv, interrupted)


def _error(message: str, code: int, argv: list[str] | None) -> NoReturn:
    """One line on stderr and the exit code; with JSON output asked for, the line is the JSON
    error object (``ledger.cli.json_output``: the MCP tool errors' shape) so an agent parses
    errors as it parses results."""
    from ledger.cli.json_output import error_json, wants_json

    text = _one_line(message)
    if wants_json(sys.argv[1:] if argv is None else argv):
        click.echo(error_json(text, code), err=True)
    else:
        click.echo(f"tuneledger: error: {text}", err=True)
    sys.exit(code)


def _aborted(argv: list[str] | None) -> NoReturn:
    """An interrupted call: ``tuneledger: aborted``, or its JSON error object; exit 130."""
    from ledger.cli.json_output import wants_json

    if wants_json(sys.argv[1:] if argv is None else argv):
        _error("aborted", 130, argv)
    click.echo("tuneledger: aborted", err=True)
    sys.exit(130)


def _main(argv: list[str] | None, interrupted: list[bool]) -> None:
    """``main``'s body: each way a command ends, as an exit code and at most one line."""
    _RUNNING[0] = None
    try:
        cli.main(args=argv, prog_name="tuneledger", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        _aborted(argv)
    except _NoArgsIsHelp as exc:  # `tuneledger`, `tuneledger run`: the help, as click shows it
        click.echo(exc.format_message(), err=True)
        sys.exit(2)
    except click.UsageError as exc:
        hint = f" (see tuneledger {exc.ctx.command_path.split(' ', 1)[1] + ' ' if exc.ctx and ' ' in exc.ctx.command_path else ''}--help)"
        _error(f"{exc.format_message()}{hint}", 2, argv)
    except click.ClickException as exc:
        _error(exc.format_message(), exc.exit_code, argv)
    except LedgerError as exc:
        _error(str(exc), exc.exit_code, argv)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a full disk or read-only storage under DuckDB: one line, exit 15
        if interrupted:
            # Ctrl-C inside a DuckDB query comes back as DuckDB's own error ("Query
            # interrupted", a failed Arrow scan): an interrupt all the same, and the store
            # call it cut short stored nothing (one transaction)
            _aborted(argv)
        from ledger.store.ledger_file import query_damage, storage_error

        running = _RUNNING[0]
        error = storage_error(exc) or (
            query_damage(running.ledger, exc) if running is not None else None
        )
        if error is None:
            raise
        _error(str(error), error.exit_code, argv)
    sys.exit(0)


if __name__ == "__main__":
    # `python -m ledger.cli.main`: run the imported module's entry point, not this __main__ copy,
    # so the plugins' commands (which import its Context) find the context object they expect.
    from ledger.cli.main import run as _run

    _run()
