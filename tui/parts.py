"""What a pane reads on a refresh, with no Textual here: a ``Part`` names the pane's data, the
views it reads (from which the event types whose arrival make it stale follow:
``ledger.read.view_sources``), and the function that reads it in a worker.

A pane (``tui.pane``) carries its ``Part``; ``tui.queries.iter_snapshot`` reads the parts
that the new events made stale, in one open of the ledger that writes nothing and binds only
the views of the parts it reads. Keeping this module free of the
UI keeps every read testable without a terminal (``tests/tui/test_tui_queries.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from ledger.read import model as read_model
from ledger.read.view_sources import sources_of


@dataclass(frozen=True)
class Reading:
    """What a part's ``read`` gets: an open connection and what to read.

    ``since_seq``: the events after it are new (0: a first read); ``full``: reread everything
    (a first read, or a retraction that hides older rows); ``state``: what the pane's read
    needs from the screen, taken on the UI thread when the refresh started (the timeline's
    filter), or None.
    """

    con: duckdb.DuckDBPyConnection
    session_id: str | None
    since_seq: int
    full: bool
    state: Any = None


@dataclass(frozen=True)
class Part:
    """A pane's data: ``name`` (the part, and the pane's tab id), ``read`` (called in a
    worker with a ``Reading``; returns what the pane's ``show`` takes, plain Python values),
    ``views``: the views ``read`` reads (the refresh's connection binds only those, from this
    code, as the part is read: the store's ``read_views``; a view left off would be the one
    stored in the file, or none: ``tests/tui/test_tui_queries.py`` reads every part without).

    Derived from ``views`` (``ledger.read.view_sources``), never written per pane:
    ``dirtied_by``, the event types whose arrival makes it stale (None: every new event), and
    ``names_candidate``, whether any new event naming a candidate does too (the board's latest
    evidence). ``latency_first``: read first on a refresh, because that is where a new event
    shows up (the timeline). A retraction makes every part stale.
    """

    name: str
    read: Callable[[Reading], Any]
    views: tuple[str, ...]
    latency_first: bool = False
    dirtied_by: frozenset[str] | None = field(init=False)
    names_candidate: bool = field(init=False)

    def __post_init__(self) -> None:
        # frozen: set once, here, from the one declaration (the views' own SQL)
        sources = sources_of(self.views)
        object.__setattr__(self, "dirtied_by", sources.types)
        object.__setattr__(self, "names_candidate", sources.names_candidate)

    def is_stale(self, types: Iterable[str], names_candidate: bool) -> bool:
        """Whether new events of ``types`` (one of them naming a candidate when
        ``names_candidate``) make this part stale."""
        if self.dirtied_by is None:
            return True
        return bool(self.dirtied_by & set(types)) or (self.names_candidate and names_candidate)


def stale_parts(
    parts: Sequence[Part], con: duckdb.DuckDBPyConnection, since_seq: int
) -> tuple[list[Part], bool]:
    """The parts the events after ``since_seq`` make stale, in reading order, and whether the
    read is full (a first read, or a retraction among the new events: every part, reread)."""
    if since_seq <= 0:
        return list(parts), True
    new = read_model.new_events(con, since_seq)
    if not new.types:
        return [], False
    if "event_retracted" in new.types:
        return list(parts), True
    stale = [p for p in parts if p.is_stale(new.types, new.names_candidate)]
    return sorted(stale, key=lambda p: not p.latency_first), False
