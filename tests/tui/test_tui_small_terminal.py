"""The TUI on a 100x30 terminal: dialogs scroll to the focused field with their
buttons reachable, a validation error names the field and keeps what was typed, evidence is picked
from the timeline, the board drops low-value columns first, an empty Benchmarks plot says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Input, Select, Static

from ledger.cli.demo import DEMO_SESSION
from ledger.store import LedgerStore
from schemas.envelope import Actor
from schemas.events import SessionStarted
from tests.tui.pilot import make_demo, wait_for, wait_loaded
from tui.app import TuneLedgerApp
from tui.modals import DecisionForm, ProposeForm

SMALL = (100, 30)
ACTOR = Actor(kind="person", name="tester")

pytestmark = pytest.mark.anyio


@pytest.fixture
def demo(tmp_path: Path) -> LedgerStore:
    return make_demo(tmp_path)


def _app(path: Path, session: str = DEMO_SESSION) -> TuneLedgerApp:
    return TuneLedgerApp(path, session, actor=ACTOR, watch=False, poll_s=0)


def _on_screen(app: TuneLedgerApp, widget) -> bool:
    """The widget is drawn inside the terminal and inside every scrolling container above it."""
    region = widget.region
    width, height = app.size
    return region.height > 0 and region.y >= 0 and region.bottom <= height and region.right <= width


async def test_propose_dialog_scrolls_to_each_field_and_keeps_its_buttons(
    demo: LedgerStore,
) -> None:
    app = _app(demo.path)
    async with app.run_test(size=SMALL) as pilot:
        await wait_loaded(pilot)
        await pilot.press("p")
        form = app.screen
        assert isinstance(form, ProposeForm)
        await pilot.pause()
        assert _on_screen(app, form.query_one("#ok", Button)) and _on_screen(
            app, form.query_one("#cancel", Button)
        )
        for field in ("kind", "title", "flag", "priority", "hypothesis", "candidate_id"):
            form.query_one(f"#{field}").focus()
            # the scroll to the focused field is animated: wait for it to end (a hang bound)
            await wait_for(
                pilot, lambda f=field: _on_screen(app, form.query_one(f"#{f}")), what=field
            )
            assert _on_screen(app, form.query_one("#ok", Button)), field
        # a validation error names the field, focuses it, and keeps what was typed
        form.query_one("#flag", Input).value = "enable-foo"
        await pilot.click("#ok")
        await pilot.pause()
        assert app.screen is form
        assert "title" in str(form.query_one(".form-error", Static).render())
        assert form.focused is form.query_one("#title", Input)
        assert form.query_one("#flag", Input).value == "enable-foo"


async def test_decision_dialog_names_a_bad_field_and_picks_evidence_from_the_timeline(
    demo: LedgerStore,
) -> None:
    app = _app(demo.path)
    async with app.run_test(size=SMALL) as pilot:
        await wait_loaded(pilot)
        await wait_for(
            pilot, lambda: bool(app.timeline.rows), what="the timeline"
        )  # offered as evidence
        head = demo.head()
        await pilot.press("D")
        form = app.screen
        assert isinstance(form, DecisionForm)
        await pilot.pause()
        assert _on_screen(app, form.query_one("#ok", Button))
        form.query_one("#decision", Input).value = "Stop kernel tuning"
        form.query_one("#evidence_event_ids", Input).value = "not-an-id"
        await pilot.click("#ok")
        await pilot.pause()
        assert app.screen is form and demo.head() == head
        error = str(form.query_one(".form-error", Static).render())
        assert error.startswith("evidence event ids:"), error
        assert form.query_one("#decision", Input).value == "Stop kernel tuning"
        # pick the newest benchmark from the timeline instead of typing its UUID
        bench = demo.read(types=["benchmark_completed"])[-1]
        pick = form.query_one("#evidence-pick", Select)
        form.query_one("#evidence_event_ids", Input).value = ""
        pick.value = str(bench.event_id)
        await pilot.pause()
        assert form.query_one("#evidence_event_ids", Input).value == str(bench.event_id)
        await pilot.click("#ok")
        await wait_for(pilot, lambda: demo.head() == head + 1, what="the decision")
        assert demo.read(after_seq=head)[0].evidence_event_ids == [bench.event_id]


async def test_board_drops_low_value_columns_first_on_a_narrow_terminal(demo: LedgerStore) -> None:
    app = _app(demo.path)
    async with app.run_test(size=SMALL) as pilot:
        await wait_loaded(pilot)
        table = app.query_one("#board-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == ["status", "candidate", "verdict", "Δ out tok/s"]
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= SMALL[0]
    app = _app(demo.path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_loaded(pilot)
        labels = [str(c.label) for c in app.query_one("#board-table", DataTable).columns.values()]
        assert labels == ["status", "candidate", "verdict", "Δ out tok/s", "priority", "reason"]


async def test_benchmarks_drop_the_p99_columns_first_on_a_narrow_terminal(
    demo: LedgerStore,
) -> None:
    app = _app(demo.path)
    async with app.run_test(size=SMALL) as pilot:
        await wait_loaded(pilot)
        await pilot.press("2")
        pane = app.query_one("BenchmarksPane")
        table = pane.query_one("#bench-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, what="benchmark rows")
        await pilot.pause()
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == ["configuration", "c", "runs", "out tok/s", "TTFT med ms", "TPOT med ms"]
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= SMALL[0]
    app = _app(demo.path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("2")
        table = app.query_one("BenchmarksPane").query_one("#bench-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, what="benchmark rows")
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == [
            "configuration",
            "workload",
            "c",
            "runs",
            "out tok/s",
            "TTFT med ms",
            "TTFT p99 ms",
            "TPOT med ms",
            "TPOT p99 ms",
        ]


async def test_an_empty_benchmarks_plot_says_no_data(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "empty.duckdb")
    store.init()
    store.append(SessionStarted(title="nothing measured yet", session_id="fresh"))
    app = _app(store.path, "fresh")
    async with app.run_test(size=SMALL) as pilot:
        await wait_loaded(pilot)
        await pilot.press("2")
        pane = app.query_one("BenchmarksPane")
        await wait_for(pilot, lambda: pane.plot_mounted and pane.plot_title, what="the plot")
        assert "no data" in pane.plot_title
