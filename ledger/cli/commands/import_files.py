"""``tuneledger import``: files of other tools, detected by content, appended as one batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ledger.cli.context import Context, first_error, ledger_option, pass_ctx, shown
from ledger.cli.json_output import json_option, print_json
from ledger.errors import InvalidInput
from schemas import Event, Host, ServerFailed, ServerStarted

#: A server run's status by the last lifecycle event its log gave (a log that never got
#: ready, nor failed, was cut before either: its tail holds no more).
_STATUS_OF = {"server_started": "started", "server_ready": "ready", "server_stopped": "stopped"}


def server_outcomes(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Each server run an imported log holds: engine and version, status and, for a failed
    run, the failure model's root cause (``cause``, ``message``): what the README promises
    ``import - < pasted-tail.txt`` says of a pasted tail, said for a file alike."""
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        run_id = getattr(event, "run_id", None)
        if event.type not in (*_STATUS_OF, "server_failed") or run_id is None:
            continue
        run = runs.setdefault(
            run_id,
            {
                "run_id": run_id,
                "engine": None,
                "engine_version": None,
                "status": None,
                "cause": None,
                "message": None,
            },
        )
        if isinstance(event, ServerStarted):
            run["engine"] = event.engine
        if event.host is not None:
            run["engine"] = run["engine"] or event.host.engine
            run["engine_version"] = run["engine_version"] or event.host.engine_version
        if isinstance(event, ServerFailed):
            run.update(status="failed", cause=event.cause, message=event.message)
        elif run["status"] != "failed":
            run["status"] = _STATUS_OF[event.type]
    return list(runs.values())


def outcome_line(server: dict[str, Any]) -> str:
    """``server RUN: sglang 0.5.23, failed (crash): <root cause line>``."""
    engine = " ".join(str(x) for x in (server["engine"], server["engine_version"]) if x)
    status = server["status"]
    if status == "failed":
        status = f"failed ({server['cause']}): {server['message']}"
    elif status == "started":
        status = "started, no ready line in the log (cut before the server was ready)"
    return f"server {server['run_id']}: {engine or 'engine not named'}, {status}"


@click.command(name="import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--session", "session_id", help="Session id for the imported events.")
@click.option(
    "--config-name", help="Configuration name for imported benchmark runs (default: the file name)."
)
@json_option
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
    re-importing a file is a no-op (event ids derive from the file's content). Each server log
    (or a tail of one, '-' for standard input) is followed by its server runs' engine, status
    and, for a failure, the root cause. A ledger that does not exist is not created (exit 5)
    unless --create."""
    from ledger.importers.ingest import import_files

    store = ctx.writable_store(create=create)

    session = session_id or ctx.session
    host = None
    if host_json is not None:
        try:
            host = Host.model_validate_json(host_json)
        except ValueError as exc:
            raise InvalidInput(f"--host: {first_error(exc)}") from None
    done = import_files(
        store,
        files,
        session_id=session,
        actor=ctx.actor,
        config_name=config_name,
        host=host,
        check_arch=check_arch,
    )
    summary: list[dict[str, Any]] = []
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
                "servers": server_outcomes(result.events),
            }
        )
    if as_json:
        print_json(summary)
    else:
        for row in summary:
            pair = f" (one run with {row['paired_with']})" if row["paired_with"] else ""
            click.echo(
                f"{shown(row['file'])}: {row['kind']}, {row['new']} new, {row['duplicates']} already stored{shown(pair)}"
            )
            for server in row["servers"]:
                click.echo(f"  {shown(outcome_line(server))}")
        for finding in done.findings:
            click.echo(f"finding: {shown(finding.message)}")
