"""The timeline pane: the live tail of events, filterable, with an event's JSON and links.

New events are appended at the bottom as they arrive; the view follows the
tail while the cursor sits on the last row (as ``tail -f`` and Toolong do)
and stays put when the user scrolled up to read. Selecting a row loads the
event's JSON and the events it links to (its cause, the events it cites, the
events caused by or citing it); Enter on a link jumps to that event.
"""

from __future__ import annotations

import time
from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, OptionList, Select, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ledger.errors import LedgerError

from . import queries
from .messages import EventDetailLoaded, TimelineReloaded
from .pane import Pane
from .parts import Part
from .queries import EventDetail, EventFilter, TimelineData
from .render import clip


class EventTable(DataTable[Any]):
    """The timeline's table: a change of its width refits the summary column."""

    def on_resize(self, event: Any) -> None:
        for node in self.ancestors:
            if isinstance(node, TimelinePane):
                node.refit()
                break


class TimelinePane(Pane):
    """Events, oldest at the top, newest at the bottom, with a detail pane on the right."""

    NAME = "timeline"
    TITLE = "Timeline"
    KEYS = "3,f4"
    FOCUS = "#timeline-table"
    #: Every new event is a row here: read first on a refresh (where a new event shows up).
    PART = Part("timeline", queries.timeline, ("timeline",), latency_first=True)
    SUMMARY = "live tail; Enter on a link opens that event"
    HELP_KEYS = (("Enter", "Timeline links", "open the linked event"),)
    COMMANDS = (
        (
            "Timeline: show all event types and sessions",
            "Clear the timeline's filters",
            "clear_filters",
        ),
    )

    #: Below this width the event's detail goes under the table instead of beside it: beside
    #: it, at 100 columns, it took half the width and left the summaries none.
    STACK_BELOW = 130

    DEFAULT_CSS = """
    TimelinePane #timeline-filters { height: 3; }
    TimelinePane #timeline-filters Select { width: 1fr; max-width: 36; }
    TimelinePane #timeline-status { padding: 1 1; color: $text-muted; width: 1fr; }
    TimelinePane #timeline-body { height: 1fr; }
    TimelinePane #timeline-table { width: 1fr; height: 1fr; }
    TimelinePane #timeline-detail { width: 40%; max-width: 64; height: 1fr; border-left: solid $primary-darken-2; }
    TimelinePane.-stacked #timeline-body { layout: vertical; }
    TimelinePane.-stacked #timeline-detail {
        width: 1fr; max-width: 100%; height: 40%; border-left: none; border-top: solid $primary-darken-2;
    }
    TimelinePane #event-json { height: auto; }
    TimelinePane #event-links { height: auto; max-height: 14; border: none; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[dict[str, Any]] = []
        self.last_seq = 0
        self.filter = EventFilter()
        self._options: dict[str, list[str]] = {}
        self._detail_id: str | None = None
        #: seq -> wall-clock time when that event was shown (with ``record_visibility``; wall
        #: clock, so a benchmark can compare it with another process's append time).
        self.visible_wall: dict[int, float] = {}
        self.record_visibility = False
        #: How many cells of a summary the table shows (the rest of the table's width).
        self.summary_width = 64

    def compose(self) -> ComposeResult:
        with Horizontal(id="timeline-filters"):
            yield Select[str]([], prompt="type: all", id="timeline-type")
            yield Select[str]([], prompt="session: all", id="timeline-session")
            yield Static("", id="timeline-status")
        with Horizontal(id="timeline-body"):
            table = EventTable(id="timeline-table", cursor_type="row")
            self._add_columns(table)
            yield table
            with VerticalScroll(id="timeline-detail"):
                yield Static("Select an event to see its JSON.", id="event-json")
                yield OptionList(id="event-links")

    # --- data ---------------------------------------------------------------------------

    def read_state(self) -> EventFilter:
        """A refresh reads the events this filter shows."""
        return self.filter

    def show(self, data: TimelineData) -> None:
        """Show a refresh's events (only the new ones unless ``data.reset``) and the filters'
        choices; a refresh read for a filter the user has changed since is dropped (the
        reload for the new filter follows)."""
        if data.filter != self.filter:
            return
        self.set_choices(data.sessions, data.types)
        if data.reset:
            self.replace(data.rows)
        else:
            self.extend(data.rows)
        if self.record_visibility:
            now = time.time()
            for row in data.rows:
                self.visible_wall.setdefault(row["seq"], now)

    def set_choices(self, sessions: list[str], types: list[str]) -> None:
        """Offer the sessions and event types present in the ledger as filters."""
        for key, values in (("type", types), ("session", sessions)):
            if values == self._options.get(key):
                continue
            self._options[key] = values
            select = self.query_one(f"#timeline-{key}", Select)
            current = select.value
            with select.prevent(Select.Changed):
                select.set_options([(v, v) for v in values])
                if current in values:
                    select.value = current

    def replace(self, rows: list[dict[str, Any]]) -> None:
        """Show these rows instead of the current ones (first load, filter change, retraction)."""
        table = self.query_one("#timeline-table", DataTable)
        table.clear(columns=True)
        self._add_columns(table)
        self.rows = []
        self.last_seq = 0
        self.extend(rows, follow=True)

    def extend(self, rows: list[dict[str, Any]], *, follow: bool | None = None) -> None:
        """Append new events at the bottom (rows already shown are skipped)."""
        table = self.query_one("#timeline-table", DataTable)
        if follow is None:  # follow the tail only if the cursor is on the last row
            follow = not self.rows or table.cursor_row >= len(self.rows) - 1
        fresh = [r for r in rows if r["seq"] > self.last_seq]
        self.rows.extend(fresh)
        if self._fit():
            self._fill(table)  # a wider seq or type column: every summary is clipped anew
        else:
            for row in fresh:
                self._add(table, row)
        if fresh:
            self.last_seq = fresh[-1]["seq"]
        if follow and self.rows:
            table.move_cursor(row=len(self.rows) - 1)
        self.query_one("#timeline-status", Static).update(
            f"{len(self.rows)} events, last seq {self.last_seq}"
        )

    @staticmethod
    def _add_columns(table: DataTable[Any]) -> None:
        table.add_columns("seq", "UTC", "type", "summary")

    def _add(self, table: DataTable[Any], row: dict[str, Any]) -> None:
        table.add_row(
            Text(str(row["seq"]), style="dim"),
            Text(row["recorded_at"][5:], style="dim"),  # MM-DD HH:MM:SS; the year is in the JSON
            row["type"],  # whole: the summary gives way, never the type
            clip(row["summary"], self.summary_width),
            key=str(row["seq"]),
        )

    def _fill(self, table: DataTable[Any]) -> None:
        """Show ``self.rows`` again (the summary width changed), keeping the cursor."""
        cursor = table.cursor_row
        table.clear(columns=True)  # a column keeps the width of the widest cell it ever had
        self._add_columns(table)
        for row in self.rows:
            self._add(table, row)
        if self.rows:
            table.move_cursor(row=min(max(cursor, 0), len(self.rows) - 1), animate=False)

    def _fit(self) -> bool:
        """Give the summary column what the table's width leaves (seq, time and the longest
        type shown whole, one cell of padding a side each, a scrollbar); True if it changed."""
        table = self.query_one("#timeline-table", DataTable)
        width = table.size.width
        if not width:
            return False
        seq = len(str(self.rows[-1]["seq"])) if self.rows else 3
        kind = max((len(r["type"]) for r in self.rows), default=4)
        room = max(width - 2 - (max(seq, 3) + 2) - (14 + 2) - (max(kind, 4) + 2) - 2, 12)
        if room == self.summary_width:
            return False
        self.summary_width = room
        return True

    def on_resize(self, event: Any) -> None:
        """Put the detail under the table on a narrow terminal (the table's own resize then
        refits the summaries)."""
        self.set_class(event.size.width < self.STACK_BELOW, "-stacked")

    def refit(self) -> None:
        """Fit the summaries to the table's width, as it is now."""
        if self.is_attached and self._fit() and self.rows:
            self._fill(self.query_one("#timeline-table", DataTable))

    def show_detail(self, detail: EventDetail) -> None:
        """Show one event's JSON and its links (each link an option; Enter opens it)."""
        self._detail_id = detail.event_id
        self.query_one("#event-json", Static).update(
            Syntax(
                detail.json, "json", word_wrap=True, theme="ansi_dark", background_color="default"
            )
        )
        links = self.query_one("#event-links", OptionList)
        links.clear_options()
        if not detail.links:
            links.add_option(Option(Text("no linked events", style="dim"), disabled=True))
        for link in detail.links:
            label = Text()
            label.append(f"{link['relation']}: ", style="bold")
            label.append(f"seq {link['seq']} {link['type']}: ", style="dim")
            label.append(clip(link["summary"], 120))
            links.add_option(Option(label, id=link["event_id"]))

    @property
    def selected(self) -> dict[str, Any] | None:
        """The event row under the cursor, or None."""
        table = self.query_one("#timeline-table", DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    # --- events -------------------------------------------------------------------------

    def on_select_changed(self, event: Select.Changed) -> None:
        """A filter changed: ask the app to reread the timeline."""
        event.stop()
        values = {}
        for key in ("type", "session"):
            value = self.query_one(f"#timeline-{key}", Select).value
            values[key] = value if isinstance(value, str) else None
        self.filter = EventFilter(
            types=(values["type"],) if values["type"] else (), session_id=values["session"]
        )
        self._reload(self.filter)

    @work(thread=True, exclusive=True, group="timeline", exit_on_error=False)
    def _reload(self, flt: EventFilter) -> None:
        rows = queries.load_timeline(self.app.store, flt)  # type: ignore[attr-defined]
        if not get_current_worker().is_cancelled:
            self.post_message(TimelineReloaded(rows))

    def on_timeline_reloaded(self, message: TimelineReloaded) -> None:
        """Show the timeline reread for the new filter."""
        if not self.closing:
            self.replace(message.rows)

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def _load_detail(self, event_id: str) -> None:
        try:
            detail = queries.load_event_detail(self.app.store, event_id)  # type: ignore[attr-defined]
        except LedgerError as exc:
            self.app.call_from_thread(self.app.notify, str(exc), severity="error")
            return
        if not get_current_worker().is_cancelled:
            self.post_message(EventDetailLoaded(detail))

    def on_event_detail_loaded(self, message: EventDetailLoaded) -> None:
        """Show the event's JSON and links."""
        if not self.closing:
            self.show_detail(message.detail)

    def action_clear_filters(self) -> None:
        """Show every event type and session."""
        for key in ("type", "session"):
            self.query_one(f"#timeline-{key}", Select).clear()
        self.app.action_show_tab(self.NAME)  # type: ignore[attr-defined]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor moved to an event: load its detail."""
        event.stop()
        row = self.selected
        if row is not None and row["event_id"] != self._detail_id:
            self._detail_id = row["event_id"]
            self._load_detail(row["event_id"])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a link: show that event (and move the cursor to it when it is listed)."""
        event.stop()
        event_id = event.option.id
        if not event_id:
            return
        for index, row in enumerate(self.rows):
            if row["event_id"] == event_id:
                self.query_one("#timeline-table", DataTable).move_cursor(row=index)
                break
        self._detail_id = event_id
        self._load_detail(event_id)
