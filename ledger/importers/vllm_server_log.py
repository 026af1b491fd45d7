"""vLLM server log -> ``ServerStarted``, then ``ServerReady`` and/or ``ServerFailed``, then findings.

The parsing is ``ledger.vllm_log``; the events have the shapes of an SGLang log's
(``ledger/importers/server_log.py``), with engine ``vllm``: deterministic ids,
``source`` = ``name:line``, ``run_id`` = ``vllm-`` + 12 hex of the file hash.
"""

from __future__ import annotations

from ledger.errors import InvalidInput
from ledger.gpu_arch import compute_capability_for
from ledger.vllm_log import is_vllm_log, parse_vllm_log, vllm_findings
from schemas import Event, Host, ServerFailed, ServerReady, ServerStarted

from .detect import ImportContext, Importer, InputFile, ReadResult, Sniffed
from .server_log import cli_flags

ENGINE = "vllm"


def _host(gpu_name: str | None, tp: object, version: str | None, given: Host | None) -> Host:
    """The host the log shows (GPU from the MoE config path, ``gpu_count`` = tensor parallel size,
    engine ``vllm`` and its version), with every non-empty field of ``given`` on top."""
    seen = Host(
        gpu_name=gpu_name,
        compute_capability=compute_capability_for(gpu_name),
        gpu_count=tp if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 0 else None,
        engine=ENGINE,
        engine_version=version,
    )
    return seen.model_copy(
        update={k: v for k, v in (given.model_dump() if given else {}).items() if v is not None}
    )


def _sniff(sniffed: Sniffed) -> float:
    return 0.9 if not sniffed.claims_json and is_vllm_log(sniffed.text) else 0.0


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    parsed = parse_vllm_log(file.lines())
    facts = parsed.facts
    if not (
        facts.server_args
        or facts.has_startup_facts
        or facts.ready
        or facts.crash
        or parsed.engine_version
    ):
        raise InvalidInput(
            f"{file.label}: no vLLM server facts found (args, startup lines, ready or crash)"
        )
    run_id = file.run_id("vllm")
    args = facts.server_args
    host = _host(facts.gpu_name, args.get("tensor_parallel_size"), parsed.engine_version, ctx.host)
    common = dict(session_id=ctx.session_id, host=host, actor=ctx.actor)

    def src(key: str) -> str:
        line = facts.evidence.get(key)
        return f"{file.name}:{line.number}" if line else file.name

    model = args.get("model") or args.get("model_tag")
    port = args.get("port")
    started = ServerStarted(
        event_id=file.event_id("server_started"),
        source=src("server_args"),
        run_id=run_id,
        engine=ENGINE,
        model=model if isinstance(model, str) else None,
        config_name=ctx.config_name,
        flags=cli_flags({k: v for k, v in args.items() if k not in ("model", "model_tag")}),
        port=port if isinstance(port, int) and not isinstance(port, bool) else None,
        pid=facts.pid,
        **common,
    )
    events: list[Event] = [started]
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
                cause=facts.crash.cause,
                message=facts.crash.message,
                log_tail=facts.crash.tail,
                startup=facts.to_startup_facts()
                if facts.has_startup_facts or facts.server_args
                else None,
                **common,
            )
        )
    findings = vllm_findings(
        parsed,
        host=host,
        previous=ctx.previous_startup,
        run_id=run_id,
        session_id=ctx.session_id,
        source_name=file.name,
    )
    if (
        ctx.remember is not None
    ):  # flags the ledger already knows do nothing (ledger/flag_memory.py)
        findings += ctx.remember(started)
    for finding in findings:
        events.append(
            finding.model_copy(
                update={
                    "event_id": file.event_id(
                        f"finding:{finding.kind}:{finding.flag}:{finding.message}"
                    ),
                    "source": finding.evidence[0].ref if finding.evidence else file.name,
                    "host": host,
                    "actor": ctx.actor,
                }
            )
        )
    return events, {}


IMPORTER = Importer(kind="vllm-server-log", description="vLLM server log", sniff=_sniff, read=_read)
