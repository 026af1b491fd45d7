"""The tuneledger TUI: board, benchmarks, timeline, flags and SQL over one ledger file, live.

Threading rules (the UI thread never blocks):

- every database call runs in a thread worker and goes through the store's
  short-lived connections, so the TUI never holds the DuckDB file open and a
  writer in another process waits at most one refresh;
- a watchfiles worker watches the ledger file and its ``.wal`` and posts
  ``LedgerChanged``, which coalesces floods (``can_replace``); a poll of the
  head every ``poll_s`` catches changes the file watcher misses;
- one refresh runs at a time (``@work(thread=True, exclusive=True)``); a change
  arriving meanwhile marks the app dirty and one more refresh follows, so a
  steady stream of appends can neither queue refreshes nor starve them;
- a refresh reads only what the new events can change (``seq > last seen``):
  the timeline gets just the new rows, the board/benchmarks/flags are reread
  only when an event of their kind arrived (each pane's ``Part``, ``tui.parts``).

The panes are built from one list (``tui.panes.PANES``): tabs, tab keys, focus, what a
refresh reads for each, the help's lines and the palette's pane commands (``tui.pane``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from ledger.errors import ConcurrencyConflict, LedgerError
from ledger.store import WRITER_HOLD_S, LedgerStore
from schemas.envelope import Actor

from . import queries, writes
from .board import BoardPane
from .commands import LedgerCommands
from .messages import Appended, AppendFailed, LedgerChanged, PartLoaded
from .modals import DecisionForm, ProposeForm, TextPrompt
from .pane import Pane
from .panes import PANES, PARTS
from .timeline import TimelinePane

#: Seconds between refreshes of the header's sync status (it asks the hub what is pending).
SYNC_STATUS_S = 30.0

#: App actions some pane offers only while it is shown (``Pane.ACTIONS``).
_PANE_ACTIONS = frozenset().union(*(p.ACTIONS for p in PANES))


def _default_actor() -> Actor:
    from ledger.cli.context import default_actor_text  # $TUNELEDGER_ACTOR, else person:<login name>

    text = default_actor_text()
    try:
        return Actor.parse(text)
    except ValueError:
        return Actor(kind="person", name="unknown")


class TuneLedgerApp(App[None]):
    """The terminal UI of one ledger file.

    Args:
        path: the ledger file.
        session_id: the session to show and write to (default: the latest started one).
        actor: who appends (default: ``TUNELEDGER_ACTOR`` or ``person:$USER``).
        watch: watch the file for changes (tests of the poll turn it off).
        poll_s: seconds between fallback polls of the ledger's head (0: no poll).
    """

    TITLE = "tuneledger"
    COMMANDS: ClassVar = App.COMMANDS | {LedgerCommands}

    CSS = """
    TabbedContent { height: 1fr; }
    TabPane { padding: 0; }
    """

    BINDINGS: ClassVar = [
        Binding(
            "a",
            "accept",
            "Accept",
            id="board.accept",
            tooltip="Triage the selected candidate: accepted",
        ),
        Binding(
            "r",
            "reject",
            "Reject",
            id="board.reject",
            tooltip="Triage the selected candidate: rejected, with a reason",
        ),
        Binding(
            "d",
            "defer",
            "Defer",
            id="board.defer",
            tooltip="Triage the selected candidate: deferred",
        ),
        Binding(
            "n",
            "note",
            "Note",
            id="ledger.note",
            tooltip="Add a note (about the selected candidate or event)",
        ),
        Binding("p", "propose", "Propose", id="ledger.propose", tooltip="Propose a new candidate"),
        Binding("D", "decision", "Decision", id="ledger.decision", tooltip="Record a decision"),
        Binding(
            "e",
            "export",
            "Export",
            id="ledger.export",
            tooltip="Write the session's decision log as Markdown",
        ),
        Binding(
            "S",
            "sync",
            "Sync",
            id="ledger.sync",
            show=False,
            tooltip="Sync with the ledger's PostgreSQL hub (push, then pull)",
        ),
        Binding(
            "ctrl+r",
            "reload",
            "Reload",
            id="ledger.reload",
            show=False,
            tooltip="Reread everything",
        ),
        *(
            Binding(p.KEYS, f"show_tab('{p.NAME}')", p.TITLE, id=f"tab.{p.NAME}", show=False)
            for p in PANES
        ),
        Binding("f1,question_mark", "help", "Help", id="app.help"),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    #: Bindings offered in the command palette (every action).
    PALETTE_BINDINGS: ClassVar = [
        b for b in BINDINGS if isinstance(b, Binding) and b.id != "app.help"
    ] + [
        Binding("f1", "help", "Help: keys and actions", id="palette.help"),
    ]

    def __init__(
        self,
        path: str | Path,
        session_id: str | None = None,
        *,
        actor: Actor | None = None,
        watch: bool = True,
        poll_s: float = 2.0,
    ) -> None:
        super().__init__()
        # Its writes keep the file open for a burst (WRITER_HOLD_S); its reads never do.
        self.store = LedgerStore(path, hold_s=WRITER_HOLD_S, hold_reads=False)
        self.session_id = session_id
        self._session_given = session_id is not None
        self.actor = actor or _default_actor()
        self.watch_enabled = watch
        self.poll_s = poll_s
        self.last_seq = 0
        self.refreshing = False
        self.dirty = False
        self.full_pending = True
        self.started = time.perf_counter()
        #: part -> perf_counter when its pane first showed rows (the benchmark reads the board's).
        self.first_shown_at: dict[str, float] = {}
        #: The sync status shown in the header (None: the ledger has no remote).
        self.sync_line: str | None = None

    # --- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)  # no wall-clock time: snapshots stay deterministic
        with TabbedContent(initial=PANES[0].NAME, id="tabs"):
            for pane in PANES:
                with TabPane(pane.TITLE, id=pane.NAME):
                    yield pane(id=f"{pane.NAME}-pane")
        yield Footer()

    @property
    def main_screen(self) -> Any:
        """The screen holding the panes (queries must not hit a modal form on top of it)."""
        return self.screen_stack[0]

    def pane(self, name: str) -> Pane:
        """The pane named ``name`` (``Pane.NAME``)."""
        return self.main_screen.query_one(f"#{name}-pane", Pane)

    @property
    def first_board_at(self) -> float | None:
        """perf_counter when the board first showed rows (bench/bench_tui.py reads it)."""
        return self.first_shown_at.get("board")

    @property
    def board(self) -> BoardPane:
        """The board pane."""
        return self.main_screen.query_one(BoardPane)

    @property
    def timeline(self) -> TimelinePane:
        """The timeline pane."""
        return self.main_screen.query_one(TimelinePane)

    @property
    def closing(self) -> bool:
        """True once the app shuts down: workers' late results are dropped from then on.

        Textual's shutdown clears ``is_running`` first, then removes the screens' widgets while
        the app's message loop still runs (``App.run_test`` shuts down beside it): a result
        handled then would query widgets that are gone. An empty screen stack is the end of it.
        """
        return not self.is_running or not self.screen_stack

    @property
    def active_tab(self) -> str:
        """The id of the pane shown."""
        return str(self.main_screen.query_one("#tabs", TabbedContent).active)

    def _set_titles(self) -> None:
        self.title = f"tuneledger · {self.store.path.name}"
        self.sub_title = f"session {self.session_id}" if self.session_id else "all sessions"
        if self.sync_line:
            self.sub_title += f" · {self.sync_line}"

    def on_mount(self) -> None:
        """Start the first (full) refresh, the file watcher and the fallback poll."""
        self._set_titles()
        self._focus_tab(PANES[0].NAME)
        self.request_refresh(full=True)
        if self.watch_enabled:
            self.watch_ledger()
        if self.poll_s > 0:
            self.set_interval(self.poll_s, self.poll_head)
        self._sync_status_worker()
        self.set_interval(SYNC_STATUS_S, self._sync_status_worker)

    # --- live refresh -------------------------------------------------------------------

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def watch_ledger(self) -> None:
        """Post ``LedgerChanged`` whenever the ledger file or its WAL changes.

        The folder is watched (not the files): the WAL comes and goes with each
        write and a watch on a missing file would fail.
        """
        from watchfiles import awatch

        names = {self.store.path.name, self.store.path.name + ".wal"}
        folder = self.store.path.resolve().parent
        # step/debounce small: a write should reach the screen well within a second
        async for _ in awatch(
            folder,
            watch_filter=lambda _change, p: Path(p).name in names,
            debounce=200,
            step=20,
            recursive=False,
        ):
            self.post_message(LedgerChanged())

    def poll_head(self) -> None:
        """Fallback: compare the ledger's head with the last seen one (file events can be missed)."""
        if not self.refreshing:
            self._poll_worker()

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll_worker(self) -> None:
        try:
            head = queries.head(self.store)
        except LedgerError:
            return
        if head != self.last_seq:
            self.post_message(LedgerChanged())

    def on_ledger_changed(self, _message: LedgerChanged) -> None:
        """Refresh now, or once more after the refresh in flight."""
        if self.closing:  # a worker's late message
            return
        self.request_refresh()

    def request_refresh(self, *, full: bool = False) -> None:
        """Start a refresh unless one runs; then remember to run one more when it ends."""
        self.full_pending = self.full_pending or full
        if self.closing:
            return
        if self.refreshing:
            self.dirty = True
            return
        self.refreshing = True
        self.dirty = False
        full, self.full_pending = self.full_pending, False
        states = {p.NAME: self.pane(p.NAME).read_state() for p in PANES if p.PART is not None}
        self._refresh_worker(0 if full else self.last_seq, states)

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def _refresh_worker(self, since_seq: int, states: dict[str, Any]) -> None:
        """Read what changed since ``since_seq`` and post it part by part; the head goes last,
        so a refresh that fails half-way is redone in full by the next one."""
        worker = get_current_worker()
        if self.session_id is None and not self._session_given:
            self.session_id = queries.default_session(self.store)
            self.call_from_thread(self._set_titles)
        head = None
        for part, data in queries.iter_snapshot(
            self.store, self.session_id, PARTS, since_seq=since_seq, states=states
        ):
            if worker.is_cancelled:
                return
            if part == "head":
                head = data
            else:
                self.post_message(PartLoaded(part, data))
        self.post_message(PartLoaded("head", head))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """When a refresh ends (done, failed or cancelled), run the one that waited."""
        if event.worker.group != "refresh" or event.state not in (
            WorkerState.SUCCESS,
            WorkerState.ERROR,
            WorkerState.CANCELLED,
        ):
            return
        if event.state == WorkerState.ERROR:
            self.notify(f"refresh failed: {event.worker.error}", severity="error", timeout=4)
        self.refreshing = False
        if self.dirty or self.full_pending:
            self.request_refresh()

    def on_part_loaded(self, message: PartLoaded) -> None:
        """Hand a freshly read part to its pane."""
        if self.closing:  # a worker's late message
            return
        if message.part == "head":
            if message.data is not None:
                self.last_seq = message.data
            return
        self.pane(message.part).show(message.data)
        if message.data and message.part not in self.first_shown_at:
            self.first_shown_at[message.part] = time.perf_counter()

    # --- writing ------------------------------------------------------------------------

    @property
    def author(self) -> writes.Author:
        """Who writes from here, into which session."""
        return writes.Author(self.actor, self.session_id)

    def _selected_candidate(self) -> dict[str, Any] | None:
        row = self.board.selected
        if row is None:
            self.notify("Select a candidate on the Board first.", severity="warning")
        return row

    def _triage(self, status: str, reason: str | None = None) -> None:
        row = self._selected_candidate()
        if row is not None:
            self._append(
                f"{row['candidate_id']} {status}",
                lambda: writes.triage(self.store, self.author, row, status, reason),
            )

    def action_accept(self) -> None:
        """Accept the selected candidate (appends candidate_triaged)."""
        self._triage("accepted")

    def action_defer(self) -> None:
        """Defer the selected candidate (appends candidate_triaged)."""
        self._triage("deferred")

    def action_reject(self) -> None:
        """Reject the selected candidate, asking why (appends candidate_triaged)."""
        row = self._selected_candidate()
        if row is None:
            return

        def done(reason: str | None) -> None:
            if reason:
                self._append(
                    f"{row['candidate_id']} rejected",
                    lambda: writes.triage(self.store, self.author, row, "rejected", reason),
                )

        self.push_screen(
            TextPrompt(f"Reject {row['candidate_id']}: why?", "no-op on this arch; dead code; ..."),
            done,
        )

    def action_note(self) -> None:
        """Add a note: about the selected candidate (Board) or citing the selected event (Timeline)."""
        candidate_id, refs, about = None, [], ""
        if self.active_tab == "board" and self.board.selected:
            candidate_id = self.board.selected["candidate_id"]
            about = f" about {candidate_id}"
        elif self.active_tab == "timeline" and self.timeline.selected:
            refs = [self.timeline.selected["event_id"]]
            about = f" citing seq {self.timeline.selected['seq']}"

        def done(text: str | None) -> None:
            if text:
                self._append(
                    "note",
                    lambda: writes.add_note(
                        self.store, self.author, text, candidate_id=candidate_id, refs=refs
                    ),
                )

        self.push_screen(TextPrompt(f"Add a note{about}", "what you found"), done)

    def action_propose(self) -> None:
        """Propose a new candidate (appends candidate_proposed)."""

        def done(fields: dict[str, Any] | None) -> None:
            if fields:
                self._append("proposal", lambda: writes.propose(self.store, self.author, fields))

        self.push_screen(ProposeForm(), done)

    def action_decision(self) -> None:
        """Record a decision about the selected candidate (appends decision_recorded)."""
        row = self.board.selected if self.active_tab == "board" else None
        evidence = (
            self.timeline.selected["event_id"]
            if self.active_tab == "timeline" and self.timeline.selected
            else ""
        )

        def done(fields: dict[str, Any] | None) -> None:
            if fields:
                self._append(
                    "decision", lambda: writes.record_decision(self.store, self.author, fields)
                )

        # the newest events first: the evidence is usually what just happened
        recent = list(reversed(self.timeline.rows[-200:]))
        self.push_screen(DecisionForm(row["candidate_id"] if row else None, evidence, recent), done)

    @work(thread=True, group="append", exit_on_error=False)
    def _append(self, what: str, write: Any) -> None:
        """Run one append off the UI thread and report how it went."""
        try:
            result = write()
        except ConcurrencyConflict as exc:
            self.post_message(AppendFailed(what, str(exc), conflict=True))
        except (LedgerError, ValueError) as exc:
            self.post_message(
                AppendFailed(what, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            )
        else:
            self.post_message(Appended(what, result.seq))

    def on_appended(self, message: Appended) -> None:
        """Say what was appended, and show it."""
        if self.closing:  # a worker's late message
            return
        self.notify(f"{message.what}: appended as seq {message.seq}", timeout=3)
        self.request_refresh()

    def on_append_failed(self, message: AppendFailed) -> None:
        """Say why an append failed; after a conflict, show what the other writer did."""
        if self.closing:  # a worker's late message
            return
        if message.conflict:
            self.notify(
                f"{message.what}: changed by someone else; refreshed. Look again and retry.",
                severity="warning",
                timeout=6,
            )
            self.request_refresh(full=True)
        else:
            self.notify(
                f"{message.what} not appended: {message.error}", severity="error", timeout=6
            )

    # --- export -------------------------------------------------------------------------

    def action_export(self) -> None:
        """Write the session's Markdown decision log next to the ledger."""
        self._export()

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export(self) -> None:
        try:
            from ledger.export.markdown import render_markdown
            from ledger.store.safe_files import write_file
        except ImportError:
            self.call_from_thread(
                self.notify, "Markdown export is not available in this build.", severity="error"
            )
            return
        try:
            text = render_markdown(self.store, session_id=self.session_id)
        except LedgerError as exc:
            self.call_from_thread(self.notify, f"export failed: {exc}", severity="error")
            return
        out = export_path(self.store.path, self.session_id)
        try:
            write_file(out, text)  # whole file; never replaces a symlink or a special file
        except LedgerError as exc:
            self.call_from_thread(self.notify, f"export failed: {exc}", severity="error")
            return
        self.call_from_thread(self.notify, f"Decision log written to {out}", timeout=8)

    # --- sync -----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sync-status", exit_on_error=False)
    def _sync_status_worker(self) -> None:
        from . import sync_status  # psycopg only when the worker runs, not at start-up

        line = sync_status.status_line(self.store)
        if line != self.sync_line:
            self.sync_line = line
            self.call_from_thread(self._set_titles)

    def action_sync(self) -> None:
        """Sync with the hub in a worker; the screen stays live, the result is a notification."""
        self.notify("syncing with the hub…", timeout=2)
        self._sync_worker()

    @work(thread=True, exclusive=True, group="sync", exit_on_error=False)
    def _sync_worker(self) -> None:
        from . import sync_status

        try:
            text = sync_status.run_sync(self.store)
        except LedgerError as exc:
            self.call_from_thread(self.notify, f"sync failed: {exc}", severity="error", timeout=8)
        else:
            self.call_from_thread(self.notify, text, timeout=5)
        self._sync_status_worker()
        self.post_message(LedgerChanged())

    # --- navigation ---------------------------------------------------------------------

    def action_show_tab(self, tab: str) -> None:
        """Show one pane and focus its main widget."""
        self.main_screen.query_one("#tabs", TabbedContent).active = tab
        self._focus_tab(tab)

    def _focus_tab(self, tab: str) -> None:
        pane = self.pane(tab)
        pane.query_one(pane.FOCUS).focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_bindings()
        if event.pane.id:
            self._focus_tab(event.pane.id)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A pane's own actions (``Pane.ACTIONS``: the board's triage) show in the footer, and
        run, only while that pane is shown.

        Before the app is mounted, or before its tabs are composed, every action is offered:
        the DOM is not queried then (``App.is_mounted`` is a method taking a widget, so the
        test for it was always true, and a blanket ``except`` hid what failed).
        """
        if action not in _PANE_ACTIONS or not self.is_running or not self.screen_stack:
            return True
        tabs = self.main_screen.query("#tabs")
        if not tabs:  # mounted, tabs not composed yet
            return True
        active = str(tabs.first(TabbedContent).active)
        return any(action in p.ACTIONS for p in PANES if p.NAME == active)

    def action_reload(self) -> None:
        """Reread everything from the ledger."""
        self.request_refresh(full=True)

    def action_help(self) -> None:
        """Show the keys and actions."""
        from .help import HelpScreen  # Markdown is imported on first use, not at start

        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)], PANES))


def export_path(ledger: Path, session_id: str | None) -> Path:
    """Where the Markdown decision log goes: ``<session>-decisions.md`` next to the ledger."""
    return ledger.resolve().parent / f"{session_id or 'all-sessions'}-decisions.md"


def open_tui(
    path: str | Path, session_id: str | None = None, *, actor: Actor | None = None
) -> None:
    """Run the TUI on the ledger at ``path`` (``tuneledger demo`` and ``tuneledger tui`` call this)."""
    TuneLedgerApp(path, session_id, actor=actor).run()
