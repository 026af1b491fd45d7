"""Compare many runs as users of MLflow and W&B ask for — diff only, repeats grouped
with their noise band, the Pareto front of throughput against latency (text and a matplotlib
plot) — in the CLI (`tuneledger compare`) and the decision log. (The TUI's pane: tests/test_tui_compare.py.)"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

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
    groups = {(g.config_name, g.load): g for g in repeat_groups(LedgerStore(ledger), "s")}
    g = groups[("baseline", "c=1")]
    values = [80.0, 84.0, 82.0]
    assert g.values == values and g.mean == pytest.approx(82.0)
    assert g.ci_half == pytest.approx(t975(2) * statistics.stdev(values) / math.sqrt(3))
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
    assert "| baseline | 64/8 tok random | c=1 | 3 | 82.0 ± 5.0 | 80.0 .. 84.0 | 2.4% |" in section
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
