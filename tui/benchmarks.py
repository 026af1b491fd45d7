"""The benchmarks pane: baseline against each configuration per concurrency, and a plot.

The table shows the ``benchmark_summary`` view's rows as they are: one per arm
(configuration, workload, concurrency, request rate), the output throughput, TTFT
and TPOT (median and p99) a change is computed from and, for non-baseline
configurations, the change against the baseline from ``benchmark_deltas``,
coloured by its verdict (green improved, red regressed, dim
no-measurable-change, yellow inconclusive / insufficient-data). The plot (plotext) draws each
configuration (and workload, where the session ran several) against concurrency on a log
axis: a marker on each measured point and straight lines between them, nothing else;
``m`` cycles the plotted metric.
"""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ledger.read import model as read_model
from schemas.metrics import HEADLINE_METRICS

from .pane import Pane
from .parts import Part, Reading
from .queries import BENCH_METRICS
from .render import DELTA_STYLE, Columns, number, short_delta_verdict

#: The plot's colours, one per line (plotext names).
_COLORS = ("cyan", "orange", "green", "magenta", "yellow", "blue", "red", "white")

#: Metrics the plot can show, cycled with ``m``.
PLOT_METRICS: tuple[tuple[str, str], ...] = tuple((m.name, m.title) for m in HEADLINE_METRICS)

#: The metric columns dropped on a narrow terminal (the p99s), by width (terminal cells).
_METRIC_DROP_BELOW = {"TPOT p99 ms": 150, "TTFT p99 ms": 130}


def workload_text(row: dict[str, Any]) -> str:
    """An arm's workload in a few characters: ``in/out`` tokens, the dataset when it is not
    random, the request rate when one was set (``1024/128 sharegpt 4 req/s``)."""
    parts = []
    if row["input_len"] is not None or row["output_len"] is not None:
        parts.append(f"{row['input_len'] or '—'}/{row['output_len'] or '—'}")
    if row["dataset"] and row["dataset"] != "random":
        parts.append(row["dataset"])
    if row["request_rate"] is not None:
        parts.append(f"{row['request_rate']:g} req/s")
    return " ".join(parts) or "—"


def runs_text(row: dict[str, Any]) -> str:
    """The runs the row's output throughput is over (``output_throughput_runs``), with the
    arm's valid runs stored beside it where they differ: a comparison that counted a run the
    validity gate marked invalid (``2 (1 valid)``), throughput missing from some runs
    (``1 of 2``)."""
    n, stored = row.get("output_throughput_runs"), row["runs"]
    if n is None or n == stored or not n:
        return str(stored)
    return f"{n} ({stored} valid)" if n > stored else f"{n} of {stored}"


def _read(reading: Reading) -> list[dict[str, Any]]:
    return read_model.benchmark_summary(reading.con, reading.session_id)


class BenchmarksPane(Pane):
    """Benchmark results against the baseline."""

    NAME = "bench"
    TITLE = "Benchmarks"
    KEYS = "2,f3"
    FOCUS = "#bench-table"
    PART = Part(
        "bench",
        _read,
        ("benchmark_summary",),
    )
    SUMMARY = "vs baseline, with a plot"
    HELP_KEYS = (("m", "Benchmarks", "cycle the plotted metric"),)

    BINDINGS = [Binding("m", "cycle_metric", "Plot metric", id="bench.cycle_metric")]

    #: Every column, in order (the configuration, its workload, concurrency and run count, then
    #: one per metric), with the width (terminal cells) below which it is dropped: the p99s
    #: first (the medians and the throughput carry the verdicts a user acts on), then the
    #: workload, then the run count.
    COLUMNS = Columns(
        (
            ("configuration", 0),
            ("workload", 110),
            ("c", 0),
            ("runs", 90),
            *((label, _METRIC_DROP_BELOW.get(label, 0)) for _, label in BENCH_METRICS),
        )
    )

    DEFAULT_CSS = """
    BenchmarksPane #bench-table { height: 1fr; min-height: 6; }
    BenchmarksPane #bench-legend { height: 1; padding: 0 1; color: $text-muted; }
    BenchmarksPane #bench-plot, BenchmarksPane #bench-plot-placeholder { height: 2fr; min-height: 12; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[dict[str, Any]] = []
        self.metric_index = 0
        self.plot_mounted = False
        #: The plot's title as last drawn ("... no data ..." when there is nothing to plot).
        self.plot_title = ""
        #: What the plot drew: per line, its measured (concurrency, value) points, in order.
        self.plot_series: dict[str, list[tuple[int, float]]] = {}
        self._columns: tuple[str, ...] = self.COLUMNS.names

    def compose(self) -> ComposeResult:
        table: DataTable[Any] = DataTable(id="bench-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*self._columns)
        yield table
        legend = Text("change vs baseline: ")
        for verdict in (
            "improved",
            "regressed",
            "no-measurable-change",
            "inconclusive",
            "insufficient-data",
            "too-noisy",
        ):
            legend.append(
                short_delta_verdict(verdict)
                if verdict != "no-measurable-change"
                else "≈ no change",
                style=DELTA_STYLE[verdict],
            )
            legend.append("  ")
        legend.append("   m: plot metric", style="dim")
        yield Static(legend, id="bench-legend")
        # the plot widget is mounted when the pane is first shown: plotext costs ~0.1 s to
        # import, which the first paint of the board should not pay
        yield Static("", id="bench-plot-placeholder")

    async def on_show(self) -> None:
        """First time shown: mount the plot (importing plotext now) and draw it."""
        if self.plot_mounted:
            return
        self.plot_mounted = True
        from textual_plotext import PlotextPlot

        await self.query_one("#bench-plot-placeholder").remove()
        await self.mount(PlotextPlot(id="bench-plot"))
        self._plot()

    def show(self, rows: list[dict[str, Any]]) -> None:
        """Show freshly read ``benchmark_summary`` rows (``ledger.read.model.benchmark_summary``)."""
        self.rows = rows
        table = self.query_one("#bench-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            cells: dict[str, Any] = {
                "configuration": Text(
                    row["config_name"], style="bold" if row["is_baseline"] else ""
                ),
                "workload": workload_text(row),
                "c": str(row["concurrency"] or ""),
                "runs": runs_text(row),
            }
            # a metric over another number of runs than the runs column's says so in its cell
            shown_runs = row.get("output_throughput_runs") or row["runs"]
            for metric, label in BENCH_METRICS:
                cells[label] = self._cell(
                    row[metric],
                    row[f"{metric}_change_pct"],
                    row[f"{metric}_verdict"],
                    row["is_baseline"],
                )
                n = row.get(f"{metric}_runs")
                if row[metric] is not None and n and n != shown_runs:
                    cells[label].append(f" n={n}", style="dim")
            table.add_row(*self.COLUMNS.row(cells, self._columns))
        if rows:
            table.move_cursor(row=min(max(cursor, 0), len(rows) - 1))
        self._plot()

    @staticmethod
    def _cell(
        value: float | None, change_pct: float | None, verdict: str | None, baseline: bool
    ) -> Text:
        digits = 1 if value is None or abs(value) >= 10 else 2
        text = Text(number(value, digits) or "—", style="" if value is not None else "dim")
        if verdict is not None and not baseline:
            style = DELTA_STYLE.get(verdict, "")
            if change_pct is not None:
                text.append(f" {change_pct:+.1f}%", style=style)
            text.append(f" {short_delta_verdict(verdict)}", style=style)
        return text

    def _plot(self) -> None:
        metric, label = PLOT_METRICS[self.metric_index]
        if not self.plot_mounted or not self.query("#bench-plot"):
            return
        from textual_plotext import PlotextPlot

        widget = self.query_one("#bench-plot", PlotextPlot)
        plt = widget.plt
        plt.clear_figure()
        series: dict[str, list[tuple[int, float]]] = {}
        # one line per configuration; per configuration and workload where there are several
        several = len({workload_text(row) for row in self.rows}) > 1
        for row in self.rows:
            if row["concurrency"] is not None and row[metric] is not None:
                name = row["config_name"] + (f" {workload_text(row)}" if several else "")
                series.setdefault(name, []).append((row["concurrency"], row[metric]))
        for points in series.values():
            points.sort()
        self.plot_series = series
        self.plot_title = f"{label} against concurrency" if series else self._no_data(label)
        plt.title(self.plot_title)
        plt.xlabel("concurrency (log scale)")
        if series:
            # concurrency doubles (1, 2, 4 ... 64): plot against log2 so the points spread evenly
            xs = sorted({c for points in series.values() for c, _ in points})
            plt.xticks([math.log2(x) for x in xs], [str(x) for x in xs])
            for index, (name, points) in enumerate(series.items()):
                xs_log = [math.log2(p[0]) for p in points]
                ys = [p[1] for p in points]
                color = _COLORS[index % len(_COLORS)]
                # straight segments between measured points only, and a marker on each point:
                # nothing drawn between them reads as a measurement
                if len(points) > 1:
                    plt.plot(xs_log, ys, marker="braille", color=color)
                plt.scatter(xs_log, ys, marker="●", color=color, label=name)
        widget.refresh()

    def _no_data(self, label: str) -> str:
        """Why there is nothing to plot: no benchmark at a fixed concurrency, or benchmarks
        that did not report this metric (a tool without streaming gives no TTFT)."""
        fixed = sum(row["concurrency"] is not None for row in self.rows)
        if not fixed:
            return f"{label}: no data (no benchmark at a fixed concurrency in this session yet)"
        return (
            f"{label}: not reported by the {fixed} arm(s) at a fixed concurrency (m: next metric)"
        )

    def on_resize(self, event: Any) -> None:
        """Keep the columns that fit: drop the low-value ones first on a narrow terminal."""
        columns = self.COLUMNS.fitting(event.size.width)
        if columns == self._columns:
            return
        self._columns = columns
        table = self.query_one("#bench-table", DataTable)
        table.clear(columns=True)
        table.add_columns(*columns)
        if self.rows:
            self.show(self.rows)

    def action_cycle_metric(self) -> None:
        """Plot the next metric (throughput, median TTFT, median TPOT, p99s)."""
        self.metric_index = (self.metric_index + 1) % len(PLOT_METRICS)
        self._plot()
