"""SVG snapshots of each screen on the demo ledger (fixed clock, fixed size, fixed event ids).

Baselines live in tests/tui/__snapshots__/; regenerate with ``pytest tests/tui/test_tui_snapshots.py
--snapshot-update`` after a deliberate change of the look, and check the SVGs by eye.
The file watcher and the poll are off, so nothing but the keys below changes the screen.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from ledger.cli.demo import DEMO_SESSION
from tests.tui.pilot import SIZE, make_demo, wait_for, wait_loaded
from tui.app import TuneLedgerApp
from tui.sql_console import SqlPane


@pytest.fixture
def demo_app(tmp_path: Path) -> TuneLedgerApp:
    store = make_demo(tmp_path)
    SqlPane.show_timings = False  # query times vary run to run
    return TuneLedgerApp(store.path, DEMO_SESSION, watch=False, poll_s=0)


def _no_blink(pilot: Pilot) -> None:
    """A blinking cursor is on or off depending on when the screenshot is taken: keep it on."""
    for screen in pilot.app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False


def _before(*keys: str, until=None):
    async def run_before(pilot: Pilot) -> None:
        await wait_loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        if until is not None:
            await wait_for(pilot, lambda: until(pilot.app), what="the screen to settle")
        _no_blink(pilot)
        await pilot.pause(0.1)

    return run_before


def test_board(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=_before())


def test_board_selected_done_candidate(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=_before("end"))


def test_benchmarks(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=_before("2"))


def test_timeline_with_detail(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(
        demo_app,
        terminal_size=SIZE,
        run_before=_before(
            "3",
            until=lambda app: (
                app.timeline._detail_id is not None
                and app.query_one("#event-links").option_count > 0
            ),
        ),
    )


def test_flags_matrix(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=_before("4"))


def test_sql_result(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(
        demo_app,
        terminal_size=SIZE,
        run_before=_before(
            "5", "enter", until=lambda app: "rows" in str(app.query_one("#sql-status").render())
        ),
    )


def test_sql_refused(snap_compare, demo_app: TuneLedgerApp) -> None:
    async def run_before(pilot: Pilot) -> None:
        await wait_loaded(pilot)
        await pilot.press("5")
        pilot.app.query_one("#sql-input").value = "DROP VIEW board"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Refused" in str(pilot.app.query_one("#sql-status").render()))
        _no_blink(pilot)
        await pilot.pause(0.1)

    assert snap_compare(demo_app, terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=_before("f1"))


def test_propose_form(snap_compare, demo_app: TuneLedgerApp) -> None:
    assert snap_compare(demo_app, terminal_size=SIZE, run_before=_before("p"))
