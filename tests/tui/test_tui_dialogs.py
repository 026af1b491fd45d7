"""The TUI's dialogs as a new user meets them: Decision (`D`) and Propose (`p`) opened with no field
focused, so the first keystrokes were lost (Propose needed two Tabs to reach the title);
placeholders looked like values already typed; the candidate id a proposal would get was not shown;
the SQL input kept the last query, so typing appended to it. Pilot tests, and SVG snapshots of the
dialogs at 80x24, 100x30 and 160x45."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from ledger.cli.demo import DEMO_SESSION
from tests.tui.pilot import SIZE, make_demo, wait_for, wait_loaded
from tui.app import TuneLedgerApp
from tui.modals import DecisionForm, ProposeForm, TextPrompt
from tui.sql_console import SqlPane

SIZES = [(80, 24), (100, 30), (160, 45)]


@pytest.fixture
def demo_app(tmp_path: Path) -> TuneLedgerApp:
    store = make_demo(tmp_path)
    SqlPane.show_timings = False
    return TuneLedgerApp(store.path, DEMO_SESSION, watch=False, poll_s=0)


def _derived(app: TuneLedgerApp) -> str:
    return str(app.screen.query_one("#derived-id", Static).render())


@pytest.mark.anyio
async def test_propose_opens_on_the_title_and_shows_the_id_it_will_get(
    demo_app: TuneLedgerApp,
) -> None:
    app = demo_app
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("p")
        form = app.screen
        assert isinstance(form, ProposeForm)
        await pilot.pause()
        assert app.focused is form.query_one("#title", Input)
        await pilot.press(*"Try mixed chunk")  # nothing lost: the title has them all
        assert form.query_one("#title", Input).value == "Try mixed chunk"
        assert _derived(app) == "id: flag:try-mixed-chunk (derived)"
        await pilot.press("tab")
        await pilot.press(*"--enable_mixed_chunk")
        assert _derived(app) == "id: flag:enable-mixed-chunk (derived)"
        form.query_one("#candidate_id", Input).value = "config:mine"
        await pilot.pause()
        assert _derived(app) == "id: config:mine"
        # placeholders read as examples, not as values
        for field in form.query(Input):
            assert not field.placeholder or field.placeholder.startswith("e.g. ")


@pytest.mark.anyio
async def test_decision_and_reason_prompts_take_the_first_keystrokes(
    demo_app: TuneLedgerApp,
) -> None:
    app = demo_app
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("D")
        form = app.screen
        assert isinstance(form, DecisionForm)
        await pilot.pause()
        await pilot.press(*"Stop tuning")
        assert form.query_one("#decision", Input).value == "Stop tuning"
        await pilot.press("escape")
        await pilot.press("r")  # reject asks for a reason
        await pilot.pause()
        assert isinstance(app.screen, TextPrompt)
        await pilot.press(*"no-op")
        assert app.screen.query_one("#prompt-input", Input).value == "no-op"


@pytest.mark.anyio
async def test_the_sql_input_is_cleared_after_a_query_and_up_brings_it_back(
    demo_app: TuneLedgerApp,
) -> None:
    app = demo_app
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("5")
        field = app.query_one("#sql-input", Input)
        field.value = "SELECT 1 AS one"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "rows" in str(app.query_one("#sql-status").render()))
        assert field.value == ""
        await pilot.press(*"SELECT 2")  # typed fresh, not appended to the last query
        assert field.value == "SELECT 2"
        field.value = ""
        await pilot.press("up")
        assert field.value == "SELECT 1 AS one"


def _typed_proposal(pilot_keys: str = "Try mixed chunk"):
    async def run_before(pilot: Pilot) -> None:
        await wait_loaded(pilot)
        await pilot.press("p")
        await pilot.pause()
        await pilot.press(*pilot_keys)
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False
        await pilot.pause(0.1)

    return run_before


def _decision():
    async def run_before(pilot: Pilot) -> None:
        await wait_loaded(pilot)
        await pilot.press("D")
        await pilot.pause()
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_propose_dialog_snapshot(snap_compare, demo_app: TuneLedgerApp, size) -> None:
    assert snap_compare(demo_app, terminal_size=size, run_before=_typed_proposal())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_decision_dialog_snapshot(snap_compare, demo_app: TuneLedgerApp, size) -> None:
    assert snap_compare(demo_app, terminal_size=size, run_before=_decision())
