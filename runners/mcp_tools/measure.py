"""``run_bench``, ``run_plan``, ``run_spec``: the measuring tools, with progress and verdicts.

Each does what its ``tuneledger run`` command does, through the same library calls
(``runners.bench.client.sweep``, ``runners.plan.run_plan``, ``runners.spec.run_spec``, the
server runner), and returns as structured output what the command prints: the runs with
their metrics and validity; the plan's verdict table as rows (change = value / baseline - 1,
its 95% CI, tau, runs per arm, verdict), with the findings and what is missing. Progress
lines (a server starting, a run done) become MCP progress notifications. The ledger is kept
open for the call's appends (a plan appends hundreds) and closed when it returns. A cancelled
call stops at its next run or step as on Ctrl-C: the running server is stopped and what
completed is recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ledger.errors import InvalidInput
from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models
from runners.bench.errors import BenchFailed
from runners.results_json import event_run_json, plan_json, run_json, spec_json

# --- run_bench -----------------------------------------------------------------------------


class BenchArgs(Arguments):
    url: str = Field(description="The server's base URL, e.g. a start_server's base_url.")
    endpoint: Literal["chat", "completions", "generate"] = Field(
        "chat", description="OpenAI chat or completions, or SGLang's native /generate."
    )
    model: str | None = Field(
        None, description="Sent in requests (default: the one model the server lists)."
    )
    input_len: int = Field(64, ge=1, description="Prompt length, tokens.")
    output_len: int = Field(32, ge=1, description="Output length asked, tokens.")
    num_prompts: int = Field(64, ge=1, description="Requests per run.")
    concurrency: list[int] = Field(
        default_factory=list,
        description="Closed-loop concurrencies (default [1]; with request_rate: at most one, a cap).",
    )
    request_rate: float | None = Field(None, gt=0, description="Open loop: Poisson req/s.")
    seed: int = Field(0, description="Seed of the prompts drawn (the same seed: the same prompts).")
    warmup: int = Field(1, ge=0, description="Uncounted requests before each run.")
    repeats: int = Field(1, ge=1, description="Runs per concurrency.")
    config_name: str | None = Field(
        None,
        description="The server configuration measured. Default: the configuration of the "
        "server run the ledger sees serving the URL's port, else 'baseline' (a name that "
        "contradicts the serving run is refused, exit 3).",
    )
    is_baseline: bool | None = Field(
        None, description="Mark the runs as the baseline (default: config_name == 'baseline')."
    )
    tokenizer: str | None = Field(None, description="A local tokenizer: exact prompt lengths.")
    server_run_id: str | None = Field(None, description="The server run measured.")
    ignore_eos: bool = Field(True, description="Ask for exactly output_len tokens per request.")
    candidate_id: str | None = Field(None, description="The board candidate the runs are for.")
    session_id: str | None = Field(None, description="Default: the server's --session.")
    tool: Literal["builtin", "guidellm", "aiperf", "sglang"] = Field(
        "builtin",
        description="Measure with another tool, run as a subprocess, and import its result "
        "(exit 11 when it is not installed, 13 when it fails).",
    )
    tool_path: str | None = Field(
        None, description="The tool's program (for sglang: its Python). Default: PATH."
    )


class RunsOut(BaseModel):
    runs: list[dict[str, Any]] = Field(
        description="One per run: event_id, concurrency, repeat, valid and notes, metrics."
    )


def _request(args: BenchArgs, call: Call) -> Any:
    """The tool's arguments as the use case's ``BenchRequest`` (the CLI builds the same)."""
    from runners.usecases import BenchRequest

    fields = args.model_dump(exclude={"tool", "tool_path", "session_id"})
    return BenchRequest(**fields, session_id=args.session_id or call.seat.session_id)


def _bench(args: BenchArgs, call: Call) -> dict[str, Any]:
    from runners.usecases import resolve, run_bench

    request = _request(args, call)
    store = call.seat.store()
    store.init()
    try:
        measured = resolve(store, request, call.progress)
    except InvalidInput as exc:
        raise InvalidInput(f"run_bench: {exc}") from None
    if args.tool != "builtin":
        resolved = args.model_copy(
            update={"config_name": measured.config_name, "server_run_id": measured.server_run_id}
        )
        return _bench_with_tool(resolved, call, measured.concurrencies)
    done: list[Any] = []
    total = len(measured.concurrencies) * args.repeats

    def on_point(point: Any) -> None:
        done.append(point)
        call.progress(
            f"run {len(done)}/{total}: c={point.concurrency} repeat {point.repeat}",
            len(done),
            total,
        )
        call.check_cancelled()

    try:
        run_bench(call.seat.store(), request, measured, on_point=on_point)
    except BenchFailed as exc:  # the warm-up failed, the model list unreadable: exit 13
        raise BenchFailed(f"run_bench: {exc}") from None
    return {"runs": [run_json(p) for p in done]}


def _config(args: BenchArgs) -> str:
    """The configuration measured, once ``resolve`` named it."""
    if args.config_name is None:
        raise AssertionError("run_bench: config_name is resolved before the runs")
    return args.config_name


def _bench_with_tool(
    args: BenchArgs, call: Call, concurrencies: list[int | None]
) -> dict[str, Any]:
    """``run bench --tool X`` (``runners.bench.external``): the tool measures, its result is imported."""
    from runners.bench.discovery import served_model
    from runners.bench.external import ToolWorkload, find_tool, run_tool_sweep

    prefix = find_tool(args.tool, args.tool_path)  # a missing tool is exit 11 before anything runs
    model = args.model
    try:
        if model is None and args.endpoint != "generate":
            model = served_model(args.url)  # the tool needs the name the server answers to
    except RuntimeError as exc:
        raise BenchFailed(f"run_bench: {exc}") from None
    workload = ToolWorkload(
        url=args.url,
        endpoint=args.endpoint,
        model=model or "default",
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        seed=args.seed,
        warmup=args.warmup,
        tokenizer=args.tokenizer,
        ignore_eos=args.ignore_eos,
    )
    store = call.seat.store().kept_open()  # a run of appends; closed below
    try:
        store.init()
        events = run_tool_sweep(
            args.tool,
            prefix,
            workload,
            store=store,
            concurrencies=concurrencies,
            request_rate=args.request_rate,
            repeats=args.repeats,
            config_name=_config(args),
            is_baseline=(args.config_name == "baseline")
            if args.is_baseline is None
            else args.is_baseline,
            server_run_id=args.server_run_id,
            session_id=args.session_id or call.seat.session_id,
            actor=call.writer.actor,
            say=lambda line: call.progress(line),
            candidate_id=args.candidate_id,
        )
    finally:
        store.close()
    return {"runs": [event_run_json(e) for e in events]}


# --- run_plan, run_spec ------------------------------------------------------------------------


class PlanArgs(Arguments):
    plan_file: str = Field(
        description="The plan TOML (format: examples/plan.toml), relative to "
        "the MCP server's working directory."
    )
    all_metrics: bool = Field(
        False, description="Every compared metric in verdicts (default: the headline ones)."
    )
    session_id: str | None = Field(
        None, description="The session when the plan names none (default: the server's --session)."
    )


class PlanOut(BaseModel):
    session_id: str | None
    verdicts: list[dict[str, Any]] = Field(
        description="The verdict table: per candidate config, load and metric: baseline_mean, "
        "mean (geometric means), change_pct = value / baseline - 1 with its 95% CI, tau_pct, "
        "runs per arm, verdict (runs_needed when inconclusive), the comparison's event_id."
    )
    findings: list[dict[str, Any]] = Field(description="Measured flag verdicts recorded.")
    missing: list[dict[str, Any]] = Field(description="Runs the plan could not make, and why.")
    not_compared: list[str] = Field(description="Metrics no run measured.")
    runs: int = Field(description="Benchmark runs recorded.")


def _say(call: Call, done: list[int], total: int | None) -> Any:
    """A plan's ``say``: each line a progress notification (``done[0]`` arms run of ``total``),
    and a point where a cancelled call stops."""

    def say(line: str) -> None:
        call.progress(line, done[0], total)
        call.check_cancelled()

    return say


def _plan(args: PlanArgs, call: Call) -> dict[str, Any]:
    from runners.usecases import PlanRequest, load_plan, measure_plan

    request = PlanRequest(Path(args.plan_file), args.session_id or call.seat.session_id)
    plan = load_plan(request, lambda line: call.progress(line))
    done = [0]  # arm sweeps finished (one server start and its benchmarks each)

    def after_sweep(_arm: str, _run: Any, _repeat: int) -> None:
        done[0] += 1

    say = _say(call, done, plan.plan.repeats * len(plan.arms))
    result = measure_plan(
        call.seat.store(),
        plan,
        request,
        say=say,
        after_sweep=after_sweep,
        server_say=lambda line: call.progress(line),  # never raises: it speaks while stopping
    )
    return plan_json(result, plan.plan.session, args.all_metrics)


class SpecArgs(Arguments):
    spec_file: str = Field(
        description="The spec TOML (format: runners/spec.py, examples/h200-spec.toml)."
    )
    session_id: str | None = Field(
        None, description="The session when the file names none (default: the server's --session)."
    )


class SpecOut(PlanOut):
    trials: list[dict[str, Any]] = Field(
        description="One per trial: accept length and its source, throughput change, verdict."
    )


def _spec(args: SpecArgs, call: Call) -> dict[str, Any]:
    from runners.usecases import PlanRequest, load_spec, measure_spec

    request = PlanRequest(Path(args.spec_file), args.session_id or call.seat.session_id)
    spec = load_spec(request)
    result, trials = measure_spec(
        call.seat.store(),
        spec,
        request,
        say=_say(call, [0], None),
        server_say=lambda line: call.progress(line),
    )
    return spec_json(result, trials, spec.plan.plan.session)


def add_measure_tools(toolbox: Toolbox) -> None:
    toolbox.add(
        tool_from_models(
            "run_bench",
            "Benchmark a running server as `tuneledger run bench`: closed loop per concurrency (or "
            "open loop), warmup, repeats; TTFT, TPOT, ITL, E2E and throughputs as sglang's "
            "bench_serving defines them; a validity gate per run. One benchmark_completed per "
            "run (with its samples); returns the runs. Exit 13 when every warmup request fails.",
            BenchArgs,
            RunsOut,
            _bench,
            long_running=True,
        )
    )
    toolbox.add(
        tool_from_models(
            "run_plan",
            "Run a plan file as `tuneledger run plan`: the baseline and each candidate "
            "configuration restarted and benchmarked interleaved (A B A B) `repeats` times, then "
            "compared with the statistical rule (Welch CI of the log ratio against a noise "
            "threshold). Records everything (benchmark_deltas and flag_verdicts show it); returns "
            "the verdict table as rows, the measured flag findings and what is missing. Takes "
            "minutes: progress notifications say which run it is on.",
            PlanArgs,
            PlanOut,
            _plan,
            long_running=True,
        )
    )
    toolbox.add(
        tool_from_models(
            "run_spec",
            "Run speculative-decoding trials as `tuneledger run spec`: each trial a restart and "
            "a benchmark against the no-speculation baseline, interleaved and repeated; the accept "
            "length read from the server. Returns the trials and the verdict table.",
            SpecArgs,
            SpecOut,
            _spec,
            long_running=True,
        )
    )
