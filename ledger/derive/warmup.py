"""Cold first runs in a series of repeated benchmark runs: detect them so they can be set aside.

A server's first benchmark after a start pays for work later runs do not (Triton/JIT
compilation, autotuning, CUDA graph or cache warm-up): sgl-project/sglang#18870 measured
1000 tok/s, then 1440 and 1438 on the same setup. Averaging such a run into its arm invents a
+11.8% "improvement" for whatever is compared with it.

The rule (``cold_first_run``) is hyperfine's "first run significantly slower than the rest"
check (hyperfine ``src/benchmark/mod.rs``: modified Z-score of the first run above 14), with the
modified Z-score of Iglewicz and Hoaglin (1993), ``M = 0.6745 (x - median) / MAD`` over the whole
series, and two guards of our own: the first run must be on the worse side (lower throughput),
and its distance from the median of the later runs must exceed output throughput's practical
threshold (``schemas.metrics``: 5%, docs/comparison.md), so that a series whose runs are almost
identical (MAD near 0) does not flag ordinary noise. It needs at least 3 runs (a first and 2 later ones).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from schemas.metrics import BY_NAME

#: hyperfine's threshold on the first run's modified Z-score.
MODIFIED_Z_THRESHOLD = 14.0
#: Iglewicz-Hoaglin's constant: 0.6745 = the 0.75 quantile of the standard normal (MAD -> sigma).
_K = 0.6745
#: The smallest gap called a cold start: output throughput's practical threshold, the smallest
#: change the comparison rule calls one (5%, docs/comparison.md). Why that one and no constant of
#: its own: a first run closer to the others than the threshold moves no verdict (the rule calls
#: a change inside it no change), so setting it aside would drop a run for nothing; one beyond it
#: is a difference the rule would report. ``cold_first_run(noise_floor=...)`` takes another.
NOISE_FLOOR: float = BY_NAME["output_throughput"].noise_floor or 0.05
MIN_RUNS = 3


@dataclass(frozen=True)
class ColdRun:
    """The first run of a series flagged as cold: its ``value``, the ``median`` of the later runs
    (same unit, e.g. tok/s), its relative ``gap`` (negative: slower) and modified ``z`` score."""

    value: float
    median: float
    gap: float
    z: float

    def note(self, metric: str = "output_throughput", unit: str = "tok/s") -> str:
        """One line for a run's validity notes."""
        return (
            f"cold first run set aside (warm-up outlier): {metric} {self.value:g} {unit} vs median "
            f"{self.median:g} of the later runs ({self.gap:+.1%}; modified z-score {self.z:.1f}, "
            f"|z| > {MODIFIED_Z_THRESHOLD:g}: hyperfine's first-run rule)"
        )


def cold_first_run(
    values: Sequence[float | None],
    *,
    higher_is_better: bool = True,
    noise_floor: float = NOISE_FLOOR,
) -> ColdRun | None:
    """``values`` of one metric over a series of repeated runs, in the order they ran.

    Returns a ``ColdRun`` when the first run is a warm-up outlier (see the module doc),
    else ``None`` (also for fewer than ``MIN_RUNS`` values or non-positive ones).
    """
    known = [v for v in values if v is not None and v > 0]
    if len(values) < MIN_RUNS or len(known) < len(values):
        return None
    values = known
    first, later = values[0], values[1:]
    later_median = statistics.median(later)
    gap = first / later_median - 1
    worse = gap < 0 if higher_is_better else gap > 0
    if not worse or abs(gap) <= noise_floor:
        return None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    z = float("inf") if mad == 0 else _K * (first - median) / mad
    if abs(z) <= MODIFIED_Z_THRESHOLD:
        return None
    return ColdRun(
        value=first, median=later_median, gap=gap, z=-abs(z) if higher_is_better else abs(z)
    )
