"""The derived views: SQL views over the log and its projections, one module per family.

The hot views read the projection tables of ``ledger.derive.projections`` (kept
current inside every append), not the raw ``events`` table, so they stay fast
on a ledger of a million events. Everything a user sees is derived from the
log by these views, so any query — the CLI's ``sql``, the TUI, DuckDB's own
shell — sees the same answers. Later findings supersede earlier ones (the latest
by ``seq`` wins); the history stays queryable in ``flag_verdict_history``,
``timeline`` and ``events``. Retracted events (``event_retracted``) drop out of
every view but ``events``.

Each view is one function returning its ``SELECT`` (named as the view), in the module of its
family; ``VIEWS`` lists them in creation order (a view after the views it reads), and the
digest of them all (``VIEWS_VERSION``) says whether a file's derived tables are this code's.

================  =====================================================================
``events``        all_events, live_events, live_control, event_log, timeline
``flags``         flag_verdict_history, flag_verdicts
``sync``          sync_conflicts
``board``         board, board_deltas
``servers``       server_runs
``benchmarks``    benchmarks, benchmark_deltas, benchmark_summary
``decisions``     decisions
``kernels``       kernel_tunes, kernel_tune_results
``spec``          spec_trials
================  =====================================================================

The views: docs/views.md; every column with its type: docs/reference/views.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import duckdb

from ledger.derive import projections
from ledger.derive.projections import DELTA_METRICS
from ledger.derive.views import (
    benchmarks,
    board,
    decisions,
    events,
    flags,
    kernels,
    servers,
    spec,
    sync,
)

__all__ = [
    "DELTA_METRICS",
    "VIEWS",
    "VIEWS_VERSION",
    "VIEW_NAMES",
    "create_views",
    "view_sql",
]

#: Every view, in creation order: each after the views it reads.
VIEWS: tuple[Callable[[], str], ...] = (
    events.all_events,
    events.live_events,
    events.live_control,
    flags.flag_verdict_history,
    flags.flag_verdicts,
    sync.sync_conflicts,
    board.board,
    servers.server_runs,
    benchmarks.benchmarks,
    benchmarks.benchmark_deltas,
    benchmarks.benchmark_summary,
    board.board_deltas,
    decisions.decisions,
    kernels.kernel_tunes,
    kernels.kernel_tune_results,
    spec.spec_trials,
    events.event_log,
    events.timeline,
)


def view_sql() -> dict[str, str]:
    """Return ``{view name: SELECT statement}`` in creation order."""
    return {view.__name__: view() for view in VIEWS}


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create every view in the open read-write connection ``con``."""
    for name, select in view_sql().items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")


VIEW_NAMES: tuple[str, ...] = tuple(view_sql())


def views_version() -> str:
    """A digest of every statement that derives the views from the log: the projections' DDL and
    catch-up SQL (with the upcasters and one-line summaries inside) and each view's SELECT.

    Stored in ``ledger_meta.views_version``; a file whose digest differs (older code, or a view
    changed since) gets its projections rebuilt and its views recreated on the next open, so a
    changed view is never served stale and nobody has to remember to bump a number.
    """
    digest = hashlib.sha256()
    for text in (projections.DDL, *projections.apply_sql(), *view_sql().values()):
        digest.update(text.encode())
        digest.update(b"\0")
    return "sql-" + digest.hexdigest()[:16]


#: ``views_version()`` of this code (see there). Older tuneledgers stored a hand-bumped number.
VIEWS_VERSION = views_version()
