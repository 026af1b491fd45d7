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

import math

#: z_{0.975}: the normal quantile the expansion starts from (df infinite).
Z_975 = 1.959963984540054

#: z_{0.975} + z_{0.80}: a two-sided 5% test with 80% power (runs needed per arm,
#: ``n ~ 2 (Z_SUM_80)^2 (CV / tau)^2``).
Z_SUM_80 = 1.96 + 0.84

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
