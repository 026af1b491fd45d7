"""Pilot tests of every TUI action: each appends exactly the event it should (read back with
``LedgerStore.read``), through a worker, and the screen shows the result."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.coordinate import Coordinate
from textual.widgets import Input, Select

from ledger.cli.demo import DEMO_SESSION
from ledger.store import LedgerStore
from schemas.envelope import Actor
from schemas.events import CandidateTriaged
from tests.tui.pilot import SIZE, make_demo, wait_for, wait_loaded
from tui.app import TuneLedgerApp, export_path
from tui.help import HelpScreen
from tui.modals import DecisionForm, ProposeForm, TextPrompt

ACTOR = Actor(kind="person", name="tester")

pytestmark = pytest.mark.anyio


@pytest.fixture
def demo(tmp_path: Path) -> LedgerStore:
    return make_demo(tmp_path)


def _app(store: LedgerStore, **kwargs) -> TuneLedgerApp:
    kwargs.setdefault("watch", False)
    kwargs.setdefault("poll_s", 0)
    return TuneLedgerApp(store.path, DEMO_SESSION, actor=ACTOR, **kwargs)


def _select_candidate(app: TuneLedgerApp, candidate_id: str) -> dict:
    table = app.query_one("#board-table")
    index = [r["candidate_id"] for r in app.board.shown].index(candidate_id)
    table.move_cursor(row=index)
    return app.board.shown[index]


def _new_events(store: LedgerStore, after: int, *types: str) -> list:
    return store.read(after_seq=after, types=list(types) or None)


def _result_rows(app: TuneLedgerApp) -> int:
    """Rows in the SQL result table (-1 before the first result mounts it)."""
    from textual_fastdatatable import DataTable as FastTable

    table = app.query_one("#sql-result")
    return table.row_count if isinstance(table, FastTable) else -1


def _recording_notify(app: TuneLedgerApp) -> list[str]:
    seen: list[str] = []
    original = app.notify

    def notify(message, *args, **kwargs):
        seen.append(str(message))
        return original(message, *args, **kwargs)

    app.notify = notify  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize(("key", "status"), [("a", "accepted"), ("d", "deferred")])
async def test_accept_and_defer_append_triage_with_expected_version(
    demo: LedgerStore, key: str, status: str
) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        row = _select_candidate(app, "flag:cuda-graph-max-bs")
        await pilot.press(key)
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the triage event")
        [event] = _new_events(demo, head)
        assert isinstance(event, CandidateTriaged)
        assert (event.candidate_id, event.status, event.actor) == (
            "flag:cuda-graph-max-bs",
            status,
            ACTOR,
        )
        assert event.session_id == DEMO_SESSION
        assert event.stream_version == row["stream_version"] + 1
        await wait_for(
            pilot,
            lambda: any(
                r["candidate_id"] == "flag:cuda-graph-max-bs" and r["status"] == status
                for r in app.board.rows
            ),
            what="the board to show it",
        )


async def test_reject_asks_for_a_reason(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        _select_candidate(app, "spec-decoding:tune-speculative-params")
        await pilot.press("r")
        assert isinstance(app.screen, TextPrompt)
        await pilot.press("enter")  # empty reason: refused, the form stays
        assert isinstance(app.screen, TextPrompt)
        await pilot.press(*"no-op on sm120", "enter")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the rejection")
        [event] = _new_events(demo, head)
        assert (event.type, event.status, event.reason) == (
            "candidate_triaged",
            "rejected",
            "no-op on sm120",
        )


async def test_cancelled_reject_appends_nothing(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        await pilot.press("r", "x", "escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, TextPrompt)
        assert demo.head() == head


async def test_note_about_the_selected_candidate(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        _select_candidate(app, "flag:triton-attention-reduce-in-fp32")
        await pilot.press("n", *"checked 0.5.23 too", "enter")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the note")
        [event] = _new_events(demo, head)
        assert (event.type, event.text, event.candidate_id) == (
            "note_added",
            "checked 0.5.23 too",
            "flag:triton-attention-reduce-in-fp32",
        )


async def test_note_on_the_timeline_cites_the_selected_event(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        await pilot.press("3")
        selected = app.timeline.selected
        await pilot.press("n", *"see this", "enter")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the note")
        [event] = _new_events(demo, head)
        assert [str(r) for r in event.refs] == [selected["event_id"]]
        # the new note shows up at the bottom of the timeline
        await wait_for(
            pilot, lambda: app.timeline.last_seq == head + 1, what="the note in the timeline"
        )


async def test_propose_form_appends_candidate_proposed(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        await pilot.press("p")
        form = app.screen
        assert isinstance(form, ProposeForm)
        form.query_one("#title", Input).value = "Try --enable-mixed-chunk"
        form.query_one("#flag", Input).value = "--enable_mixed_chunk"
        form.query_one("#priority", Select).value = "low"
        form.query_one("#hypothesis", Input).value = "overlap prefill with decode"
        await pilot.click("#ok")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the proposal")
        [event] = _new_events(demo, head)
        assert event.type == "candidate_proposed"
        assert (event.candidate_id, event.flag, event.priority, event.kind) == (
            "flag:enable-mixed-chunk",
            "enable-mixed-chunk",
            "low",
            "flag",
        )
        assert event.stream_version == 1
        await wait_for(
            pilot,
            lambda: any(
                r["candidate_id"] == "flag:enable-mixed-chunk" and r["status"] == "proposed"
                for r in app.board.rows
            ),
            what="the new candidate on the board",
        )


async def test_proposing_an_existing_id_is_refused(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        seen = _recording_notify(app)
        head = demo.head()
        await pilot.press("p")
        app.screen.query_one("#title", Input).value = "again"
        app.screen.query_one("#candidate_id", Input).value = "flag:cuda-graph-max-bs"
        await pilot.click("#ok")
        await wait_for(
            pilot,
            lambda: any("changed by someone else" in m for m in seen),
            what="the conflict notice",
        )
        assert demo.head() == head


async def test_decision_form_appends_decision_recorded(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        _select_candidate(app, "kernel-tune:fused-moe-triton-sm120")
        evidence = demo.read(types=["benchmark_completed"])[-1].event_id
        await pilot.press("D")
        form = app.screen
        assert isinstance(form, DecisionForm)
        assert form.query_one("#candidate_id", Input).value == "kernel-tune:fused-moe-triton-sm120"
        form.query_one("#decision", Input).value = "Stop kernel tuning"
        form.query_one("#rationale", Input).value = "memory-bound GEMMs"
        form.query_one("#alternatives", Input).value = "tune 18 batch sizes; copy H200 config"
        form.query_one("#evidence_event_ids", Input).value = str(evidence)
        await pilot.click("#ok")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the decision")
        [event] = _new_events(demo, head)
        assert event.type == "decision_recorded"
        assert event.decision == "Stop kernel tuning"
        assert event.alternatives == ["tune 18 batch sizes", "copy H200 config"]
        assert event.evidence_event_ids == [evidence]
        assert event.candidate_id == "kernel-tune:fused-moe-triton-sm120"


async def test_stale_triage_is_a_conflict_and_refreshes(demo: LedgerStore) -> None:
    """Someone else triaged the candidate after the board was read: nothing is appended by
    the TUI, the user is told, and the board shows the other writer's status."""
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        seen = _recording_notify(app)
        _select_candidate(app, "flag:cuda-graph-max-bs")
        demo.append(
            CandidateTriaged(
                candidate_id="flag:cuda-graph-max-bs",
                status="done",
                reason="elsewhere",
                session_id=DEMO_SESSION,
            )
        )
        head = demo.head()
        await pilot.press("a")
        await wait_for(
            pilot,
            lambda: any("changed by someone else; refreshed" in m for m in seen),
            what="the conflict notice",
        )
        assert demo.head() == head
        await wait_for(
            pilot,
            lambda: any(
                r["candidate_id"] == "flag:cuda-graph-max-bs" and r["status"] == "done"
                for r in app.board.rows
            ),
            what="the refreshed board",
        )


async def test_export_writes_the_decision_log_next_to_the_ledger(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        seen = _recording_notify(app)
        out = export_path(demo.path, DEMO_SESSION)
        assert out == demo.path.parent / f"{DEMO_SESSION}-decisions.md"
        await pilot.press("e")
        await wait_for(pilot, out.exists, what="the exported file")
        assert "## Decisions" in out.read_text()
        await wait_for(
            pilot, lambda: any(str(out) in m for m in seen), what="the path in a notification"
        )


async def test_board_filters_by_verdict_and_arch(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        app.query_one("#filter-verdict", Select).value = "no-op"
        await pilot.pause()
        assert [r["candidate_id"] for r in app.board.shown] == [
            "flag:triton-attention-reduce-in-fp32"
        ]
        app.query_one("#filter-verdict", Select).clear()
        app.query_one("#filter-arch", Select).value = "sm120"
        await pilot.pause()
        assert len(app.board.shown) == len(app.board.rows) == 8
        app.query_one("#filter-arch", Select).value = (
            "(none)" if "(none)" in app.board._options["arch"] else "sm120"
        )
        await pilot.pause()


async def test_board_rows_carry_the_benchmark_delta(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        # the B200-config run was made for the kernel-tune candidate (its events say so), so
        # the board shows it there, not on the fused-MoE flag that configuration merely inherits.
        row = next(
            r for r in app.board.rows if r["candidate_id"] == "kernel-tune:fused-moe-triton-sm120"
        )
        assert (row["delta_config"], row["delta_concurrency"], row["delta_verdict"]) == (
            "moe-config-b200",
            64,
            "insufficient-data",  # one run per arm
        )
        assert row["delta_pct"] == pytest.approx(100 * (1566.0 / 1582.5 - 1))
        flag_row = next(
            r for r in app.board.rows if r["candidate_id"] == "flag:enable-fused-moe-sum-all-reduce"
        )
        assert flag_row["delta_config"] is None


async def test_timeline_filter_and_detail_links(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("3")
        app.query_one("#timeline-type", Select).value = "decision_recorded"
        await wait_for(
            pilot,
            lambda: {r["type"] for r in app.timeline.rows} == {"decision_recorded"},
            what="the filtered timeline",
        )
        assert len(app.timeline.rows) == 5
        first = app.timeline.rows[0]
        app.query_one("#timeline-table").move_cursor(row=0)
        links = app.query_one("#event-links")
        await wait_for(
            pilot,
            lambda: app.timeline._detail_id == first["event_id"] and links.option_count > 3,
            what="the detail pane",
        )
        relations = {
            str(links.get_option_at_index(i).prompt).split(":")[0]
            for i in range(links.option_count)
        }
        assert {"cited (evidence_event_ids)", "caused by this"} <= relations
        # Enter on a link opens the linked event
        links.focus()
        links.highlighted = 0
        target = links.get_option_at_index(0).id
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.timeline._detail_id == target, what="the linked event")
        # clearing the filters (a palette command) shows everything again
        await app.run_action("clear_filters", app.timeline)
        await wait_for(
            pilot, lambda: len(app.timeline.rows) == demo.head(), what="the unfiltered timeline"
        )


async def test_sql_console_runs_refuses_and_remembers(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("5")
        sql_input = app.query_one("#sql-input", Input)
        assert app.focused is sql_input
        await pilot.press("enter")  # the default query: flags without effect
        from textual_fastdatatable import DataTable as FastTable

        await wait_for(pilot, lambda: _result_rows(app) == 4, what="the result")
        sql_input.value = "DELETE FROM events"
        await pilot.press("enter")
        status = app.query_one("#sql-status")
        await wait_for(pilot, lambda: "Refused" in str(status.render()), what="the refusal")
        assert status.has_class("error")
        sql_input.value = "SELECT nope FROM board"
        await pilot.press("enter")
        await wait_for(
            pilot, lambda: "InvalidInput" in str(status.render()), what="the query error"
        )
        sql_input.value = "SELECT count(*) AS n FROM timeline"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "1 rows" in str(status.render()), what="the count")
        assert app.query_one("#sql-result", FastTable).get_cell_at(Coordinate(0, 0)) == demo.head()
        await pilot.press("up")
        assert sql_input.value == "SELECT count(*) AS n FROM timeline"
        await pilot.press("up")
        assert sql_input.value == "SELECT nope FROM board"
        await pilot.press("down", "down")
        assert sql_input.value == ""
        assert demo.head() == 81  # nothing was written (the demo: data/demo_campaign.jsonl)


async def test_sql_console_large_result_is_capped(tmp_path: Path) -> None:
    """A 200,000-row result lands in the Arrow-backed table capped at 100,000 rows, saying so
    (a behaviour test: no timing here)."""
    store = LedgerStore(tmp_path / "empty.duckdb")
    store.init()
    app = TuneLedgerApp(store.path, watch=False, poll_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        app.query_one(
            "#sql-input", Input
        ).value = "SELECT range AS i, range * 2 AS j FROM range(200000)"
        await pilot.press("enter")

        status = app.query_one("#sql-status")
        # the rows land, then the status line is set: on a busy machine a frame may pass
        # between the two (a fresh clone beside a CPU-bound neighbour saw "running…")
        await wait_for(
            pilot,
            lambda: _result_rows(app) == 100_000 and "(capped)" in str(status.render()),
            what="the capped result and its status",
        )


async def test_flags_matrix_marks_no_effect(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("4")
        summary = str(app.query_one("#flags-summary").render())
        assert "no effect on SM120" in summary
        for flag in (
            "num-continuous-decode-steps",
            "triton-attention-reduce-in-fp32",
            "enable-flashinfer-allreduce-fusion",
            "enable-fused-moe-sum-all-reduce",
        ):
            assert f"--{flag}" in summary
        assert "--enable-mixed-chunk" not in summary  # incompatible is an effect
        pane = app.query_one("#flags-pane")
        assert pane.columns == [("sm120", None)]
        assert pane.matrix["num-continuous-decode-steps"][("sm120", None)]["verdict"] == "dead-code"


async def test_benchmarks_table_and_plot_metric(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("2")
        pane = app.query_one("#bench-pane")
        assert [(r["config_name"], r["concurrency"]) for r in pane.rows] == [
            ("baseline", 1),
            ("baseline", 64),
            ("moe-config-b200", 1),
            ("moe-config-b200", 64),
        ]
        cell = app.query_one("#bench-table").get_row_at(3)[4]  # after the workload column
        assert "1,566.0 -1.0%" in str(cell)
        assert cell.spans[-1].style == "yellow"  # insufficient-data (one run per arm) is yellow
        await pilot.press("m")
        assert pane.metric_index == 1


async def test_help_screen_and_quit(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_command_palette_runs_actions(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        head = demo.head()
        _select_candidate(app, "flag:num-continuous-decode-steps")
        await pilot.press("ctrl+p")
        await pilot.press(*"Defer")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the deferral")
        [event] = _new_events(demo, head)
        assert (event.candidate_id, event.status) == (
            "flag:num-continuous-decode-steps",
            "deferred",
        )


def test_every_binding_has_an_id_and_is_in_the_palette() -> None:
    ids = [b.id for b in TuneLedgerApp.BINDINGS]
    assert all(ids) and len(set(ids)) == len(ids)
    palette_actions = {b.action for b in TuneLedgerApp.PALETTE_BINDINGS}
    assert {b.action for b in TuneLedgerApp.BINDINGS} <= palette_actions


async def test_keymap_rebinds_by_binding_id(demo: LedgerStore) -> None:
    app = _app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        app.set_keymap({"board.accept": "y"})
        head = demo.head()
        _select_candidate(app, "flag:cuda-graph-max-bs")
        await pilot.press("y")
        await wait_for(pilot, lambda: len(_new_events(demo, head)) == 1, what="the rebound accept")


async def test_board_actions_are_offered_only_on_the_board(
    demo: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regression: ``check_action`` tested ``self.is_mounted`` (a method: always true) and hid
    whatever failed behind a blanket ``except``. Before the app runs it must answer without
    touching the DOM (``main_screen`` is replaced by a property that records a read and fails:
    the old blanket ``except`` swallowed the failure, the record stays); once running, board
    actions are enabled on the board and disabled elsewhere."""
    app = _app(demo)
    reads: list[str] = []

    def no_dom(self: TuneLedgerApp) -> None:
        reads.append("main_screen")
        raise RuntimeError("check_action queried the DOM before the app was mounted")

    with monkeypatch.context() as patch:
        patch.setattr(TuneLedgerApp, "main_screen", property(no_dom))
        assert app.check_action("accept", ()) is True
    assert reads == []
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        assert app.check_action("accept", ()) is True
        assert app.check_action("reload", ()) is True
        await pilot.press("3")
        await wait_for(pilot, lambda: app.active_tab == "timeline", what="the timeline tab")
        assert app.check_action("accept", ()) is False
        assert app.check_action("reload", ()) is True


async def test_late_results_during_shutdown_are_dropped(demo: LedgerStore) -> None:
    """Workers' results that arrive while the app shuts down are dropped, never shown.

    Textual's shutdown (``App.run_test`` runs it beside the app's message loop) clears
    ``is_running``, then removes the screens' widgets while the loop still handles what worker
    threads post: an event's detail loaded just then could reach a timeline whose widgets were
    gone (NoMatches, a failed test now and then). Here results keep arriving through the
    shutdown — from a thread, as the detail and refresh workers post them, and at each widget
    being unmounted — and none may reach a pane once the shutdown began.
    """
    import threading

    from textual import events

    from tui import queries
    from tui.messages import EventDetailLoaded, PartLoaded

    app = _app(demo)
    stop = threading.Event()
    late: list[str] = []
    results: list = []

    def post_results() -> None:
        while not stop.is_set():
            results[2].post_message(EventDetailLoaded(results[0]))
            app.post_message(PartLoaded("board", results[1]))
            stop.wait(0.0005)

    def at_unmount(message) -> None:
        if isinstance(message, events.Unmount) and results:
            app.post_message(PartLoaded("board", results[1]))

    async with app.run_test(size=SIZE, message_hook=at_unmount) as pilot:
        await wait_loaded(pilot)
        results += [
            queries.load_event_detail(app.store, app.timeline.rows[-1]["event_id"]),
            list(app.board.shown),
            app.timeline,
        ]
        for pane, name in ((app.timeline, "show_detail"), (app.board, "show")):
            shown = getattr(pane, name)

            def record(*args, _shown=shown, _name=name):
                if not app.is_running:
                    late.append(_name)
                return _shown(*args)

            setattr(pane, name, record)
        poster = threading.Thread(target=post_results, daemon=True)
        poster.start()
        await pilot.pause(0.05)
    stop.set()
    poster.join()
    assert late == [] and app.return_code in (None, 0)
