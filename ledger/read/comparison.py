"""Comparing many runs the way users of experiment trackers ask for it.

MLflow's and W&B's most asked-for comparison is "diff only" (mlflow/mlflow#5896, #10477,
#4819; W&B's Run Comparer has it), then repeats grouped with their spread, then Pareto fronts
(vLLM's ``bench sweep plot_pareto``). Three reads, each a pure function of rows the views hold:

- ``diff``: N server runs or configurations side by side, only the flags, environment and
  startup facts that differ, and the headline metrics per workload and concurrency with the
  change of each against the first (value / first - 1, the one sign convention).
- ``repeat_groups``: the runs of each arm (configuration x workload x concurrency x rate)
  grouped, with the geometric mean, its 95% confidence interval (Student t on log values, as
  the comparison rule), min, max and CV.
- ``pareto``: every arm as a point of throughput against latency, per workload; the front is the
  points no other point beats on both (higher output throughput and lower latency).

One number per question: a configuration's metrics at a workload and load are the geometric
means of the runs ``benchmark_deltas`` compares there (``COMPARED_RUNS``): the standing
comparison's runs where one covers the arm (a plan's interleaved runs; a run recorded outside
the plan before it does not join), else every valid run, a run whose import knew nothing of its
validity (``valid`` absent) counting as valid. The verdict table, ``compare``, the TUI's Compare
pane and the decision log all read them, and each says how many runs a value is over. A server
run's metrics are those of the valid runs recorded against it (``server_run_id``).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledger.errors import NotFound
from ledger.read.model import Row, rows
from schemas.student_t import t975

if TYPE_CHECKING:
    import duckdb

    from ledger.store import LedgerStore

#: The metrics a diff shows per workload and concurrency (those a run has).
DIFF_METRICS = ("output_throughput", "median_ttft_ms", "median_tpot_ms", "median_e2e_latency_ms")

#: Startup facts a diff compares (``server_runs`` columns), in this order.
FACTS = (
    "engine",
    "engine_version",
    "model",
    "arch",
    "attention_backend",
    "max_running_requests",
    "max_total_num_tokens",
    "context_len",
    "cuda_graph_max_bs",
    "piecewise_cuda_graph",
    "moe_kernel_config",
)

#: Latency axes of a Pareto front, in the order the default picks the first every point has.
LATENCY_AXES = ("median_tpot_ms", "median_ttft_ms", "median_e2e_latency_ms")

#: What a diff cell shows for a flag the run did not set, and for what the ledger does not hold.
NOT_SET = "not set"
NOT_RECORDED = "not recorded"

_ARM_COLUMNS = "config_name, dataset, input_len, output_len, seed, concurrency, request_rate"

#: The runs each arm's numbers are over, as ``benchmark_deltas`` compares them: where a standing
#: comparison covers the arm (as candidate, or as baseline: its latest), the runs it compared;
#: else every run not marked invalid. A subquery with ``benchmarks``' columns.
COMPARED_RUNS = """(
WITH standing AS (
    SELECT session_id, config_name AS arm, dataset, input_len, output_len, seed, concurrency,
           request_rate, comparison_event_id, seq
    FROM benchmark_deltas WHERE metric = 'output_throughput' AND comparison_event_id IS NOT NULL
    UNION ALL
    SELECT session_id, baseline_config, dataset, input_len, output_len, seed, concurrency,
           request_rate, comparison_event_id, seq
    FROM benchmark_deltas WHERE metric = 'output_throughput' AND comparison_event_id IS NOT NULL
),
latest AS (
    SELECT s.*, from_json(e.payload->'benchmark_event_ids', '["VARCHAR"]') AS ids
    FROM standing s JOIN live_control e ON e.event_id = s.comparison_event_id
    QUALIFY row_number() OVER (
        PARTITION BY s.session_id, s.arm, s.dataset, s.input_len, s.output_len, s.seed, s.concurrency,
                     s.request_rate ORDER BY s.seq DESC) = 1
)
SELECT b.* FROM benchmarks b
LEFT JOIN latest l
  ON l.session_id IS NOT DISTINCT FROM b.session_id AND l.arm = b.config_name
 AND l.dataset IS NOT DISTINCT FROM b.dataset AND l.input_len IS NOT DISTINCT FROM b.input_len
 AND l.output_len IS NOT DISTINCT FROM b.output_len AND l.seed IS NOT DISTINCT FROM b.seed
 AND l.concurrency IS NOT DISTINCT FROM b.concurrency
 AND l.request_rate IS NOT DISTINCT FROM b.request_rate
WHERE CASE WHEN l.ids IS NULL THEN b.valid IS DISTINCT FROM false
           ELSE list_contains(l.ids, CAST(b.event_id AS VARCHAR)) END
)"""


def workload_label(row: Row) -> str:
    """``16/8 tok random seed 1`` (input/output tokens, dataset and the seed where the run
    recorded one), the workload of an arm: runs of two seeds are two workloads. Seed 0, the
    default of ``run bench`` and plans, goes unsaid; a length not recorded is a dash (as the
    Benchmarks pane's), never ``?``."""
    dataset = f" {row['dataset']}" if row.get("dataset") else ""
    seed = f" seed {row['seed']}" if row.get("seed") not in (None, 0) else ""
    return f"{row.get('input_len') or '—'}/{row.get('output_len') or '—'} tok{dataset}{seed}"


def load_label(row: Row) -> str:
    """``c=4`` (closed loop) or ``2 req/s`` (open loop, ``c`` its cap when there is one)."""
    if row.get("request_rate") is not None:
        cap = f" c<={row['concurrency']}" if row.get("concurrency") else ""
        return f"{row['request_rate']:g} req/s{cap}"
    return f"c={row['concurrency']}"


def _geomean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in kept)) if kept else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


# --- diff ---------------------------------------------------------------------------------


@dataclass
class Item:
    """One column of a diff: a server run, or a configuration (its latest server run's setup)."""

    name: str
    kind: str  # "server run" | "configuration"
    run_id: str | None
    flags: dict[str, Any] | None  # None: no server run recorded
    env: dict[str, Any] | None
    facts: dict[str, Any] = field(default_factory=dict)
    #: (workload, load) -> metric -> (value, runs)
    metrics: dict[tuple[str, str], dict[str, tuple[float | None, int]]] = field(
        default_factory=dict
    )


@dataclass
class DiffRow:
    section: str  # "flag" | "env" | "fact"
    name: str
    values: list[str]


@dataclass
class MetricRow:
    workload: str
    load: str
    metric: str
    values: list[float | None]
    runs: list[int]
    changes_pct: list[float | None]  # against the first item's value


@dataclass
class Diff:
    items: list[Item]
    rows: list[DiffRow]  # only those that differ (all with ``everything``)
    same: int  # flags, env and facts equal across the items (hidden)
    metrics: list[MetricRow]
    #: item name -> the facts other items recorded and it did not (its server run's log gave
    #: none): unknown there, so neither a difference nor the same; the note names them
    unrecorded: dict[str, list[str]] = field(default_factory=dict)
    differ: int = 0  # the rows that differ (``rows`` holds the others too with ``everything``)
    everything: bool = False


def _resolve(con: duckdb.DuckDBPyConnection, name: str, session_id: str | None) -> Item:
    """A server run id, else a configuration name, else a unique run-id prefix."""
    scope = "" if session_id is None else " AND session_id = ?"
    params = [] if session_id is None else [session_id]
    if rows(con, "SELECT 1 FROM server_runs WHERE run_id = ?" + scope, [name, *params]):
        return _server_run_item(con, name)
    latest = rows(
        con,
        "SELECT run_id FROM server_runs WHERE config_name = ?" + scope
        + " ORDER BY started_seq DESC LIMIT 1",
        [name, *params],
    )  # fmt: skip
    benched = rows(
        con, "SELECT 1 FROM benchmarks WHERE config_name = ?" + scope + " LIMIT 1", [name, *params]
    )
    if latest or benched:
        item = (
            _server_run_item(con, latest[0]["run_id"])
            if latest
            else Item(name, "configuration", None, None, None)
        )
        item.name, item.kind = name, "configuration"
        item.metrics = _metrics(con, "config_name = ?" + scope, [name, *params], COMPARED_RUNS)
        return item
    runs = rows(
        con, "SELECT run_id FROM server_runs WHERE starts_with(run_id, ?)" + scope, [name, *params]
    )
    if len(runs) == 1:
        return _server_run_item(con, runs[0]["run_id"])
    if len(runs) > 1:
        raise NotFound(f"{name!r} begins {len(runs)} server run ids: give more of the run id")
    where = f" in session {session_id!r}" if session_id else ""
    raise NotFound(f"{name!r} is neither a server run nor a configuration{where}")


def _server_run_item(con: duckdb.DuckDBPyConnection, run_id: str) -> Item:
    (run,) = rows(
        con,
        "SELECT r.*, s.host_engine_version AS engine_version FROM server_runs r "
        "LEFT JOIN live_control s ON s.type = 'server_started' AND s.payload->>'run_id' = r.run_id "
        "WHERE r.run_id = ? LIMIT 1",
        [run_id],
    )
    return Item(
        name=run_id,
        kind="server run",
        run_id=run_id,
        flags=_object(run["flags"]),
        env=_object(run["env"]),
        facts={f: run.get(f) for f in FACTS},
        metrics=_metrics(
            con, "server_run_id = ? AND valid IS DISTINCT FROM false", [run_id], "benchmarks"
        ),
    )


def _object(value: Any) -> dict[str, Any]:
    loaded = json.loads(value) if isinstance(value, str) else value
    return loaded if isinstance(loaded, dict) else {}


def _metrics(
    con: duckdb.DuckDBPyConnection, where: str, params: Sequence[Any], source: str
) -> dict[tuple[str, str], dict[str, tuple[float | None, int]]]:
    runs = rows(
        con,
        f"SELECT {_ARM_COLUMNS}, {', '.join(DIFF_METRICS)} FROM {source} AS r "
        f"WHERE {where} ORDER BY seq",
        params,
    )
    grouped: dict[tuple[str, str], list[Row]] = {}
    for r in runs:
        grouped.setdefault((workload_label(r), load_label(r)), []).append(r)
    return {
        key: {m: (_geomean(r[m] for r in group), len(group)) for m in DIFF_METRICS}
        for key, group in grouped.items()
    }


def load_items(
    store: LedgerStore, names: Sequence[str], session_id: str | None = None
) -> list[Item]:
    """The items a diff compares, by server run id (or a unique prefix) or configuration name.

    Raises:
        NotFound: a name that is neither (the message names it).
    """
    with store.connect() as con:
        return [_resolve(con, name, session_id) for name in names]


def read_configurations(con: duckdb.DuckDBPyConnection, session_id: str) -> list[Item]:
    """The session's benchmarked configurations as diff items, the baseline first."""
    names = rows(
        con,
        "SELECT config_name FROM benchmarks WHERE session_id = ? AND valid IS DISTINCT FROM false "
        "GROUP BY config_name "
        "ORDER BY bool_or(is_baseline) DESC, min(seq)",
        [session_id],
    )
    return [_resolve(con, r["config_name"], session_id) for r in names]


def diff(items: Sequence[Item], *, everything: bool = False) -> Diff:
    """Only what differs between ``items`` (``everything``: every row), and the metric deltas."""
    table: list[DiffRow] = []
    for section, recorded in (("flag", [i.flags for i in items]), ("env", [i.env for i in items])):
        names = sorted({k for d in recorded if d for k in d})
        for key in names:
            values = [
                NOT_RECORDED if d is None else (_text(d[key]) or "null" if key in d else NOT_SET)
                for d in recorded
            ]
            table.append(DiffRow(section, key, values))
    for fact in FACTS:
        values = [
            (_text(i.facts.get(fact)) or NOT_RECORDED) if i.run_id else NOT_RECORDED for i in items
        ]
        if any(v != NOT_RECORDED for v in values):
            table.append(DiffRow("fact", fact, values))
    # a fact one item did not record is no difference: only the recorded values are compared
    differing = [r for r in table if len(_compared(r)) > 1]
    unrecorded: dict[str, list[str]] = {}
    for r in table:
        if r.section == "fact" and len(_compared(r)) == 1 and NOT_RECORDED in r.values:
            for item, value in zip(items, r.values, strict=True):
                if value == NOT_RECORDED:
                    unrecorded.setdefault(item.name, []).append(r.name)
    return Diff(
        items=list(items),
        rows=table if everything else differing,
        same=sum(len(set(r.values)) == 1 for r in table),
        metrics=_metric_rows(items),
        unrecorded=unrecorded,
        differ=len(differing),
        everything=everything,
    )


def _compared(row: DiffRow) -> set[str]:
    """The values a row compares: a fact's recorded ones (flags and env: all)."""
    if row.section != "fact":
        return set(row.values)
    return {v for v in row.values if v != NOT_RECORDED}


def _metric_rows(items: Sequence[Item]) -> list[MetricRow]:
    keys: list[tuple[str, str]] = []
    for item in items:
        keys += [k for k in item.metrics if k not in keys]
    out = []
    for key in sorted(keys, key=_load_order):
        for metric in DIFF_METRICS:
            cells = [item.metrics.get(key, {}).get(metric, (None, 0)) for item in items]
            values = [v for v, _ in cells]
            if sum(v is not None for v in values) < 2:  # nothing to compare with
                continue
            ref = values[0]
            changes = [
                None if v is None or not ref or i == 0 else 100 * (v / ref - 1)
                for i, v in enumerate(values)
            ]
            out.append(MetricRow(key[0], key[1], metric, values, [n for _, n in cells], changes))
    return out


def _load_order(key: tuple[str, str]) -> tuple[str, float, str]:
    workload, load = key
    number = load.removeprefix("c=").split(" ")[0]
    try:
        return workload, float(number), load
    except ValueError:
        return workload, math.inf, load


# --- grouped repeats ----------------------------------------------------------------------


@dataclass
class RepeatGroup:
    config_name: str
    workload: str
    load: str
    metric: str
    values: list[float]
    mean: float  # geometric (all values positive), as benchmark_deltas compares; else arithmetic
    ci_low: float | None  # 95% CI of that mean (None: one run)
    ci_high: float | None
    low: float
    high: float
    cv_pct: float | None


#: The metrics ``repeat_groups`` takes.
REPEAT_METRICS = DIFF_METRICS + ("request_throughput", "p99_ttft_ms", "p99_tpot_ms")


def repeat_groups(
    store: LedgerStore, session_id: str | None = None, metric: str = "output_throughput"
) -> list[RepeatGroup]:
    """The valid runs of each arm grouped, with their noise band (see the module docstring).

    Raises:
        ValueError: a metric not in ``REPEAT_METRICS``.
    """
    with store.connect() as con:
        return read_repeat_groups(con, session_id, metric)


def _mean_ci(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """The mean ``benchmark_deltas`` compares and its 95% CI: geometric, e^(mean ln x +-
    t(0.975, n-1) s_ln / sqrt n), when every value is positive; else arithmetic, mean +- t s / sqrt n."""
    n = len(values)
    positive = all(v > 0 for v in values)
    xs = [math.log(v) for v in values] if positive else list(values)
    centre = statistics.fmean(xs)
    half = t975(n - 1) * statistics.stdev(xs) / math.sqrt(n) if n > 1 else None
    back = math.exp if positive else (lambda x: x)
    if half is None:
        return back(centre), None, None
    return back(centre), back(centre - half), back(centre + half)


def read_repeat_groups(
    con: duckdb.DuckDBPyConnection, session_id: str | None, metric: str = "output_throughput"
) -> list[RepeatGroup]:
    """``repeat_groups`` in an open connection (the decision log reads every section in one)."""
    if metric not in REPEAT_METRICS:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(REPEAT_METRICS)})")
    scope = "" if session_id is None else " AND session_id = ?"
    runs = rows(
        con,
        f"SELECT {_ARM_COLUMNS}, {metric} AS value FROM {COMPARED_RUNS} AS r "
        f"WHERE {metric} IS NOT NULL{scope} ORDER BY seq",
        [] if session_id is None else [session_id],
    )
    grouped: dict[tuple[str, str, str], list[float]] = {}
    for r in runs:
        grouped.setdefault((r["config_name"], workload_label(r), load_label(r)), []).append(
            float(r["value"])
        )
    out = []
    for (config, workload, load), values in grouped.items():
        n = len(values)
        sd = statistics.stdev(values) if n > 1 else None
        mean, ci_low, ci_high = _mean_ci(values)
        out.append(
            RepeatGroup(
                config_name=config,
                workload=workload,
                load=load,
                metric=metric,
                values=values,
                mean=mean,
                ci_low=ci_low,
                ci_high=ci_high,
                low=min(values),
                high=max(values),
                cv_pct=None
                if sd is None or not statistics.fmean(values)
                else 100 * sd / statistics.fmean(values),
            )
        )
    return sorted(out, key=lambda g: (g.workload, _load_order((g.workload, g.load)), g.config_name))


# --- Pareto front -------------------------------------------------------------------------


@dataclass
class ParetoPoint:
    config_name: str
    workload: str
    load: str
    concurrency: int | None
    throughput: float
    latency: float
    runs: int
    on_front: bool = False
    dominated_by: str | None = None  # "config c=N" of a point that beats it on both


@dataclass
class Pareto:
    latency_metric: str
    points: list[ParetoPoint]  # per workload, front first, by latency
    #: the arms with a throughput but none of the latency (no point to place), "config load"
    no_latency: list[str] = field(default_factory=list)

    def why_empty(self) -> str | None:
        """Why arms are missing from the front (None: every arm with a throughput is on it):
        an empty table says why rather than nothing."""
        if not self.points and not self.no_latency:
            return "no run with an output throughput to place"
        if not self.no_latency:
            return None
        shown = ", ".join(self.no_latency[:6])
        more = f" and {len(self.no_latency) - 6} more" if len(self.no_latency) > 6 else ""
        return (
            f"left out, their runs hold an output throughput but no {self.latency_metric}: "
            f"{shown}{more}"
        )

    def workloads(self) -> list[str]:
        return list(dict.fromkeys(p.workload for p in self.points))

    def front(self, workload: str) -> list[ParetoPoint]:
        return [p for p in self.points if p.workload == workload and p.on_front]


def pareto(
    store: LedgerStore, session_id: str | None = None, latency_metric: str | None = None
) -> Pareto:
    """Every arm as (output throughput, latency), and which are on the front, per workload.

    ``latency_metric``: one of ``LATENCY_AXES``; by default the first every arm has (TPOT is
    empty where the stream was too coarse to time tokens).

    Raises:
        ValueError: a latency metric not in ``LATENCY_AXES``.
    """
    with store.connect() as con:
        return read_pareto(con, session_id, latency_metric)


def read_pareto(
    con: duckdb.DuckDBPyConnection, session_id: str | None, latency_metric: str | None = None
) -> Pareto:
    """``pareto`` in an open connection."""
    scope = "" if session_id is None else " AND session_id = ?"
    runs = rows(
        con,
        f"SELECT {_ARM_COLUMNS}, output_throughput, {', '.join(LATENCY_AXES)} "
        f"FROM {COMPARED_RUNS} AS r WHERE output_throughput IS NOT NULL{scope} ORDER BY seq",
        [] if session_id is None else [session_id],
    )
    arms: dict[tuple[str, str, str], list[Row]] = {}
    for r in runs:
        arms.setdefault((r["config_name"], workload_label(r), load_label(r)), []).append(r)
    if latency_metric is None:
        latency_metric = next(
            (m for m in LATENCY_AXES if all(_geomean(r[m] for r in g) for g in arms.values())),
            LATENCY_AXES[-1],
        )
    elif latency_metric not in LATENCY_AXES:
        raise ValueError(f"latency must be one of {', '.join(LATENCY_AXES)}")
    points = []
    no_latency = []
    for (config, workload, load), group in arms.items():
        thr = _geomean(r["output_throughput"] for r in group)
        lat = _geomean(r[latency_metric] for r in group)
        if thr is not None and lat is None:
            no_latency.append(f"{config} {load}")
        if thr is None or lat is None:
            continue
        points.append(
            ParetoPoint(config, workload, load, group[0]["concurrency"], thr, lat, len(group))
        )
    for p in points:
        better = [
            q
            for q in points
            if q is not p
            and q.workload == p.workload
            and q.throughput >= p.throughput
            and q.latency <= p.latency
            and (q.throughput > p.throughput or q.latency < p.latency)
        ]
        p.on_front = not better
        if better:
            best = max(better, key=lambda q: (q.throughput, -q.latency))
            p.dominated_by = f"{best.config_name} {best.load}"
    points.sort(key=lambda p: (p.workload, not p.on_front, p.latency, -p.throughput))
    return Pareto(latency_metric, points, no_latency)


# --- a session's configurations, for the decision log and the TUI --------------------------


@dataclass
class SessionComparison:
    """A session's configurations compared: what differs, the repeats, the Pareto front."""

    diff: Diff
    repeats: list[RepeatGroup]
    pareto: Pareto


def read_session_comparison(
    con: duckdb.DuckDBPyConnection, session_id: str
) -> SessionComparison | None:
    """The comparison of the session's benchmarked configurations (baseline first), or None
    when it has fewer than two."""
    items = read_configurations(con, session_id)
    if len(items) < 2:
        return None
    return SessionComparison(
        diff=diff(items),
        repeats=read_repeat_groups(con, session_id),
        pareto=read_pareto(con, session_id),
    )
