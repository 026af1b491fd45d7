"""SGLang server log -> ``ServerStarted``, then ``ServerReady`` and/or ``ServerFailed``, then findings.

The parsing is ``ledger.engines.sglang_log`` (shared with the server runner); this
module only says which of its facts go on which event (``ledger.write.commands.LoggedRun``);
``ledger.write.commands.server_run_events`` builds them, as for a vLLM log, with deterministic
ids and ``source`` = ``name:line``. ``ServerReady`` needs SGLang's ready line ("The server is
fired up and ready to roll!"); the startup facts of a run that crashed go on its
``ServerFailed``, those of a run that was still starting on its ``ServerStarted``.
Every event's ``occurred_at`` is the time its log line was printed (the log's clock,
naive local time read as UTC when the log carries no zone).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from ledger.engines.bulk_lines import SGLANG_RUN_RE
from ledger.engines.gpu_arch import compute_capability_for
from ledger.engines.identify import identify
from ledger.engines.lines import LEARN_LINES, Chronology, runs_backwards
from ledger.engines.sglang_lines import UNDATED
from ledger.engines.sglang_log import (
    LogFormatError,
    LogLine,
    ServerLogFacts,
    derive_findings,
    jsonable_args,
    parse_server_log,
)
from ledger.engines.speculative import spec_trial
from ledger.errors import InvalidInput
from ledger.input_files import LIMITS, MiB
from ledger.write.commands import LoggedRun, server_run_events
from schemas import (
    Actor,
    Event,
    FindingRecorded,
    Host,
    ServerStarted,
    SpecDecodingTrialCompleted,
    StartupFacts,
    normalize_flag,
)

from .detect import (
    ImportContext,
    Importer,
    InputFile,
    Later,
    ReadResult,
    Sniffed,
)

ENGINE = "sglang"
T = TypeVar("T")


def utc(stamp: datetime | None) -> datetime | None:
    """A log line's time as UTC (the log's clock, naive); ``None`` for none, and for a prefix that
    names no day or no year (old SGLang's time only, vLLM's month and day: read in 1900)."""
    if stamp is None or stamp.year <= UNDATED.year:
        return None
    return stamp.replace(tzinfo=UTC)


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
    remember: Callable[[ServerStarted], list[FindingRecorded]] | None = None,
) -> list[Event]:
    """Events of one server log (see the module doc); ``run_id`` is ``sglang-`` + 12 hex of the file hash.

    ``remember`` (``ledger.read.flag_memory.remembered_findings`` bound to the ledger) gives the
    ``known-no-effect`` findings of the run's flags: verdicts the ledger already holds.

    Raises:
        InvalidInput: the log shows neither server args, startup facts, readiness nor a crash;
            or a line of SGLang's shape holds a value that cannot be (``file:line: field F: ...``).
    """
    try:
        facts = _parse(file)
    except LogFormatError as exc:
        raise InvalidInput(f"{file.label}:{exc.line}: field {exc.field}: {exc.problem}") from None
    if not (
        facts.server_args
        or facts.has_startup_facts
        or facts.ready
        or facts.crash
        or identify(file.lines()).engine == ENGINE
    ):
        raise InvalidInput(
            f"{file.label}: no SGLang server facts found (server_args, startup lines, ready or crash)"
        )
    run_id = file.run_id("sglang")
    log_host = host_from_log(facts, host)

    def src(key: str) -> str:
        line = facts.evidence.get(key)
        return f"{file.name}:{line.number}" if line else file.name

    def at(line: LogLine | None) -> datetime | None:
        return utc(line.timestamp) if line is not None else None

    startup = facts.to_startup_facts(file.name)
    started_at = at(facts.evidence.get("server_args")) or utc(facts.first_timestamp)

    args = facts.server_args
    port = args.get("port")
    run = LoggedRun(
        engine=ENGINE,
        run_id=run_id,
        host=log_host,
        started=dict(
            model=args.get("model_path") if isinstance(args.get("model_path"), str) else None,
            config_name=config_name,
            flags=cli_flags(args),
            port=port if isinstance(port, int) and not isinstance(port, bool) else None,
            pid=facts.pid,
            # A run that neither became ready nor failed keeps what it showed while starting.
            startup=startup
            if not (facts.ready or facts.crash) and facts.has_startup_facts
            else None,
            occurred_at=started_at,
        ),
        ready=dict(
            ready_after_s=facts.ready_after_s,
            startup=startup,
            warnings=[w.message for w in facts.warnings],
            occurred_at=at(facts.evidence.get("ready")),
        )
        if facts.ready
        else None,
        failed=dict(
            cause=facts.crash.cause,
            message=facts.crash.message,
            log_tail=facts.crash.tail,
            startup=startup if facts.has_startup_facts or facts.server_args else None,
            occurred_at=at(facts.crash.line) or utc(facts.last_timestamp),
        )
        if facts.crash is not None
        else None,
        stopped=stopped_fields(facts),
        sources={
            "server_stopped": f"{file.name}:{facts.outcome.stop_line.number}"
            if facts.outcome.stop_line
            else file.name,
            "server_started": src("server_args"),
            "server_ready": src("ready"),
            "server_failed": f"{file.name}:{facts.crash.line.number}" if facts.crash else file.name,
        },
        finding_source=lambda f: _first_log_ref(f, file.name),
        finding_time=lambda f: _line_time(facts, _first_log_ref(f, file.name)) or started_at,
    )
    run.findings = derive_findings(
        facts,
        host=log_host,
        previous=previous_startup,
        run_id=run_id,
        session_id=session_id,
        source_name=file.name,
    )
    events = server_run_events(
        run, event_id=file.event_id, actor=actor, session_id=session_id, remember=remember
    )
    # the series' first line and its last with a time: all spec_event reads of its lines
    ends = [x for x in (facts.first_accept_line, facts.last_accept_stamped) if x is not None]
    trial = spec_event(
        file,
        ENGINE,
        run_id,
        args,
        facts.accept_lengths,
        ends,
        host=log_host,
        actor=actor,
        session_id=session_id,
    )
    return events + ([trial] if trial is not None else [])


def read_facts(
    file: InputFile,
    parse: Callable[[Iterable[str], bool], T],
    runs: re.Pattern[str] | None = None,
) -> T:
    """A server log's facts by ``parse(lines, forward)``; a log read as a stream is read one line
    at a time (``forward``), unless its lines run newest first (a cloud export: ``oldest_first``
    turns it round, so it is read again whole, refused past a result file's bound). Whether they
    do is seen as the lines go by (the ``Chronology``): a forward log is read once."""
    if not file.streamed:
        return parse(file.lines(), False)
    chronology = Chronology()
    try:
        # runs of bulk lines past the lines the reader learns its prefixes from
        facts = parse(chronology.watch(file.iter_lines(runs, LEARN_LINES)), True)
        if not chronology.backwards:
            return facts
    except LogFormatError:
        # the error of a log read the wrong way round is not its error
        if not runs_backwards(file.iter_lines()):
            raise
    size = file.path.stat().st_size
    if size > LIMITS["result"]:
        raise InvalidInput(
            f"{file.label}: too large ({size / MiB:.1f} MiB) for a log whose lines run newest "
            f"first: it is read whole, up to {LIMITS['result'] / MiB:.1f} MiB (docs/reliability.md)"
        )
    return parse(list(file.iter_lines()), False)


def _parse(file: InputFile) -> ServerLogFacts:
    return read_facts(
        file,
        lambda lines, forward: parse_server_log(lines, strict=True, forward=forward),
        SGLANG_RUN_RE,
    )


def stopped_fields(facts: ServerLogFacts) -> dict[str, Any] | None:
    """The ``server_stopped`` fields of a run whose log shows a clean shutdown after readiness
    (the failure model's ``stopped`` state: uvicorn's "Shutting down", a SIGTERM handled), with
    the time of that line; ``None`` otherwise."""
    line = facts.outcome.stop_line
    if facts.outcome.state != "stopped" or line is None:
        return None
    return dict(
        reason=f"the log shows a clean shutdown: {line.message.strip()[:200]}",
        occurred_at=utc(line.timestamp),
    )


def spec_event(
    file: InputFile,
    engine: str,
    run_id: str,
    args: dict[str, Any],
    series: list[float],
    lines: list[LogLine],
    *,
    host: Host,
    actor: Actor,
    session_id: str | None,
) -> SpecDecodingTrialCompleted | None:
    """The ``spec_decoding_trial_completed`` a log of a speculative run supports (the accept
    length read on import, as ``run spec`` reads it from the decode lines), ``None`` when the
    log logs no accept length. ``source``: the first line of the series; ``occurred_at``: the
    time of its last."""
    fields = spec_trial(engine, args, series)
    if fields is None or not lines:
        return None
    last = next((line.timestamp for line in reversed(lines) if line.timestamp), None)
    return SpecDecodingTrialCompleted(
        event_id=file.event_id("spec_decoding_trial"),
        trial_id=f"{run_id}:log",
        server_run_id=run_id,
        flags=cli_flags(args),
        notes=f"accept length read from {len(series)} log line(s) of the server log on import",
        source=f"{file.name}:{lines[0].number}",
        session_id=session_id,
        host=host,
        actor=actor,
        occurred_at=utc(last),
        **fields,
    )


def _first_log_ref(finding: FindingRecorded, default: str) -> str:
    """A finding's first log evidence (``name:line``), else ``default`` (the file name)."""
    return next((e.ref for e in finding.evidence if e.kind == "log" and e.ref), default)


def _line_time(facts: ServerLogFacts, ref: str) -> datetime | None:
    """The timestamp of the evidence line ``name:N`` (``None`` when it has none)."""
    _, _, number = ref.rpartition(":")
    if not number.isdigit():
        return None
    for line in [
        *facts.evidence.values(),
        *(b.line for b in facts.decode_batches),
        *(line for _, line in facts.eager_decodes.kept()),
        *(m.line for m in facts.moe_configs),
        *(o.line for o in facts.overrides),
    ]:
        if line.number == int(number) and line.timestamp:
            return utc(line.timestamp)
    return None


def _sniff(sniffed: Sniffed) -> float | Later:
    if sniffed.claims_json:
        return 0.0
    if sniffed.sglang_server_log:
        return 0.9
    # an excerpt (the tail around an error, no start line): claimed when its lines name SGLang
    return Later(0.5, lambda: 0.5 if sniffed.engine == ENGINE else 0.0)


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    events = import_server_log(
        file,
        config_name=ctx.config_name,
        session_id=ctx.session_id,
        host=ctx.host,
        actor=ctx.actor,
        previous_startup=ctx.previous_startup,
        remember=ctx.remember,
    )
    return events, {}


IMPORTER = Importer(
    kind="sglang-server-log", description="sglang server log", sniff=_sniff, read=_read
)
