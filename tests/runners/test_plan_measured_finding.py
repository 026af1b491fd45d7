"""A plan's measurement reaches ``flag_verdicts`` whatever it found (docs/comparison.md, Overall):
a single-flag candidate whose loads disagree, or decided nothing, got no finding, so the flag
kept its researched verdict beside a plan that had measured it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.store import LedgerStore
from runners.plan import load_plan, measured_flag_verdict, run_plan
from tests.runners.test_plan import quick_runner, write_plan


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["improved", "improved"], "effective"),
        (["regressed", "regressed"], "harmful"),
        (["no-measurable-change"], "no-measurable-change"),
        # some load decided, not all alike: it depends on the load
        (["too-noisy", "improved"], "conditional"),
        (["regressed", "no-measurable-change"], "conditional"),
        # no load decided
        (["too-noisy", "inconclusive"], "unknown"),
        (["invalid", "insufficient-data"], "unknown"),
        (["too-noisy", "too-noisy"], "unknown"),
    ],
)
def test_measured_flag_verdict(verdicts: list[str], expected: str) -> None:
    assert measured_flag_verdict(verdicts) == expected


@pytest.mark.slow
def test_a_plan_that_decides_nothing_still_reaches_flag_verdicts(tmp_path: Path) -> None:
    # the candidate is the baseline's twin: no load can call it better or worse
    plan = load_plan(write_plan(tmp_path, base_delay=5, cand_delay=5, repeats=2, prompts=8))
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    with quick_runner(store, "plan-twin") as servers:
        result = run_plan(plan, store, servers, progress=False)
    deltas = store.query_arrow(
        "SELECT concurrency, verdict FROM benchmark_deltas "
        "WHERE metric = 'output_throughput' ORDER BY concurrency"
    ).to_pylist()
    verdicts = [d["verdict"] for d in deltas]
    assert [d["concurrency"] for d in deltas] == [1, 2]
    assert "improved" not in verdicts and "regressed" not in verdicts
    [finding] = result.findings
    assert finding.verdict == measured_flag_verdict(verdicts)
    rows = store.query_arrow("SELECT flag, verdict, basis, summary FROM flag_verdicts").to_pylist()
    assert rows == [
        {
            "flag": "delay-ms",
            "verdict": finding.verdict,
            "basis": "measured",
            "summary": finding.message,
        }
    ]
    if len(set(verdicts)) == 1:
        said = f"{verdicts[0]} at every load (1, 2)"
    else:
        said = f"{verdicts[0]} at c=1, {verdicts[1]} at c=2"
    assert finding.message == (
        f"--delay-ms: output_throughput {said} vs baseline, 2 interleaved runs per arm"
    )
