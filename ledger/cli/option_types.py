"""Option types that keep a value within what the command can use, refused in one line.

click's ``FloatRange`` lets ``nan`` and ``inf`` through (``nan < 0`` is False; ``float("inf")``
is a float), and ``IntRange`` any integer: ``--timeout nan`` switched the limit off, ``--timeout
inf`` made the timer thread die with a traceback, and ``--limit 99999999999999999999999``
reached DuckDB as a LIMIT it cannot bind. These types refuse such values as usage errors
(exit 2) naming the option (docs/reliability.md).
"""

from __future__ import annotations

import math
from typing import Any

import click

#: DuckDB's BIGINT, the type of ``seq``, stream versions and LIMIT.
BIGINT_MAX = 2**63 - 1


class FiniteFloat(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and infinities."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def seconds(*, max_s: float = 365 * 86400.0) -> FiniteFloat:
    """A finite number of seconds, 0 (no limit) up to ``max_s`` (a year: a timer's interval
    past it is refused by the platform's clock)."""
    return FiniteFloat(min=0, max=max_s)


def bigint(min_value: int = 0) -> click.IntRange:
    """An integer from ``min_value`` up to BIGINT's largest."""
    return click.IntRange(min=min_value, max=BIGINT_MAX)
