"""``tuneledger run bench`` and ``tuneledger run plan``: the measuring commands.

``runners.cli.group`` adds ``bench_command`` and ``plan_command`` to its ``run`` group. Both
write to the ledger of the global ``--ledger`` (events: ``benchmark_completed`` per run with
its per-request samples; the plan adds server, comparison, finding and note events).
Progress goes to standard error, results to standard output. Exit codes: the ledger's
(``ledger.errors``), 12 a server failed to start, 13 the benchmark's warmup failed entirely
(server down or wrong arguments), 130 interrupted (what completed is recorded).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.context import Context, pass_ctx
from ledger.cli.json_output import json_option, print_json
from runners.bench.errors import BenchFailed


def _concurrencies(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        values = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise click.BadParameter(
            f"want comma-separated integers like 1,4,16,64, got {text!r}"
        ) from None
    if any(v < 1 for v in values):
        raise click.BadParameter("concurrency must be >= 1")
    return values


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _identifier(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An identifier option (recorded as given): refused before anything runs when it holds a
    secret, as the event would be refused after the measurement."""
    from schemas.secrets import holds_secret

    if value and holds_secret(value):
        raise click.BadParameter(
            "holds a secret (a token or a password) and would be recorded in clear: name it otherwise",
            ctx=ctx,
            param=param,
        )
    return value


@click.command("bench")
@click.option("--url", required=True, help="Server base URL, e.g. http://127.0.0.1:30000.")
@click.option(
    "--endpoint",
    type=click.Choice(["chat", "completions", "generate"]),
    default="chat",
    show_default=True,
    help="/v1/chat/completions, /v1/completions or SGLang's native /generate.",
)
@click.option(
    "--model",
    default=None,
    help="Model name sent in OpenAI requests (default: the one model the server lists at /v1/models).",
)
@click.option(
    "--input-len",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Prompt length, tokens.",
)
@click.option(
    "--output-len",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Output length asked, tokens.",
)
@click.option(
    "--num-prompts",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Requests per run.",
)
@click.option(
    "--concurrency",
    "concurrency_text",
    default=None,
    help="Closed-loop concurrencies, comma-separated (e.g. 1,4,16,64). Default 1 unless --request-rate.",
)
@click.option(
    "--request-rate",
    type=click.FloatRange(min=0, min_open=True),
    help="Open loop: Poisson arrivals at this many requests/s (--concurrency then caps in-flight requests).",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of prompts and arrivals."
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Uncounted requests before each run.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs per concurrency.",
)
@click.option(
    "--config-name",
    default=None,
    callback=_identifier,
    help="Name of the server configuration measured (default: the configuration the ledger's "
    "server run on the URL's port serves, else 'baseline'; one that contradicts the ledger is refused).",
)
@click.option(
    "--baseline/--no-baseline",
    "is_baseline",
    default=None,
    help="Mark the runs as the baseline (default: when --config-name is 'baseline').",
)
@click.option(
    "--tokenizer",
    # made absolute against the caller's cwd: a tool runs in the artifacts folder, where a
    # relative path would not exist (and a tool would read it as a hub repo id)
    type=click.Path(exists=True, resolve_path=True),
    help="Local tokenizer (tokenizer.json or folder): exact prompt lengths.",
)
@click.option(
    "--server-run-id",
    callback=_identifier,
    help="The server run measured (links the runs to server_runs).",
)
@click.option(
    "--ignore-eos/--no-ignore-eos",
    default=True,
    show_default=True,
    help="Ask for exactly --output-len tokens (auto-disabled when the server rejects the field).",
)
@click.option(
    "--candidate",
    "candidate_id",
    metavar="ID",
    callback=_identifier,
    help="The board's candidate these runs are for (e.g. flag:enable-foo): the board links them to it.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar on standard error.")
@click.option(
    "--tool",
    type=click.Choice(["builtin", "guidellm", "aiperf", "sglang", "vllm"]),
    default="builtin",
    show_default=True,
    help="Measure with another tool, run as a subprocess; its result is imported.",
)
@click.option(
    "--tool-path",
    help="The tool's program (guidellm, aiperf; for sglang and vllm its Python). Default: PATH.",
)
@click.option(
    "--shared-prefix-len",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Tokens at the start of every prompt that all prompts share (prefix caching's case).",
)
@click.option(
    "--server-metrics/--no-server-metrics",
    default=False,
    show_default=True,
    help="Scrape the server's Prometheus /metrics around each run into the run (vLLM).",
)
@json_option
@pass_ctx
def bench_command(
    ctx: Context,
    url: str,
    endpoint: str,
    model: str | None,
    input_len: int,
    output_len: int,
    num_prompts: int,
    concurrency_text: str | None,
    request_rate: float | None,
    seed: int,
    warmup: int,
    repeats: int,
    config_name: str | None,
    is_baseline: bool | None,
    tokenizer: str | None,
    server_run_id: str | None,
    ignore_eos: bool,
    candidate_id: str | None,
    no_progress: bool,
    tool: str,
    tool_path: str | None,
    shared_prefix_len: int,
    server_metrics: bool,
    as_json: bool,
) -> None:
    """Benchmark a running server; record one benchmark_completed per concurrency and repeat.

    Metrics are sglang bench_serving's (TTFT, TPOT, ITL, E2E in ms; throughputs in tok/s),
    each run passes a validity gate (no failed request, achieved concurrency >= 0.9 c,
    output lengths as asked) recorded with the run. With --tool guidellm|aiperf|sglang
    that tool measures instead, with the same workload options, and its numbers are
    imported (exit 11 when it is not installed, 13 when it fails). --tool vllm runs
    `vllm bench serve` of the Python given by --tool-path (the vLLM install's).
    --json: one object {"runs": [...]} once all are recorded (each run's line on stderr).
    """
    from runners.usecases import BenchRequest, resolve

    # one request, one rule for the configuration measured (``runners.usecases``, as the MCP's)
    request = BenchRequest(
        url=url,
        endpoint=endpoint,
        model=model,
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        concurrency=_concurrencies(concurrency_text),
        request_rate=request_rate,
        seed=seed,
        warmup=warmup,
        repeats=repeats,
        config_name=config_name,
        is_baseline=is_baseline,
        tokenizer=tokenizer,
        server_run_id=server_run_id,
        ignore_eos=ignore_eos,
        candidate_id=candidate_id,
        session_id=ctx.session,
        shared_prefix_len=shared_prefix_len,
        server_metrics=server_metrics,
    )
    measured = resolve(
        ctx.store(), request, lambda line: click.echo(f"tuneledger: {line}", err=True)
    )
    from runners.bench.placement import keep_off_server_cores

    # ours and a --tool alike (the tool's process inherits it): off the server's pinned cores
    keep_off_server_cores(url, lambda line: click.echo(f"tuneledger: {line}", err=True))
    if tool != "builtin":
        # every option reaches the tool or is refused: these are the built-in client's only
        for given, option in (
            (shared_prefix_len, "--shared-prefix-len"),
            (server_metrics, "--server-metrics"),
        ):
            if given:
                raise click.BadParameter(
                    f"{option} is for the built-in client only (--tool {tool})"
                )
        from runners.bench.external import find_tool

        prefix = find_tool(tool, tool_path)  # a missing tool exits 11 before anything is asked
        if model is None and endpoint != "generate":
            model = _served_model_or_exit(url)  # the tool needs the name the server answers to
        _bench_with_tool(
            ctx,
            tool,
            prefix,
            measured.concurrencies,
            request_rate,
            repeats,
            measured.config_name,
            is_baseline,
            measured.server_run_id,
            candidate_id,
            url=url,
            endpoint=endpoint,
            model=model or "default",
            input_len=input_len,
            output_len=output_len,
            num_prompts=num_prompts,
            seed=seed,
            warmup=warmup,
            tokenizer=tokenizer,
            ignore_eos=ignore_eos,
            as_json=as_json,
        )
        return
    _bench_builtin(ctx, request, measured, no_progress=no_progress, as_json=as_json)


def _bench_builtin(
    ctx: Context, request: Any, measured: Any, *, no_progress: bool, as_json: bool
) -> None:
    """``run bench`` with the built-in client (``runners.usecases.run_bench``), each run printed
    as it is recorded; Ctrl-C exits 130, a failed warm-up 13."""
    from runners.bench.client import format_point
    from runners.usecases import run_bench

    signal.signal(signal.SIGTERM, _raise_interrupt)
    done: list[Any] = []

    def on_point(point: Any) -> None:
        done.append(point)
        click.echo(format_point(point), err=as_json)  # with --json: progress, on stderr

    try:
        run_bench(ctx.store(), request, measured, on_point=on_point, progress=not no_progress)
    except KeyboardInterrupt:
        click.echo(f"tuneledger: interrupted after {len(done)} recorded run(s)", err=True)
        sys.exit(130)
    if as_json:
        from runners.results_json import run_json

        print_json({"runs": [run_json(p) for p in done]})


def _served_model_or_exit(url: str) -> str:
    """The model name the server at ``url`` answers to; exit 13 (the warm-up failed) when it
    cannot say."""
    from runners.bench.discovery import served_model

    try:
        return served_model(url)
    except RuntimeError as exc:
        raise BenchFailed(str(exc)) from None


def _bench_with_tool(
    ctx: Context,
    tool: str,
    prefix: list[str],
    concurrencies: list[int | None],
    request_rate: float | None,
    repeats: int,
    config_name: str,
    is_baseline: bool | None,
    server_run_id: str | None,
    candidate_id: str | None,
    as_json: bool = False,
    **workload: Any,
) -> None:
    """``run bench --tool X``: see ``runners/bench/external.py``."""
    from runners.bench.external import ToolWorkload, run_tool_sweep

    store = ctx.store().kept_open()  # a long-lived writer: one open for a run of appends
    store.init()
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    events = run_tool_sweep(
        tool,
        prefix,
        ToolWorkload(**workload),
        store=store,
        concurrencies=concurrencies,
        request_rate=request_rate,
        repeats=repeats,
        config_name=config_name,
        is_baseline=(config_name == "baseline") if is_baseline is None else is_baseline,
        server_run_id=server_run_id,
        session_id=ctx.session,
        actor=ctx.actor,
        say=say,
        candidate_id=candidate_id,
    )
    if as_json:
        from runners.results_json import event_run_json

        print_json({"runs": [event_run_json(e) for e in events]})
        return
    for event in events:
        m = event.metrics
        click.echo(
            f"{tool} c={event.concurrency} repeat={event.repeat}: {m.completed} ok, {m.failed or 0} failed, "
            f"output {m.output_throughput or 0:.1f} tok/s, median TTFT {m.median_ttft_ms or 0:.1f} ms "
            f"(event {event.event_id})"
        )


@click.command("plan")
@click.argument("plan_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--all-metrics",
    is_flag=True,
    help="Show every compared metric in the verdict table (default: the headline ones: output throughput, median and p99 TTFT and TPOT).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar on standard error.")
@click.option(
    "--resume",
    is_flag=True,
    help="Measure only the runs this plan's session does not hold yet (after a kill or Ctrl-C); compare all.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the arms, the runs in order and a time estimate from the ledger's earlier runs (where it has none: the model's size and the workload, said so); run nothing.",
)
@click.option(
    "--threshold",
    "threshold_pct",
    type=click.FloatRange(0, 100, min_open=True, max_open=True),
    help="The practical threshold in percent: the smallest change the comparisons call one, every metric (default: [plan] threshold, else 5%, 10% for p99; docs/comparison.md).",
)
@json_option
@pass_ctx
def plan_command(
    ctx: Context,
    plan_file: Path,
    all_metrics: bool,
    no_progress: bool,
    resume: bool,
    dry_run: bool,
    threshold_pct: float | None,
    as_json: bool,
) -> None:
    """Run PLAN_FILE: baseline and candidates restarted and benchmarked interleaved, then compared.

    Prints the verdict table; everything is recorded (benchmark_deltas shows the verdicts).
    Ctrl-C stops the running server and records a note of the completed runs (exit 130);
    --resume then measures only what is missing. --dry-run records nothing.
    --json: one object, {"session_id", "verdicts": [...], "findings", "missing",
    "not_compared", "runs"} (with --dry-run: the starts and the estimate).
    """
    from rich.console import Console

    from runners.plan import verdict_table
    from runners.usecases import PlanRequest, load_plan, measure_plan

    say = lambda line: click.echo(line, err=True)  # noqa: E731
    request = PlanRequest(plan_file, ctx.session, threshold_pct, resume)
    plan = load_plan(request, lambda line: say(f"tuneledger: {line}"))
    if dry_run:
        _dry_run(ctx, plan, resume, as_json)
        return
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        result = measure_plan(ctx.store(), plan, request, say=say, progress=not no_progress)
    except KeyboardInterrupt:
        click.echo(
            "tuneledger: interrupted: server stopped, completed runs recorded (note_added)",
            err=True,
        )
        sys.exit(130)
    from runners.results_json import SHOWN_METRICS, plan_json

    if as_json:
        print_json(plan_json(result, plan.plan.session, all_metrics))
        return
    Console(width=160).print(verdict_table(result, None if all_metrics else SHOWN_METRICS))
    for finding in result.findings:
        click.echo(f"finding: --{finding.flag}: {finding.verdict} ({finding.message})")


def _dry_run(ctx: Context, plan: Any, resume: bool, as_json: bool) -> None:
    """``run plan --dry-run``: the plan's starts and estimate (``runners.plan_resume``)."""
    from rich.console import Console

    from runners.plan_resume import dry_run_json, dry_run_table, estimate

    store = ctx.store()
    known = store.path.exists()
    arms = estimate(store if known else None, plan, resume=resume)
    if as_json:
        print_json(dry_run_json(plan, arms))
        return
    Console(width=160).print(dry_run_table(plan, arms))
    from runners.server.engines import flag_args

    for arm in plan.arms:
        config = plan.configs[arm]
        click.echo(
            f"arm {arm} ({config.engine}, {config.model}): {' '.join(flag_args(config.flags))}"
        )
