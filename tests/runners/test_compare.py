"""The statistical rule: exact Welch numbers, verdict boundaries, and properties (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from runners.compare import (
    coefficient_of_variation,
    compare,
    decision_distance,
    flag_verdict,
    practical_threshold,
)
from schemas.student_t import MAX_PRACTICAL_RUNS, runs_factor, runs_needed
from schemas.vocab import COMPARISON_VERDICTS

noise = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


def test_welch_numbers_by_hand() -> None:
    a = [100.0, 102.0, 98.0]
    b = [110.0, 111.0, 109.0]
    c = compare("output_throughput", a, b)
    la, lb = np.log(a), np.log(b)
    d = lb.mean() - la.mean()
    va, vb = la.var(ddof=1) / 3, lb.var(ddof=1) / 3
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    t = stats.t.ppf(0.975, df)
    assert c.change == pytest.approx(math.exp(d) - 1, abs=1e-12)
    assert c.ci_low == pytest.approx(math.exp(d - t * se) - 1, abs=1e-12)
    assert c.ci_high == pytest.approx(math.exp(d + t * se) - 1, abs=1e-12)
    # the central values shown are the ones the change compares: geometric means
    assert c.baseline_mean == pytest.approx(math.exp(la.mean())) and c.mean == pytest.approx(
        math.exp(lb.mean())
    )
    assert c.mean / c.baseline_mean - 1 == pytest.approx(c.change, abs=1e-12)
    assert c.baseline_cv == pytest.approx(np.std(a, ddof=1) / np.mean(a))
    assert c.noise_threshold == 0.05 and c.verdict == "improved"


def test_shown_means_agree_with_the_change_despite_an_outlier() -> None:
    """A regression: the table printed arithmetic means 51.39 -> 88.27 beside a change of -9.9%."""
    a = [50.0, 52.0, 52.2]
    b = [44.0, 45.0, 175.8]  # one outlier run: the arithmetic mean jumps, the log mean barely moves
    c = compare("output_throughput", a, b)
    assert c.mean / c.baseline_mean - 1 == pytest.approx(c.change, abs=1e-12)
    assert c.cv > 0.8  # and the spread beside it says how much to trust it
    latency = compare("median_ttft_ms", a, b)
    assert latency.change == pytest.approx(latency.mean / latency.baseline_mean - 1, abs=1e-12)


def test_a_threefold_drop_is_decided_at_three_runs() -> None:
    """A measured case: every candidate run (249-297 tok/s) below every baseline run (603-1,324), 3
    runs per arm: the old rule (tau = 2 x the baseline's CV, 81%) said too-noisy, "need ~42
    runs/arm"; the CI of the change excludes -5% by far, so it is regressed."""
    c = compare("output_throughput", [603.0, 1324.0, 800.0], [249.0, 297.0, 270.0])
    assert c.baseline_cv > 0.4  # the noisy baseline the old threshold was built from
    assert c.ci_high < -0.05 and c.verdict == "regressed" and c.runs_needed is None


def test_power_grows_with_runs() -> None:
    """The same +6% change at a 3% per-run spread: undecided at 3 runs per arm, decided once
    the runs the rule asked for are in (the threshold does not grow with the noise)."""
    rng = np.random.default_rng(7)
    draws = rng.normal(0.0, 1.0, size=200)

    # exact sample moments: every arm has mean 0 and SD 1 in its noise, whatever n
    def arm(level: float, n: int) -> list[float]:
        z = draws[:n] - draws[:n].mean()
        z = z / z.std(ddof=1)
        return list(level * np.exp(0.03 * z))

    three = compare("output_throughput", arm(1000, 3), arm(1060, 3))
    assert three.verdict == "inconclusive" and three.runs_needed is not None
    n = three.runs_needed
    decided = compare("output_throughput", arm(1000, n), arm(1060, n))
    assert decided.verdict == "improved"


def test_too_noisy_when_even_no_change_needs_too_many_runs() -> None:
    a, b = [100.0, 140.0, 70.0], [103.0, 72.0, 135.0]
    c = compare("output_throughput", a, b)
    log_sd = math.sqrt((np.var(np.log(a), ddof=1) + np.var(np.log(b), ddof=1)) / 2)
    at_zero = runs_needed(log_sd, math.log(1.05))
    assert at_zero is None or at_zero > MAX_PRACTICAL_RUNS
    assert c.verdict == "too-noisy" and "quiet the machine" in c.notes
    # a change that clears the threshold is still decided on the same machine
    assert compare("output_throughput", a, [800.0, 1100.0, 600.0]).verdict == "improved"
    assert "too-noisy" in COMPARISON_VERDICTS


def test_a_latency_that_drops_is_a_negative_change_and_improved() -> None:
    """One sign convention: change = value / baseline - 1 for every metric; the direction
    decides the verdict (a 20% lower TTFT is -20% and improved, not +25%)."""
    c = compare("median_ttft_ms", [100.0, 101.0, 99.0], [80.0, 81.0, 79.0])
    assert c.better_direction == -1
    assert c.change == pytest.approx(
        math.exp(np.log([80, 81, 79]).mean() - np.log([100, 101, 99]).mean()) - 1
    )
    assert c.change == pytest.approx(c.mean / c.baseline_mean - 1)
    assert c.change < -0.19 and c.verdict == "improved"
    assert c.ci_low < c.change < c.ci_high < 0
    assert c.noise_threshold == 0.05  # TTFT floor


def test_verdicts() -> None:
    assert (
        compare("output_throughput", [100, 100.5, 99.5], [100.2, 99.9, 100.1]).verdict
        == "no-measurable-change"
    )
    assert compare("output_throughput", [100, 101, 99], [80, 81, 79]).verdict == "regressed"
    wide = compare("output_throughput", [100, 106, 94], [108, 114, 102])
    assert wide.verdict == "inconclusive" and wide.runs_needed and wide.runs_needed > 3
    one = compare("output_throughput", [100.0], [150.0])
    assert (
        one.verdict == "insufficient-data"
        and one.change == pytest.approx(0.5)
        and one.ci_low is None
    )
    zero = compare("median_tpot_ms", [0.0, 0.01, 0.02], [0.01, 0.02, 0.02])
    assert (
        zero.verdict == "insufficient-data" and zero.baseline_runs == 3 and "1 run(s)" in zero.notes
    )
    missing = compare("median_itl_ms", [None, 1.0, 1.1], [1.0, 1.0, 1.0])
    assert missing.verdict == "insufficient-data" and missing.baseline_runs == 3
    bad = compare(
        "output_throughput",
        [100, 101],
        [100, 101],
        valid=False,
        invalid_reason="run failed its gate",
    )
    assert bad.verdict == "invalid" and bad.notes == "run failed its gate"


def test_runs_needed_from_the_same_rule() -> None:
    """The runs per arm asked for are the fewest whose CI half-width, (t_.975 + t_.80) s sqrt(2/n)
    at 80% power, fits between the change and the nearest threshold."""
    a, b = [100.0, 104.0, 96.0], [101.0, 105.0, 97.0]
    c = compare("output_throughput", a, b)
    s = math.sqrt((np.var(np.log(a), ddof=1) + np.var(np.log(b), ddof=1)) / 2)
    d = float(np.log(b).mean() - np.log(a).mean())
    assert c.verdict == "inconclusive"
    n = c.runs_needed
    assert n == runs_needed(s, decision_distance(d, 0.05))
    assert runs_factor(n) * s <= decision_distance(d, 0.05) < runs_factor(n - 1) * s
    # runs_factor is the scipy quantiles' (its t_.80 is a Cornish-Fisher expansion)
    for k in (2, 3, 5, 10, 40):
        df = 2 * k - 2
        exact = (stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * math.sqrt(2 / k)
        assert runs_factor(k) == pytest.approx(exact, rel=1e-3)


def test_practical_threshold() -> None:
    assert practical_threshold("output_throughput") == (
        0.05,
        "threshold 5% (default for output_throughput)",
    )
    assert practical_threshold("p99_ttft_ms")[0] == 0.10
    assert practical_threshold("output_throughput", 0.02) == (0.02, "threshold 2.0% (set)")
    with pytest.raises(ValueError):
        practical_threshold("output_throughput", 1.5)
    # a smaller threshold asks for a tighter CI: the same runs decide less
    a, b = [100.0, 101.0, 99.0], [101.0, 102.0, 100.0]
    assert compare("output_throughput", a, b).verdict == "no-measurable-change"
    assert compare("output_throughput", a, b, threshold=0.01).verdict != "no-measurable-change"
    assert coefficient_of_variation([1.0]) is None
    assert coefficient_of_variation([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


def test_flag_verdict_needs_consistency() -> None:
    assert flag_verdict(["no-measurable-change", "no-measurable-change"]) == "no-measurable-change"
    assert flag_verdict(["improved", "improved"]) == "effective"
    assert flag_verdict(["regressed"]) == "harmful"
    assert flag_verdict(["improved", "no-measurable-change"]) is None
    assert flag_verdict(["inconclusive", "inconclusive"]) is None


@settings(max_examples=300, deadline=None)
@given(
    a=st.lists(st.floats(min_value=1e-3, max_value=1e6), min_size=1, max_size=8),
    b=st.lists(st.floats(min_value=1e-3, max_value=1e6), min_size=1, max_size=8),
    metric=st.sampled_from(["output_throughput", "median_ttft_ms", "p99_tpot_ms"]),
)
def test_change_always_inside_its_ci(a: list[float], b: list[float], metric: str) -> None:
    c = compare(metric, a, b)
    if c.ci_low is not None:
        assert c.ci_low - 1e-12 <= c.change <= c.ci_high + 1e-12
        assert c.ci_low >= -1.0  # a ratio minus one never goes below -100%


@settings(max_examples=300, deadline=None)
@given(
    level=st.floats(min_value=1.0, max_value=1e5),
    na=st.integers(min_value=1, max_value=8),
    nb=st.integers(min_value=1, max_value=8),
    eps=st.lists(noise, min_size=16, max_size=16),
    metric=st.sampled_from(
        ["output_throughput", "median_tpot_ms", "median_ttft_ms", "p99_ttft_ms"]
    ),
)
def test_a_vs_a_with_small_noise_is_never_a_change(level, na, nb, eps, metric) -> None:
    """Both arms from the same level with noise within +-0.5% (well below every floor, 2%+)."""
    a = [level * (1 + 0.005 * e) for e in eps[:na]]
    b = [level * (1 + 0.005 * e) for e in eps[8 : 8 + nb]]
    c = compare(metric, a, b)
    assert c.verdict not in ("improved", "regressed")


@settings(max_examples=300, deadline=None)
@given(
    level=st.floats(min_value=1.0, max_value=1e5),
    eps=st.lists(noise, min_size=10, max_size=10),
    up=st.booleans(),
)
def test_ten_percent_shift_is_found(level, eps, up) -> None:
    """A 10% throughput shift, 5 runs per arm, noise within +-1%: improved (up) or regressed (down)."""
    factor = 1.10 if up else 1 / 1.10
    a = [level * (1 + 0.01 * e) for e in eps[:5]]
    b = [level * factor * (1 + 0.01 * e) for e in eps[5:]]
    c = compare("output_throughput", a, b)
    assert c.verdict == ("improved" if up else "regressed")


def test_ten_percent_shift_with_lognormal_noise_over_many_seeds() -> None:
    """The same with unbounded lognormal 1% noise, interleaved A B A B draws, 200 seeds."""
    for seed in range(200):
        rng = np.random.default_rng(seed)
        draws = rng.lognormal(0.0, 0.01, size=10)
        a = list(1000 * draws[0::2])
        b = list(1100 * draws[1::2])
        c = compare("output_throughput", a, b)
        assert c.verdict == "improved", (seed, c)


def test_the_views_t_quantile_is_scipys() -> None:
    """benchmark_deltas' SQL t (schemas.student_t) against scipy, which runners.compare uses."""
    import duckdb

    from schemas.student_t import GRID, T_975, t975, t975_sql

    assert T_975 == tuple(round(float(stats.t.ppf(0.975, GRID / k)), 6) for k in range(1, GRID + 1))
    con = duckdb.connect()
    for df in [1.0, 1.05, 1.5, 2.0, 2.7, 3.3, 5.5, 9.9, 15.99, 16.0, 23.4, 80.0, 1e5]:
        exact = float(stats.t.ppf(0.975, df))
        assert t975(df) == pytest.approx(exact, rel=8e-4), df
        assert con.execute(f"SELECT {t975_sql(str(df))}").fetchall()[0][0] == pytest.approx(
            t975(df), rel=1e-12
        )
    assert con.execute(f"SELECT {t975_sql('NULL::DOUBLE')}").fetchall()[0][0] == pytest.approx(
        float(stats.norm.ppf(0.975))
    )
