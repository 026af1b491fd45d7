"""``tuneledger run tune`` and ``tuneledger run spec`` (registered in ``runners.cli.group``).

Exit codes besides the ledger's: 3 bad input (shape, spec file), 11 the kernel or torch/triton is
not available here, 12 a server failed to start, 130 interrupted (what completed is recorded;
a tune run again resumes where it stopped).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.context import Context, pass_ctx
from ledger.cli.json_output import json_option, print_json


def _raise_interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def _offline(ctx: Context, request: Any, arch: str) -> None:
    """``run tune --arch``: the offline file pair (``runners.moe.tune_offline``), recorded."""
    from importlib.metadata import PackageNotFoundError, version

    from ledger.write import commands
    from runners.moe.request import resolve_shape, seed_file_configs
    from runners.moe.space import INTERACTIVE_BATCH_SIZES, SGLANG_BATCH_SIZES
    from runners.moe.tune_offline import describe, offline_configs, shipped_for, write_offline

    shape = resolve_shape(request)
    sizes = (
        list(SGLANG_BATCH_SIZES)
        if request.all_batch_sizes
        else request.batch_sizes or list(INTERACTIVE_BATCH_SIZES)
    )
    shipped: dict[str, Any]
    if request.seed_file is not None:
        shipped = {
            "up": seed_file_configs(request.seed_file),
            "down": {},
            "from": [str(request.seed_file)],
        }
    else:
        shipped = shipped_for(shape, arch)
    try:
        triton_version = version("triton")
    except PackageNotFoundError:
        triton_version = "3.6.0"  # SGLang 0.5.23's newest folder with SM120 files
    res = offline_configs(shape, arch, sizes, shipped["up"] or None, shipped["down"] or None)
    store = ctx.store()
    store.init()
    seeded = (
        "seeded from " + ", ".join(Path(p).name for p in shipped["from"])
        if shipped["from"]
        else "seeded from SGLang's default (SGLang ships no file for this shape on that GPU)"
    )
    out = request.output_dir or Path(str(store.path) + ".artifacts") / "moe_configs"
    write_offline(
        res,
        shape,
        arch,
        out,
        triton_version,
        session_id=request.session_id,
        record=lambda event: commands.record(store, event),
        seeded_from=seeded,
    )
    for line in describe(res):
        click.echo(line, err=True)
    click.echo(
        f"{arch}: wrote {res.files[0]} and {res.files[1].name} ({seeded}); not measured on this "
        "arch: tune on that GPU to replace them"
    )


def parse_block_shape(text: str | None, dtype: str) -> tuple[int, int] | None:
    """``--block-shape``: "block_n,block_k" for fp8_w8a8 (default 128,128); refused for bf16/fp16."""
    if text is None:
        return (128, 128) if dtype == "fp8_w8a8" else None
    if dtype != "fp8_w8a8":
        raise click.BadParameter(f"--block-shape is for --dtype fp8_w8a8, not {dtype}")
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"not block_n,block_k: {text!r}") from None
    if len(values) != 2 or min(values) < 1:
        raise click.BadParameter(
            f"--block-shape takes two positive integers, block_n,block_k: {text!r}"
        )
    return values[0], values[1]


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise click.BadParameter(f"batch sizes must be positive: {text!r}")
    return values


@click.command("tune")
@click.option(
    "--model-config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A model's config.json: E, N (intermediate / --tp), K, top-k from it.",
)
@click.option(
    "--tp",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Tensor parallel size (N = intermediate / tp).",
)
@click.option("-E", "experts", type=click.IntRange(1), help="Experts (instead of --model-config).")
@click.option("-N", "inter", type=click.IntRange(1), help="Per-rank intermediate size.")
@click.option("-K", "hidden", type=click.IntRange(1), help="Hidden size.")
@click.option("--topk", type=click.IntRange(1), help="Experts per token.")
@click.option(
    "--dtype",
    type=click.Choice(["bf16", "fp16", "fp8_w8a8"]),
    default="bf16",
    show_default=True,
    help="fp8_w8a8: fp8 e4m3 weights and activations with block quantisation (--block-shape).",
)
@click.option(
    "--block-shape",
    default=None,
    help="fp8_w8a8's quantisation block, block_n,block_k (default 128,128, DeepSeek-V3 / "
    "Qwen3-FP8 style; a --model-config's weight_block_size wins).",
)
@click.option(
    "--batch-sizes", default=None, help="Comma-separated M values (default 1,2,4,8,16,24,32,48,64)."
)
@click.option("--all-batch-sizes", is_flag=True, help="SGLang's tuner's 18 batch sizes, 1..4096.")
@click.option(
    "--arch",
    type=click.Choice(["sm120"]),
    help="Configs for a GPU that is not here (sm120: RTX PRO 6000 Blackwell) without running "
    "anything: SGLang's shipped files for it as seeds, pruned by its shared memory and stage rule; "
    "recorded as not measured on that arch.",
)
@click.option(
    "--one-config",
    is_flag=True,
    help="One config for both expert GEMMs (no _down file) instead of a config each.",
)
@click.option(
    "--kernel",
    type=click.Choice(["sglang", "reference"]),
    default="sglang",
    show_default=True,
    help="SGLang's fused_moe_kernel, or tuneledger's own Triton kernel where sglang is not importable.",
)
@click.option(
    "--search", type=click.Choice(["halving", "exhaustive"]), default="halving", show_default=True
)
@click.option(
    "--sample",
    type=click.FloatRange(0.001, 1.0),
    default=0.2,
    show_default=True,
    help="The first rung's share of the pruned space's GROUP_SIZE_M-folded classes.",
)
@click.option(
    "--seed-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A MoE config file: its nearest entry joins each first rung and the final re-timing, so the "
    "tune is never slower than it beyond that re-timing's noise (default: SGLang's shipped file for "
    "this shape and GPU, when the installed sglang has one).",
)
@click.option(
    "--time-budget",
    "time_budget_s",
    type=click.FloatRange(min=1),
    help="Stop cleanly after this many seconds with the best so far.",
)
@click.option(
    "--workers",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Processes compiling configs in parallel.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where configs/triton_X_Y_Z/<file> is written (default <ledger>.artifacts/moe_configs); use as SGLANG_MOE_CONFIG_DIR.",
)
@click.option(
    "--session", "session_id", help="Session of the events (default: the global --session)."
)
@click.option(
    "--candidate",
    "candidate_id",
    help="The board's candidate this tune answers (e.g. kernel-tune:fused-moe).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar on standard error.")
@json_option
@pass_ctx
def tune_command(
    ctx: Context,
    model_config: Path | None,
    tp: int,
    experts: int | None,
    inter: int | None,
    hidden: int | None,
    topk: int | None,
    dtype: str,
    block_shape: str | None,
    batch_sizes: str | None,
    all_batch_sizes: bool,
    one_config: bool,
    arch: str | None,
    kernel: str,
    search: str,
    sample: float,
    seed_file: Path | None,
    time_budget_s: float | None,
    workers: int,
    output_dir: Path | None,
    session_id: str | None,
    candidate_id: str | None,
    no_progress: bool,
    as_json: bool,
) -> None:
    """Tune SGLang's fused-MoE Triton kernel for one shape on this GPU and write SGLang's config file.

    Every measured config is recorded (kernel_config_measured); running the same command again
    resumes and measures only what is missing. Ends with one summary line (--json: one object,
    the summary with the outcome, the config file written and the tuned results).
    """
    from runners.moe.request import TuneRequest

    request = TuneRequest(
        model_config=model_config,
        tp=tp,
        experts=experts,
        inter=inter,
        hidden=hidden,
        topk=topk,
        dtype=dtype,
        block_shape=parse_block_shape(block_shape, dtype),
        batch_sizes=_int_list(batch_sizes) if batch_sizes else None,
        all_batch_sizes=all_batch_sizes,
        split=not one_config,
        kernel=kernel,
        search=search,
        sample=sample,
        seed_file=seed_file,
        time_budget_s=time_budget_s,
        workers=workers,
        output_dir=output_dir,
        session_id=session_id or ctx.session,
        candidate_id=candidate_id,
    )
    if arch is not None:
        _offline(ctx, request, arch)
        return
    from runners.usecases import measure_tune

    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        report = measure_tune(
            ctx.store(),
            request,
            say=lambda line: click.echo(line, err=True),
            progress=not no_progress,
        )
    except KeyboardInterrupt:
        click.echo(
            "tuneledger: interrupted: measurements so far are recorded; run the same command to resume",
            err=True,
        )
        sys.exit(130)
    if as_json:
        from runners.results_json import tune_json

        print_json(tune_json(report))
        return
    click.echo(report.summary)


@click.command("spec")
@click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-progress", is_flag=True, help="No progress bar on standard error.")
@click.option(
    "--resume",
    is_flag=True,
    help="Measure only the runs this spec's session does not hold yet (as run plan --resume).",
)
@json_option
@pass_ctx
def spec_command(
    ctx: Context, spec_file: Path, no_progress: bool, resume: bool, as_json: bool
) -> None:
    """Run SPEC_FILE: speculative-decoding trials against the no-speculation baseline (see runners/spec.py).

    Each trial is a server restart and a benchmark, interleaved with the baseline and repeated;
    one spec_decoding_trial_completed per trial (the spec_trials view). Prints a line per
    trial; --json: one object, run plan's {"verdicts", ...} with "trials": [...].
    """
    from runners.usecases import PlanRequest, load_spec, measure_spec

    request = PlanRequest(spec_file, ctx.session, resume=resume)
    spec = load_spec(request)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    try:
        result, events = measure_spec(ctx.store(), spec, request, say=say, progress=not no_progress)
    except KeyboardInterrupt:
        click.echo("tuneledger: interrupted: server stopped, completed runs recorded", err=True)
        sys.exit(130)
    if as_json:
        from runners.results_json import spec_json

        print_json(spec_json(result, events, spec.plan.plan.session))
        return
    for e in events:
        change = e.output_throughput_change
        accept = "unknown" if e.accept_length is None else f"{e.accept_length:.2f}"
        click.echo(
            f"trial {e.trial_id}: accept length {accept} ({e.accept_length_source}), output "
            f"throughput {'unknown' if change is None else f'{change:+.1%}'}: {e.verdict}"
        )
