"""End to end on a CPU against a real server: `transformers serve` of a tiny random-weight Qwen3-MoE,
a plan with two real configurations (continuous batching off / on) at two concurrencies with
3 interleaved repeats, run through the real CLI (`tuneledger run plan examples/plan.toml`); then
the ledger is checked: server events, benchmark events with samples, statistical comparisons
feeding benchmark_deltas and the measured flag verdict.

The plan is the README first session's (tests/support/readme_walkthrough.py): the walkthrough
runs that very command once a test run, and this test reads the ledger it left: its six
`transformers serve` starts were a third run of the same plan before (~150 s of wall).

Needs torch and transformers[serving] (CI installs them; skipped without them, failed where every
test must run: tests/support/needs.py).
Offline: the model and tokenizer are built locally (tests/support/tiny_model.py), HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import pytest

from ledger.store import LedgerStore
from runners.plan import measured_flag_verdict
from schemas.vocab import COMPARISON_VERDICTS
from tests.support.readme_walkthrough import Walkthrough

#: Process-based on purpose (a real transformers server on the CPU), the engine tier: `make test-engines` runs it.
pytestmark = [pytest.mark.slow, pytest.mark.engine("torch", "transformers", "fastapi")]

VERDICTS = set(COMPARISON_VERDICTS)


def test_plan_against_transformers_serve(readme_walkthrough_run: Walkthrough) -> None:
    out = readme_walkthrough_run
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Plan verdicts" in out.stdout  # the plan's verdict table

    store = LedgerStore(out.folder / "first-session.duckdb")
    runs = store.query_arrow(
        "SELECT config_name, status, engine, started_seq FROM server_runs ORDER BY started_seq"
    ).to_pylist()
    # the walkthrough's own server and benchmark first, then the plan's
    solo, runs = runs[0], runs[1:]
    assert solo["config_name"] == "baseline"
    assert [r["config_name"] for r in runs] == ["baseline", "continuous-batching"] * 3
    assert all(r["status"] == "stopped" and r["engine"] == "transformers" for r in runs)

    benches = store.query_arrow(
        "SELECT b.event_id, b.config_name, b.concurrency, b.repeat, b.valid, b.completed, "
        "b.output_throughput, b.median_ttft_ms, b.median_tpot_ms, b.median_itl_ms, "
        "e.payload->'validity_notes' AS notes FROM benchmarks b JOIN events e USING (event_id) "
        "WHERE b.seq > ? ORDER BY b.seq",
        [runs[0]["started_seq"]],
    ).to_pylist()
    assert len(benches) == 2 * 2 * 3
    assert all(
        b["completed"] == 32 and b["output_throughput"] > 0 and b["median_ttft_ms"] > 0
        for b in benches
    )
    # transformers serve rejects ignore_eos: noted on every run, and lengths are not gated on it
    assert all("ignore_eos not honoured" in b["notes"] for b in benches)
    # the gate is evaluated on every run; on a busy host a run can miss 0.9 c, and then every
    # comparison at that concurrency must say invalid (and only then)
    assert all(b["valid"] is not None for b in benches)
    invalid_loads = {b["concurrency"] for b in benches if not b["valid"]}
    samples = store.query_arrow(
        "SELECT count(*) AS n, count(*) FILTER (WHERE ok) AS ok FROM bench_samples "
        "WHERE benchmark_event_id IN (SELECT event_id FROM benchmarks WHERE seq > ?)",
        [runs[0]["started_seq"]],
    ).to_pylist()[0]
    assert samples == {"n": 12 * 32, "ok": 12 * 32}

    # transformers serve streams a few tokens per chunk on this CPU: where a run's
    # stream was coarse its TPOT/ITL are empty with the reason, and a metric no run measured is
    # never compared (it was "median TPOT 0.01 ms, +401.8%" before)
    coarse = [b for b in benches if "coarse streaming" in b["notes"]]
    assert sum(b["median_tpot_ms"] is None and b["median_itl_ms"] is None for b in benches) == len(
        coarse
    )
    comparisons = store.read(types=["comparison_completed"])
    compared = {(c.concurrency, c.metric) for c in comparisons}
    per_token = {"median_tpot_ms", "p99_tpot_ms", "median_itl_ms"}
    for load in (1, 4):
        if all(b["concurrency"] != load or b in coarse for b in benches):
            assert not {m for c, m in compared if c == load} & per_token
    assert len(comparisons) >= 2 * 6
    assert all(c.verdict in VERDICTS and c.baseline_runs == 3 and c.runs == 3 for c in comparisons)
    assert all((c.verdict == "invalid") == (c.concurrency in invalid_loads) for c in comparisons)
    deltas = store.query_arrow(
        "SELECT concurrency, verdict, change_pct, ci_low_pct, ci_high_pct FROM benchmark_deltas "
        "WHERE metric = 'output_throughput' AND verdict_rule LIKE 'statistical%' ORDER BY concurrency"
    ).to_pylist()
    assert [d["concurrency"] for d in deltas] == [1, 4]
    assert all(
        d["ci_low_pct"] <= d["change_pct"] <= d["ci_high_pct"]
        for d in deltas
        if d["concurrency"] not in invalid_loads
    )

    # the plan's measurement reaches flag_verdicts whatever it found (docs/comparison.md)
    expected = measured_flag_verdict([d["verdict"] for d in deltas])
    findings = store.query_arrow(
        "SELECT flag, verdict, basis, engine FROM flag_verdicts WHERE basis = 'measured'"
    ).to_pylist()
    assert findings == [
        {
            "flag": "continuous-batching",
            "verdict": expected,
            "basis": "measured",
            "engine": "transformers",
        }
    ]
