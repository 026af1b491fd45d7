"""The metric table: every benchmark metric the ledger knows, once.

One row per metric (``Metric``): its name (a ``BenchMetrics`` field, spelled as sglang
``bench_serving`` spells it), unit, better direction, default practical threshold, label, and whether it is an
integer. Everything that lists metrics derives its list from here: the event model
(``schemas.events.BenchMetrics`` is built from ``METRICS``), the projections and views
(``bench_runs`` columns: ``VIEW_METRICS``; the ``benchmark_deltas`` rules: ``COMPARED_METRICS``),
the comparison runner (``runners.compare``), the importers (integer fields), the TUI's panes, the
CLI's tables and the Markdown export (units and labels). Definitions: docs/metrics.md
(TTFT, TPOT, ITL, E2E); the default practical thresholds (the smallest change a comparison calls one, ``noise_floor``):
docs/comparison.md (5%, 10% for p99).

The sign convention of a change (one for every name, everywhere: the ``comparison_completed``
event, the ``benchmark_deltas`` view, the plan table, the TUI and the export):
``change = value / baseline - 1`` ("+" means the metric went up); whether that is better is the
metric's ``direction`` (``better``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: +1: higher is better (throughput); -1: lower is better (latency); 0: neither (a count, a
#: duration of the run, a load figure): such a metric is shown, never judged.
Direction = Literal[1, -1, 0]


@dataclass(frozen=True)
class Metric:
    """One benchmark metric.

    ``name``: the ``BenchMetrics`` field and ``bench_runs`` column; ``unit``: ``ms``, ``s``,
    ``tok/s``, ``req/s``, ``tokens``, ``requests``; ``direction``: see ``Direction``;
    ``noise_floor``: the default practical threshold, the smallest change (a fraction) a
    comparison calls one (docs/comparison.md), None for a metric that is not compared; ``label``: how people name it ("median TTFT"); ``short``: a
    column header ("TTFT med"); ``integer``: a count (BIGINT); ``view``: a column of
    ``bench_runs``/``benchmarks``; ``headline``: shown by default (TUI panes, plan table, CLI).
    """

    name: str
    unit: str
    direction: Direction
    label: str
    short: str
    noise_floor: float | None = None
    integer: bool = False
    view: bool = False
    headline: bool = False

    @property
    def compared(self) -> bool:
        """Whether comparisons (``benchmark_deltas``, plans) judge this metric."""
        return self.noise_floor is not None

    @property
    def header(self) -> str:
        """A table column header with the unit: ``TTFT med ms``."""
        return f"{self.short} {self.unit}"

    @property
    def title(self) -> str:
        """The label with the unit: ``median TTFT (ms)``."""
        return f"{self.label} ({self.unit})"

    def better(self, change: float | None) -> bool | None:
        """Whether a change (``value / baseline - 1``) is an improvement; None when it cannot
        be judged (no change, or a metric without a direction)."""
        if change is None or change == 0 or self.direction == 0:
            return None
        return (change > 0) == (self.direction > 0)


#: Distribution statistics of a per-request latency, as bench_serving names them.
_STATS = ("mean", "median", "std", "p90", "p95", "p99")
#: Which statistics of which latency are ``bench_runs`` columns, headline, and their floors.
_VIEW_STATS = {
    "ttft": ("mean", "median", "p90", "p99"),
    "tpot": ("mean", "median", "p90", "p99"),
    "itl": ("mean", "median", "p90", "p99"),
    "e2e_latency": ("mean", "median", "p99"),
}
_FLOORS = {
    ("ttft", "median"): 0.05,
    ("ttft", "p99"): 0.10,
    ("tpot", "median"): 0.05,
    ("tpot", "p99"): 0.10,
    ("itl", "median"): 0.05,
    ("e2e_latency", "median"): 0.05,
}
_HEADLINE = {("ttft", "median"), ("ttft", "p99"), ("tpot", "median"), ("tpot", "p99")}
_LATENCY_LABEL = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e_latency": "E2E"}
_STAT_SHORT = {"mean": "mean", "median": "med", "std": "std", "p90": "p90", "p95": "p95"}


def _latency(name: str, extra: tuple[Metric, ...] = ()) -> tuple[Metric, ...]:
    label = _LATENCY_LABEL[name]
    rows = tuple(
        Metric(
            f"{stat}_{name}_ms",
            "ms",
            -1,
            f"{stat} {label}",
            f"{label} {_STAT_SHORT.get(stat, stat)}",
            noise_floor=_FLOORS.get((name, stat)),
            view=stat in _VIEW_STATS[name],
            headline=(name, stat) in _HEADLINE,
        )
        for stat in _STATS
    )
    return rows + extra


#: Every metric, in ``BenchMetrics`` field order (which is the order tables show them in).
METRICS: tuple[Metric, ...] = (
    Metric("completed", "requests", 0, "completed requests", "done", integer=True, view=True),
    Metric("failed", "requests", 0, "failed requests", "failed", integer=True, view=True),
    Metric("duration_s", "s", 0, "run duration", "dur", view=True),
    Metric("total_input_tokens", "tokens", 0, "input tokens", "in", integer=True),
    Metric("total_output_tokens", "tokens", 0, "output tokens", "out", integer=True),
    Metric(
        "request_throughput", "req/s", 1, "request throughput", "req", noise_floor=0.05, view=True
    ),
    Metric("input_throughput", "tok/s", 1, "input throughput", "in", view=True),
    Metric(
        "output_throughput",
        "tok/s",
        1,
        "output throughput",
        "out",
        noise_floor=0.05,
        view=True,
        headline=True,
    ),
    Metric(
        "total_throughput", "tok/s", 1, "total throughput", "total", noise_floor=0.05, view=True
    ),
    Metric("achieved_concurrency", "requests", 0, "achieved concurrency", "conc", view=True),
    Metric("max_output_tokens_per_s", "tok/s", 1, "peak output throughput", "out max"),
    Metric(
        "max_concurrent_requests",
        "requests",
        0,
        "peak concurrent requests",
        "conc max",
        integer=True,
    ),
    Metric("accept_length", "tokens", 1, "accept length", "accept", view=True),
    *_latency("ttft"),
    *_latency("tpot"),
    *_latency("itl", (Metric("max_itl_ms", "ms", -1, "max ITL", "ITL max"),)),
    *_latency("e2e_latency"),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}

#: The ``bench_runs`` / ``benchmarks`` metric columns, in table order.
VIEW_METRICS: tuple[str, ...] = tuple(m.name for m in METRICS if m.view)
#: The metrics comparisons judge (``benchmark_deltas``, ``tuneledger run plan``): throughputs
#: first, headline ones first within each direction, else in table order.
COMPARED_METRICS: tuple[Metric, ...] = tuple(
    sorted((m for m in METRICS if m.compared), key=lambda m: (-m.direction, not m.headline))
)
#: The metrics shown by default (TUI panes, plan table), in table order.
HEADLINE_METRICS: tuple[Metric, ...] = tuple(m for m in METRICS if m.headline)
#: Integer-valued metrics (counts).
INTEGER_METRICS: frozenset[str] = frozenset(m.name for m in METRICS if m.integer)


def metric(name: str) -> Metric:
    """The table row of ``name``.

    Raises:
        KeyError: not a metric of the table (the message lists none: callers name the input).
    """
    return BY_NAME[name]


def direction_of(name: str) -> Direction:
    """The better direction of a metric (+1 higher, -1 lower), 0 for an unknown one."""
    row = BY_NAME.get(name)
    return row.direction if row is not None else 0


def unit_of(name: str) -> str | None:
    """The unit of a metric, None for a name that is not in the table."""
    row = BY_NAME.get(name)
    return row.unit if row is not None else None


def tpot(ttft: float | None, e2e: float | None, output_tokens: int | None) -> float | None:
    """TPOT of one request: ``(E2E - TTFT) / (output_tokens - 1)`` (docs/metrics.md: the
    first token is excluded), in the unit of ``ttft`` and ``e2e``; None without at least 2
    output tokens or a missing time."""
    if ttft is None or e2e is None or output_tokens is None or output_tokens <= 1:
        return None
    return (e2e - ttft) / (output_tokens - 1)
