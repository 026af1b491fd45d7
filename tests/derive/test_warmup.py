"""The cold-first-run rule's floor is output throughput's practical threshold."""

from __future__ import annotations

import pytest

from ledger.derive.warmup import NOISE_FLOOR, cold_first_run
from schemas.metrics import BY_NAME


def test_the_floor_is_the_comparison_rules_threshold() -> None:
    assert NOISE_FLOOR == BY_NAME["output_throughput"].noise_floor == 0.05


@pytest.mark.parametrize(
    ("first", "flagged"),
    [
        (1440.0 * 0.96, False),  # -4%: inside the 5% threshold, no verdict would move
        (1440.0 * 0.94, True),  # -6%: beyond it, and MAD 0 makes the z-score infinite
    ],
)
def test_a_first_run_is_cold_only_beyond_the_threshold(first: float, flagged: bool) -> None:
    cold = cold_first_run([first, 1440.0, 1440.0, 1440.0])
    assert (cold is not None) is flagged
    if cold is not None:
        assert cold.gap == pytest.approx(-0.06)
        assert cold.median == 1440.0


def test_the_floor_is_settable() -> None:
    series = [1440.0 * 0.96, 1440.0, 1440.0, 1440.0]
    assert cold_first_run(series) is None
    cold = cold_first_run(series, noise_floor=0.03)
    assert cold is not None and cold.gap == pytest.approx(-0.04)
