"""``tuneledger import``: files of other tools, detected by content, appended as one batch."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.context import Context, first_error, ledger_option, pass_ctx, shown
from ledger.cli.json_output import json_option, print_json
from ledger.errors import InvalidInput
from schemas import Host


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
    re-importing a file is a no-op (event ids derive from the file's content). A ledger that
    does not exist is not created (exit 5) unless --create."""
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
        print_json(summary)
    else:
        for row in summary:
            pair = f" (one run with {row['paired_with']})" if row["paired_with"] else ""
            click.echo(
                f"{shown(row['file'])}: {row['kind']}, {row['new']} new, {row['duplicates']} already stored{shown(pair)}"
            )
        for finding in done.findings:
            click.echo(f"finding: {shown(finding.message)}")
