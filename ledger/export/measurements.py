"""The decision log's measurement sections: ``## Verdicts`` (``benchmark_deltas``, the metrics
that carry one change collapsed into one row) and ``## Server runs`` (each run's startup facts in
one cell, only those its log showed)."""

from __future__ import annotations

from typing import Any

from ledger.derive.verdict_rule import verdict_words
from ledger.derive.views import DELTA_METRICS
from ledger.export.text import (
    NONE_RECORDED,
    code,
    flag_value,
    format_change,
    format_metric,
    load_json,
    markdown_table,
    one_line,
    utc,
)
from ledger.read.model import SessionReport

_METRIC_ORDER = {name: index for index, (name, _, _) in enumerate(DELTA_METRICS)}

#: Metrics that, over one run's duration, all carry the same change (tokens or requests over
#: the same seconds): one row when their changes agree (one change shown three times).
_THROUGHPUTS = ("output_throughput", "request_throughput", "total_throughput")

#: How close two changes must be (percentage points) to be the same change.
_SAME_CHANGE_PP = 0.05


def _number(value: Any) -> str:
    return "?" if value is None else str(value)


def _load(r: dict[str, Any]) -> str:
    parts = []
    if r["concurrency"] is not None:
        parts.append(f"c={r['concurrency']}")
    if r["request_rate"] is not None:
        parts.append(f"{r['request_rate']:g} req/s")
    if r["input_len"] is not None or r["output_len"] is not None:
        parts.append(f"{_number(r['input_len'])}/{_number(r['output_len'])} tok")
    return " ".join(parts) or "—"


def _arm(r: dict[str, Any]) -> tuple[Any, ...]:
    return (
        r["config_seq"],
        r["config_name"] or "",
        r["dataset"] or "",
        r["input_len"] if r["input_len"] is not None else -1,
        r["output_len"] if r["output_len"] is not None else -1,
        r["request_rate"] if r["request_rate"] is not None else -1.0,
        r["concurrency"] if r["concurrency"] is not None else -1,
    )


def collapse_throughputs(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``(label, row)`` per shown row: an arm's throughputs in one row (output's values) when
    their changes and verdicts agree, each on its own otherwise."""
    shown: list[tuple[str, dict[str, Any]]] = []
    by_arm: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        by_arm.setdefault(_arm(r), []).append(r)
    for arm_rows in by_arm.values():
        same = [r for r in arm_rows if r["metric"] in _THROUGHPUTS]
        changes = [r["change_pct"] for r in same]
        agree = (
            len(same) > 1
            and same[0]["metric"] == "output_throughput"
            and None not in changes
            and max(changes) - min(changes) <= _SAME_CHANGE_PP
            and len({r["verdict"] for r in same}) == 1
        )
        for r in arm_rows:
            if agree and r["metric"] in _THROUGHPUTS:
                if r is same[0]:
                    names = ", ".join(x["metric"].removesuffix("_throughput") for x in same)
                    shown.append((f"throughput ({names})", r))
                continue
            shown.append((r["metric"], r))
    return shown


def render_verdicts(report: SessionReport) -> list[str]:
    """``## Verdicts``: each configuration against the baseline, per load and metric."""
    rows = sorted(
        report.deltas,
        key=lambda r: (*_arm(r), _METRIC_ORDER.get(r["metric"], len(_METRIC_ORDER)), r["metric"]),
    )
    lines = ["## Verdicts", ""]
    if not rows:
        return lines + [NONE_RECORDED]
    baselines = sorted({r["baseline_config"] for r in rows if r["baseline_config"]})
    lines += [
        f"Each configuration against {', '.join(code(b) for b in baselines) or 'the baseline'}: "
        "change = value / baseline - 1 (a latency that drops is negative; the verdict knows which "
        "way is better), values the geometric means of the runs with their CV. Verdict rule: "
        f"{rows[0]['verdict_rule']}; {verdict_words()}.",
        "",
    ]

    def with_cv(metric: str, value: Any, cv_pct: Any) -> str:
        text = format_metric(metric, value)
        return text if cv_pct is None or value is None else f"{text} (CV {cv_pct:.1f}%)"

    table = markdown_table(
        ["Config", "Load", "Metric", "Baseline", "Value", "Change", "Runs (base/this)", "Verdict"],
        [
            [
                r["config_name"],
                _load(r),
                label,
                with_cv(r["metric"], r["baseline_value"], r["baseline_cv_pct"]),
                with_cv(r["metric"], r["value"], r["cv_pct"]),
                format_change(r["change_pct"]),
                f"{_number(r['baseline_runs'])}/{_number(r['runs'])}",
                r["verdict"]
                + (f" (~{r['runs_needed']} runs/arm needed)" if r["runs_needed"] else ""),
            ]
            for label, r in collapse_throughputs(rows)
        ],
        align=["l", "l", "l", "r", "r", "r", "r", "l"],
    )
    return lines + [table, "", *_reproduce(report, rows)]


def _reproduce(report: SessionReport, rows: list[dict[str, Any]]) -> list[str]:
    """What made the runs, once per command (a plan names its configurations)."""
    made: dict[str, list[str]] = {}
    for r in rows:
        for config in (r["config_name"], r["baseline_config"]):
            source = report.sources.get((config, r["concurrency"], r["request_rate"]))
            if source and config not in made.setdefault(source, []):
                made[source].append(config)
    if not made:
        return ["Reproduce: not recorded."]
    out = ["Reproduce:", ""]
    for source, configs in made.items():
        if source.endswith(".toml"):
            out.append(f"- {code('tuneledger run plan ' + source)} ({', '.join(configs)})")
        else:
            out.append(f"- {code(source)}")
    return out


# --- server runs ---------------------------------------------------------------------------


def _flag_changes(run: dict[str, Any]) -> list[str]:
    flags = load_json(run["flags"]) or {}
    changes = [f"+{name}{flag_value(flags.get(name, True))}" for name in run["flags_added"] or []]
    changes += [f"-{name}" for name in run["flags_removed"] or []]
    changes += [
        f"~{name}{flag_value(flags.get(name, True))}" for name in run["flags_changed"] or []
    ]
    return changes


def _run_label(run: dict[str, Any]) -> str:
    name = one_line(run["config_name"])
    if not name or name == run["run_id"]:
        return code(run["run_id"])
    return f"{name} ({code(run['run_id'])})"


def startup_facts(r: dict[str, Any]) -> str:
    """The facts a run's log showed, in one cell; what it did not show is left out (a row of
    ``?`` cells told nothing)."""
    facts = [
        f"{name} {r[key]}"
        for key, name in (
            ("max_running_requests", "max_running_requests"),
            ("max_total_num_tokens", "max_total_num_tokens"),
            ("cuda_graph_max_bs", "CUDA graph max bs"),
        )
        if r.get(key) is not None
    ]
    if r.get("piecewise_cuda_graph") is not None:
        reason = one_line(r.get("piecewise_disabled_reason"))
        state = "on" if r["piecewise_cuda_graph"] else ("off" + (f" ({reason})" if reason else ""))
        facts.append(f"piecewise CUDA graph {state}")
    if r.get("moe_kernel_config"):
        facts.append(f"MoE kernel config {r['moe_kernel_config']}")
    return "; ".join(facts) or "—"


def render_server_runs(report: SessionReport) -> list[str]:
    """``## Server runs``: configuration, status, what changed since the previous run, facts."""
    rows = report.server_runs

    def status(r: dict[str, Any]) -> str:
        if r["status"] == "failed":
            cause = r["failure_cause"] or "cause not recorded"
            return f"failed ({cause}): {one_line(r['failure_message'])}".rstrip(": ")
        return str(r["status"])

    def changes(r: dict[str, Any]) -> str:
        if r["previous_run_id"] is None:
            return "first run"
        parts = _flag_changes(r)
        if r["changes_vs_previous"]:
            parts.append(r["changes_vs_previous"])
        return "; ".join(parts) if parts else "no change"

    facts = any(startup_facts(r) != "—" for r in rows)
    occurred = any(r.get("occurred_at") for r in rows)
    headers = ["Config", "Engine", "Status", "Changes vs previous run"]
    headers += (["Startup facts"] if facts else []) + (
        ["Started (log time, UTC)"] if occurred else []
    )
    table = markdown_table(
        headers,
        [
            [_run_label(r), r["engine"] or "—", status(r), changes(r)]
            + ([startup_facts(r)] if facts else [])
            + ([utc(r.get("occurred_at"))] if occurred else [])
            for r in rows
        ],
    )
    return ["## Server runs", "", table]
