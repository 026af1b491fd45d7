"""Is a change real? Noise-aware comparison of two arms of benchmark runs (docs/comparison.md).

The unit is the run (requests inside one run are correlated by batching). For one metric at one
concurrency, with arm A (baseline) and arm B (candidate) of runs:

1. invalid if any run of either arm failed its validity gate, or the workloads differ;
2. insufficient data with one run (or none) in either arm;
3. ``d = mean(ln B) - mean(ln A)``, Welch standard error ``SE = sqrt(s_A^2/n_A + s_B^2/n_B)`` of
   the log values and Welch-Satterthwaite degrees of freedom; ``t = scipy.stats.t.ppf(0.975, df)``;
4. ``change = e^d - 1`` with CI ``e^(d +- t SE) - 1``: the metric's own change, ``value /
   baseline - 1`` ("+" means it went up: the one sign convention, ``schemas.metrics``);
5. ``tau = max(floor, 2 * CV of A-vs-A repeats)`` (floors: the metric table ``schemas.metrics``);
6. judged in the better direction (``direction`` +1: higher is better, -1: latencies), the
   better-signed change ``e^(direction * d) - 1``: improved if its CI low > tau; regressed if
   its CI high < -tau; no-measurable-change if its whole CI lies inside +-tau; else
   inconclusive, with runs needed per arm
   ``n ~ 2 (1.96 + 0.84)^2 (CV / tau)^2`` (80% power at the 5% level to see a change of tau);
7. too-noisy, instead of no-measurable-change or inconclusive, when tau > ``MAX_NOISE_THRESHOLD``
   (25%): on a machine that noisy "no change" would hide effects up to tau. Its runs needed
   are those to see a change of 25% at the measured CV.

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
from schemas.student_t import Z_SUM_80
from schemas.vocab import FLAG_VERDICT_OF_COMPARISON, ComparisonVerdict

#: metric -> (direction, noise floor), from the metric table so views and runner agree.
METRIC_RULES: dict[str, tuple[int, float]] = {
    m.name: (m.direction, m.noise_floor) for m in COMPARED_METRICS if m.noise_floor is not None
}

CONFIDENCE = 0.95
#: Above this noise threshold tau (a fraction) a comparison does not claim "no measurable
#: change": the verdict is "too-noisy" (a 225% tau would call anything under 3x no change).
MAX_NOISE_THRESHOLD = 0.25
#: z_{0.975} + z_{0.80}: two-sided 5% test with 80% power (shared with benchmark_deltas' SQL).
_Z_SUM = Z_SUM_80


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


def runs_for(cv: float, effect: float) -> int:
    """Runs per arm to see a change of ``effect`` at a per-run CV ``cv`` (both fractions):
    ``n ~ 2 (1.96 + 0.84)^2 (cv / effect)^2``, at least 3 (80% power, two-sided 5% level)."""
    return max(3, math.ceil(2 * _Z_SUM**2 * (cv / effect) ** 2))


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1) over mean; None for fewer than 2 values or a zero mean."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    mean = float(np.mean(arr))
    if mean == 0:
        return None
    return float(np.std(arr, ddof=1) / abs(mean))


def noise_threshold(
    metric: str, aa_cv: float | None, floor: float | None = None
) -> tuple[float, str]:
    """``tau = max(floor, 2 * CV of A-vs-A repeats)`` and a note saying which one won.

    Raises:
        KeyError: a metric without a floor and none given.
    """
    base = METRIC_RULES[metric][1] if floor is None else floor
    if aa_cv is None or 2 * aa_cv <= base:
        detail = f"floor {base:.0%}" + (
            "" if aa_cv is None else f" (2 x A-vs-A CV = {2 * aa_cv:.2%})"
        )
        return base, detail
    return 2 * aa_cv, f"2 x A-vs-A CV = {2 * aa_cv:.2%} (floor {base:.0%})"


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
    aa_cv: float | None = None,
    floor: float | None = None,
    valid: bool = True,
    invalid_reason: str | None = None,
) -> Comparison:
    """Compare candidate runs against baseline runs on ``metric`` (see the module docstring).

    ``direction`` and ``floor`` default to the metric's row of the metric table;
    ``aa_cv`` is the coefficient of variation of A-vs-A repeats (None: floor only);
    ``valid`` false (a run failed its gate, or the workloads differ) gives ``invalid``; a run
    whose value is missing (None) or not positive gives ``insufficient-data``.

    Raises:
        KeyError: an unknown metric without ``direction`` and ``floor``.
    """
    if direction is None:
        direction = METRIC_RULES[metric][0]
    tau, source = noise_threshold(metric, aa_cv, floor)
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
    runs_needed = None
    notes = None
    verdict: ComparisonVerdict
    if better_low > tau:
        verdict = "improved"
    elif better_high < -tau:
        verdict = "regressed"
    elif better_low >= -tau and better_high <= tau:
        verdict = "no-measurable-change"
    else:
        verdict = "inconclusive"
        # The pooled SD of ln values approximates the per-run CV.
        cv = math.sqrt((np.var(la, ddof=1) + np.var(lb, ddof=1)) / 2)
        runs_needed = runs_for(cv, tau)
        if runs_needed <= min(len(a), len(b)):
            runs_needed = min(len(a), len(b)) + 2
            notes = "the change sits near the noise threshold: more runs narrow the CI"
    if tau > MAX_NOISE_THRESHOLD and verdict in ("no-measurable-change", "inconclusive"):
        # tau = 2 x the A-vs-A CV here (floors are far below 25%): that CV is the machine's noise.
        noise_cv = max(tau / 2, math.sqrt((np.var(la, ddof=1) + np.var(lb, ddof=1)) / 2))
        verdict = "too-noisy"
        runs_needed = runs_for(noise_cv, MAX_NOISE_THRESHOLD)
        notes = (
            f"noise threshold {tau:.0%} (per-run CV {noise_cv:.0%}) is above {MAX_NOISE_THRESHOLD:.0%}: "
            f"too noisy to tell a change under {tau:.0%} from none; ~{runs_needed} runs per arm would "
            f"resolve a {MAX_NOISE_THRESHOLD:.0%} change at this CV (or quiet the machine)"
        )
    return Comparison(
        **base,
        change=math.exp(d) - 1,
        ci_low=math.exp(d - t * se) - 1,
        ci_high=math.exp(d + t * se) - 1,
        verdict=verdict,
        runs_needed=runs_needed,
        notes=notes,
    )


#: A flag's measured verdict (``finding_recorded``) from its throughput verdicts at every concurrency.
FLAG_VERDICTS = FLAG_VERDICT_OF_COMPARISON


def flag_verdict(verdicts: Sequence[str]) -> str | None:
    """The flag verdict when every concurrency agrees (improved/regressed/no change), else None.

    An overall claim needs consistency across concurrencies (docs/comparison.md).
    """
    if not verdicts or len(set(verdicts)) != 1:
        return None
    return FLAG_VERDICTS.get(verdicts[0])
