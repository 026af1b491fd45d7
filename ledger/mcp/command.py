"""``tuneledger mcp``: serve one ledger to an MCP client (a coding agent) over stdio.

Found by the core CLI through the ``tuneledger.commands`` entry point, like the TUI's and the
runners' commands. The SDK (``mcp``, the ``mcp`` extra) is imported only when the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ledger.errors import LedgerError
from schemas import Actor

#: The actor of what the server writes unless ``--actor`` says otherwise.
DEFAULT_ACTOR = "agent:mcp"
#: The entry point group through which other packages (the runners) contribute tools.
TOOLS_GROUP = "tuneledger.mcp_tools"


class MissingSdk(LedgerError):
    """The ``mcp`` package is not installed (exit 11, as a missing engine or tool)."""

    exit_code = 11


def _actor(text: str) -> Actor:
    try:
        actor = Actor.parse(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected KIND:NAME with KIND person or agent (e.g. agent:claude)",
            param_hint="--actor",
        ) from None
    if actor.kind == "runner":
        raise click.BadParameter(
            f"{text!r}: runner actors are the runners' own (an agent writes as agent:NAME)",
            param_hint="--actor",
        )
    return actor


#: The tool sets a client may ask for (``--tools``, ``TUNELEDGER_MCP_TOOLS``): ``core`` the
#: ledger's (record, propose/triage/decide, the reads, research), ``runners`` the runners'
#: (servers, bench, plan, spec, tune, and the jobs that run them); ``all`` both.
TOOL_SETS = ("core", "runners", "all")


def tool_sets(text: str) -> frozenset[str]:
    """``core``, ``runners``, ``all`` or a comma-separated mix, as the set of ``core``/``runners``.

    Raises:
        click.BadParameter: another name.
    """
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(TOOL_SETS))
    if unknown or not names:
        raise click.BadParameter(
            f"{text!r}: expected {', '.join(TOOL_SETS)} (or a comma-separated mix)",
            param_hint="--tools",
        )
    return frozenset({"core", "runners"} if "all" in names else names)


def build_app(
    ledger: Path,
    actor: Actor,
    session_id: str | None,
    *,
    actor_given: bool = False,
    tools: frozenset[str] = frozenset({"core", "runners"}),
    allow_run: bool = False,
) -> Any:
    """The server's ``McpApp``: the generated record tools, the verbs, the reads and the tools of
    every ``tuneledger.mcp_tools`` plugin (the runners' long-running tools).

    Raises:
        MissingSdk: the ``mcp`` package is not installed.
    """
    try:
        from ledger.mcp.server import Calls, McpApp
    except ImportError as exc:
        raise MissingSdk(
            f"tuneledger mcp needs the MCP SDK: pip install 'tuneledger[mcp]' ({exc})"
        ) from None
    from ledger.mcp.resources import Library
    from ledger.mcp.toolbox import LazyToolbox, Seat, Toolbox

    seat = Seat(ledger=ledger, actor=actor, session_id=session_id, actor_given=actor_given)
    calls = Calls()

    def fill(toolbox: Toolbox) -> None:
        from ledger.mcp.export_tool import add_export_tool
        from ledger.mcp.jobs import Jobs, add_job_tools
        from ledger.mcp.reads import add_read_tools
        from ledger.mcp.records import add_record_tools
        from ledger.mcp.research import add_research_tool
        from ledger.mcp.verbs import add_verbs

        if "core" in tools:
            add_verbs(toolbox)
            add_record_tools(toolbox)
            add_read_tools(toolbox)
            add_research_tool(toolbox)
            add_export_tool(toolbox)
        if "runners" in tools:
            for register in process_tools(allow_run):
                register(toolbox, seat)
            add_job_tools(toolbox, Jobs(toolbox, (calls.start, calls.end)))

    return McpApp(seat=seat, toolbox=LazyToolbox(fill), library=Library(), calls=calls)


#: ``tuneledger mcp --allow-run`` as an environment variable (a client's profile that sets it).
ALLOW_RUN_ENV = "TUNELEDGER_MCP_ALLOW_RUN"


def process_tools(allow_run: bool) -> list[Any]:
    """The gate of the tools that start processes: the ``tuneledger.mcp_tools`` plugins
    (``start_server``, ``run_bench``, ``run_plan``, ``run_spec``, ``run_tune``: they run the
    program a servers TOML, a plan or ``--tool-path`` names, with the server's user rights;
    docs/reliability.md), served only when the server was started with ``--allow-run``
    (or ``TUNELEDGER_MCP_ALLOW_RUN=1``). Without it the agent records and reads; nothing runs."""
    return _plugins() if allow_run else []


def _plugins() -> list[Any]:
    """The ``register(toolbox, seat)`` functions of the ``tuneledger.mcp_tools`` entry points
    (a plugin whose imports fail, e.g. the runners without their dependencies, is left out)."""
    from importlib.metadata import entry_points

    found = []
    for entry in sorted(entry_points(group=TOOLS_GROUP), key=lambda e: e.name):
        try:
            found.append(entry.load())
        except (ImportError, AttributeError):
            continue
    return found


def tool_listing(app: Any) -> list[dict[str, Any]]:
    """The tools as ``tools/list`` returns them (name, title, description, schemas)."""
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in app.tool_list()]


@click.command("mcp")
@click.option(
    "--actor",
    "actor_text",
    default=None,
    metavar="KIND:NAME",
    help="Who the agent's events are by (default: agent:<the client's declared name>, else "
    f"{DEFAULT_ACTOR}; TUNELEDGER_ACTOR is not read: the agent is not the person whose shell "
    "started it). Never a runner.",
)
@click.option("--session", "session_id", help="Default session of the agent's events.")
@click.option(
    "--tools",
    "tools_text",
    default="all",
    show_default=True,
    envvar="TUNELEDGER_MCP_TOOLS",
    metavar="SET",
    help="The tools served: core (record, propose/triage/decide, reads, research), runners "
    "(servers, bench, plan, spec, tune, jobs) or all; a comma-separated mix works. Env "
    "TUNELEDGER_MCP_TOOLS.",
)
@click.option(
    "--list-tools", is_flag=True, help="Print the tools with their JSON Schemas and exit."
)
@click.option(
    "--allow-run",
    is_flag=True,
    envvar=ALLOW_RUN_ENV,
    help="Serve the tools that start processes (start_server, run_bench, run_plan, run_spec, "
    "run_tune): they run what a servers TOML, a plan or --tool-path names. Off by default.",
)
@click.pass_context
def mcp_command(
    ctx: click.Context,
    actor_text: str | None,
    session_id: str | None,
    tools_text: str,
    list_tools: bool,
    allow_run: bool,
) -> None:
    """Serve the ledger to an MCP client (Claude Code, Cursor, Codex...) over stdio.

    \b
    Register it with a client as the command: tuneledger mcp --ledger /abs/path/ledger.duckdb
    Tools (24): record (type, fields), propose_candidate, triage_candidate, record_decision,
    research_flags, board, flag_verdicts, benchmark_deltas, server_runs, show, events_since,
    sql, export, init_ledger (--tools core: 14); start_job, job_status, cancel_job,
    start_server, stop_server, running_servers, run_bench, run_plan, run_spec, run_tune
    (--tools runners: 10; the last 7 only with --allow-run: 17 tools without it).
    Resources: tuneledger://board, tuneledger://session/{id}/decision-log, tuneledger://flag/{name},
    tuneledger://schema/{type}.
    The ledger is never held between calls: the CLI and the TUI use it alongside. See docs/mcp.md.
    """
    root = ctx.find_root()
    ledger = Path(root.obj.ledger)
    if (
        actor_text is None
        and root.get_parameter_source("actor") == click.core.ParameterSource.COMMANDLINE
    ):
        actor_text = root.params["actor"]  # `tuneledger --actor agent:x mcp`
    actor = _actor(actor_text or DEFAULT_ACTOR)
    actor_given = actor_text is not None
    tools = tool_sets(tools_text)
    # an impossible name now, not at the agent's first call; without DuckDB (Start-up)
    from ledger.store.ledger_file import check_ledger_path

    check_ledger_path(ledger)
    app = build_app(
        ledger.resolve(),
        actor,
        session_id or root.obj.session,
        actor_given=actor_given,
        tools=tools,
        allow_run=allow_run,
    )
    if list_tools:
        click.echo(json.dumps(tool_listing(app), indent=2))
        return
    from ledger.mcp.server import serve_stdio

    serve_stdio(app)
