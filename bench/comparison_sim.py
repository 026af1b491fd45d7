"""How often the comparison rule decides wrongly: a simulation (docs/comparison.md).

Arms of n runs each are drawn from a lognormal around a level (per-run CV c), the candidate's
level a known factor away from the baseline's, and judged by ``runners.compare.compare`` (the
rule itself, not a copy) with the default 5% threshold. For each (true change, CV, n) it
prints how often each verdict came out, and the false decisions:

- a change called (improved / regressed) when the true change lies inside the threshold
  (A/A, +2.5%): the rule's false-alarm rate;
- the wrong direction, or "no-measurable-change", when the true change lies beyond it
  (+10%, -10%, -67%): a missed or reversed effect.

Undecided verdicts (inconclusive, too-noisy) are not false decisions: they ask for runs.

    PYTHONPATH=$PWD .venv/bin/python bench/comparison_sim.py [--reps 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter

import numpy as np

from runners.compare import compare

CHANGES = (0.0, 0.025, 0.10, -0.10, -0.67)
CVS = (0.02, 0.05, 0.10, 0.20)
RUNS = (3, 5, 10)
THRESHOLD = 0.05
SHORT = {
    "improved": "impr",
    "regressed": "regr",
    "no-measurable-change": "none",
    "inconclusive": "inc",
    "too-noisy": "noisy",
}


def false_decision(change: float, verdict: str) -> bool:
    """Whether ``verdict`` contradicts a true ``change`` (a fraction) at the 5% threshold."""
    if abs(change) < THRESHOLD:
        return verdict in ("improved", "regressed")
    if change > 0:
        return verdict in ("regressed", "no-measurable-change")
    return verdict in ("improved", "no-measurable-change")


def scenario(change: float, cv: float, n: int, reps: int, rng: np.random.Generator) -> Counter:
    sigma = math.sqrt(math.log1p(cv**2))  # the lognormal whose CV is cv
    counts: Counter = Counter()
    for _ in range(reps):
        a = 1000.0 * np.exp(rng.normal(0.0, sigma, n))
        b = 1000.0 * (1 + change) * np.exp(rng.normal(0.0, sigma, n))
        counts[compare("output_throughput", list(a), list(b)).verdict] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.reps} simulated comparisons per row, threshold {THRESHOLD:.0%}, seed {args.seed}\n"
    )
    print("| true change | CV | runs/arm | " + " | ".join(SHORT.values()) + " | false |")
    print("|---:|---:|---:|" + "---:|" * (len(SHORT) + 1))
    for change in CHANGES:
        for cv in CVS:
            for n in RUNS:
                counts = scenario(change, cv, n, args.reps, rng)
                shares = [100 * counts[v] / args.reps for v in SHORT]
                wrong = sum(c for v, c in counts.items() if false_decision(change, v))
                print(
                    f"| {change:+.1%} | {cv:.0%} | {n} | "
                    + " | ".join(f"{x:.1f}" for x in shares)
                    + f" | {100 * wrong / args.reps:.2f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
