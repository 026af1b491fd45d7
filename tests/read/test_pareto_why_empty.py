"""An empty Pareto table says why (docs/compare-runs.md): the demo's runs hold an output
throughput and no latency, so no arm can be placed; the table named none of this."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.cli.demo import DEMO_SESSION, build_demo
from ledger.read.comparison import pareto
from ledger.store import LedgerStore
from schemas import BenchmarkCompleted, BenchMetrics
from tests.support.cli_inprocess import invoke

DEMO_ARMS = ["baseline c=1", "baseline c=64", "moe-config-b200 c=1", "moe-config-b200 c=64"]


def test_the_demos_pareto_names_the_arms_it_leaves_out_and_why(tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    store = build_demo(path)
    result = pareto(store, DEMO_SESSION)
    assert result.points == [] and result.latency_metric == "median_e2e_latency_ms"
    assert result.no_latency == DEMO_ARMS
    why = (
        "left out, their runs hold an output throughput but no median_e2e_latency_ms: "
        + ", ".join(DEMO_ARMS)
    )
    assert result.why_empty() == why
    out = invoke(["--ledger", path, "compare", "pareto", "--format", "json"])
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["points"] == [] and shown["no_latency"] == DEMO_ARMS
    assert shown["why_empty"] == why
    text = invoke(["--ledger", path, "compare", "pareto"]).stdout
    assert "left out, their runs hold an output throughput but no" in text


def test_a_pareto_with_every_arm_placed_has_nothing_to_explain(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "p.duckdb")
    store.init()
    assert pareto(store).why_empty() == "no run with an output throughput to place"
    store.append(
        [
            BenchmarkCompleted(
                run_id=f"{c}-{i}",
                config_name=c,
                concurrency=1,
                session_id="s",
                metrics=BenchMetrics(output_throughput=v, median_e2e_latency_ms=100.0 + i),
            )
            for c, v in (("baseline", 100.0), ("x", 110.0))
            for i in range(2)
        ]
    )
    result = pareto(store, "s")
    assert [p.config_name for p in result.points] == ["x", "baseline"]
    assert result.no_latency == [] and result.why_empty() is None
