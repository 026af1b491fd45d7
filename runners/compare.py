"""Is a change real? Noise-aware comparison of two arms of benchmark runs (docs/comparison.md).

The unit is the run (requests inside one run are correlated by batching). For one metric at one
concurrency, with arm A (baseline) and arm B (candidate) of runs:

1. invalid if any run of either arm failed its validity gate, or the workloads differ;
2. insufficient data with one run (or none) in either arm;
3. ``d = mean(ln B) - mean(ln A)``, Welch standard error ``SE = sqrt(s_A^2/n_A + s_B^2/n_B)`` of
   the log values and Welch-Satterthwaite degrees of freedom; ``t = scipy.stats.t.ppf(0.975, df)``;
4. ``change = e^d - 1`` with CI ``e^(d +- t SE) - 1``: the metric's own change, ``value /
   baseline - 1`` ("+" means it went up: the one sign convention, ``schemas.metrics``);
5. ``tau``: the practical threshold, the smallest change worth calling one: the caller's
   (``threshold``: a plan's ``[plan] threshold``, ``run plan --threshold``), else the metric
   table's default (``schemas.metrics``: 5%, 10% for p99). It does not depend on the noise:
   the noise is in the CI, which narrows as runs are added, so power grows with runs;
6. judged in the better direction (``direction`` +1: higher is better, -1: latencies), the
   better-signed change ``e^(direction * d) - 1``: improved if its CI low > tau; regressed if
   its CI high < -tau; no-measurable-change if its whole CI lies inside +-tau; else
   inconclusive, with the runs needed per arm from the same rule: the fewest n whose CI
   half-width ``(t_.975 + t_.80) s sqrt(2/n)`` (s the pooled SD of the log values, 80% power)
   fits between d and the nearest threshold (``schemas.student_t.runs_needed``);
7. too-noisy, instead of inconclusive, when neither the observed change nor no change at all
   would be decided within ``MAX_PRACTICAL_RUNS`` (30) runs per arm at this spread.

All changes, CI bounds and tau are fractions (0.05 = +5%). ``baseline_mean`` and ``mean``
are geometric means (``e^mean(ln x)``): the central values the change compares, so that
``change == mean / baseline_mean - 1``; ``baseline_cv`` and ``cv`` are
each arm's spread (coefficient of variation over its runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from schemas.metrics import COMPARED_METRICS
from schemas.student_t import MAX_PRACTICAL_RUNS, MAX_RUNS_PER_ARM, runs_needed
from schemas.vocab import FLAG_VERDICT_OF_COMPARISON, ComparisonVerdict

#: metric -> (direction, default practical threshold), from the metric table so views and runner agree.
METRIC_RULES: dict[str, tuple[int, float]] = {
    m.name: (m.direction, m.noise_floor) for m in COMPARED_METRICS if m.noise_floor is not None
}

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing arm B against arm A on one metric (fields as ``ComparisonCompleted``)."""

    metric: str
    better_direction: int
    baseline_runs: int
    runs: int
    baseline_mean: float | None
    mean: float | None
    change: float | None
    ci_low: float | None
    ci_high: float | None
    noise_threshold: float
    noise_source: str
    verdict: ComparisonVerdict
    runs_needed: int | None = None
    notes: str | None = None
    baseline_cv: float | None = None
    cv: float | None = None


def central_value(values: Sequence[float]) -> float | None:
    """The geometric mean when every value is positive (what the log-ratio change compares), else the mean."""
    if not values:
        return None
    arr = np.asarray(values, dtype=float)
    if np.all(arr > 0):
        return float(np.exp(np.mean(np.log(arr))))
    return float(np.mean(arr))


def decision_distance(d: float, tau: float) -> float:
    """How far the better-signed log change ``d`` is from the nearest of the thresholds
    ``ln(1 + tau)`` and ``ln(1 - tau)``: the CI half-width below which the rule decides."""
    up, down = math.log1p(tau), math.log1p(-tau)
    return min(abs(d - up), abs(d - down))


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1) over mean; None for fewer than 2 values or a zero mean."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    mean = float(np.mean(arr))
    if mean == 0:
        return None
    return float(np.std(arr, ddof=1) / abs(mean))


def _beyond_practical(runs: int | None) -> bool:
    return runs is None or runs > MAX_PRACTICAL_RUNS


def practical_threshold(metric: str, threshold: float | None = None) -> tuple[float, str]:
    """``tau``, the smallest change worth calling one, and a note saying where it came from:
    the caller's ``threshold`` (a fraction), else the metric table's default.

    Raises:
        KeyError: a metric without a default and none given.
        ValueError: a threshold outside (0, 1).
    """
    if threshold is None:
        tau = METRIC_RULES[metric][1]
        return tau, f"threshold {tau:.0%} (default for {metric})"
    if not 0 < threshold < 1:
        raise ValueError(f"threshold {threshold} is not a fraction in (0, 1)")
    return threshold, f"threshold {threshold:.1%} (set)"


def welch(log_a: np.ndarray, log_b: np.ndarray) -> tuple[float, float, float]:
    """``(d, SE, df)`` of the difference of means of B and A (Welch); df is inf when SE is 0."""
    d = float(np.mean(log_b) - np.mean(log_a))
    va = float(np.var(log_a, ddof=1)) / len(log_a)
    vb = float(np.var(log_b, ddof=1)) / len(log_b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, 0.0, math.inf
    df = (va + vb) ** 2 / (va**2 / (len(log_a) - 1) + vb**2 / (len(log_b) - 1))
    return d, se, df


def compare(
    metric: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    direction: int | None = None,
    threshold: float | None = None,
    valid: bool = True,
    invalid_reason: str | None = None,
) -> Comparison:
    """Compare candidate runs against baseline runs on ``metric`` (see the module docstring).

    ``direction`` and ``threshold`` (tau, a fraction) default to the metric's row of the
    metric table; ``valid`` false (a run failed its gate, or the workloads differ) gives
    ``invalid``; a run whose value is missing (None) or not positive gives ``insufficient-data``.

    Raises:
        KeyError: an unknown metric without ``direction`` and ``threshold``.
        ValueError: a threshold outside (0, 1).
    """
    if direction is None:
        direction = METRIC_RULES[metric][0]
    tau, source = practical_threshold(metric, threshold)
    a = [float(x) for x in baseline if x is not None]
    b = [float(x) for x in candidate if x is not None]
    base: dict[str, Any] = dict(
        metric=metric,
        better_direction=direction,
        baseline_runs=len(baseline),
        runs=len(candidate),
        baseline_mean=central_value(a),
        mean=central_value(b),
        baseline_cv=coefficient_of_variation(a),
        cv=coefficient_of_variation(b),
        noise_threshold=tau,
        noise_source=source,
    )
    if not valid:
        return Comparison(
            **base, change=None, ci_low=None, ci_high=None, verdict="invalid", notes=invalid_reason
        )
    unusable = (len(baseline) - len(a)) + (len(candidate) - len(b)) + sum(x <= 0 for x in a + b)
    if unusable:
        # A run without the metric (no ITL when every token came in one chunk) or with a zero
        # (TPOT when the last chunk came in the same read as the first) has no logarithm.
        return Comparison(
            **base,
            change=None,
            ci_low=None,
            ci_high=None,
            verdict="insufficient-data",
            notes=f"{unusable} run(s) without a positive {metric}: no log ratio",
        )
    if not a or not b:
        return Comparison(
            **base,
            change=None,
            ci_low=None,
            ci_high=None,
            verdict="insufficient-data",
            notes="no runs in one arm",
        )
    if len(a) < 2 or len(b) < 2:
        point = math.exp(float(np.mean(np.log(b)) - np.mean(np.log(a)))) - 1
        return Comparison(
            **base,
            change=point,
            ci_low=None,
            ci_high=None,
            verdict="insufficient-data",
            notes="one run per arm proves nothing: repeat (3+ runs per arm, interleaved)",
        )
    la, lb = np.log(a), np.log(b)
    d, se, df = welch(la, lb)
    t = (
        float(stats.t.ppf(0.5 + CONFIDENCE / 2, df))
        if math.isfinite(df)
        else float(stats.norm.ppf(0.975))
    )
    # Judged in the better direction; stored as the metric's own change (value / baseline - 1).
    signed = direction * d
    better_low = math.exp(signed - t * se) - 1
    better_high = math.exp(signed + t * se) - 1
    needed: int | None = None
    notes = None
    verdict: ComparisonVerdict
    if better_low > tau:
        verdict = "improved"
    elif better_high < -tau:
        verdict = "regressed"
    elif better_low >= -tau and better_high <= tau:
        verdict = "no-measurable-change"
    else:
        verdict, needed, notes = _undecided(la, lb, signed, tau)
    return Comparison(
        **base,
        change=math.exp(d) - 1,
        ci_low=math.exp(d - t * se) - 1,
        ci_high=math.exp(d + t * se) - 1,
        verdict=verdict,
        runs_needed=needed,
        notes=notes,
    )


def _undecided(
    la: np.ndarray, lb: np.ndarray, signed: float, tau: float
) -> tuple[ComparisonVerdict, int | None, str | None]:
    """The verdict, runs needed per arm and note of a CI that decides nothing (module doc, 6-7)."""
    # The pooled SD of the ln values: the per-run spread the CI narrows from.
    log_sd = math.sqrt((np.var(la, ddof=1) + np.var(lb, ddof=1)) / 2)
    needed = runs_needed(log_sd, decision_distance(signed, tau))
    notes = None
    have = min(len(la), len(lb))
    if needed is not None and needed <= have:
        # Welch's df and scipy's t of the runs at hand are wider than the plan's 2n - 2.
        needed = have + 2
        notes = "the change sits near the threshold: more runs narrow the CI"
    elif needed is None:
        notes = (
            f"the change sits at the {tau:.0%} threshold: more than {MAX_RUNS_PER_ARM} runs "
            "per arm to decide"
        )
    at_zero = runs_needed(log_sd, decision_distance(0.0, tau))
    if _beyond_practical(needed) and _beyond_practical(at_zero):
        return (
            "too-noisy",
            needed,
            f"per-run spread {log_sd:.0%}: even no change would need "
            f"{'more than ' + str(MAX_RUNS_PER_ARM) if at_zero is None else at_zero} runs per "
            f"arm to be told from a {tau:.0%} change; quiet the machine (or raise the threshold)",
        )
    return "inconclusive", needed, notes


#: A flag's measured verdict (``finding_recorded``) from its throughput verdicts at every concurrency.
FLAG_VERDICTS = FLAG_VERDICT_OF_COMPARISON


def flag_verdict(verdicts: Sequence[str]) -> str | None:
    """The flag verdict when every concurrency agrees (improved/regressed/no change), else None.

    An overall claim needs consistency across concurrencies (docs/comparison.md).
    """
    if not verdicts or len(set(verdicts)) != 1:
        return None
    return FLAG_VERDICTS.get(verdicts[0])
