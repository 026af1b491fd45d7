"""The comparisons of ``ledger.read.comparison`` as tables: headers and text cells, the same for
the CLI (``tuneledger compare``), the TUI's Compare pane and the decision log."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.read.comparison import Diff, Pareto, RepeatGroup
from ledger.read.model import SessionReport
from schemas.metrics import unit_of

#: Decimals per unit (as the decision log's metric tables).
_DECIMALS = {"ms": 2, "tok/s": 1, "req/s": 3}


@dataclass
class TextTable:
    """Headers, rows of text cells, and which columns are numbers (right-aligned)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    note: str = ""


def number(metric: str, value: float | None) -> str:
    """A metric's value in its unit's decimals (``-`` when absent)."""
    if value is None:
        return "-"
    unit = unit_of(metric) or ""
    return f"{value:.{_DECIMALS.get(unit, 2)}f}"


def change(pct: float | None) -> str:
    return "" if pct is None else f"{pct:+.1f}%"


def metric_label(metric: str) -> str:
    unit = unit_of(metric)
    return f"{metric} ({unit})" if unit else metric


def diff_tables(d: Diff) -> list[TextTable]:
    """What differs (flags, environment, facts), then the metrics with their changes."""
    names = [i.name for i in d.items]
    kinds = {i.kind for i in d.items}
    if d.everything:
        hidden = f"; {d.same} flag(s) and fact(s) the same, shown" if d.same else ""
    else:
        hidden = (
            f"; {d.same} flag(s) and fact(s) the same hidden (--all shows them)" if d.same else ""
        )
    what = TextTable(
        title="every flag and fact" if d.everything else "what differs",
        headers=["", "name", *names],
        rows=[[r.section, r.name, *r.values] for r in d.rows],
        numeric=[False] * (2 + len(names)),
        note=f"{d.differ} row(s) differ{hidden}"
        + "".join(
            f"; not recorded for {name} (its server run recorded none), so not "
            f"compared: {', '.join(facts)}"
            for name, facts in d.unrecorded.items()
        )
        + (
            ""
            if kinds == {"server run"}
            else "; a configuration's setup is its latest server run's"
        ),
    )
    first = names[0]
    metrics = TextTable(
        title=f"metrics (change against {first}: value / {first} - 1)",
        headers=["workload", "load", "metric", *[f"{n}" for n in names]],
        rows=[
            [
                m.workload,
                m.load,
                metric_label(m.metric),
                *[
                    f"{number(m.metric, v)} ({n} run{'s' if n != 1 else ''})"
                    + (f" {change(c)}" if c is not None else "")
                    if v is not None
                    else "-"
                    for v, n, c in zip(m.values, m.runs, m.changes_pct, strict=True)
                ],
            ]
            for m in d.metrics
        ],
        numeric=[False, False, False] + [True] * len(names),
        note=(
            "geometric means over the runs benchmark_deltas compares (a standing comparison's, "
            "else every valid run); runs: how many"
            if d.metrics
            else "no valid benchmark run"
        ),
    )
    return [what, metrics]


def repeats_table(groups: list[RepeatGroup]) -> TextTable:
    """One row per arm: runs, geometric mean [its 95% CI], min..max, CV."""
    metric = groups[0].metric if groups else "output_throughput"
    return TextTable(
        title=f"repeats grouped: {metric_label(metric)}",
        headers=["configuration", "workload", "load", "runs", "mean [95% CI]", "min .. max", "CV"],
        rows=[
            [
                g.config_name,
                g.workload,
                g.load,
                str(len(g.values)),
                number(metric, g.mean)
                + (
                    f" [{number(metric, g.ci_low)}, {number(metric, g.ci_high)}]"
                    if g.ci_low is not None and g.ci_high is not None
                    else " (one run)"
                ),
                f"{number(metric, g.low)} .. {number(metric, g.high)}",
                "-" if g.cv_pct is None else f"{g.cv_pct:.1f}%",
            ]
            for g in groups
        ],
        numeric=[False, False, False, True, True, True, True],
        note=(
            "geometric mean of the runs benchmark_deltas compares (a standing comparison's, else "
            "every valid run), with its 95% CI e^(mean ln x ± t(0.975, n-1) s_ln / sqrt n)"
        ),
    )


def pareto_table(p: Pareto) -> TextTable:
    """Every arm with its throughput and latency; the front first, per workload."""
    return TextTable(
        title=f"Pareto front: output throughput against {metric_label(p.latency_metric)}",
        headers=[
            "workload",
            "configuration",
            "load",
            "output tok/s",
            p.latency_metric,
            "runs",
            "front",
        ],
        rows=[
            [
                q.workload,
                q.config_name,
                q.load,
                number("output_throughput", q.throughput),
                number(p.latency_metric, q.latency),
                str(q.runs),
                "yes" if q.on_front else f"no (beaten by {q.dominated_by})",
            ]
            for q in p.points
        ],
        numeric=[False, False, False, True, True, True, False],
        note=(
            "on the front: no other arm of the workload has both more throughput and less "
            "latency; geometric means over the runs benchmark_deltas compares"
            + (f"\n{why}" if (why := p.why_empty()) else "")
        ),
    )


# --- the decision log's section ------------------------------------------------------------


def _markdown(t: TextTable) -> str:
    from ledger.export.text import markdown_table

    return markdown_table(t.headers, t.rows, align=["r" if n else "l" for n in t.numeric])


def render_comparison(report: SessionReport, plot: str | None = None) -> list[str]:
    """``## Comparing the configurations`` (none with fewer than two): what differs between
    them, each arm's repeats with their noise band, the Pareto front and, with ``plot`` (a file
    name next to the document), its picture."""
    c = report.comparison
    if c is None:
        return []
    what = diff_tables(c.diff)[0]
    names = ", ".join(f"`{i.name}`" for i in c.diff.items)
    lines = ["## Comparing the configurations", ""]
    if what.rows:
        same = f"; {c.diff.same} other flag(s) and fact(s) are the same" if c.diff.same else ""
        lines += [
            f"What differs between {names} (each configuration's latest server run{same}):",
            "",
            _markdown(what),
            "",
        ]
    else:
        lines += [f"{names}: no flag, environment or startup fact differs.", ""]
    repeats = repeats_table(c.repeats)
    lines += [
        "Repeats of each arm (valid runs), output throughput: mean ± the 95% confidence interval "
        "of the mean, the band a change has to clear.",
        "",
        _markdown(repeats),
        "",
    ]
    p = c.pareto
    front = [q for q in p.points if q.on_front]
    if not front:
        return lines[:-1]
    table = pareto_table(Pareto(p.latency_metric, front))
    beaten = len(p.points) - len(front)
    lines += [
        f"Pareto front of output throughput against {metric_label(p.latency_metric)}: the arms "
        "no other arm beats on both"
        + (
            f" ({beaten} other arm(s) are beaten: `tuneledger compare pareto` lists them)"
            if beaten
            else ""
        )
        + ".",
        "",
        _markdown(
            TextTable(
                table.title, table.headers[:-1], [r[:-1] for r in table.rows], table.numeric[:-1]
            )
        ),
    ]
    if plot:
        lines += [
            "",
            f"![Pareto front: output throughput against {metric_label(p.latency_metric)}]({plot})",
        ]
    return lines
