"""The measuring commands' results as JSON: ``tuneledger run bench|plan|spec|tune --json`` and
the MCP tools ``run_bench``, ``run_plan``, ``run_spec``, ``run_tune`` return the same objects,
built here once.

A run: event id, configuration, load, repeat, validity with its notes, the headline metrics.
The verdict table: per candidate configuration, load and metric, the geometric means,
``change_pct = value / baseline - 1`` with its 95% CI, the noise threshold ``tau_pct``, the
runs per arm and the verdict (``runs_needed`` when inconclusive). Percentages are percent,
metrics in their units (docs/metrics.md).
"""

from __future__ import annotations

from typing import Any

from ledger.read.json_values import jsonable
from schemas.metrics import HEADLINE_METRICS

#: The headline metrics of the verdict table (``run plan`` without ``--all-metrics``).
SHOWN_METRICS = tuple(m.name for m in HEADLINE_METRICS)


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def run_json(point: Any) -> dict[str, Any]:
    """One benchmark run of the built-in client (a ``SweepPoint``)."""
    m = point.event.metrics
    return jsonable(
        {
            "event_id": str(point.event.event_id),
            "config_name": point.event.config_name,
            "concurrency": point.concurrency,
            "request_rate": point.request_rate,
            "repeat": point.repeat,
            "valid": point.run.valid,
            "notes": list(point.run.notes),
            "completed": m.completed,
            "failed": m.failed,
            "output_throughput": m.output_throughput,
            "median_ttft_ms": m.median_ttft_ms,
            "p99_ttft_ms": m.p99_ttft_ms,
            "median_tpot_ms": m.median_tpot_ms,
            "median_itl_ms": m.median_itl_ms,
        }
    )


def event_run_json(event: Any) -> dict[str, Any]:
    """One benchmark run imported from another tool (its ``benchmark_completed``)."""
    m = event.metrics
    return jsonable(
        {
            "event_id": str(event.event_id),
            "config_name": event.config_name,
            "concurrency": event.concurrency,
            "request_rate": event.workload.request_rate if event.workload else None,
            "repeat": event.repeat,
            "valid": event.valid,
            "notes": list(event.validity_notes),
            "completed": m.completed,
            "failed": m.failed,
            "output_throughput": m.output_throughput,
            "median_ttft_ms": m.median_ttft_ms,
            "p99_ttft_ms": m.p99_ttft_ms,
            "median_tpot_ms": m.median_tpot_ms,
            "median_itl_ms": m.median_itl_ms,
        }
    )


def verdict_rows(result: Any, metrics: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The plan's verdict table (``runners.plan.verdict_table``) as rows of numbers."""
    return [
        jsonable(
            {
                "config_name": c.config_name,
                "concurrency": c.concurrency,
                "request_rate": c.request_rate,
                "metric": c.metric,
                "baseline_mean": c.baseline_mean,
                "mean": c.mean,
                "baseline_cv_pct": _pct(c.baseline_cv),
                "cv_pct": _pct(c.cv),
                "change_pct": _pct(c.change),
                "ci_low_pct": _pct(c.ci_low),
                "ci_high_pct": _pct(c.ci_high),
                "tau_pct": _pct(c.noise_threshold),
                "baseline_runs": c.baseline_runs,
                "runs": c.runs,
                "verdict": c.verdict,
                "runs_needed": c.runs_needed,
                "event_id": str(c.event_id),
            }
        )
        for c in result.comparisons
        if not metrics or c.metric in metrics
    ]


def plan_json(result: Any, session_id: str | None, all_metrics: bool) -> dict[str, Any]:
    """A ``PlanResult``: the verdicts, the measured flag findings, what is missing and why."""
    return {
        "session_id": session_id,
        "verdicts": verdict_rows(result, None if all_metrics else SHOWN_METRICS),
        "findings": [
            jsonable(
                {
                    "event_id": str(f.event_id),
                    "flag": f.flag,
                    "verdict": f.verdict,
                    "message": f.message,
                }
            )
            for f in result.findings
        ],
        "missing": [
            jsonable(
                {
                    "config_name": f.config_name,
                    "repeat": f.repeat,
                    "loads": f.loads,
                    "attempts": f.attempt + 1,
                    "cause": f.cause,
                }
            )
            for f in result.missing
        ],
        "not_compared": list(dict.fromkeys(result.unmeasured)),
        "runs": len(result.points),
    }


def spec_json(result: Any, trials: list[Any], session_id: str | None) -> dict[str, Any]:
    """Speculative-decoding trials (``runners.spec.run_spec``): the plan's object (headline
    verdicts) and one row per trial."""
    return {
        **plan_json(result, session_id, False),
        "trials": [
            jsonable(
                {
                    "event_id": str(t.event_id),
                    "trial_id": t.trial_id,
                    "algorithm": t.algorithm,
                    "accept_length": t.accept_length,
                    "accept_length_source": t.accept_length_source,
                    "output_throughput_change_pct": _pct(t.output_throughput_change),
                    "verdict": t.verdict,
                }
            )
            for t in trials
        ],
    }


def tune_json(report: Any) -> dict[str, Any]:
    """A kernel tune's report (``runners.moe.tune.run_tune``): its outcome, the config files
    written, what was measured, reused and rejected, and the tuned results."""
    return jsonable(
        {
            "tune_id": report.tune_id,
            "outcome": report.outcome,
            "summary": report.summary,
            "output_file": str(report.output_file) if report.output_file else None,
            # the _down file of a two-config tune (None for one config)
            "down_file": str(report.down_file) if getattr(report, "down_file", None) else None,
            "measured": report.measured,
            "reused": report.reused,
            "rejected": report.rejected,
            "seconds": report.seconds,
            "results": report.results,
        }
    )
