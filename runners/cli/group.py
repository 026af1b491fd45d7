"""``tuneledger run ...``: commands that run things and record them (found by the core CLI
through the ``tuneledger.commands`` entry point, so the core never imports the runners).

\b
tuneledger run server start CONFIG --configs servers.toml [--port N] [--health-timeout S] [--follow]
    start the configuration, wait until healthy, record it, then stay in the foreground until
    Ctrl-C, which stops the server (SIGINT, SIGTERM, SIGKILL to its process group) and records it.
tuneledger run server show [CONFIG] --configs servers.toml
    the resolved configurations and the argv each would launch (nothing starts).

Exit codes (besides the ledger's): 3 bad configuration file, 10 port already in use,
11 engine not installed, 12 server failed to start (crash, out of memory, timeout; the
``server_failed`` event holds the log tail), 130 interrupted.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.context import Context, pass_ctx
from ledger.cli.json_output import error_json, json_option, print_json
from runners.cli.measure import bench_command, plan_command
from runners.server.configs import DEFAULT_HEALTH_TIMEOUT_S, load_config, load_configs
from runners.server.engines import adapter_for

_CONFIGS_OPTION = click.option(
    "--configs",
    "configs_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="TUNELEDGER_SERVERS",
    default="servers.toml",
    show_default=True,
    help="The TOML file of server configurations (env TUNELEDGER_SERVERS).",
)


@click.group("run")
def run_group() -> None:
    """Run servers and benchmarks, recording everything in the ledger."""


@run_group.group("server")
def server_group() -> None:
    """Start and stop inference servers from named configurations."""


def _stderr(line: str) -> None:
    click.echo(line, err=True)


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


@server_group.command("start")
@click.argument("config_name", metavar="CONFIG")
@_CONFIGS_OPTION
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Port (default: the configuration's, else the engine's).",
)
@click.option(
    "--health-timeout",
    "health_timeout_s",
    type=click.FloatRange(min=1),
    help=f"Seconds to wait for health (default: the configuration's, else {DEFAULT_HEALTH_TIMEOUT_S:.0f}).",
)
@click.option("--follow", is_flag=True, help="Print the server's log lines while it runs.")
@click.option(
    "--session", "session_id", help="Session of the events (default: the global --session)."
)
@json_option
@pass_ctx
def start_command(
    ctx: Context,
    config_name: str,
    configs_path: Path,
    port: int | None,
    health_timeout_s: float | None,
    follow: bool,
    session_id: str | None,
    as_json: bool,
) -> None:
    """Start CONFIG, wait until healthy, then keep it running until Ctrl-C.

    Progress goes to standard error; on ready, one JSON line with the run id, port,
    pid and log path goes to standard output (for scripts and agents). --json: the same
    line, and an error (the server failing, dying) as the JSON error object on stderr.
    """
    # httpx: only when one starts
    from runners.usecases import ServerRequest, start_server, watch_server

    request = ServerRequest(
        configs_path, config_name, port, health_timeout_s, session_id or ctx.session
    )
    # A supervisor's SIGTERM must stop the server too, like Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        # ServerStartFailed, PortInUse, MissingEngine, ConfigError are LedgerErrors: the core CLI
        # prints them as one line and exits with their code.
        served = start_server(ctx.store(), request, _stderr, hold=True)
    except KeyboardInterrupt:
        click.echo(
            f"tuneledger: interrupted: server {config_name} stopped before it was ready", err=True
        )
        sys.exit(130)
    run = served.run
    click.echo(
        json.dumps(
            {"run_id": run.run_id, "port": run.port, "pid": run.pid, "log": str(run.log_path)}
        )
    )
    _stderr(f"{config_name} is serving on {run.base_url}; Ctrl-C stops it")
    end = watch_server(served, (lambda line: click.echo(line, err=True)) if follow else None)
    if end.interrupted:
        return
    if end.failed is not None:
        message = f"server {run.run_id} died: {end.failed}"
        click.echo(
            error_json(message, 12) if as_json else f"tuneledger: error: {message}", err=True
        )
        sys.exit(12)
    click.echo(f"tuneledger: server {run.run_id} exited by itself", err=True)


#: What ``run server show`` prints for the port of a ``port = 0`` configuration.
FREE_PORT = "<a free port, picked at start>"


@server_group.command("show")
@click.argument("config_name", metavar="[CONFIG]", required=False)
@_CONFIGS_OPTION
@json_option
def show_command(config_name: str | None, configs_path: Path, as_json: bool) -> None:
    """Print resolved configurations and the argv each would launch (nothing starts);
    secrets masked as in the ledger (an env variable named by a secret word shown as ***).

    A JSON line per configuration; --json: one array of them (CONFIG given: one object)."""
    from schemas.secrets import MASK, is_secret_env_name, mask_payload

    configs = load_configs(configs_path)
    if config_name is not None:
        configs = {config_name: load_config(configs_path, config_name)}
    shown_configs = []
    for name, config in configs.items():
        adapter = adapter_for(config.engine)
        port = adapter.default_port if config.port is None else config.port
        argv = adapter.argv(config, port)
        if port == 0:  # `port = 0`: a free port picked at each start, not the engine's default
            at = argv.index("--port") + 1
            argv[at] = FREE_PORT
        shown = config.model_dump(exclude={"name"}, exclude_none=True)
        env = shown.pop("env", None)
        masked = mask_payload({"name": name, **shown, "argv": argv})
        if env is not None:  # shown, not dropped as the ledger does: the name is a fact
            masked["env"] = {
                key: MASK if is_secret_env_name(key) else mask_payload(value)
                for key, value in env.items()
            }
        shown_configs.append(masked)
    if as_json:
        print_json(shown_configs[0] if config_name is not None else shown_configs)
        return
    for masked in shown_configs:
        click.echo(json.dumps(masked))


# --- the measurement commands -----------------------------------------------------------
run_group.add_command(bench_command)
run_group.add_command(plan_command)

# --- GPU runners: kernel tuning, speculative-decoding trials --------------------------------
from runners.cli.gpu import spec_command, tune_command  # noqa: E402

run_group.add_command(tune_command)
run_group.add_command(spec_command)
