"""The replicated write path: events pulled from a sync hub (``ledger.sync.replicate``).

They were accepted by the commands of the ledger that wrote them, so the rules that judge an
intent (a triage's expected version, a retraction's finality) were applied there; two offline
triages at one version are both kept by design (the ``sync_conflicts`` view shows them). What
holds here too: a retraction names an event of this ledger or of the batch
(``rules.check_targets``). The rows are then stored through the store's column path
(``LedgerStore.append_replicated``: local ``seq`` and stream versions, secrets masked).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ledger.write import rules

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from ledger.store import AppendResults, LedgerStore


def append_pulled(
    store: LedgerStore,
    table: pa.Table,
    *,
    record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None = None,
    where: str = "pulled rows",
) -> AppendResults:
    """Append rows pulled from a hub (``events`` columns as ``columns_table`` makes them), in
    hub order, atomically, ``record(con, results)`` inside the same transaction (the sync
    bookkeeping commits with the events or not at all).

    Raises:
        NotFound: a retraction of an event neither in this ledger nor in ``table`` (exit 5).
        EventIdReused: an ``event_id`` stored here with other content (exit 8).
        LedgerBusy: the file stayed locked.
    """
    rules.check_targets(store, table, where=where)
    return store.append_replicated(table, record=record)
