"""One comparison rule, in one wording (docs/comparison.md, ledger/derive/verdict_rule.py): the
vLLM CPU demo's comparisons, recorded under the earlier rule (tau = 2 x the baseline's CV), are
judged again by today's, and every place that states the rule says it in the same words."""

from __future__ import annotations

from pathlib import Path

from ledger.cli.demo import build_demo
from ledger.derive.verdict_rule import verdict_rule, verdict_words
from runners.plan import TAU_FOOTNOTE
from tests.support.cli_inprocess import invoke


def test_the_vllm_cpu_demo_shows_todays_rule(tmp_path: Path) -> None:
    path = tmp_path / "v.duckdb"
    store = build_demo(path, campaign="vllm-cpu")
    rows = store.query_arrow(
        "SELECT config_name, metric, round(change_pct) AS change, round(ci_low_pct) AS low, "
        "noise_threshold_pct AS tau, verdict, verdict_rule, comparison_event_id "
        "FROM benchmark_deltas WHERE metric IN ('output_throughput', 'median_ttft_ms') "
        "ORDER BY config_name, metric"
    ).to_pylist()
    # no verdict of the earlier rule is shown: tau is the metric's default practical threshold
    assert {r["tau"] for r in rows} == {5.0}
    assert {r["verdict_rule"] for r in rows} == {verdict_rule(stored=False)}
    assert all(r["comparison_event_id"] is None for r in rows)
    got = {(r["config_name"], r["metric"]): (r["change"], r["low"], r["verdict"]) for r in rows}
    # +98% [+29%, ...] at n = 5: the interval excludes tau (the earlier rule: too-noisy, tau 44%)
    assert got["ngram-3", "output_throughput"] == (98.0, 29.0, "improved")
    assert got["max-num-seqs-1", "output_throughput"] == (-71.0, -79.0, "regressed")
    assert got["no-prefix-caching", "median_ttft_ms"] == (54.0, 23.0, "regressed")
    assert got["compiled", "output_throughput"][2] == "too-noisy"
    # the events keep what they recorded
    stored = store.query_arrow(
        "SELECT count(*) AS n FROM live_control WHERE type = 'comparison_completed' "
        "AND payload->>'noise_source' LIKE '2 x A-vs-A CV%'"
    ).to_pylist()
    assert stored[0]["n"] > 0
    log = invoke(["--ledger", path, "export", "markdown", "-o", "-"])
    assert log.returncode == 0, log.stderr
    assert verdict_words() in log.stdout
    assert "above 25%" not in log.stdout


def test_the_plans_footnote_says_the_same_rule() -> None:
    assert TAU_FOOTNOTE.startswith(
        verdict_words("--threshold, the plan file's threshold, else the metric's default")
    )
    assert "too-noisy: neither the change nor no change would be decided within 30 runs" in (
        TAU_FOOTNOTE
    )
