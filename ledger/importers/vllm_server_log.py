"""vLLM server log -> ``ServerStarted``, then ``ServerReady`` and/or ``ServerFailed``, then findings.

The parsing is ``ledger.engines.vllm_log``; the events are built by the same command as an SGLang
log's (``ledger.write.commands.server_run_events``), with engine ``vllm``: deterministic ids,
``source`` = ``name:line``, ``run_id`` = ``vllm-`` + 12 hex of the file hash.
"""

from __future__ import annotations

from itertools import islice

from ledger.engines.bulk_lines import VLLM_RUN_RE
from ledger.engines.gpu_arch import compute_capability_for
from ledger.engines.identify import IDENTIFY_SCAN, identify
from ledger.engines.vllm_log import parse_vllm_log, vllm_findings
from ledger.errors import InvalidInput
from ledger.write.commands import LoggedRun, server_run_events
from schemas import Host

from .detect import ImportContext, Importer, InputFile, Later, ReadResult, Sniffed
from .server_log import cli_flags, read_facts, spec_event, stopped_fields

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


def _sniff(sniffed: Sniffed) -> float | Later:
    if sniffed.claims_json:
        return 0.0
    if sniffed.vllm_server_log:
        return 0.9
    # an excerpt (the tail around an error, no start line): claimed when its lines name vLLM
    return Later(0.5, lambda: 0.5 if sniffed.engine == ENGINE else 0.0)


def _head(file: InputFile) -> list[str]:
    """The lines ``identify`` reads: the first ``IDENTIFY_SCAN`` (of a log read as a stream, read
    again from its start)."""
    return list(islice(file.iter_lines(), IDENTIFY_SCAN)) if file.streamed else file.lines()


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    parsed = read_facts(
        file, lambda lines, forward: parse_vllm_log(lines, forward=forward), VLLM_RUN_RE
    )
    facts = parsed.facts
    if not (
        facts.server_args
        or facts.has_startup_facts
        or facts.ready
        or facts.crash
        or parsed.engine_version
        or identify(_head(file)).engine == ENGINE
    ):
        raise InvalidInput(
            f"{file.label}: no vLLM server facts found (args, startup lines, ready or crash)"
        )
    run_id = file.run_id("vllm")
    args = facts.server_args
    host = _host(facts.gpu_name, args.get("tensor_parallel_size"), parsed.engine_version, ctx.host)

    def src(key: str) -> str:
        line = facts.evidence.get(key)
        return f"{file.name}:{line.number}" if line else file.name

    model = args.get("model") or args.get("model_tag")
    port = args.get("port")
    has_facts = facts.has_startup_facts or facts.server_args
    run = LoggedRun(
        engine=ENGINE,
        run_id=run_id,
        host=host,
        started=dict(
            model=model if isinstance(model, str) else None,
            config_name=ctx.config_name,
            flags=cli_flags({k: v for k, v in args.items() if k not in ("model", "model_tag")}),
            port=port if isinstance(port, int) and not isinstance(port, bool) else None,
            pid=facts.pid,
            # A run that neither became ready nor failed keeps what it showed while starting.
            startup=facts.to_startup_facts()
            if not (facts.ready or facts.crash) and facts.has_startup_facts
            else None,
        ),
        ready=dict(
            ready_after_s=facts.ready_after_s,
            startup=facts.to_startup_facts(),
            warnings=[w.message for w in facts.warnings],
        )
        if facts.ready
        else None,
        failed=dict(
            cause=facts.crash.cause,
            message=facts.crash.message,
            log_tail=facts.crash.tail,
            startup=facts.to_startup_facts() if has_facts else None,
        )
        if facts.crash is not None
        else None,
        stopped=stopped_fields(facts),
        sources={
            "server_stopped": f"{file.name}:{facts.outcome.stop_line.number}"
            if facts.outcome.stop_line
            else file.name,
            "server_started": src("server_args"),
            "server_ready": src("ready") if facts.ready else file.name,
            "server_failed": f"{file.name}:{facts.crash.line.number}" if facts.crash else file.name,
        },
        finding_source=lambda f: (f.evidence[0].ref if f.evidence else None) or file.name,
    )
    run.findings = vllm_findings(
        parsed,
        host=host,
        previous=ctx.previous_startup,
        run_id=run_id,
        session_id=ctx.session_id,
        source_name=file.name,
    )
    # ctx.remember: flags the ledger already knows do nothing (ledger/read/flag_memory.py)
    events = server_run_events(
        run,
        event_id=file.event_id,
        actor=ctx.actor,
        session_id=ctx.session_id,
        remember=ctx.remember,
    )
    trial = spec_event(
        file,
        ENGINE,
        run_id,
        args,
        parsed.accept_lengths,
        [x for x in (parsed.first_accept_line, parsed.last_accept_stamped) if x is not None],
        host=host,
        actor=ctx.actor,
        session_id=ctx.session_id,
    )
    return events + ([trial] if trial is not None else []), {}


IMPORTER = Importer(
    kind="vllm-server-log",
    description="vLLM server log",
    sniff=_sniff,
    read=_read,
    max_score=0.9,  # _sniff's most
)
