"""The plan runner: a baseline and candidate server configurations, benchmarked interleaved, compared.

A plan file (TOML, see ``examples/plan.toml``)::

    [plan]
    session = "cb-trial"              # optional; session_started is recorded when it is new
    session_title = "Continuous batching on the tiny MoE"
    baseline = "baseline"             # configuration names (below, or in `servers`)
    repeats = 3                       # runs per arm and concurrency (3+ for a verdict)
    concurrency = [1, 4]              # closed loop; or request_rate = 2.0 (open loop, req/s)
    # servers = "servers.toml"        # configurations from that file instead of [configs.*] here
    # stop_wait_s = 30                # seconds from SIGINT to SIGTERM when a server is stopped
    # retries = 1                     # a run failing before it measures: restarts of its server
    # time_budget_s = 440             # start no arm after this many seconds; compare what ran
    # threshold = 0.05                # the smallest change called one (default: per metric, 5%)

    [[candidates]]
    config = "cb"
    flag = "continuous-batching"      # a single-flag candidate: its measured verdict becomes a finding
    hypothesis = "batching raises throughput at c > 1"

    [[candidates]]                    # a grid: one configuration per value (runners/plan_grid.py)
    grid = { max-num-seqs = [1, 8, 32] }   # -> max-num-seqs-1, max-num-seqs-8, max-num-seqs-32

    [bench]                           # the workload, as `tuneledger run bench` takes it
    endpoint = "chat"
    input_len = 64
    output_len = 32
    num_prompts = 32
    warmup = 1
    seed = 0
    # prompts_per_concurrency = 5     # a run at c sends min(num_prompts, max(min_prompts, 5 c))
    # model = "name sent in requests" (default: the one model the server lists at /v1/models)
    # tokenizer = "/local/tokenizer"  (exact prompt lengths)

    [defaults] / [configs.NAME]       # server configurations, format of runners/server/configs.py

Execution: for repeat r, for each arm (baseline first, then candidates): start the arm's
server (``runners.server.runner.ServerRunner``: it records server_started/ready/stopped), warm up,
benchmark every concurrency (one ``benchmark_completed`` per run, samples included), stop
it. So arms alternate A B A B and drift hits both. A run that fails before measuring is
recorded (not valid, with its cause) and retried on a restarted server within ``retries``;
past that budget the plan goes on and its table lists what is missing. Then, per candidate, concurrency and
compared metric of the metric table (``schemas.metrics``): one ``comparison_completed`` (``runners.compare``),
tau the practical threshold (``[plan] threshold`` or ``run plan --threshold``, else the metric's
default); a single-flag candidate gets a ``finding_recorded`` (basis ``measured``): its throughput
verdict's flag verdict where every concurrency agrees, else ``conditional`` (some load decided) or
``unknown`` (none did), each load's verdict in the message (``measured_flag_verdict``).
Decisions are left to people. Ctrl-C stops the running server (recorded by the server
runner) and records a ``note_added`` listing the runs completed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from uuid import UUID

from ledger.derive.verdict_rule import verdict_words
from ledger.errors import ConcurrencyConflict
from ledger.read import runs
from ledger.store import LedgerStore
from ledger.write import commands
from runners.bench.client import (
    BenchTarget,
    RunIdentity,
    SweepPoint,
    WarmupFailed,
    benchmark_event,
    format_point,
    sweep,
)
from runners.bench.discovery import served_model
from runners.bench.identity import event_workload
from runners.bench.record import RunResult
from runners.bench.workload import WorkloadSpec, build_workload

# Re-exported (``X as X``): the plan file's models and reader live in runners/plan_file.py.
from runners.plan_file import BenchSection as BenchSection
from runners.plan_file import CandidateSpec as CandidateSpec
from runners.plan_file import Plan as Plan
from runners.plan_file import PlanSection as PlanSection
from runners.plan_file import load_plan as load_plan
from runners.plan_file import read_toml as read_toml
from runners.plan_file import validated as validated
from runners.plan_resume import finished_points
from runners.server.runner import PortInUse, ServerStartFailed
from schemas import Actor, Host
from schemas.envelope import Evidence
from schemas.events import (
    BenchmarkCompleted,
    CandidateProposed,
    ComparisonCompleted,
    FindingRecorded,
    NoteAdded,
    SessionStarted,
)
from schemas.parts import BenchMetrics

from .compare import (
    METRIC_RULES,
    Comparison,
    compare,
    flag_verdict,
)

PLAN_ACTOR = Actor(kind="runner", name="plan")
#: The metric whose verdict at every concurrency decides a flag's measured finding.
FLAG_METRIC = "output_throughput"


def measured_flag_verdict(verdicts: Sequence[str]) -> str:
    """A single-flag candidate's measured verdict from its throughput verdict at each load: the
    comparison's flag verdict when every load agrees (docs/comparison.md, Overall); else
    ``conditional`` when some load decided (it depends on the load), else ``unknown`` (no load
    decided: too noisy, inconclusive or invalid). Always one: a plan's measurement reaches
    ``flag_verdicts`` whatever it found, the finding's message says per load."""
    agreed = flag_verdict(verdicts)
    if agreed is not None:
        return agreed
    decided = {"improved", "regressed", "no-measurable-change"}
    return "conditional" if any(v in decided for v in verdicts) else "unknown"


# --- what the plan needs of the server runner ---------------------------------------------


class ServerHandle(Protocol):
    """A running server: ``run_id`` (its ledger id), ``base_url``, ``host`` (envelope host)."""

    run_id: str
    base_url: str
    host: Host


class Servers(Protocol):
    """Start/stop servers, recording them (``runners.server.runner.ServerRunner`` is one)."""

    def start(self, config: Any) -> ServerHandle: ...

    def stop(self, run: Any, *, reason: str = "stopped") -> Any: ...


# --- running ---------------------------------------------------------------------------------


@dataclass
class FailedAttempt:
    """A run that failed before measuring: the arm, repeat and loads left, why, and whether it was retried.

    ``event`` is the ``benchmark_completed`` recorded for it (``valid`` false, the cause in
    ``validity_notes``), None when nothing could be recorded.
    """

    config_name: str
    repeat: int
    loads: list[int | None]
    attempt: int
    cause: str
    retried: bool
    event: BenchmarkCompleted | None = None


@dataclass
class PlanResult:
    """What a plan produced: runs (sweep points), comparisons and findings (events), failed attempts."""

    points: list[SweepPoint] = field(default_factory=list)
    comparisons: list[ComparisonCompleted] = field(default_factory=list)
    findings: list[FindingRecorded] = field(default_factory=list)
    failures: list[FailedAttempt] = field(default_factory=list)
    #: Metrics left uncompared because no run measured them (e.g. TPOT of a coarse stream).
    unmeasured: list[str] = field(default_factory=list)
    host: Host | None = None

    @property
    def missing(self) -> list[FailedAttempt]:
        """Failed attempts that were not retried: their runs are missing from the comparisons."""
        return [f for f in self.failures if not f.retried]


def candidate_id(spec: CandidateSpec) -> str:
    """``flag:<flag>`` for a single-flag candidate, else ``config:<name>``."""
    return f"flag:{spec.flag}" if spec.flag else f"config:{spec.config}"


def _record_preamble(store: LedgerStore, plan: Plan) -> None:
    """session_started when the plan names a new session; candidate_proposed for new candidates."""
    session = plan.plan.session
    if session and not store.read(types=["session_started"], session_id=session, limit=1):
        commands.record(
            store,
            SessionStarted(
                title=plan.plan.session_title or session,
                session_id=session,
                actor=PLAN_ACTOR,
                model=plan.configs[plan.plan.baseline].model,
                source=plan.source,
            ),
        )
    # The board and the candidate streams' versions in one statement (one snapshot): a
    # proposal expects its stream at the version read with the board, so a candidate proposed
    # by someone else since is a conflict, not a second proposal.
    read = runs.board_candidates(store)
    on_board, versions = read.on_board, read.versions
    for spec in plan.candidates:
        cid = candidate_id(spec)
        if cid in on_board:
            continue
        config = plan.configs[spec.config]
        proposal = CandidateProposed(
            candidate_id=cid,
            kind="flag" if spec.flag else "config",
            title=spec.title or (f"--{spec.flag}" if spec.flag else f"configuration {spec.config}"),
            flag=spec.flag,
            value=config.flags.get(spec.flag) if spec.flag else None,
            hypothesis=spec.hypothesis,
            session_id=session,
            actor=PLAN_ACTOR,
            source=plan.source,
        )
        try:
            commands.propose_candidate(
                store, proposal, expected_version=versions.get(proposal.default_stream(), 0)
            )
        except ConcurrencyConflict:
            pass  # proposed since the board was read (another plan, a person): it is on the board


def run_plan(
    plan: Plan,
    store: LedgerStore,
    servers: Servers,
    *,
    say: Callable[[str], None] = lambda _line: None,
    progress: bool = True,
    request_options: dict[str, dict[str, Any]] | None = None,
    after_sweep: Callable[[str, Any, int], None] | None = None,
    resume: bool = False,
) -> PlanResult:
    """Run the plan (see the module docstring); return its runs, comparisons and findings.

    ``resume``: the runs this plan's session already holds (valid, same workload and tool, by
    arm, repeat and load: ``runners.plan_resume``) are not measured again but compared with the
    new ones; an arm with nothing left to measure is not started.

    A run that fails before measuring (the server does not start, every warmup request
    fails) is recorded as not valid with its cause and retried on a restarted server, up to
    ``[plan] retries`` times per arm and repeat; then the plan goes on without it and
    ``PlanResult.missing`` (and the verdict table's caption) says what is missing.

    ``request_options``: arm -> fields added to each of its requests (``runners.spec``);
    ``after_sweep(arm, server_run, repeat)``: called after an arm's benchmarks, before its server
    stops (``runners.spec`` reads ``/server_info`` and the log there).

    Raises:
        KeyboardInterrupt: after stopping the running server and recording a ``note_added``
            that lists the completed runs.
        runners.server.engines.MissingEngine, runners.server.configs.ConfigError: no attempt could succeed.
            The running server is stopped first in every case.
    """
    b = plan.bench
    # The inputs first (a tokenizer path that does not exist is exit 3): a refused plan
    # leaves nothing in the ledger.
    workload = build_workload(
        WorkloadSpec(
            b.input_len, b.output_len, b.num_prompts, b.seed, b.tokenizer, b.shared_prefix_len
        )
    )
    store.init()
    _record_preamble(store, plan)
    result = PlanResult()
    loads: Sequence[int | None] = (
        plan.plan.concurrency if plan.plan.request_rate is None else [None]
    )
    candidates = {spec.config: candidate_id(spec) for spec in plan.candidates}
    done = finished_points(store, plan, loads) if resume else {}
    result.points.extend(done.values())
    if done:
        say(f"resume: {len(done)} run(s) of this plan already in the ledger, not measured again")
    t0, budget = time.monotonic(), plan.plan.time_budget_s
    try:
        for repeat in range(plan.plan.repeats):
            for arm in plan.arms:
                pending = [c for c in loads if (arm, repeat, c) not in done]
                if not pending:
                    continue
                if budget and time.monotonic() - t0 > budget:
                    say(f"time budget {budget:g} s spent: {arm} repeat {repeat + 1} not run")
                    continue
                say(f"repeat {repeat + 1}/{plan.plan.repeats}: {arm}")
                identity = RunIdentity(
                    config_name=arm,
                    request_rate=plan.plan.request_rate,
                    repeat=repeat,
                    is_baseline=arm == plan.plan.baseline,
                    candidate_id=candidates.get(arm),
                    session_id=plan.plan.session,
                    source=plan.source,
                )
                _run_arm(
                    plan,
                    store,
                    servers,
                    identity,
                    pending,
                    workload,
                    result,
                    say=say,
                    progress=progress,
                    extra_body=(request_options or {}).get(arm, {}),
                    after_sweep=after_sweep,
                )
    except KeyboardInterrupt as exc:
        _record_interrupted(store, plan, result, interruption(exc))
        raise
    compare_and_record(store, plan, result)
    return result


#: Failures of a run that a restarted server may not repeat: the server did not start (crash,
#: timeout, its port still held by the previous server) or every warmup request failed. A missing
#: engine or a bad configuration fails every attempt alike: those end the plan.
_RETRYABLE = (ServerStartFailed, PortInUse, WarmupFailed)


def _run_arm(
    plan: Plan,
    store: LedgerStore,
    servers: Servers,
    identity: RunIdentity,
    loads: list[int | None],
    workload: Any,
    result: PlanResult,
    *,
    say: Callable[[str], None],
    progress: bool,
    extra_body: dict[str, Any] | None = None,
    after_sweep: Callable[[str, Any, int], None] | None = None,
) -> None:
    """One arm's runs of one repeat: start its server, benchmark every load, stop it.

    A run that fails before measuring is recorded (``benchmark_completed``, not valid, with the
    cause) and, within ``plan.retries``, retried on a restarted server for the loads still
    missing; past the budget the plan goes on without them (``PlanResult.missing``).
    ``identity``: the arm's runs of this repeat (their server's run id and host are added here).
    """
    b = plan.bench
    arm, repeat = identity.config_name, identity.repeat
    config = plan.configs[arm]
    pending = list(loads)

    def done(point: SweepPoint) -> None:
        result.points.append(point)
        pending.remove(point.concurrency)
        say(format_point(point))

    for attempt in range(plan.plan.retries + 1):
        run = None
        reason = f"plan: {arm} repeat {repeat} done"
        try:
            run = servers.start(config)
            result.host = run.host
            model = b.model
            if model is None:
                model = (
                    config.model or arm
                    if b.endpoint == "generate"
                    else served_model(run.base_url, config.model)
                )
            target = BenchTarget(
                url=run.base_url,
                endpoint=b.endpoint,
                model=model,
                workload=workload,
                ignore_eos=b.ignore_eos,
                extra_body=extra_body or {},
                server_metrics=config.engine == "vllm",
            )
            asyncio.run(
                _sweep_levels(
                    b,
                    target,
                    identity.on_server(run.run_id, run.host),
                    concurrencies=list(pending),
                    repeats=[repeat],
                    warmup_requests=b.warmup,
                    store=store,
                    progress=progress,
                    on_point=done,
                )
            )
            if after_sweep is not None:
                after_sweep(arm, run, repeat)
            return
        except KeyboardInterrupt as exc:
            reason = f"plan interrupted ({interruption(exc)})"
            raise
        except _RETRYABLE as exc:
            cause = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
            reason = f"plan: run failed: {cause}"[:300]
            retried = attempt < plan.plan.retries
            failed = _record_failed_run(
                store,
                plan,
                identity.on_server(run.run_id if run else None, run.host if run else result.host),
                pending,
                cause=cause,
                attempt=attempt,
                retried=retried,
            )
            result.failures.append(
                FailedAttempt(arm, repeat, list(pending), attempt, cause, retried, failed)
            )
            budget = f"attempt {attempt + 1} of {plan.plan.retries + 1}"
            say(
                f"{arm} repeat {repeat}: run failed ({cause}); {budget}: "
                + ("restarting the server and retrying" if retried else "going on without it")
            )
        except BaseException as exc:
            reason = f"plan failed: {type(exc).__name__}: {exc}"[:300]
            raise
        finally:
            if run is not None:
                servers.stop(run, reason=reason)


async def _sweep_levels(
    b: BenchSection,
    target: BenchTarget,
    identity: RunIdentity,
    *,
    concurrencies: list[int | None],
    **kw: Any,
) -> list[SweepPoint]:
    """``runners.bench.client.sweep``, one concurrency at a time with its own prompt count when
    ``b.prompts_per_concurrency`` is set (the first ``min(num_prompts, max(min_prompts,
    prompts_per_concurrency x c))`` prompts of the workload), else one sweep as it is. The
    client keeps off the CPUs the server pinned threads to (``runners.bench.placement``)."""
    from runners.bench.placement import keep_off_server_cores

    keep_off_server_cores(target.url)
    if not b.prompts_per_concurrency:
        return await sweep(target, identity, concurrencies=concurrencies, **kw)
    points: list[SweepPoint] = []
    for c in concurrencies:
        n = (
            b.num_prompts
            if c is None
            else min(b.num_prompts, max(b.min_prompts, b.prompts_per_concurrency * c))
        )
        w = target.workload
        level = replace(
            target,
            workload=replace(w, spec=replace(w.spec, num_prompts=n), prompts=list(w.prompts[:n])),
        )
        points += await sweep(level, identity, concurrencies=[c], **kw)
    return points


def _record_failed_run(
    store: LedgerStore,
    plan: Plan,
    identity: RunIdentity,
    loads: list[int | None],
    *,
    cause: str,
    attempt: int,
    retried: bool,
) -> BenchmarkCompleted:
    """Record the run that failed before measuring: ``benchmark_completed``, not valid, with its cause.

    ``identity``: the arm's runs of this repeat, on the server that failed (if it started); the
    run is recorded at the first of the ``loads`` left, with the plan's whole workload.
    """
    b = plan.bench
    then = "retried on a restarted server" if retried else "not retried: the retry budget is spent"
    spec = WorkloadSpec(
        b.input_len, b.output_len, b.num_prompts, b.seed, b.tokenizer, b.shared_prefix_len
    )
    failed = identity.at(loads[0] if loads else None, identity.repeat).with_workload(
        event_workload(
            spec,
            dataset="random",
            endpoint=b.endpoint,
            ignore_eos=b.ignore_eos,
            request_rate=identity.request_rate,
        )
    )
    not_measured = RunResult(
        [], 0.0, BenchMetrics(completed=0), False, [f"run failed before measuring: {cause}"]
    )
    event = benchmark_event(
        failed,
        not_measured,
        notes=f"attempt {attempt + 1} of {plan.plan.retries + 1} (plan retries = {plan.plan.retries}); {then}; "
        f"loads not measured: {', '.join(_load_text(x, identity.request_rate) for x in loads)}",
        actor=PLAN_ACTOR,
    )
    commands.record_benchmark(store, event)
    return event


def _load_text(concurrency: int | None, request_rate: float | None) -> str:
    return f"c={concurrency}" if concurrency is not None else f"rate={request_rate:g}/s"


def interruption(exc: KeyboardInterrupt) -> str:
    """What interrupted a run: a ``KeyboardInterrupt``'s message when it has one (the MCP
    server's cancellation says so), else Ctrl-C."""
    return str(exc) or "Ctrl-C"


def _record_interrupted(store: LedgerStore, plan: Plan, result: PlanResult, why: str) -> None:
    done = [f"{p.event.config_name} c={p.concurrency} rep {p.repeat}" for p in result.points]
    text = (
        f"plan {plan.source} interrupted ({why}) after {len(done)} completed run(s)"
        + (": " + ", ".join(done) if done else "")
        + "; no comparison recorded"
    )
    commands.add_note(
        store,
        NoteAdded(
            text=text,
            refs=[p.event.event_id for p in result.points],
            session_id=plan.plan.session,
            actor=PLAN_ACTOR,
            source=plan.source,
        ),
    )


def _comparison_event(
    plan: Plan,
    arm: str,
    load: int | None,
    cmp: Comparison,
    base_pts: list[SweepPoint],
    cand_pts: list[SweepPoint],
    host: Host | None,
) -> ComparisonCompleted:
    wl = base_pts[0].event.workload if base_pts else cand_pts[0].event.workload
    return ComparisonCompleted(
        baseline_config=plan.plan.baseline,
        config_name=arm,
        metric=cmp.metric,
        concurrency=load,
        request_rate=plan.plan.request_rate,
        dataset=wl.dataset,
        input_len=wl.input_len,
        output_len=wl.output_len,
        seed=wl.seed,
        better_direction=cmp.better_direction,
        baseline_runs=cmp.baseline_runs,
        runs=cmp.runs,
        baseline_mean=cmp.baseline_mean,
        mean=cmp.mean,
        change=cmp.change,
        ci_low=cmp.ci_low,
        ci_high=cmp.ci_high,
        noise_threshold=cmp.noise_threshold,
        noise_source=cmp.noise_source,
        verdict=cmp.verdict,
        runs_needed=cmp.runs_needed,
        benchmark_event_ids=[p.event.event_id for p in base_pts + cand_pts],
        notes=cmp.notes,
        baseline_cv=cmp.baseline_cv,
        cv=cmp.cv,
        session_id=plan.plan.session,
        actor=PLAN_ACTOR,
        host=host,
        source=plan.source,
    )


def compare_and_record(store: LedgerStore, plan: Plan, result: PlanResult) -> None:
    """Record one comparison per (candidate, load, metric) and the single-flag findings."""
    loads = sorted({p.concurrency for p in result.points}, key=lambda c: (c is None, c))
    by_arm: dict[tuple[str, int | None], list[SweepPoint]] = {}
    for p in result.points:
        by_arm.setdefault((p.event.config_name, p.concurrency), []).append(p)
    for spec in plan.candidates:
        throughput_verdicts: list[str] = []
        verdict_loads: list[int | None] = []
        evidence: list[UUID] = []
        for load in loads:
            base_pts = by_arm.get((plan.plan.baseline, load), [])
            cand_pts = by_arm.get((spec.config, load), [])
            if not base_pts and not cand_pts:
                continue
            invalid = [p for p in base_pts + cand_pts if not p.run.valid]
            reason = None
            if invalid:
                reason = "; ".join(
                    f"{p.event.config_name} rep {p.repeat}: {', '.join(p.run.notes)}"
                    for p in invalid[:3]
                )
            for metric in METRIC_RULES:
                values_a = [getattr(p.run.metrics, metric) for p in base_pts]
                values_b = [getattr(p.run.metrics, metric) for p in cand_pts]
                if all(v is None for v in values_a + values_b) and base_pts and cand_pts:
                    # Not measurable in any run (TPOT/ITL of a coarse stream): nothing to compare.
                    result.unmeasured.append(
                        f"{metric} at {_load_text(load, plan.plan.request_rate)}: "
                        "not measured in any run (see the runs' validity notes)"
                    )
                    continue
                cmp = compare(
                    metric,
                    values_a,
                    values_b,
                    threshold=plan.plan.threshold,
                    valid=not invalid,
                    invalid_reason=reason,
                )
                event = _comparison_event(
                    plan, spec.config, load, cmp, base_pts, cand_pts, result.host
                )
                commands.record_comparison(store, event)
                result.comparisons.append(event)
                if metric == FLAG_METRIC:
                    throughput_verdicts.append(cmp.verdict)
                    verdict_loads.append(load)
                    evidence.append(event.event_id)
        if spec.flag and throughput_verdicts:
            verdict = measured_flag_verdict(throughput_verdicts)
            host = result.host
            finding = FindingRecorded(
                kind="measured-change",
                basis="measured",
                flag=spec.flag,
                verdict=verdict,
                message=_finding_message(
                    spec.flag, throughput_verdicts, verdict_loads, plan, loads
                ),
                engine=host.engine if host else None,
                engine_version=host.engine_version if host else None,
                evidence=[Evidence(kind="event", ref=str(e)) for e in evidence],
                session_id=plan.plan.session,
                actor=PLAN_ACTOR,
                host=host,
                source=plan.source,
            )
            commands.record_finding(store, finding)
            result.findings.append(finding)


def _finding_message(
    flag: str,
    verdicts: Sequence[str],
    at: Sequence[int | None],
    plan: Plan,
    loads: Sequence[int | None],
) -> str:
    """``--flag: output_throughput improved at every load (1, 4) vs baseline, 3 interleaved runs
    per arm``, or each load's verdict where they differ."""
    if len(set(verdicts)) == 1:
        said = f"{verdicts[0]} at every load ({', '.join(str(x) for x in loads)})"
    else:
        said = ", ".join(
            f"{v} at {_load_text(x, plan.plan.request_rate)}"
            for v, x in zip(verdicts, at, strict=True)
        )
    return (
        f"--{flag}: {FLAG_METRIC} {said} vs {plan.plan.baseline}, "
        f"{plan.plan.repeats} interleaved runs per arm"
    )


#: Under the verdict table: what its ``tau`` column is.
TAU_FOOTNOTE = (
    verdict_words("--threshold, the plan file's threshold, else the metric's default")
    + "; runs: the runs per arm that would decide"
)


def verdict_table(result: PlanResult, metrics: Sequence[str] | None = None):
    """A rich Table of the comparisons, with the runs the plan could not make under it.

    Columns: config, concurrency, metric, baseline and candidate (the geometric mean of the
    runs, which the change compares, with the CV over the runs beside it), change % [95% CI]
    as ``value / baseline - 1`` (+ means the metric went up, as in ``benchmark_deltas``, the
    TUI and the export; the verdict says whether that is better), tau, runs per arm, verdict.
    The caption lists each missing run (arm, repeat, load) with its cause, and the metrics no
    run could measure (TPOT and ITL of a coarse stream).
    """
    from rich.table import Table

    lines = [
        f"missing: {f.config_name} rep {f.repeat} "
        f"{', '.join(_load_text(x, None) if x is not None else 'open loop' for x in f.loads)} "
        f"(failed {f.attempt + 1} time(s): {f.cause[:160]})"
        for f in result.missing
    ]
    lines += [f"not compared: {text}" for text in dict.fromkeys(result.unmeasured)]
    lines.append(TAU_FOOTNOTE)  # the column is unexplained otherwise
    caption = "\n".join(lines)
    table = Table(
        title="Plan verdicts (change = value / baseline - 1: + means the metric went up)",
        caption=caption,
        caption_justify="left",
    )
    for col in (
        "config",
        "concurrency",
        "metric",
        "baseline (CV)",
        "candidate (CV)",
        "change % [95% CI]",
        "tau",
        "runs",
        "verdict",
    ):
        table.add_column(col, justify="right" if col in ("concurrency", "tau", "runs") else "left")
    for c in result.comparisons:
        if metrics and c.metric not in metrics:
            continue
        load = str(c.concurrency) if c.concurrency is not None else f"{c.request_rate:g}/s"
        text = "-" if c.change is None else f"{100 * c.change:+.1f}%"
        if c.ci_low is not None and c.ci_high is not None:
            text += f" [{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}]"
        verdict = c.verdict + (f" (need ~{c.runs_needed} runs/arm)" if c.runs_needed else "")
        table.add_row(
            c.config_name,
            load,
            c.metric,
            _with_cv(c.baseline_mean, c.baseline_cv),
            _with_cv(c.mean, c.cv),
            text,
            f"{100 * c.noise_threshold:.1f}%",
            f"{c.baseline_runs}/{c.runs}",
            verdict,
        )
    return table


def _with_cv(value: float | None, cv: float | None) -> str:
    return _num(value) + ("" if cv is None else f" ({100 * cv:.0f}%)")


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:.0f}"
