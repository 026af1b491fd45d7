"""Every message of the TUI, in one place (as Harlequin keeps its messages).

Workers read the ledger off the UI thread and post these; the app and its
panes handle them on the UI thread.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from textual.message import Message

from .queries import EventDetail


class LedgerChanged(Message):
    """The ledger file (or its WAL) changed, or the poll saw a new head.

    ``can_replace`` coalesces a flood: while one is waiting in the queue, a new
    one replaces it instead of queueing behind it (as Toolong does for file
    updates), so 100 writes in a burst cost one refresh, not 100.
    """

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LedgerChanged)


class PartLoaded(Message):
    """One part of a refresh was read: ``part`` is ``head`` or a pane's name, ``data`` what its
    ``Part.read`` returned (see ``tui.queries.iter_snapshot``)."""

    def __init__(self, part: str, data: Any) -> None:
        super().__init__()
        self.part = part
        self.data = data


class TimelineReloaded(Message):
    """The timeline was reread for a new filter: ``rows`` replace what it showed."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.rows = rows


class EventDetailLoaded(Message):
    """One event's JSON and links were read for the timeline's detail pane."""

    def __init__(self, detail: EventDetail) -> None:
        super().__init__()
        self.detail = detail


class SqlFinished(Message):
    """The SQL console's query ran: ``table`` is its result, or ``error`` says why not."""

    def __init__(
        self, sql: str, table: pa.Table | None, error: str | None, elapsed_s: float
    ) -> None:
        super().__init__()
        self.sql = sql
        self.table = table
        self.error = error
        self.elapsed_s = elapsed_s


class Appended(Message):
    """The TUI appended an event (``what`` says which, for the notification)."""

    def __init__(self, what: str, seq: int) -> None:
        super().__init__()
        self.what = what
        self.seq = seq


class AppendFailed(Message):
    """An append from the TUI failed; ``conflict`` for an optimistic-concurrency conflict."""

    def __init__(self, what: str, error: str, conflict: bool = False) -> None:
        super().__init__()
        self.what = what
        self.error = error
        self.conflict = conflict
