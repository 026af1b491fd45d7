"""Compare many runs as users of MLflow and W&B ask for — diff only, repeats grouped
with their noise band, the Pareto front of throughput against latency (text and a matplotlib
plot) — in the CLI (`tuneledger compare`) and the decision log. (The TUI's pane: tests/test_tui_compare.py.)"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from ledger.export.comparison import diff_tables
from ledger.read.comparison import diff, load_items, pareto, repeat_groups
from ledger.store import LedgerStore
from schemas import BenchmarkCompleted, ServerReady, ServerStarted
from schemas.envelope import Host
from schemas.parts import BenchMetrics, StartupFacts, Workload
from schemas.student_t import t975
from tests.support.cli_inprocess import invoke

HOST = Host(gpu_name="NVIDIA H200", compute_capability="sm90", engine="transformers")

#: configuration -> (flags, max_running_requests, {concurrency: [(tok/s, median TPOT ms)...]})
CAMPAIGN: dict[str, tuple[dict, int, dict[int, list[tuple[float, float]]]]] = {
    "baseline": (
        {"device": "cuda"},
        64,
        {1: [(80.0, 9.0), (84.0, 9.4), (82.0, 9.2)], 16: [(95.0, 10.0), (99.0, 10.4)]},
    ),
    "cb": (
        {"device": "cuda", "continuous-batching": True},
        64,
        {1: [(60.0, 16.0), (61.0, 16.2)], 16: [(600.0, 18.0), (590.0, 18.4)]},
    ),
    "cb-sdpa": (
        {"device": "cuda", "continuous-batching": True, "attn-implementation": "sdpa"},
        48,
        {1: [(78.0, 11.0), (77.0, 10.8)], 16: [(660.0, 15.4), (668.0, 15.5)]},
    ),
}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("compare") / "l.duckdb"
    store = LedgerStore(path)
    store.init()
    events = []
    for config, (flags, mrr, runs) in CAMPAIGN.items():
        run_id = f"{config}-run"
        events += [
            ServerStarted(run_id=run_id, engine="transformers", config_name=config, flags=flags,
                          model="tiny", session_id="s", host=HOST),
            ServerReady(run_id=run_id, startup=StartupFacts(max_running_requests=mrr),
                        session_id="s", host=HOST),
        ]  # fmt: skip
        for c, values in runs.items():
            for repeat, (thr, tpot) in enumerate(values):
                events.append(
                    BenchmarkCompleted(
                        run_id=f"{config}-c{c}-r{repeat}", config_name=config,
                        is_baseline=config == "baseline", server_run_id=run_id,
                        workload=Workload(dataset="random", input_len=64, output_len=8),
                        concurrency=c, repeat=repeat, valid=True, session_id="s", host=HOST,
                        metrics=BenchMetrics(output_throughput=thr, median_tpot_ms=tpot,
                                             median_ttft_ms=20.0, median_e2e_latency_ms=100.0),
                    )
                )  # fmt: skip
    store.append(events)
    return path


def test_diff_only_shows_what_differs_with_the_metric_deltas(ledger: Path) -> None:
    store = LedgerStore(ledger)
    result = diff(load_items(store, ["baseline", "cb", "cb-sdpa"], "s"))
    rows = {(r.section, r.name): r.values for r in result.rows}
    assert rows == {
        ("flag", "attn-implementation"): ["not set", "not set", "sdpa"],
        ("flag", "continuous-batching"): ["not set", "on", "on"],
        ("fact", "max_running_requests"): ["64", "64", "48"],
    }
    assert result.same >= 3  # device, engine, model... hidden
    everything = diff(load_items(store, ["baseline", "cb"], "s"), everything=True)
    assert ("flag", "device") in {(r.section, r.name) for r in everything.rows}
    # --all shows the rows that are the same too, and counts what differs as it is
    only = diff(load_items(store, ["baseline", "cb"], "s"))
    assert everything.differ == only.differ == len(only.rows) < len(everything.rows)
    (shown,) = [t for t in diff_tables(everything) if t.title == "every flag and fact"]
    assert shown.note.startswith(f"{only.differ} row(s) differ; {everything.same} flag(s)")
    assert "the same, shown" in shown.note and "hidden" not in shown.note
    assert "hidden (--all shows them)" in diff_tables(only)[0].note
    # the metric deltas: geometric means of the valid runs, change against the first
    thr16 = next(m for m in result.metrics if m.load == "c=16" and m.metric == "output_throughput")
    assert thr16.workload == "64/8 tok random" and thr16.runs == [2, 2, 2]
    assert thr16.values[0] == pytest.approx(math.sqrt(95.0 * 99.0))
    assert thr16.changes_pct[0] is None
    assert thr16.changes_pct[2] == pytest.approx(
        100 * (math.sqrt(660 * 668) / math.sqrt(95 * 99) - 1)
    )
    # server runs by id (or a unique prefix) compare too
    by_run = diff(load_items(store, ["baseline-run", "cb-r"], "s"))
    assert [i.kind for i in by_run.items] == ["server run", "server run"]
    assert [r.name for r in by_run.rows] == ["continuous-batching"]


def test_repeats_grouped_with_the_95_percent_band(ledger: Path) -> None:
    """The mean is the geometric one benchmark_deltas and diff compare, its CI on log values."""
    groups = {(g.config_name, g.load): g for g in repeat_groups(LedgerStore(ledger), "s")}
    g = groups[("baseline", "c=1")]
    values = [80.0, 84.0, 82.0]
    logs = [math.log(v) for v in values]
    half = t975(2) * statistics.stdev(logs) / math.sqrt(3)
    assert g.values == values and g.mean == pytest.approx((80.0 * 84.0 * 82.0) ** (1 / 3))
    assert g.ci_low == pytest.approx(g.mean * math.exp(-half))
    assert g.ci_high == pytest.approx(g.mean * math.exp(half))
    assert (g.low, g.high) == (80.0, 84.0)
    assert g.cv_pct == pytest.approx(100 * statistics.stdev(values) / 82.0)


def test_the_pareto_front_of_throughput_against_latency(ledger: Path) -> None:
    p = pareto(LedgerStore(ledger), "s")
    assert p.latency_metric == "median_tpot_ms"  # every arm has it
    front = {(q.config_name, q.load) for q in p.points if q.on_front}
    # baseline c=1 (lowest latency) and c=16 (more throughput at 10 ms), cb-sdpa c=16 (most
    # throughput); cb is beaten everywhere by cb-sdpa, cb-sdpa c=1 by baseline c=16
    assert front == {("baseline", "c=1"), ("baseline", "c=16"), ("cb-sdpa", "c=16")}
    beaten = {(q.config_name, q.load): q.dominated_by for q in p.points if not q.on_front}
    assert beaten[("cb", "c=16")] == "cb-sdpa c=16"
    assert p.points[0].on_front  # the front first
    assert pareto(LedgerStore(ledger), "s", "median_ttft_ms").latency_metric == "median_ttft_ms"


def test_the_cli_compares_and_draws_the_front(ledger: Path, tmp_path: Path) -> None:
    cli = ["--ledger", ledger, "compare"]
    out = invoke([*cli, "diff", "baseline", "cb", "--session", "s"])
    assert out.returncode == 0, out.stderr
    assert "continuous-batching" in out.stdout and "max_running_requests" not in out.stdout
    assert "device" not in out.stdout.split("metrics")[0]  # the same: hidden
    out = invoke([*cli, "diff", "baseline", "nope", "--session", "s"])
    assert (
        out.returncode == 5 and "'nope' is neither a server run nor a configuration" in out.stderr
    )
    out = invoke([*cli, "diff", "baseline", "cb", "--format", "json"])
    data = json.loads(out.stdout)
    assert data["differs"] == [
        {"section": "flag", "name": "continuous-batching", "values": ["not set", "on"]}
    ]
    out = invoke([*cli, "repeats", "--format", "json"])
    assert {g["config_name"] for g in json.loads(out.stdout)["groups"]} == set(CAMPAIGN)
    assert invoke([*cli, "repeats", "--metric", "nope"]).returncode == 3
    plot = tmp_path / "front.svg"
    out = invoke([*cli, "pareto", "--plot", plot])
    assert out.returncode == 0, out.stderr
    assert "yes" in out.stdout and "beaten by cb-sdpa c=16" in out.stdout
    svg = plot.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg and "Pareto front" in svg
    assert "median TPOT (ms)" in svg and "cb-sdpa" in svg
    # deterministic: the same ledger draws the same bytes (no date, fixed ids)
    again = tmp_path / "again.svg"
    invoke([*cli, "pareto", "--plot", again])
    assert again.read_bytes() == plot.read_bytes()
    assert invoke([*cli, "pareto", "--plot", tmp_path / "x.pdf"]).returncode == 3


def test_the_decision_log_compares_the_configurations_and_links_the_plot(
    ledger: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "report" / "s-decisions.md"
    out = invoke(["--ledger", ledger, "export", "markdown", "--session", "s", "-o", out_file])
    assert out.returncode == 0, out.stderr
    text = out_file.read_text()
    section = text.split("## Comparing the configurations")[1].split("\n## ")[0]
    assert "What differs between `baseline`, `cb`, `cb-sdpa`" in section
    assert "| flag | continuous-batching | not set | on | on |" in section
    assert "| fact | max_running_requests | 64 | 64 | 48 |" in section
    assert (
        "| baseline | 64/8 tok random | c=1 | 3 | 82.0 [77.2, 87.1] | 80.0 .. 84.0 | 2.4% |"
        in section
    )
    assert "Pareto front of output throughput against median_tpot_ms (ms)" in section
    assert "| 64/8 tok random | cb-sdpa | c=16 | 664.0 | 15.45 | 2 |" in section
    assert (
        "![Pareto front: output throughput against median_tpot_ms (ms)](s-decisions-pareto.svg)"
        in section
    )
    svg = (out_file.parent / "s-decisions-pareto.svg").read_text()
    assert "<svg" in svg and "cb-sdpa" in svg
    # to standard output: the tables, no picture to link
    out = invoke(["--ledger", ledger, "export", "markdown", "--session", "s"])
    assert "## Comparing the configurations" in out.stdout and "![" not in out.stdout


def _gm(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def test_every_reader_shows_one_baseline_number(tmp_path: Path) -> None:
    """A standalone baseline run recorded before a plan joined `compare diff` and the
    TUI (4 runs) while the verdict table showed the plan's comparison (3 runs), and repeats used
    the arithmetic mean. Now the verdict table (benchmark_deltas, benchmark_summary), diff,
    repeats and Pareto (the TUI's Compare pane and the decision log read these) show the
    comparison's runs and their geometric mean; runs whose import knew nothing of validity
    (``valid`` absent, as the demo's) count."""
    from ledger.read.comparison import read_session_comparison
    from runners.compare import compare
    from schemas import ComparisonCompleted

    def run(config: str, thr: float, repeat: int, valid: bool | None = True) -> BenchmarkCompleted:
        return BenchmarkCompleted(
            run_id=f"{config}-{repeat}-{thr}", config_name=config, is_baseline=config == "base",
            workload=Workload(dataset="random", input_len=64, output_len=8), concurrency=1,
            repeat=repeat, valid=valid, session_id="w",
            metrics=BenchMetrics(output_throughput=thr, median_ttft_ms=20.0, median_tpot_ms=9.0),
        )  # fmt: skip

    standalone = run("base", 16.5, 0)
    base = [run("base", v, i) for i, v in enumerate((12.4, 12.9, 12.8))]
    cand = [run("tuned", v, i, valid=None) for i, v in enumerate((11.0, 11.4, 11.2))]
    outcome = compare("output_throughput", [12.4, 12.9, 12.8], [11.0, 11.4, 11.2])
    comparison = ComparisonCompleted(
        session_id="w", config_name="tuned", baseline_config="base", metric="output_throughput",
        concurrency=1, dataset="random", input_len=64, output_len=8, baseline_runs=3, runs=3,
        baseline_mean=outcome.baseline_mean, mean=outcome.mean, change=outcome.change,
        ci_low=outcome.ci_low, ci_high=outcome.ci_high, noise_threshold=0.05,
        verdict=outcome.verdict, benchmark_event_ids=[e.event_id for e in base + cand],
    )  # fmt: skip
    store = LedgerStore(tmp_path / "w.duckdb")
    store.init()
    store.append([standalone, *[e for pair in zip(base, cand, strict=True) for e in pair]])
    store.append(comparison)
    expected = _gm([12.4, 12.9, 12.8])
    assert outcome.baseline_mean == pytest.approx(expected)
    (delta,) = store.query_arrow(
        "SELECT baseline_value, baseline_runs FROM benchmark_deltas "
        "WHERE metric = 'output_throughput'"
    ).to_pylist()
    assert delta == {"baseline_value": pytest.approx(expected), "baseline_runs": 3}
    (summary,) = store.query_arrow(
        "SELECT output_throughput, output_throughput_runs FROM benchmark_summary "
        "WHERE config_name = 'base'"
    ).to_pylist()
    assert summary == {"output_throughput": pytest.approx(expected), "output_throughput_runs": 3}
    with store.connect() as con:
        session = read_session_comparison(con, "w")
    assert session is not None
    thr = next(m for m in session.diff.metrics if m.metric == "output_throughput")
    assert thr.values[0] == pytest.approx(expected) and thr.runs == [3, 3]
    assert thr.values[1] == pytest.approx(_gm([11.0, 11.4, 11.2]))  # valid absent: counted
    repeats = {g.config_name: g for g in session.repeats}
    assert repeats["base"].mean == pytest.approx(expected) and len(repeats["base"].values) == 3
    points = {q.config_name: q for q in session.pareto.points}
    assert points["base"].throughput == pytest.approx(expected) and points["base"].runs == 3
    # no comparison: every run not marked invalid, the standalone one included
    store.append(run("base", 12.0, 9, valid=False))
    bare = LedgerStore(tmp_path / "bare.duckdb")
    bare.init()
    bare.append([standalone, *base, *cand])
    with bare.connect() as con:
        no_comparison = read_session_comparison(con, "w")
    assert no_comparison is not None
    assert {g.config_name: len(g.values) for g in no_comparison.repeats} == {"base": 4, "tuned": 3}


@pytest.mark.parametrize("written_seed", [None, 7])
def test_a_comparison_stands_for_the_runs_of_its_seed(tmp_path: Path, written_seed) -> None:
    """The seed is part of an arm (``ARM_KEY``): a comparison stands for the arms of its seed,
    written on the event, or, for events written before ``comparison_completed`` kept one, the
    seed of the runs it lists; runs of another seed are another arm, judged apart."""
    from runners.compare import compare
    from schemas import ComparisonCompleted

    def run(config: str, thr: float, repeat: int, seed: int) -> BenchmarkCompleted:
        return BenchmarkCompleted(
            run_id=f"{config}-{repeat}-{seed}", config_name=config, is_baseline=config == "base",
            workload=Workload(dataset="random", input_len=64, output_len=8, seed=seed),
            concurrency=1, repeat=repeat, valid=True, session_id="w",
            metrics=BenchMetrics(output_throughput=thr, median_ttft_ms=20.0),
        )  # fmt: skip

    base = [run("base", v, i, 7) for i, v in enumerate((12.4, 12.9, 12.8))]
    cand = [run("tuned", v, i, 7) for i, v in enumerate((11.0, 11.4, 11.2))]
    other_seed = [run("base", 20.0, 0, 8), run("tuned", 22.0, 0, 8)]
    outcome = compare("output_throughput", [12.4, 12.9, 12.8], [11.0, 11.4, 11.2])
    comparison = ComparisonCompleted(
        session_id="w", config_name="tuned", baseline_config="base", metric="output_throughput",
        concurrency=1, dataset="random", input_len=64, output_len=8, seed=written_seed,
        baseline_runs=3, runs=3, baseline_mean=outcome.baseline_mean, mean=outcome.mean,
        change=outcome.change, ci_low=outcome.ci_low, ci_high=outcome.ci_high,
        noise_threshold=0.05, verdict=outcome.verdict,
        benchmark_event_ids=[e.event_id for e in base + cand],
    )  # fmt: skip
    store = LedgerStore(tmp_path / "w.duckdb")
    store.init()
    store.append([*base, *cand])
    store.append(comparison)
    store.append(other_seed)  # after the comparison, but of another arm: it stays standing
    rows = store.query_arrow(
        "SELECT seed, runs, change_pct, comparison_event_id IS NOT NULL AS standing "
        "FROM benchmark_deltas WHERE metric = 'output_throughput' ORDER BY seed"
    ).to_pylist()
    assert [(r["seed"], r["runs"], r["standing"]) for r in rows] == [(7, 3, True), (8, 1, False)]
    assert rows[0]["change_pct"] == pytest.approx(100 * outcome.change)
    assert rows[1]["change_pct"] == pytest.approx(10.0)
