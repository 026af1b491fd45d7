"""The TUI's view of sync with a PostgreSQL hub: a one-line status and the ``S`` action's work.

Both run in thread workers (network and DuckDB never on the UI thread). The status line
goes into the header's sub-title, after the session: the remote, the last sync (UTC), and
the events pending each way (``↑`` to push, counted locally; ``↓`` to pull, asked of the
hub with a short connect timeout, ``?`` when it cannot be reached).
"""

from __future__ import annotations

from ledger.errors import LedgerError
from ledger.store import LedgerStore
from ledger.sync import remote
from ledger.sync import replicate as sync

#: Seconds the status line waits for the hub before showing ``↓?``.
HUB_TIMEOUT_S = 3


def status_line(store: LedgerStore) -> str | None:
    """``"hub · synced 12:01:07 · ↑3 ↓5"`` for the ledger's remote, None when it has none.

    With several remotes the first by name is shown. Never raises a ``LedgerError``:
    what cannot be read shows as ``?``.
    """
    try:
        remotes = remote.list_remotes(store)
    except LedgerError:
        return None
    if not remotes:
        return None
    item = remotes[0]
    try:
        state = sync.status(store, item)
    except LedgerError:
        return f"{item.name} · ?"
    when = state.last_sync_at.strftime("%H:%M:%S") if state.last_sync_at else "never synced"
    when = f"synced {when}" if state.last_sync_at else when
    try:
        to_pull = str(sync.count_to_pull(store, item, state, connect_timeout_s=HUB_TIMEOUT_S))
    except LedgerError:
        to_pull = "?"
    held = f" · {state.held} held back" if state.held else ""
    return f"{item.name} · {when} · ↑{state.to_push} ↓{to_pull}{held}"


def run_sync(store: LedgerStore) -> str:
    """Sync with the ledger's remote (the first by name); return what it did in one line.

    Raises:
        LedgerError: no remote, a refused event (exit 8's), an unreachable hub, a busy file.
    """
    remotes = remote.list_remotes(store)
    item = remote.get_remote(store, remotes[0].name if remotes else None)
    report = sync.sync(store, item)
    held = f"; {len(report.held)} held back" if report.held else ""
    return (
        f"synced with {report.remote}: pushed {report.pushed}, pulled {report.pulled} "
        f"(hub position {report.position}){held}"
    )
