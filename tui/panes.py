"""The panes of the app, in tab order: a new pane is its module and one line here.

The app builds its tabs, tab keys, focus, refresh reads, help and palette entries from this
list (``tui.pane`` says what each pane declares).
"""

from __future__ import annotations

from typing import Any

from ledger.store import LedgerStore

from . import queries
from .benchmarks import BenchmarksPane
from .board import BoardPane
from .compare import ComparePane
from .flags import FlagsPane
from .pane import Pane
from .parts import Part
from .sql_console import SqlPane
from .timeline import TimelinePane

PANES: tuple[type[Pane], ...] = (
    BoardPane,
    BenchmarksPane,
    TimelinePane,
    FlagsPane,
    SqlPane,
    ComparePane,
)

#: What a refresh reads: the parts of the panes that read one, in tab order.
PARTS: tuple[Part, ...] = tuple(p.PART for p in PANES if p.PART is not None)


def snapshot(store: LedgerStore, session_id: str | None, **kwargs: Any) -> dict[str, Any]:
    """Everything a refresh reads for every pane (``queries.load_snapshot`` of ``PARTS``)."""
    return queries.load_snapshot(store, session_id, PARTS, **kwargs)
