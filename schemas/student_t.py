"""Student's t critical values for the views' comparisons, where SQL has no t quantile.

``runners.compare`` judges a change with ``scipy.stats.t.ppf(0.975, df)`` (Welch's df,
docs/comparison.md). ``benchmark_deltas`` applies the same rule in SQL to arms no comparison event
covers, and DuckDB has no t distribution: this module gives the critical value as an SQL
expression (``t975_sql``) and as Python (``t975``, for tests), within 0.08% of scipy's:

- df < 16: ``ln t`` interpolated linearly in ``u = 1/df`` between the 16 points
  ``u = k/16`` of ``T_975`` (``ln t`` is nearly linear in 1/df; checked against scipy by
  ``tests/runners/test_compare.py``);
- df >= 16: the Cornish-Fisher expansion of the t quantile in powers of 1/df (Abramowitz &
  Stegun 26.7.5, three terms), within 2e-5;
- df infinite or undefined (every run equal): z.
"""

from __future__ import annotations

import functools
import math

#: z_{0.975}: the normal quantile the expansion starts from (df infinite).
Z_975 = 1.959963984540054

#: z_{0.80}: the one-sided quantile of 80% power (the runs a comparison needs, ``runs_needed``).
Z_80 = 0.8416212335729143

#: The most runs per arm ``runs_needed`` counts up to; beyond it a comparison says "more than".
MAX_RUNS_PER_ARM = 200

#: Above this many runs per arm to tell no change from a change of tau, a comparison that has
#: not decided is "too-noisy": the machine's spread, not the run count, is what to fix.
MAX_PRACTICAL_RUNS = 30

#: Points of the interpolation: 1/df = k/16 for k = 1..16.
GRID = 16

#: t_{0.975, df} at df = 16/k, k = 1..16 (two-sided 95%), to 6 decimals.
T_975: tuple[float, ...] = (
    2.119905,  # df = 16/1
    2.306004,  # df = 16/2
    2.523002,  # df = 16/3
    2.776445,  # df = 16/4
    3.072829,  # df = 16/5
    3.419770,  # df = 16/6
    3.826208,  # df = 16/7
    4.302653,  # df = 16/8
    4.861473,  # df = 16/9
    5.517245,  # df = 16/10
    6.287175,  # df = 16/11
    7.191585,  # df = 16/12
    8.254515,  # df = 16/13
    9.504417,  # df = 16/14
    10.974997,  # df = 16/15
    12.706205,  # df = 16/16
)


def _expansion_terms() -> tuple[float, float, float]:
    z = Z_975
    return (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
    )


def t975(df: float) -> float:
    """t_{0.975, df} as ``t975_sql`` computes it (df >= 1; ``math.inf``: z).

    Raises:
        ValueError: df below 1 (Welch's df is at least 1 with 2+ runs per arm).
    """
    if df < 1:
        raise ValueError(f"df {df} is below 1")
    if math.isinf(df):
        return Z_975
    if df >= GRID:
        g1, g2, g3 = _expansion_terms()
        return Z_975 + g1 / df + g2 / df**2 + g3 / df**3
    x = GRID / df
    k = min(int(x), GRID - 1)
    w = x - k
    return math.exp((1 - w) * math.log(T_975[k - 1]) + w * math.log(T_975[k]))


def _cf80(df: float) -> float:
    """t_{0.80, df} by the same Cornish-Fisher expansion as ``t975`` (within 0.1% of scipy's
    for df >= 2, the smallest df of 2 runs per arm)."""
    z = Z_80
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


@functools.cache
def runs_factor(n: int) -> float:
    """``(t_{0.975, 2n-2} + t_{0.80, 2n-2}) sqrt(2 / n)``: the CI half-width, in per-run log SDs,
    that n runs per arm leave with 80% power (both arms of n runs and one spread: Welch's df is
    2n - 2). A comparison decides once that half-width fits between its change and the nearest
    threshold (docs/comparison.md)."""
    df = 2 * n - 2
    return (t975(df) + _cf80(df)) * math.sqrt(2 / n)


def runs_needed(log_sd: float, distance: float) -> int | None:
    """The fewest runs per arm (2..``MAX_RUNS_PER_ARM``) whose ``runs_factor`` x ``log_sd`` fits
    in ``distance`` (the log change's distance to the nearest threshold); None beyond the cap."""
    if distance <= 0:
        return None
    if log_sd <= 0:
        return 2
    for n in range(2, MAX_RUNS_PER_ARM + 1):
        if runs_factor(n) * log_sd <= distance:
            return n
    return None


def runs_needed_sql(log_sd: str, distance: str) -> str:
    """``runs_needed`` as an SQL scalar subquery over the DOUBLE expressions given."""
    factors = ", ".join(f"({n}, {runs_factor(n)!r})" for n in range(2, MAX_RUNS_PER_ARM + 1))
    return (
        f"(SELECT min(f.n) FROM (VALUES {factors}) f(n, k) "
        f"WHERE ({distance}) > 0 AND f.k * ({log_sd}) <= ({distance}))"
    )


def t975_sql(df: str) -> str:
    """An SQL expression of ``t975`` for the DOUBLE expression ``df`` (NULL or infinite: z)."""
    table = ", ".join(f"ln({v})" for v in T_975)
    g1, g2, g3 = _expansion_terms()
    x = f"({GRID} / ({df}))"
    k = f"least(floor({x})::INTEGER, {GRID - 1})"
    return (
        f"CASE WHEN ({df}) IS NULL OR isinf({df}) THEN {Z_975} "
        f"WHEN ({df}) >= {GRID} THEN {Z_975} + {g1} / ({df}) + {g2} / ({df}) ^ 2 + {g3} / ({df}) ^ 3 "
        f"ELSE exp((1 - ({x} - {k})) * [{table}][{k}] + ({x} - {k}) * [{table}][{k} + 1]) END"
    )
