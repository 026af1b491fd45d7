"""``tuneledger compare``: many runs at once (registered through the
``tuneledger.commands`` entry points).

``compare diff A B [C...]``   server runs or configurations side by side: only the flags, environment
                              and startup facts that differ, and the metrics with their changes
``compare repeats``           each arm's runs grouped (those benchmark_deltas compares): geometric
                              mean [95% CI], min..max, CV
``compare pareto``            throughput against latency per arm, the front marked; ``--plot FILE``
                              draws it (SVG or PNG, matplotlib)

``--session`` (the global one, or ``TUNELEDGER_SESSION``) limits each to one session. Exit codes
as ``ledger.errors``: 5 for a name that is neither a server run nor a configuration, or a missing
ledger; 3 for a plot with nothing to draw or an unknown format.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from ledger.cli.context import Context, ledger_option, pass_ctx
from ledger.cli.json_output import json_format_options, print_json
from ledger.errors import InvalidInput

_FORMAT = json_format_options(
    ("table", "json"),
    "table",
    "A terminal table, or JSON (one object, the same keys as the tables).",
)
_SESSION = click.option(
    "--session", "session_id", help="Only this session (default: the global --session, else all)."
)


@click.group(name="compare")
def compare_group() -> None:
    """Compare many runs: what differs, repeats with their noise band, the Pareto front."""


def _print(tables: list[Any]) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 240)
    for t in tables:
        table = Table(title=t.title, header_style="bold", title_justify="left")
        for header, numeric in zip(t.headers, t.numeric, strict=True):
            table.add_column(header, justify="right" if numeric else "left", overflow="fold")
        for row in t.rows:
            table.add_row(*row)
        console.print(table)
        if t.note:
            console.print(f"[dim]{t.note}[/dim]", highlight=False)


def _json(value: Any) -> None:
    print_json(value)


@compare_group.command(name="diff")
@click.argument("names", nargs=-1, required=True, metavar="RUN_OR_CONFIG...")
@click.option("--all", "everything", is_flag=True, help="Show the rows that are the same too.")
@_SESSION
@_FORMAT
@ledger_option
@pass_ctx
def diff_command(
    ctx: Context, names: tuple[str, ...], everything: bool, session_id: str | None, fmt: str
) -> None:
    """Server runs (ids or unique prefixes) or configurations side by side: only what differs.

    Flags, environment and startup facts (max_running_requests, piecewise CUDA graph, MoE
    kernel config...) that are not the same for all, then per workload and concurrency the
    headline metrics of each, with the change against the first.
    """
    from ledger.export.comparison import diff_tables
    from ledger.read.comparison import diff, load_items

    if len(names) < 2:
        raise InvalidInput("compare diff needs two names or more (server runs or configurations)")
    result = diff(load_items(ctx.store(), names, session_id or ctx.session), everything=everything)
    if fmt == "json":
        _json(
            {
                "items": [
                    {"name": i.name, "kind": i.kind, "run_id": i.run_id} for i in result.items
                ],
                "differs": [dataclasses.asdict(r) for r in result.rows],
                "same": result.same,
                "unrecorded": result.unrecorded,
                "metrics": [dataclasses.asdict(m) for m in result.metrics],
            }
        )
        return
    _print(diff_tables(result))


@compare_group.command(name="repeats")
@click.option(
    "--metric",
    default="output_throughput",
    show_default=True,
    help="output_throughput, request_throughput, median_ttft_ms, median_tpot_ms, median_e2e_latency_ms, p99_ttft_ms, p99_tpot_ms.",
)
@_SESSION
@_FORMAT
@ledger_option
@pass_ctx
def repeats_command(ctx: Context, metric: str, session_id: str | None, fmt: str) -> None:
    """Each arm's runs grouped: geometric mean [its 95% CI], min..max and CV.

    The runs are those benchmark_deltas compares (a standing comparison's, else every valid
    run), so the mean is the verdict table's, diff's and the Pareto front's.
    """
    from ledger.export.comparison import repeats_table
    from ledger.read.comparison import repeat_groups

    try:
        groups = repeat_groups(ctx.store(), session_id or ctx.session, metric)
    except ValueError as exc:
        raise InvalidInput(f"--metric: {exc}") from None
    if fmt == "json":
        _json({"metric": metric, "groups": [dataclasses.asdict(g) for g in groups]})
        return
    _print([repeats_table(groups)])


@compare_group.command(name="pareto")
@click.option(
    "--latency",
    "latency_metric",
    type=click.Choice(["median_tpot_ms", "median_ttft_ms", "median_e2e_latency_ms"]),
    help="The latency axis (default: the first of these every arm has).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also draw it to this .svg or .png file (needs matplotlib: tuneledger[plot]).",
)
@_SESSION
@_FORMAT
@ledger_option
@pass_ctx
def pareto_command(
    ctx: Context,
    latency_metric: str | None,
    plot_path: Path | None,
    session_id: str | None,
    fmt: str,
) -> None:
    """Output throughput against latency for every configuration and concurrency; the front marked."""
    from ledger.export.comparison import pareto_table
    from ledger.read.comparison import pareto

    result = pareto(ctx.store(), session_id or ctx.session, latency_metric)
    if plot_path is not None:
        _plot(result, plot_path)
    if fmt == "json":
        _json(
            {
                "latency_metric": result.latency_metric,
                "points": [dataclasses.asdict(q) for q in result.points],
                "no_latency": result.no_latency,
                "why_empty": result.why_empty(),
            }
        )
        return
    _print([pareto_table(result)])
    if plot_path is not None:
        click.echo(f"plot: {plot_path}", err=True)


def _plot(result: Any, path: Path) -> None:
    from ledger.export.plot import NO_MATPLOTLIB, have_matplotlib, pareto_figure

    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("svg", "png"):
        raise InvalidInput(f"--plot {path}: the file must end in .svg or .png")
    if not have_matplotlib():
        raise InvalidInput(f"--plot {path}: {NO_MATPLOTLIB}")
    try:
        data = pareto_figure(result, fmt)
    except ValueError as exc:
        raise InvalidInput(f"--plot {path}: {exc}") from None
    from ledger.store.safe_files import write_file

    write_file(path, data)
