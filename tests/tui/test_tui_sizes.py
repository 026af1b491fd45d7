"""The Timeline, the Board and Benchmarks at the common terminal sizes (80x24, 100x30, 160x45)
on the demo ledger with the campaign's own times: what each shows whole (event types, the
status counts, the Δ column), the run count beside a mean, the plot's measured points, and an
SVG snapshot of each (regenerate with ``--snapshot-update`` after a deliberate change, and look
at the SVGs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from ledger.cli.demo import CAMPAIGNS, build_demo
from tests.tui.pilot import wait_for, wait_loaded
from tui.app import TuneLedgerApp

SIZES = [(80, 24), (100, 30), (160, 45)]
IDS = [f"{w}x{h}" for w, h in SIZES]

pytestmark = pytest.mark.anyio


def _app(folder: Path, campaign: str = "seeds") -> TuneLedgerApp:
    """The demo built as ``tuneledger demo`` builds it: no clock given, so every event carries
    the campaign's time (its server logs'), the same on every run."""
    store = build_demo(folder / "demo.duckdb", campaign=campaign)
    return TuneLedgerApp(store.path, CAMPAIGNS[campaign][1], watch=False, poll_s=0)


def _text(cell: Any) -> str:
    return getattr(cell, "plain", str(cell))


def _fits(table: DataTable[Any]) -> bool:
    """No column runs past the table's visible width (nothing scrolls sideways)."""
    return table.virtual_size.width <= table.scrollable_content_region.width


# --- timeline -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_timeline_shows_types_whole_and_the_summaries_the_rest(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_loaded(pilot)
        await pilot.press("3")
        await pilot.pause(0.2)
        table = app.query_one("#timeline-table", DataTable)
        detail = app.query_one("#timeline-detail")
        rows = app.timeline.rows
        for index, row in enumerate(rows):
            assert _text(table.get_cell_at((index, 2))) == row["type"]
            summary = _text(table.get_cell_at((index, 3)))
            assert summary == row["summary"] or (
                summary.endswith("…") and row["summary"].startswith(summary[:-1])
            )
        assert _fits(table)
        width = size[0]
        if width < app.timeline.STACK_BELOW:  # the detail under the table, full width
            assert detail.region.y >= table.region.bottom and detail.region.width == width
        else:  # beside it, at most 40% of the width
            assert detail.region.x >= table.region.right and detail.region.width <= 0.4 * width
        # the summary column gets what seq, time and the longest type leave
        longest = max(len(r["type"]) for r in rows)
        room = table.scrollable_content_region.width - (3 + 2) - (14 + 2) - (longest + 2) - 2
        assert app.timeline.summary_width == room >= (30 if width <= 100 else 40)


async def test_timeline_shows_the_campaigns_times_not_the_build_time(tmp_path: Path) -> None:
    """The demo's events carry the campaign's times (its server logs' ``occurred_at``; the
    others the last log time before them), and the timeline's UTC column shows them."""
    app = _app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("3")
        await pilot.pause(0.2)
        table = app.query_one("#timeline-table", DataTable)
        shown = {
            row["seq"]: _text(table.get_cell_at((i, 1))) for i, row in enumerate(app.timeline.rows)
        }
        by_seq = {row["seq"]: row for row in app.timeline.rows}
        assert {t[:5] for t in shown.values()} == {"11-20"}  # the campaign's day, every event
        server_started = next(s for s, r in by_seq.items() if r["type"] == "server_started")
        assert shown[server_started] == "11-20 14:02:11"  # its log's first line
        assert shown[max(shown)] == "11-20 15:12:10"


# --- board ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_board_counts_and_delta_are_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_loaded(pilot)
        counts = app.query_one("#board-counts", Static)
        text = str(counts.render())
        assert text == "proposed 0  accepted 1  rejected 3  deferred 1  done 3"
        assert counts.region.width >= len(text) + 2
        table = app.query_one("#board-table", DataTable)
        assert _fits(table)
        board = app.board
        index = next(
            i
            for i, r in enumerate(board.shown)
            if r["candidate_id"] == "kernel-tune:fused-moe-triton-sm120"
        )
        column = list(table.columns).index(
            next(k for k, c in table.columns.items() if c.label.plain == "Δ out tok/s")
        )
        delta = _text(table.get_cell_at((index, column)))
        assert delta == ("-1.0% c=64" if size[0] < 100 else "-1.0% c=64 moe-config-b200")
        table.move_cursor(row=index)
        await pilot.pause()
        detail = str(app.query_one("#board-detail", Static).render())
        assert (
            "Δ out tok/s: -1.0% insufficient-data  moe-config-b200 at c=64 against its baseline"
            in detail.replace("\n", " ")
        )


# --- benchmarks -----------------------------------------------------------------------------


async def test_benchmarks_runs_are_the_runs_the_mean_is_over(tmp_path: Path) -> None:
    """On the H200 campaign the baseline at c=64 has one valid run stored, and its value is the
    comparison's mean over two (one the validity gate marked invalid): the runs column says 2
    and that one of them is valid, never 1 beside a mean of 2."""
    app = _app(tmp_path, "h200")
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("2")
        await pilot.pause(0.2)
        pane = app.query_one("BenchmarksPane")
        table = app.query_one("#bench-table", DataTable)
        runs_col = list(table.columns).index(
            next(k for k, c in table.columns.items() if c.label.plain == "runs")
        )
        cells = {
            (r["config_name"], r["concurrency"]): _text(table.get_cell_at((i, runs_col)))
            for i, r in enumerate(pane.rows)
        }
        baseline = next(
            r for r in pane.rows if r["config_name"] == "baseline" and r["concurrency"] == 64
        )
        assert (baseline["runs"], baseline["output_throughput_runs"]) == (1, 2)
        assert baseline["output_throughput"] == pytest.approx(
            (80.40451495644966 * 85.74470055961726) ** 0.5
        )
        assert cells[("baseline", 64)] == "2 (1 valid)"
        assert cells[("baseline", 1)] == "2"


async def test_benchmarks_plot_draws_the_measured_points_and_says_why_a_metric_is_empty(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("2")
        pane = app.query_one("BenchmarksPane")
        await wait_for(pilot, lambda: bool(pane.plot_title), what="the plot")
        assert pane.plot_series == {
            "baseline": [(1, 121.6), (64, 1582.5)],
            "moe-config-b200": [(1, 122.0), (64, 1566.0)],
        }
        await pilot.press("m")  # median TTFT: the seeds' benchmarks did not report it
        await pilot.pause()
        assert pane.plot_series == {}
        assert pane.plot_title == (
            "median TTFT (ms): not reported by the 4 arm(s) at a fixed concurrency (m: next metric)"
        )


# --- snapshots ------------------------------------------------------------------------------


def _before(*keys: str, until: Any = None) -> Any:
    async def run_before(pilot: Pilot) -> None:
        await wait_loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        if until is not None:
            await wait_for(pilot, lambda: until(pilot.app), what="the screen to settle")
        await pilot.pause(0.1)

    return run_before


def _detail_shown(app: TuneLedgerApp) -> bool:
    return app.timeline._detail_id is not None and app.query_one("#event-links").option_count > 0


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_timeline_snapshot(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(
        _app(tmp_path), terminal_size=size, run_before=_before("3", until=_detail_shown)
    )


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_board_snapshot(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(
        _app(tmp_path), terminal_size=size, run_before=_before(*["down"] * 4)
    )  # the deferred kernel tune: its Δ in the detail


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_benchmarks_snapshot(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    def drawn(app: TuneLedgerApp) -> bool:
        return bool(app.query_one("BenchmarksPane").plot_title)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=_before("2", until=drawn))
