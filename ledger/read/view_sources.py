"""Which event types each view is derived from, read off the views' own SQL: what makes a front
end's copy of a view stale when new events arrive (the TUI's panes: ``tui.parts.Part``).

A view's sources are the event types its SELECT names (``type = 'server_started'``,
``type IN (...)``), those of the projection tables it reads that keep named types only, and
those of the views it reads, transitively; a view over every event (the timeline) has None:
any new event makes it stale. The board's evidence (``ledger.derive.views.board.LINKED_TYPES``)
is read from events naming a candidate only, so it counts as "any event naming a candidate"
rather than as those types whatever they name (a plain note changes no board row). Nothing here
is written by hand per pane, so a view that starts reading another type makes its panes stale
on that type without an edit elsewhere (``tests/read/test_view_sources.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from ledger.derive.views import view_sql
from ledger.derive.views.board import LINKED_TYPES
from ledger.derive.views.common import sql_list
from schemas import EVENT_TYPES

#: Views that show every event as it is (the raw log, the timeline): any new event is theirs.
EVERY_EVENT_VIEWS = frozenset({"all_events", "live_events", "event_log", "timeline"})

#: Projection tables whose rows come from some types only (``ledger.derive.projections``); the
#: others (``control_events``, ``event_summaries``) hold every type and their readers' SQL names
#: the ones they keep.
_TABLE_TYPES: dict[str, frozenset[str]] = {
    "bench_runs": frozenset({"benchmark_completed"}),
    "retractions": frozenset({"event_retracted"}),
}

#: Per view, the SQL list of types it reads only from events that name a candidate.
_CANDIDATE_ONLY: dict[str, str] = {"board": sql_list(LINKED_TYPES)}

_QUOTED = re.compile(r"'([a-z_]+)'")


@dataclass(frozen=True)
class Sources:
    """What a view is derived from: ``types`` (None: every type), and whether any event naming
    a candidate changes it too (``names_candidate``)."""

    types: frozenset[str] | None
    names_candidate: bool = False

    def __or__(self, other: Sources) -> Sources:
        types = None if self.types is None or other.types is None else self.types | other.types
        return Sources(types, self.names_candidate or other.names_candidate)


@cache
def view_sources() -> dict[str, Sources]:
    """``{view: its Sources}`` for every view of ``ledger.derive.views``."""
    sql = view_sql()
    names = tuple(sql)
    direct: dict[str, Sources] = {}
    reads: dict[str, tuple[str, ...]] = {}
    for name, select in sql.items():
        candidate_only = _CANDIDATE_ONLY.get(name)
        scanned = select.replace(candidate_only, "") if candidate_only else select
        named = {t for t in _QUOTED.findall(scanned) if t in EVENT_TYPES}
        for table, types in _TABLE_TYPES.items():
            if re.search(rf"\b{table}\b", select):
                named |= types
        every = name in EVERY_EVENT_VIEWS
        direct[name] = Sources(None if every else frozenset(named), candidate_only is not None)
        reads[name] = tuple(v for v in names if v != name and re.search(rf"\b{v}\b", select))

    def sources(name: str) -> Sources:
        found = direct[name]
        for view in reads[name]:
            found |= sources(view)
        return found

    return {name: sources(name) for name in names}


def sources_of(views: Iterable[str]) -> Sources:
    """What ``views`` are derived from together; KeyError for a name that is no view."""
    known = view_sources()
    found = Sources(frozenset())
    for view in views:
        if view not in known:
            raise KeyError(f"no view named {view!r}")
        found |= known[view]
    return found
