"""The comparison rule's error rates by simulation (the figures of docs/comparison.md come from
bench/comparison_sim.py, which judges with the rule itself):
a false decision stays under the 2.5% per side of its 95% intervals, a 3x drop is decided at
3 runs per arm, and the power grows with runs."""

from __future__ import annotations

import numpy as np
import pytest

from bench.comparison_sim import false_decision, scenario

REPS = 400


def _share(counts, verdicts) -> float:
    return sum(counts[v] for v in verdicts) / REPS


@pytest.mark.parametrize(("change", "cv"), [(0.0, 0.05), (0.025, 0.05), (0.0, 0.20)])
def test_a_change_inside_the_threshold_is_rarely_called_one(change: float, cv: float) -> None:
    for n in (3, 10):
        counts = scenario(change, cv, n, REPS, np.random.default_rng(7))
        wrong = sum(c for v, c in counts.items() if false_decision(change, v)) / REPS
        assert wrong <= 0.025, (change, cv, n, counts)


def test_a_3x_drop_is_decided_at_3_runs() -> None:
    counts = scenario(-0.67, 0.20, 3, REPS, np.random.default_rng(7))
    assert _share(counts, ["regressed"]) >= 0.95, counts


def test_the_power_grows_with_runs() -> None:
    shares = [
        _share(scenario(-0.10, 0.05, n, REPS, np.random.default_rng(7)), ["regressed"])
        for n in (3, 5, 10)
    ]
    assert shares[0] < shares[1] < shares[2], shares
    assert shares[2] > 0.5  # docs/comparison.md: 62% at 10 runs per arm
