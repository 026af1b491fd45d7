"""SGLang server log -> ``ServerStarted``, then ``ServerReady`` and/or ``ServerFailed``, then findings.

The parsing is ``ledger.sglang_log`` (shared with the server runner); this
module only turns its facts into events with deterministic ids and
``source`` = ``name:line``.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.errors import InvalidInput
from ledger.gpu_arch import compute_capability_for
from ledger.sglang_log import ServerLogFacts, derive_findings, jsonable_args, parse_server_log
from schemas import Actor, Event, Host, ServerFailed, ServerReady, ServerStarted, StartupFacts, normalize_flag

from .detect import ImportContext, Importer, InputFile, ReadResult, Sniffed, is_server_log

ENGINE = "sglang"


def host_from_log(facts: ServerLogFacts, host: Host | None) -> Host:
    """The host the log shows (GPU name from the MoE config path, its compute capability,
    ``gpu_count`` = ``tp_size``, engine ``sglang``), with every non-empty field of ``host`` on top."""
    tp = facts.server_args.get("tp_size")
    seen = Host(
        gpu_name=facts.gpu_name,
        compute_capability=compute_capability_for(facts.gpu_name),
        gpu_count=tp if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 0 else None,
        engine=ENGINE,
    )
    given = {k: v for k, v in (host.model_dump() if host else {}).items() if v is not None}
    return seen.model_copy(update=given)


def cli_flags(server_args: dict[str, Any]) -> dict[str, Any]:
    """Server args in CLI spelling (``tp_size`` -> ``tp-size``), values as logged.

    Dict values (not a ``FlagValue``) are kept as their JSON text.
    """
    flags: dict[str, Any] = {}
    for key, value in jsonable_args(server_args).items():
        try:
            name = normalize_flag(key)
        except ValueError:
            continue
        flags[name] = json.dumps(value) if isinstance(value, dict) else value
    return flags


def import_server_log(
    file: InputFile,
    *,
    config_name: str | None,
    session_id: str | None,
    host: Host | None,
    actor: Actor,
    previous_startup: StartupFacts | None,
) -> list[Event]:
    """Events of one server log (see the module doc); ``run_id`` is ``sglang-`` + 12 hex of the file hash.

    Raises:
        InvalidInput: the log shows neither server args, startup facts, readiness nor a crash.
    """
    facts = parse_server_log(file.lines())
    if not (facts.server_args or facts.has_startup_facts or facts.ready or facts.crash):
        raise InvalidInput(f"{file.label}: no SGLang server facts found (server_args, startup lines, ready or crash)")
    run_id = f"sglang-{file.sha256[:12]}"
    log_host = host_from_log(facts, host)
    common = dict(session_id=session_id, host=log_host, actor=actor)

    def src(key: str) -> str:
        line = facts.evidence.get(key)
        return f"{file.name}:{line.number}" if line else file.name

    args = facts.server_args
    port = args.get("port")
    events: list[Event] = [
        ServerStarted(
            event_id=file.event_id("server_started"),
            source=src("server_args"),
            run_id=run_id,
            engine=ENGINE,
            model=args.get("model_path") if isinstance(args.get("model_path"), str) else None,
            config_name=config_name,
            flags=cli_flags(args),
            port=port if isinstance(port, int) and not isinstance(port, bool) else None,
            pid=facts.pid,
            **common,
        )
    ]
    if facts.ready or (facts.has_startup_facts and facts.crash is None):
        events.append(
            ServerReady(
                event_id=file.event_id("server_ready"),
                source=src("ready") if facts.ready else file.name,
                run_id=run_id,
                ready_after_s=facts.ready_after_s,
                startup=facts.to_startup_facts(),
                warnings=[w.message for w in facts.warnings],
                **common,
            )
        )
    if facts.crash is not None:
        events.append(
            ServerFailed(
                event_id=file.event_id("server_failed"),
                source=f"{file.name}:{facts.crash.line.number}",
                run_id=run_id,
                cause=facts.crash.cause,  # type: ignore[arg-type]
                message=facts.crash.message,
                log_tail=facts.crash.tail,
                **common,
            )
        )
    findings = derive_findings(
        facts, host=log_host, previous=previous_startup, run_id=run_id, session_id=session_id, source_name=file.name
    )
    for finding in findings:
        first_ref = finding.evidence[0].ref if finding.evidence else file.name
        events.append(
            finding.model_copy(update={
                "event_id": file.event_id(f"finding:{finding.kind}:{finding.flag}:{finding.message}"),
                "source": first_ref,
                "host": log_host,
                "actor": actor,
            })
        )
    return events


def _sniff(sniffed: Sniffed) -> float:
    return 0.9 if not sniffed.claims_json and is_server_log(sniffed.text) else 0.0


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    events = import_server_log(
        file, config_name=ctx.config_name, session_id=ctx.session_id, host=ctx.host, actor=ctx.actor,
        previous_startup=ctx.previous_startup,
    )
    return events, {}


IMPORTER = Importer(kind="sglang-server-log", description="sglang server log", sniff=_sniff, read=_read)
