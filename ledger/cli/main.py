"""The ``tuneledger`` command line.

Every command takes ``--ledger PATH`` (or ``TUNELEDGER_LEDGER``; default
``./tuneledger.duckdb``). Errors print one line, ``tuneledger: error: ...``,
on standard error and exit with the stable codes of ``ledger.errors``; usage
errors exit 2. Commands contributed by other packages (the TUI's ``tui``) are
found through the ``tuneledger.commands`` entry point group, so this core
never imports the UI.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from ledger.cli.option_types import bigint, seconds
from ledger.errors import InvalidInput, LedgerError, NotFound
from ledger.write import input_checks
from ledger.write.input_checks import loads
from ledger.write.jsonl import event_from_obj, event_to_json, read_stdin_events, read_stdin_text
from schemas import EVENT_TYPES, Actor, Event, Host

if TYPE_CHECKING:
    from datetime import datetime

    from ledger.store import AppendResult, LedgerStore

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
        """The ledger store at ``--ledger`` (DuckDB imported here: `--help` and `types` need none)."""
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
                raise NotFound(
                    f"no ledger at {self.ledger} (create it with `tuneledger init`, or pass --create)"
                )
            _require_folder(self.ledger, "ledger", "`tuneledger init --parents` creates it")
        return store


def _require_folder(path: Path, what: str, remedy: str) -> None:
    """Refuse a path whose folder is missing: a mistyped folder is not a new one (exit 5).

    Raises:
        NotFound: ``path.parent`` is not a directory.
    """
    folder = path.parent
    if not folder.is_dir():
        raise NotFound(f"no directory {folder} for {what} {path} (mistyped? {remedy})")


pass_ctx = click.make_pass_decorator(Context)
#: The context of the command running (one at a time per process: the resident serves calls
#: one by one), so ``main`` can name the ledger in an error raised from deep inside DuckDB.
_RUNNING: list[Context | None] = [None]


def _ledger_override(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
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
    callback=_ledger_override,
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


class _LazyPluginGroup(click.Group):
    """The root group: commands of other packages (entry points ``tuneledger.commands``) are
    listed by name and imported only when one of them runs or help lists them."""

    def _plugins(self) -> dict[str, Any]:
        from importlib.metadata import entry_points

        return {entry.name: entry for entry in entry_points(group="tuneledger.commands")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
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


# --- init ---------------------------------------------------------------------------


@cli.command()
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
        _require_folder(ctx.ledger, "ledger", "`--parents` creates it")
    created = store.init()
    click.echo(f"{'created' if created else 'updated'} ledger {ctx.ledger}")


# --- append -------------------------------------------------------------------------


def _first_error(exc: ValueError) -> str:
    """The first message of a pydantic error (or the exception's first line)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where + ': ' if where else ''}{first.get('msg', 'invalid')}"
    return str(exc).splitlines()[0]


def _parse_value(text: str, key: str) -> Any:
    try:
        return loads(text, f"--field {key}")
    except json.JSONDecodeError:
        return text


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise InvalidInput(f"field '{dotted}': '{key}' is not an object")
    target[keys[-1]] = value


class _AppendCommand(click.Command):
    """``append``: ``append TYPE --help`` adds the fields of TYPE (names, types, units) to the help."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # --help is eager: it prints before TYPE is parsed, so note TYPE here.
        ctx.meta["append_type"] = next((a for a in args if a in EVENT_TYPES), None)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        event_type = ctx.meta.get("append_type")
        if event_type:
            from ledger.read.event_types import describe_type

            formatter.write("\n" + describe_type(event_type) + "\n")


def _fill_envelope(event: Event, ctx: Context, overrides: dict[str, Any]) -> Event:
    """Apply the command's defaults (actor, session) where the event left them unset."""
    update: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    if "actor" not in event.model_fields_set and "actor" not in update:
        update["actor"] = ctx.actor
    if event.session_id is None and "session_id" not in update and ctx.session:
        update["session_id"] = ctx.session
    if not update:
        return event
    # Validated (model_copy would not): a bad --causation is named, never stored or warned about.
    try:
        return type(event).model_validate({**event.model_dump(), **update})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        option = _OPTION_OF.get(field, field)
        raise InvalidInput(
            f"{option}: {first['msg']} (got {str(update.get(field, ''))[:60]!r})"
        ) from None


#: The ``append`` option that sets each envelope field (for error messages).
_OPTION_OF = {
    "causation_id": "--causation",
    "correlation_id": "--correlation",
    "event_id": "--event-id",
    "session_id": "--session",
    "stream": "--stream",
    "source": "--source",
    "host": "--host",
    "actor": "--actor",
}


def _result_json(result: AppendResult) -> dict[str, Any]:
    return {
        "event_id": str(result.event_id),
        "seq": result.seq,
        "stream": result.stream,
        "stream_version": result.stream_version,
        "duplicate": result.duplicate,
    }


def _report_appended(
    results: Sequence[AppendResult],
    events: list[Any],
    as_json: bool,
    types: list[str] | None = None,
) -> None:
    if as_json:
        click.echo(json.dumps([_result_json(r) for r in results]))
        return
    names = types if types is not None else [event.type for event in events]
    click.echo(
        "\n".join(
            f"{'already stored at' if result.duplicate else 'appended'} seq {result.seq}: {name} "
            f"{result.event_id} ({result.stream} v{result.stream_version})"
            for result, name in zip(results, names, strict=True)
        )
    )


#: JSON lines on standard input from which the bulk import (``ledger.write.bulk``: validation in
#: worker processes, one transaction) takes over; smaller inputs take the event-by-event path.
BULK_MIN_LINES = 1000


def _bulk_eligible(
    text: str, overrides: dict[str, Any], event_id: str | None, expected_version: int | None
) -> bool:
    """Many JSON lines and no option that changes each event (those take the general path)."""
    if (
        event_id is not None
        or expected_version is not None
        or any(v is not None for v in overrides.values())
    ):
        return False
    return not text.lstrip().startswith("[") and text.count("\n") >= BULK_MIN_LINES


@cli.command(cls=_AppendCommand)
@click.argument("event_type", required=False, metavar="[TYPE]")
@click.option(
    "-f",
    "--field",
    "fields",
    multiple=True,
    metavar="KEY=VALUE",
    help="A payload field; VALUE is JSON when it parses (42, true, [1,2]) else text; KEY may be dotted (metrics.output_throughput).",
)
@click.option("--session", "session_id", help="Session id of the event.")
@click.option("--stream", help="Stream (default: the event type's aggregate, e.g. candidate:ID).")
@click.option("--event-id", help="Give the event id (makes a retry idempotent).")
@click.option("--causation", "causation_id", help="Id of the event that caused this one.")
@click.option("--correlation", "correlation_id", help="Id correlating a chain of events.")
@click.option("--source", help="Where this record comes from (file:line, URL, message).")
@click.option(
    "--host",
    "host_json",
    metavar="JSON",
    help='Host as JSON, e.g. \'{"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}\'.',
)
@click.option(
    "--expected-version",
    type=bigint(0),
    help="Fail with exit 4 unless the stream is at this version (0: new stream).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--create", is_flag=True, help="Create the ledger if it does not exist (else: exit 5)."
)
@ledger_option
@pass_ctx
def append(
    ctx: Context,
    event_type: str | None,
    fields: tuple[str, ...],
    session_id: str | None,
    stream: str | None,
    event_id: str | None,
    causation_id: str | None,
    correlation_id: str | None,
    source: str | None,
    host_json: str | None,
    expected_version: int | None,
    as_json: bool,
    create: bool,
) -> None:
    """Append one event from options, or events as JSON / JSON lines on standard input.

    \b
    From options:  tuneledger append note_added -f text="fused MoE sum: no change"
    From stdin:    echo '{"type": "note_added", "text": "hi"}' | tuneledger append --json
    A batch on stdin (JSON array or JSON lines) is appended atomically: all or nothing.

    \b
    TYPE's fields, with their types and units: `tuneledger append TYPE --help`
    or `tuneledger types TYPE`.

    \b
    Exit codes: 0 ok, 3 invalid input, 4 version conflict, 5 not found,
    7 ledger busy, 8 event id reused with other content, 15 storage error
    (disk full, read-only file system; nothing of the call stored), 16 the
    resident process ended mid-call (it may be stored: an event with its own
    event_id can be retried safely).
    A ledger that does not exist is not created (exit 5: a mistyped path
    is not a new ledger) unless --create; --create makes no folders.
    """
    ctx.writable_store(create=create)
    overrides: dict[str, Any] = {
        "session_id": session_id,
        "stream": stream,
        "causation_id": causation_id,
        "correlation_id": correlation_id,
        "source": source,
    }
    if host_json is not None:
        try:
            overrides["host"] = Host.model_validate_json(host_json)
        except ValueError as exc:
            raise InvalidInput(f"--host: {_first_error(exc)}") from None
    if event_type is None or event_type == "-":
        if fields:
            raise click.UsageError("-f/--field needs a TYPE")
        if sys.stdin.isatty():
            raise click.UsageError(
                "give a TYPE with -f fields, or pipe JSON / JSON lines on standard input"
            )
        text = read_stdin_text(sys.stdin)
        if _bulk_eligible(text, overrides, event_id, expected_version):
            from ledger.write.bulk import import_lines
            from ledger.write.jsonl import jsonl_lines

            lines = jsonl_lines(text)
            imported, types = import_lines(
                ctx.store(), lines, "<stdin>", actor=ctx.actor, session_id=ctx.session
            )
            _report_appended(imported, [], as_json, types=types)
            return
        events = read_stdin_events(io.StringIO(text))
        if event_id is not None:
            if len(events) != 1:
                # Ignoring it would make a retry append the whole batch again.
                raise click.UsageError(
                    f"--event-id names one event, but standard input held {len(events)}; "
                    'give each event its own "event_id" in the JSON instead'
                )
            overrides["event_id"] = event_id
    else:
        data: dict[str, Any] = {"type": event_type}
        for item in fields:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise InvalidInput(f"--field {item!r}: expected KEY=VALUE")
            _set_dotted(data, key, _parse_value(value, key))
        if event_id is not None:
            data["event_id"] = event_id
        events = [event_from_obj(data, "options")]
    events = [_fill_envelope(event, ctx, overrides) for event in events]
    for number, event in enumerate(events, start=1):  # name the input here, not in the store
        where = "options" if event_type not in (None, "-") else f"<stdin>: event {number}"
        input_checks.check_text(event.model_dump(), where)
        input_checks.payload_json(event, where)
        input_checks.host_json(event, where)
    where = "options" if event_type not in (None, "-") else "<stdin>"
    from ledger.write import commands  # imported when a command writes (start-up time: see above)

    results = commands.append(ctx.store(), events, expected_version=expected_version, where=where)
    _report_appended(results, events, as_json)


# --- reading ------------------------------------------------------------------------


@cli.command()
@click.option("--type", "types", multiple=True, help="Only this event type (repeatable).")
@click.option("--session", "session_id", help="Only this session.")
@click.option("--stream", help="Only this stream.")
@click.option("--actor", help="Only this actor: kind:name (agent:claude) or a name.")
@click.option(
    "--since",
    type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]),
    help="Only events recorded at or after this UTC time (2026-01-02 or 2026-01-02T03:04:05).",
)
@click.option("--after", "after_seq", type=bigint(0), default=0, help="Only events after this seq.")
@click.option("--limit", type=bigint(0), help="At most this many (the newest when --newest).")
@click.option("--newest", is_flag=True, help="Newest first.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@ledger_option
@pass_ctx
def events(
    ctx: Context,
    types: tuple[str, ...],
    session_id: str | None,
    stream: str | None,
    actor: str | None,
    since: datetime | None,
    after_seq: int,
    limit: int | None,
    newest: bool,
    fmt: str,
) -> None:
    """List events (retracted ones too, marked); json prints full events as JSON lines."""
    from ledger.read import model as read_model

    unknown = [t for t in types if t not in EVENT_TYPES]
    if unknown:
        raise InvalidInput(
            f"--type {unknown[0]!r}: unknown event type (known: {', '.join(sorted(EVENT_TYPES))})"
        )
    flt = read_model.EventFilter(
        types=types,
        session_id=session_id,
        stream=stream,
        actor=actor,
        since=since,
        after_seq=after_seq,
    )
    store = ctx.store()
    if fmt == "json":
        for event in store.read(flt, limit=limit, newest_first=newest):
            click.echo(event_to_json(event))
        return
    with store.connect() as con:
        table = read_model.event_log(con, flt, limit=limit, newest_first=newest)
    print_table(table, fmt)


@cli.command()
@click.argument("event_id")
@ledger_option
@pass_ctx
def show(ctx: Context, event_id: str) -> None:
    """Show one event as JSON (an 8+ character id prefix is enough), with what links to it."""
    from ledger.read import model as read_model

    store = ctx.store()
    event = store.get(event_id)
    click.echo(event_to_json(event, indent=2))
    with store.connect() as con:
        linked = read_model.linked_events(con, event)
    if linked:
        click.echo("\nlinked events (its cause, what it cites, and events citing or caused by it):")
        for row in linked:
            click.echo(
                f"  seq {row['seq']:>6}  {row['event_id']}  {row['relation']}: "
                f"{row['type']}: {_shown(row['summary'])}"
            )


@cli.command()
@click.argument("query")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
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
    a query stopped by --timeout exits 14. A table shows --max-rows rows (with a notice
    when there are more); csv and json stream every row. --timeout covers the query,
    fetching and printing.
    """
    from ledger.cli.sql_guard import hard_deadline, limit_memory
    from ledger.read.sql_sandbox import run_readonly, stream_readonly, timeout_message

    limit_memory()
    with hard_deadline(timeout_s, timeout_message(timeout_s)):
        if fmt != "table":  # streamed: memory stays at one batch whatever the result's size
            stream_rows(stream_readonly(ctx.store(), query, timeout_s=timeout_s or None), fmt)
            return
        table = run_readonly(ctx.store(), query, max_rows=max_rows + 1, timeout_s=timeout_s or None)
        print_table(table.slice(0, max_rows), fmt)
    if table.num_rows > max_rows:
        click.echo(
            f"(the first {max_rows:,} rows; --max-rows N shows more, --format csv or json streams them all)"
        )


@cli.command(name="types")
@click.argument("event_type", required=False, metavar="[TYPE]")
def list_types(event_type: str | None) -> None:
    """List the event types, or TYPE's fields with their types, units and meaning."""
    from ledger.read.event_types import describe_all, describe_type

    click.echo(describe_type(event_type) if event_type else describe_all())


@cli.command(name="views")
@ledger_option
@pass_ctx
def list_views(ctx: Context) -> None:
    """List the derived views and their columns."""
    from ledger.derive.views import VIEW_NAMES

    store = ctx.store()
    for name in VIEW_NAMES:
        cols = store.query_arrow(f"DESCRIBE {name}")
        click.echo(f"{name}: " + ", ".join(cols.column("column_name").to_pylist()))


# --- import / export ----------------------------------------------------------------


@cli.command(name="import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--session", "session_id", help="Session id for the imported events.")
@click.option(
    "--config-name", help="Configuration name for imported benchmark runs (default: the file name)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--check-arch",
    "check_arch",
    multiple=True,
    metavar="SMNN",
    help="Check MoE config files against this arch's shared memory per block (e.g. sm120); "
    "each entry that would not launch is recorded as a finding.",
)
@click.option(
    "--host",
    "host_json",
    metavar="JSON",
    help='The host the files come from, e.g. \'{"gpu_name": "NVIDIA RTX PRO 6000", "compute_capability": '
    "\"12.0\"}' (default: the session's own, from its session_started or host_observed).",
)
@click.option(
    "--create", is_flag=True, help="Create the ledger if it does not exist (else: exit 5)."
)
@ledger_option
@pass_ctx
def import_(
    ctx: Context,
    files: tuple[Path, ...],
    session_id: str | None,
    config_name: str | None,
    as_json: bool,
    check_arch: tuple[str, ...],
    host_json: str | None,
    create: bool,
) -> None:
    """Import files, detecting each kind by content: sglang/vLLM/GuideLLM/llmperf/AIPerf
    benchmark results, tuned MoE configs, SGLang and vLLM server logs. All files are appended in one atomic batch;
    re-importing a file is a no-op (event ids derive from the file's content). A ledger that
    does not exist is not created (exit 5) unless --create."""
    from ledger.write import commands

    store = ctx.writable_store(create=create)

    session = session_id or ctx.session
    host = None
    if host_json is not None:
        try:
            host = Host.model_validate_json(host_json)
        except ValueError as exc:
            raise InvalidInput(f"--host: {_first_error(exc)}") from None
    done = commands.import_files(
        store,
        files,
        session_id=session,
        actor=ctx.actor,
        config_name=config_name,
        host=host,
        check_arch=check_arch,
    )
    summary = []
    for result in done.results:
        mine = [done.appended[e.event_id] for e in result.events]
        summary.append(
            {
                "file": str(result.path),
                "kind": result.kind,
                "events": len(mine),
                "new": sum(not r.duplicate for r in mine),
                "duplicates": sum(r.duplicate for r in mine),
                "paired_with": str(result.paired_with) if result.paired_with else None,
            }
        )
    if as_json:
        click.echo(json.dumps(summary))
    else:
        for row in summary:
            pair = f" (one run with {row['paired_with']})" if row["paired_with"] else ""
            click.echo(
                f"{_shown(row['file'])}: {row['kind']}, {row['new']} new, {row['duplicates']} already stored{_shown(pair)}"
            )
        for finding in done.findings:
            click.echo(f"finding: {_shown(finding.message)}")


@cli.group()
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


# --- demo ---------------------------------------------------------------------------


SM120_QUERY = "SELECT flag, verdict, basis FROM flag_verdicts WHERE arch = 'sm120' AND no_effect ORDER BY flag"


@cli.command()
@click.option("--no-tui", is_flag=True, help="Print a summary instead of opening the TUI.")
@click.option(
    "--campaign",
    type=click.Choice(["seeds", "h200"]),
    default="seeds",
    show_default=True,
    help="seeds: data/demo_campaign.jsonl; h200: the H200 runs (data/h200_*.jsonl).",
)
@ledger_option
@pass_ctx
def demo(ctx: Context, no_tui: bool, campaign: str) -> None:
    """Build the demo ledger from data/demo_campaign.jsonl (the seeds' campaign) at --ledger and open it."""
    from ledger.cli.demo import CAMPAIGNS, build_demo

    store = build_demo(ctx.ledger, campaign=campaign)
    DEMO_SESSION = CAMPAIGNS[campaign][1]
    # Without a terminal (a script, an agent, CI) there is nothing to draw on: print the summary.
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    opener = None if no_tui or not interactive else _plugin("tuneledger.tui_opener")
    if opener is not None:
        opener(store.path, DEMO_SESSION)
        return
    click.echo(f"built demo ledger {ctx.ledger}: {store.head()} events, session {DEMO_SESSION}\n")
    print_table(
        store.query_arrow(
            "SELECT candidate_id, status, verdict, priority, reason FROM board ORDER BY updated_seq"
        ),
        title="board",
    )
    if campaign == "h200":
        _print_h200(store)
    else:
        print_table(store.query_arrow(SM120_QUERY), title="which flags were no-ops on SM120?")
    print_table(
        store.query_arrow(
            "SELECT config_name, concurrency, metric, baseline_value, value, round(change_pct, 2) AS change_pct, verdict "
            "FROM benchmark_deltas WHERE metric = 'output_throughput' ORDER BY config_name, concurrency"
        ),
        title="benchmark deltas (output throughput, tok/s)",
    )
    if not no_tui:
        click.echo(
            "(no terminal to draw the TUI on: summary printed; run it in a terminal, or `tuneledger tui`)"
            if not interactive
            else "(the TUI is not installed; showing the summary)"
        )


def _print_h200(store: Any) -> None:
    print_table(
        store.query_arrow(
            "SELECT flag, arch, verdict, basis, summary FROM flag_verdicts ORDER BY flag"
        ),
        title="flag verdicts on sm90",
    )
    print_table(
        store.query_arrow(
            "SELECT E, N, batch_size, default_us, tuned_us, round(speedup, 3) AS speedup, "
            "round(100 * bandwidth_fraction, 1) AS bandwidth_pct, round(100 * flops_fraction, 2) AS flops_pct "
            "FROM kernel_tune_results WHERE tune_id IN (SELECT tune_id FROM kernel_tunes WHERE search LIKE '%halving%' "
            "AND session_id = 'h200-moe-tune' QUALIFY row_number() OVER (PARTITION BY E, N ORDER BY seq DESC) = 1) "
            "ORDER BY seq, batch_size"
        ),
        title="fused-MoE tune: SGLang default vs tuned (µs), latest tune per shape",
    )
    print_table(
        store.query_arrow(
            "SELECT trial_id, accept_length, round(output_throughput_change_pct, 1) AS throughput_pct, "
            "round(median_tpot_change_pct, 1) AS tpot_pct, verdict FROM spec_trials"
        ),
        title="speculative trials",
    )


# --- the resident process ------------------------------------------------------------


@cli.group()
def resident() -> None:
    """The resident process that serves `tuneledger append` (docs/cli.md).

    \b
    Started by the first append that finds none; exits after TUNELEDGER_RESIDENT_IDLE_S
    (default 60) idle seconds. TUNELEDGER_RESIDENT=0 turns it off.
    """


@resident.command(name="status")
def resident_status() -> None:
    """Say whether this user's resident process (of this install) runs: its pid and calls."""
    from ledger.frontdoor import launcher
    from ledger.frontdoor.resident import ask_server

    if os.environ.get(launcher.ENV_SWITCH, "1") == "0":
        click.echo(f"resident process: off ({launcher.ENV_SWITCH}=0)")
        return
    folder = launcher.runtime_dir()
    problem = launcher.private_dir_problem(folder)
    if problem:
        click.echo(f"resident process: off: its folder {folder} {problem}; appends run in-process")
        return
    answer = ask_server("status")
    path = launcher.socket_path(folder, launcher.identity())
    if answer is None:
        click.echo(f"resident process: not running (socket {path})")
    else:
        click.echo(f"resident process: pid {answer[1]}, {answer[2]} calls served (socket {path})")


@resident.command(name="stop")
def resident_stop() -> None:
    """Stop this user's resident process (the next append starts a fresh one)."""
    from ledger.frontdoor.resident import ask_server

    answer = ask_server("stop")
    click.echo("resident process: not running" if answer is None else f"stopped pid {answer[1]}")


# --- plugins and entry point -----------------------------------------------------------


def _plugin(group: str) -> Any:
    """The first object registered under the entry point ``group``, or None."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=group):
        try:
            return entry.load()
        except (ImportError, AttributeError):  # a plugin not built (yet) is simply absent
            return None
    return None


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
    # What the interpreter's exit does first (``threading._shutdown``): the threading module's
    # exit hooks (a thread pool's workers are told to stop), then every non-daemon thread is
    # waited for.
    threading._shutdown()  # type: ignore[attr-defined]
    _flush_stdio()
    atexit._run_exitfuncs()
    _flush_stdio()  # what an exit handler printed
    os._exit(code)


def _skip_pydantic_plugin_scan() -> None:
    """Tell pydantic this process has no plugins, before it looks.

    The first validator pydantic builds looks for its plugins among the entry points of every
    installed distribution (``pydantic.plugin._loader.get_plugins``): 7-14 ms of CPU and a read
    of each distribution's metadata, more in a larger environment, in every CLI call. The
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
    if getattr(_loader, "_plugins", ()) is None:  # not looked for yet
        _loader._plugins = {}


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # reader gone, or stream closed: nothing to keep
            pass


def _shown(text: object) -> str:
    """Stored or user text on one line of human-readable output: secrets masked, control
    characters escaped (``ledger.read.shown_text``), so a file name can neither show a token
    nor drive the terminal."""
    from ledger.read.shown_text import escape_controls
    from schemas.secrets import mask_text

    return escape_controls(mask_text(str(text)), one_line=True)


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
            callback=_ledger_override,
            help="The ledger file (also accepted before the command).",
        )
    )


def _register_plugin_commands() -> None:
    """Load every plugin command now (for code that drives ``cli`` directly, e.g. click's
    CliRunner in tests); the CLI itself loads a plugin only when its command is used."""
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
    for command in cli.commands.values():  # plugin commands get it when loaded (_LazyPluginGroup)
        _accept_ledger_everywhere(command)
    with _noting_interrupts() as interrupted:
        _main(argv, interrupted)


def _main(argv: list[str] | None, interrupted: list[bool]) -> None:
    """``main``'s body: each way a command ends, as an exit code and at most one line."""
    _RUNNING[0] = None
    try:
        cli.main(args=argv, prog_name="tuneledger", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("tuneledger: aborted", err=True)
        sys.exit(130)
    except _NoArgsIsHelp as exc:  # `tuneledger`, `tuneledger run`: the help, as click shows it
        click.echo(exc.format_message(), err=True)
        sys.exit(2)
    except click.UsageError as exc:
        hint = f" (see tuneledger {exc.ctx.command_path.split(' ', 1)[1] + ' ' if exc.ctx and ' ' in exc.ctx.command_path else ''}--help)"
        click.echo(_one_line(f"tuneledger: error: {exc.format_message()}{hint}"), err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(_one_line(f"tuneledger: error: {exc.format_message()}"), err=True)
        sys.exit(exc.exit_code)
    except LedgerError as exc:
        click.echo(_one_line(f"tuneledger: error: {exc}"), err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a full disk or read-only storage under DuckDB: one line, exit 15
        if interrupted:
            # Ctrl-C inside a DuckDB query comes back as DuckDB's own error ("Query
            # interrupted", a failed Arrow scan): an interrupt all the same, and the store
            # call it cut short stored nothing (one transaction)
            click.echo("tuneledger: aborted", err=True)
            sys.exit(130)
        from ledger.store.ledger_file import query_damage, storage_error

        running = _RUNNING[0]
        error = storage_error(exc) or (
            query_damage(running.ledger, exc) if running is not None else None
        )
        if error is None:
            raise
        click.echo(_one_line(f"tuneledger: error: {error}"), err=True)
        sys.exit(error.exit_code)
    sys.exit(0)


if __name__ == "__main__":
    # `python -m ledger.cli.main`: run the imported module's entry point, not this __main__ copy,
    # so the plugins' commands (which import its Context) find the context object they expect.
    from ledger.cli.main import run as _run

    _run()
