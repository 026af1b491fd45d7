"""The runners' use cases both front ends call: ``run bench``'s built-in sweep, ``run plan``,
``run spec`` and ``run tune``, once.

``tuneledger run bench`` (``runners/cli/measure.py``) and the MCP ``run_bench`` tool
(``runners/mcp_tools/measure.py``) turn their input into one ``BenchRequest`` and call
``run_bench``; ``run plan``/``run_plan`` and ``run spec``/``run_spec`` one ``PlanRequest`` and
``load_plan`` + ``measure_plan`` (``load_spec`` + ``measure_spec``): the kept-open store, the
server runner, the refusal to resume beside a served run, the server stopped however the run
ends, a warmup failure as exit 13; ``run tune``/``run_tune`` one ``TuneRequest``
(``runners.moe.request``) and ``measure_tune``; ``run server start``/``start_server`` one
``ServerRequest`` and ``start_server``, then what follows the start: ``watch_server`` (the
CLI, in the foreground), ``stop_server`` and ``server_ended`` (the MCP server's pool). Neither
front end orchestrates
(``tests/app/test_one_layer.py`` checks it). Here, in order: the configuration measured by the one
config-name rule (``resolve_config_name``: the ledger knows which run serves the port; a
contradicting name is exit 3), the loads (``concurrencies``), the model the server answers to,
the workload, the run's identity with the command line that repeats it, and the sweep, each run
recorded as it ends. The ledger layer's use cases (propose, triage, decide, record) are
``ledger.app``: the ledger never imports the runners.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ledger.errors import InvalidInput, LedgerError

if TYPE_CHECKING:
    from ledger.store import LedgerStore
    from runners.moe.request import TuneRequest
    from runners.moe.tune import TuneReport
    from runners.plan import Plan, PlanResult
    from runners.server.runner import ServerRun, ServerRunner
    from runners.spec import SpecPlan


@dataclass(frozen=True)
class BenchRequest:
    """One ``run bench`` with the built-in client (the CLI's options, the tool's arguments)."""

    url: str
    endpoint: str = "chat"
    model: str | None = None
    input_len: int = 64
    output_len: int = 32
    num_prompts: int = 64
    concurrency: Sequence[int] = ()
    request_rate: float | None = None
    seed: int = 0
    warmup: int = 1
    repeats: int = 1
    config_name: str | None = None
    is_baseline: bool | None = None
    tokenizer: str | None = None
    server_run_id: str | None = None
    ignore_eos: bool = True
    candidate_id: str | None = None
    session_id: str | None = None
    shared_prefix_len: int = 0
    server_metrics: bool = False


@dataclass(frozen=True)
class Measured:
    """What to measure, resolved: the configuration, the server run, the loads."""

    config_name: str
    server_run_id: str | None
    concurrencies: list[int | None]


def resolve(store: LedgerStore, request: BenchRequest, say: Callable[[str], None]) -> Measured:
    """The configuration (the one rule, ``resolve_config_name``) and loads of ``request``;
    what is worth saying goes to ``say``.

    Raises:
        InvalidInput: a concurrency below 1, several with a request rate, a shared prefix not
            below the input, a configuration name the ledger contradicts (exit 3).
    """
    from runners.bench.metrics import prompts_warning
    from runners.bench.serving import resolve_config_name

    if any(c < 1 for c in request.concurrency):
        raise InvalidInput("concurrency: every concurrency must be >= 1")
    if request.shared_prefix_len >= request.input_len:
        raise InvalidInput(
            f"shared_prefix_len {request.shared_prefix_len} must be below input_len "
            f"{request.input_len}"
        )
    loads: list[int | None] = list(request.concurrency)
    if request.request_rate is not None:
        if len(loads) > 1:
            raise InvalidInput("with a request rate give at most one concurrency (a cap)")
        loads = [loads[0] if loads else None]
    else:
        loads = loads or [1]
        if warning := prompts_warning(request.num_prompts, loads):
            say(warning)
    config_name, server_run_id, said = resolve_config_name(
        store, request.url, request.config_name, request.server_run_id
    )
    if said:
        say(said)
    return Measured(config_name, server_run_id, loads)


def run_bench(
    store: LedgerStore,
    request: BenchRequest,
    measured: Measured,
    *,
    on_point: Callable[[Any], None],
    progress: bool = False,
) -> None:
    """The sweep of ``request`` as ``measured`` resolved it: each run recorded in ``store``
    (kept open here for the run of appends, closed however it ends) as it ends, and passed to
    ``on_point``.

    Raises:
        BenchFailed: the warm-up failed, the model list unreadable (``run bench``'s exit 13).
        KeyboardInterrupt: from ``on_point`` (Ctrl-C, a cancelled call): what ended is recorded.
    """
    from runners.bench.errors import BenchFailed

    kept = store.kept_open()  # a long-lived writer: one open for a run of appends
    try:
        kept.init()
        _sweep(kept, request, measured, on_point, progress)
    except RuntimeError as exc:  # WarmupFailed, the model list unreadable
        raise BenchFailed(str(exc)) from None
    finally:
        kept.close()


def _sweep(
    store: LedgerStore,
    request: BenchRequest,
    measured: Measured,
    on_point: Callable[[Any], None],
    progress: bool,
) -> None:
    from runners.bench.client import BenchTarget, RunIdentity, sweep
    from runners.bench.discovery import served_model
    from runners.bench.reproduce import reproducing_command
    from runners.bench.workload import WorkloadSpec, build_workload

    r = request
    workload = build_workload(
        WorkloadSpec(
            r.input_len, r.output_len, r.num_prompts, r.seed, r.tokenizer, r.shared_prefix_len
        )
    )
    model = r.model
    if model is None:
        model = "default" if r.endpoint == "generate" else served_model(r.url)
    target = BenchTarget(
        url=r.url,
        endpoint=r.endpoint,
        model=model,
        workload=workload,
        ignore_eos=r.ignore_eos,
        server_metrics=r.server_metrics,
    )
    concurrency_text = ",".join(str(c) for c in r.concurrency) or None
    source = reproducing_command(
        r.url, r.endpoint, model, r.input_len, r.output_len, r.num_prompts, concurrency_text,
        r.request_rate, r.seed, r.warmup, r.tokenizer, r.ignore_eos, measured.config_name,
    )  # fmt: skip
    baseline = measured.config_name == "baseline" if r.is_baseline is None else r.is_baseline
    identity = RunIdentity(
        config_name=measured.config_name,
        request_rate=r.request_rate,
        is_baseline=baseline,
        candidate_id=r.candidate_id,
        session_id=r.session_id,
        server_run_id=measured.server_run_id,
        source=source,
    )
    asyncio.run(
        sweep(
            target,
            identity,
            concurrencies=measured.concurrencies,
            repeats=range(r.repeats),
            warmup_requests=r.warmup,
            store=store,
            progress=progress,
            on_point=on_point,
        )
    )


# --- run plan, run spec --------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRequest:
    """One ``run plan`` or ``run spec`` (the CLI's file and options, the tool's arguments).

    ``session_id``: the session when the file names none (the CLI's ``--session``, the MCP
    server's); ``threshold_pct``: ``run plan --threshold``; ``resume``: measure only what the
    session does not hold yet, never beside a server of the session a live owner serves.
    """

    path: Path
    session_id: str | None = None
    threshold_pct: float | None = None
    resume: bool = False


def load_plan(request: PlanRequest, say: Callable[[str], None]) -> Plan:
    """The plan of ``request``, with its session and threshold; a workload too short for its
    loads is said (``say``), not refused.

    Raises:
        InvalidInput: the plan file (``runners.plan.load_plan``).
    """
    from runners.bench.metrics import prompts_warning
    from runners.plan import load_plan as read_plan

    plan = read_plan(request.path)
    if plan.plan.request_rate is None and (
        warning := prompts_warning(plan.bench.num_prompts, plan.plan.concurrency)
    ):
        say(f"{request.path}: [bench] num_prompts: {warning}")
    if plan.plan.session is None and request.session_id:
        plan.plan.session = request.session_id
    if request.threshold_pct is not None:
        plan.plan.threshold = request.threshold_pct / 100
    return plan


def load_spec(request: PlanRequest) -> SpecPlan:
    """The speculative-decoding trials of ``request``, with their session.

    Raises:
        InvalidInput: the spec file (``runners.spec.load_spec``).
    """
    from runners.spec import load_spec as read_spec

    spec = read_spec(request.path)
    if spec.plan.plan.session is None and request.session_id:
        spec.plan.plan.session = request.session_id
    return spec


def measure_plan(
    store: LedgerStore,
    plan: Plan,
    request: PlanRequest,
    *,
    say: Callable[[str], None],
    progress: bool = False,
    after_sweep: Callable[[str, Any, int], None] | None = None,
    server_say: Callable[[str], None] | None = None,
) -> PlanResult:
    """``plan`` run: arms restarted and benchmarked interleaved, compared, all recorded.

    ``say``: the plan's lines (a front end may raise ``KeyboardInterrupt`` from it: a safe
    point); ``server_say``: the server runner's (default ``say``), which must not raise: it
    speaks while it stops a server too.

    Raises:
        PortInUse: ``resume`` beside a server of the session a live owner still serves (10).
        ServerStartFailed: a server never became healthy past the retries (exit 12).
        BenchFailed: every warmup failed past the retries (exit 13).
        KeyboardInterrupt: Ctrl-C, SIGTERM, a cancelled call: the server stopped, what
            completed recorded.
    """
    from runners.plan import run_plan

    def run(kept: LedgerStore, runner: ServerRunner) -> PlanResult:
        return run_plan(
            plan,
            kept,
            runner,
            say=say,
            progress=progress,
            after_sweep=after_sweep,
            resume=request.resume,
        )

    return _with_servers(store, plan, request, "plan", server_say or say, run)


def measure_spec(
    store: LedgerStore,
    spec: SpecPlan,
    request: PlanRequest,
    *,
    say: Callable[[str], None],
    progress: bool = False,
    server_say: Callable[[str], None] | None = None,
) -> tuple[PlanResult, list[Any]]:
    """``spec``'s trials run against the baseline, as ``measure_plan`` runs a plan (the same
    errors, the same ``say`` and ``server_say``); the comparisons and one
    ``spec_decoding_trial_completed`` per trial."""
    from runners.spec import run_spec

    def run(kept: LedgerStore, runner: ServerRunner) -> tuple[PlanResult, list[Any]]:
        return run_spec(spec, kept, runner, say=say, progress=progress, resume=request.resume)

    return _with_servers(store, spec.plan, request, "spec trials", server_say or say, run)


T = TypeVar("T")


def _with_servers(
    store: LedgerStore,
    plan: Plan,
    request: PlanRequest,
    what: str,
    say: Callable[[str], None],
    run: Callable[[LedgerStore, ServerRunner], T],
) -> T:
    """``run(kept-open store, server runner)``, the server it left running stopped however it
    ends and the store closed; a warmup failure is ``BenchFailed`` (exit 13)."""
    from runners.bench.errors import BenchFailed
    from runners.server.runner import ServerRunner

    kept = store.kept_open()  # a long-lived writer: one open for a run of appends
    try:
        kept.init()
        runner = ServerRunner(
            kept, session_id=plan.plan.session, say=say, sigint_wait_s=plan.plan.stop_wait_s
        )
        try:
            if request.resume:
                _refuse_a_second_server(kept, plan.plan.session, what)
            return run(kept, runner)
        except KeyboardInterrupt:
            runner.close(reason=f"{what} interrupted")
            raise
        except LedgerError:
            raise  # ServerStartFailed, PortInUse...: their own exit codes
        except RuntimeError as exc:  # every warmup failed past the retries
            raise BenchFailed(str(exc)) from None
        finally:
            runner.close(reason=f"{what} ended")
    finally:
        kept.close()


def _refuse_a_second_server(store: LedgerStore, session_id: str | None, what: str) -> None:
    """``resume`` while a server of this session still runs for a live owner (the run being
    resumed was not dead, or another one runs): exit 10 before anything starts, never a second
    server beside it (the runner recorded and stopped the orphans already)."""
    import socket

    from runners.server.runs import PortInUse
    from runners.server.supervise import served

    busy = served(store, socket.gethostname(), session_id)
    if busy:
        run = busy[0]
        raise PortInUse(
            f"{what} resume: server run {run['run_id']} of session {session_id!r} is still "
            f"served (pid {run['pid']}, port {run['port']}) by a live owner: stop it (or the "
            "plan running it) first; nothing was started"
        )


# --- run tune ----------------------------------------------------------------------------------


def measure_tune(
    store: LedgerStore,
    request: TuneRequest,
    *,
    say: Callable[[str], None],
    prepare_say: Callable[[str], None] | None = None,
    progress: bool = False,
) -> TuneReport:
    """``request`` tuned on this GPU (``runners.moe.request.prepare``: the inputs checked
    before the GPU is touched, the shape, seeds and measurer; ``runners.moe.tune.run_tune``),
    every measured config recorded in ``store`` (kept open for the run, closed however it
    ends), the measurer closed. ``say``: the tune's lines (a front end may raise
    ``KeyboardInterrupt`` from it); ``prepare_say``: the preparation's (default ``say``).

    Raises:
        InvalidInput: a shape, a seed file, a batch size (exit 3).
        NotInstalled: no GPU, no Triton (exit 11).
        KeyboardInterrupt: Ctrl-C, a cancelled call: what was measured is recorded.
    """
    from runners.moe.request import prepare
    from runners.moe.tune import StoreSink, run_tune

    kept = store.kept_open()  # a long-lived writer: one open for a run of appends
    try:
        spec, measurer = prepare(request, kept.path, say=prepare_say or say)
        try:
            kept.init()
            return run_tune(spec, measurer, StoreSink(kept), say=say, progress=progress)
        finally:
            measurer.close()
    finally:
        kept.close()


# --- run server start / start_server ---------------------------------------------------------


@dataclass(frozen=True)
class ServerRequest:
    """One server start (``run server start CONFIG --configs F``, the ``start_server`` tool)."""

    configs: Path
    config: str
    port: int | None = None
    health_timeout_s: float | None = None
    session_id: str | None = None


@dataclass
class Served:
    """A started server and the runner that records what follows its start: what a front end
    keeps of a ``start_server`` and hands back to ``watch_server``, ``stop_server`` and
    ``server_ended`` (neither front end calls the runner itself: ``tests/app/test_one_layer.py``).
    """

    runner: ServerRunner
    run: ServerRun

    @property
    def run_id(self) -> str:
        return self.run.run_id


def start_server(
    store: LedgerStore,
    request: ServerRequest,
    say: Callable[[str], None],
    *,
    hold: bool = False,
    given_up: Callable[[], bool] | None = None,
) -> Served:
    """``request``'s configuration started and healthy, recorded in ``store`` (the runner that
    started it keeps recording its end: ``watch_server``, ``stop_server``, ``server_ended``).
    ``hold``: the caller watches the server in the foreground until it ends (the CLI): the
    store is kept open for that run of appends; else each append opens it (the MCP server
    holds no ledger between calls), and what the runner says after the start (a stop, a
    finding at exit) goes nowhere: it belongs to no call. ``given_up``: asked once the server
    is ready; true (the caller gave up while it started: an MCP call cancelled) stops it and
    records the stop ("start_server cancelled") before returning.

    Raises:
        ConfigError, PortInUse, MissingEngine, ServerStartFailed: their exit codes (3, 10,
            11, 12).
        KeyboardInterrupt: Ctrl-C while it started: the server stopped and recorded first.
    """
    from runners.server.configs import load_config
    from runners.server.runner import ServerRunner

    config = load_config(request.configs, request.config)
    if hold:
        store = store.kept_open()  # closed when the process ends
        store.init()
    runner = ServerRunner(store, session_id=request.session_id, say=say)
    try:
        served = Served(
            runner,
            runner.start(config, port=request.port, health_timeout_s=request.health_timeout_s),
        )
    except KeyboardInterrupt:
        try:
            runner.close(reason="interrupted (Ctrl-C)")  # just after ready: not ended yet
        except KeyboardInterrupt:
            pass  # a second Ctrl-C only hurried the stop on; it is recorded
        raise
    if given_up is not None and given_up():
        stop_server(served, "start_server cancelled")
    elif not hold:
        runner.say = lambda _line: None
    return served


@dataclass(frozen=True)
class ServerEnd:
    """How a watched server ended: stopped by an interrupt (Ctrl-C, or the SIGTERM a supervisor
    sends, raised as one), or by itself (``event``: its recorded ``server_stopped`` or
    ``server_failed``; ``failed``: the latter's message)."""

    interrupted: bool
    event: Any = None

    @property
    def failed(self) -> str | None:
        if self.event is None or self.event.type != "server_failed":
            return None
        return str(getattr(self.event, "message", "") or "")


def watch_server(served: Served, on_line: Callable[[str], None] | None = None) -> ServerEnd:
    """Keep ``served`` running in the foreground (its log lines to ``on_line``, its findings
    recorded) until it ends by itself (its end recorded) or an interrupt comes: then it is
    stopped and the stop recorded ("interrupted (Ctrl-C)"); a second interrupt only hurries
    the stop on (SIGTERM, SIGKILL)."""
    try:
        return ServerEnd(False, served.runner.watch(served.run, on_line=on_line))
    except KeyboardInterrupt:
        try:
            served.runner.stop(served.run, reason="interrupted (Ctrl-C)")
        except KeyboardInterrupt:
            pass  # the stop finished and is recorded
        return ServerEnd(True)


def stop_server(served: Served, reason: str) -> Any:
    """Stop ``served`` and record ``server_stopped`` with ``reason``; None when its end was
    recorded already (``ServerRunner.stop``)."""
    return served.runner.stop(served.run, reason=reason)


def server_ended(served: Served) -> Any:
    """``served``'s end, recorded now when it exited by itself (``server_failed`` with the crash
    from its log, or ``server_stopped``); None while it runs."""
    return served.runner.exited(served.run)
