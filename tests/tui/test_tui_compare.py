"""The Compare pane on the vLLM CPU campaign (eight configurations, two workloads): the same
tables as ``tuneledger compare`` (what differs only, the metrics with their changes, repeats
with the noise band, the Pareto front), and on a session with fewer than two benchmarked
configurations, why there is nothing to compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from ledger.cli.demo import CAMPAIGNS, build_demo
from ledger.export.comparison import diff_tables, pareto_table, repeats_table
from ledger.read.comparison import read_session_comparison
from tests.tui.pilot import wait_for, wait_loaded
from tui.app import TuneLedgerApp
from tui.compare import ComparePane

pytestmark = pytest.mark.anyio


def _app(folder: Path, campaign: str) -> TuneLedgerApp:
    store = build_demo(folder / "demo.duckdb", campaign=campaign)
    return TuneLedgerApp(store.path, CAMPAIGNS[campaign][1], watch=False, poll_s=0)


def _cells(table: DataTable[Any]) -> list[list[str]]:
    return [
        [getattr(c, "plain", str(c)) for c in table.get_row_at(i)] for i in range(table.row_count)
    ]


async def test_compare_shows_what_differs_repeats_and_the_pareto_front(tmp_path: Path) -> None:
    app = _app(tmp_path, "vllm-cpu")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("6")
        pane = app.query_one(ComparePane)
        await wait_for(pilot, lambda: pane.loaded, what="the compare pane")
        assert app.focused is app.query_one("#compare-differs")
        with app.store.connect() as con:
            comparison = read_session_comparison(con, "vllm-cpu")
        assert comparison is not None
        differs, metrics = diff_tables(comparison.diff)
        expected = {
            "differs": differs,
            "metrics": metrics,
            "repeats": repeats_table(comparison.repeats),
            "pareto": pareto_table(comparison.pareto),
        }
        for key, table in expected.items():  # the CLI's rows, cell for cell
            assert _cells(app.query_one(f"#compare-{key}", DataTable)) == table.rows, key
        names = [
            "baseline",
            "max-num-seqs-1",
            "no-prefix-caching",
            "batched-tokens-128",
            "no-chunked-prefill",
            "compiled",
            "ngram-1",
            "ngram-3",
            "ngram-5",
        ]
        shown = app.query_one("#compare-differs", DataTable)
        assert [c.label.plain for c in shown.columns.values()] == ["what", "name", *names]
        # diff only: the flags that differ (enforce-eager is off for `compiled` alone)
        rows = {r[1]: r[2:] for r in _cells(shown)}
        assert rows["enforce-eager"] == ["on", "on", "on", "on", "on", "off", "on", "on", "on"]
        assert rows["max-num-seqs"][1] == "1" and rows["max-num-batched-tokens"][3] == "128"
        note = str(app.query_one("#compare-differs-note", Static).render())
        # a fact some runs did not record (max_running_requests) is named, not a difference
        assert "6 row(s) differ" in note
        assert "so not compared: max_running_requests" in note
        # repeats: the baseline at c=8 over its 5 valid runs, the geometric mean the verdicts
        # compare, with its 95% CI
        repeats = {(r[0], r[2]): r for r in _cells(app.query_one("#compare-repeats", DataTable))}
        assert repeats[("baseline", "c=8")][3:5] == ["5", "799.5 [599.9, 1065.5]"]
        # the front per workload: the compiled engine beats the baseline at c=8, ngram-5 at c=1
        front = {(r[0], r[1]): r[-1] for r in _cells(app.query_one("#compare-pareto", DataTable))}
        assert front[("384/32 tok random-ids", "compiled")] == "yes"
        assert front[("384/32 tok random-ids", "baseline")] == "no (beaten by compiled c=8)"
        assert front[("64/96 tok random-ids", "baseline")] == "no (beaten by ngram-5 c=1)"


async def test_compare_shows_runs_that_carry_no_validity(tmp_path: Path) -> None:
    """The seeds' benchmarks carry no validity (no gate ran; the demo's Compare was
    empty): a run not marked invalid is compared, as benchmark_deltas compares it."""
    app = _app(tmp_path, "seeds")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("6")
        pane = app.query_one(ComparePane)
        await wait_for(pilot, lambda: pane.loaded, what="the compare pane")
        assert set(pane.tables) >= {"differs", "metrics", "repeats", "pareto"}
        assert pane.tables["repeats"].rows
        assert app.query_one("#compare-differs", DataTable).display


def test_compare_snapshot(snap_compare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot) -> None:
        await wait_loaded(pilot)
        await pilot.press("6")
        pane = pilot.app.query_one(ComparePane)
        await wait_for(pilot, lambda: pane.loaded, what="the compare pane")
        await pilot.pause(0.1)

    assert snap_compare(_app(tmp_path, "vllm-cpu"), terminal_size=(100, 30), run_before=run_before)
