"""The event store layer: one DuckDB file, many processes, one writer at a time.

It stores and reads back; the rules of what may be written live in ``ledger.write``. Other
layers import the store's public names from here, so the modules inside may be split freely.
"""

from typing import Any

from . import ledger_store
from .ledger_store import (
    COLUMNS,
    HANDOFF_S,
    LAYOUT_VERSION,
    ROW_GROUP_ROWS,
    WRITER_HOLD_S,
    AppendResult,
    AppendResults,
    LedgerStore,
    columns_table,
    event_values,
)

__all__ = [
    "COLUMNS",
    "HANDOFF_S",
    "LAYOUT_VERSION",
    "ROW_GROUP_ROWS",
    "WRITER_HOLD_S",
    "AppendResult",
    "AppendResults",
    "LedgerStore",
    "columns_table",
    "event_values",
]


def __getattr__(name: str) -> Any:
    """``BENCH_SAMPLES_SCHEMA``, built (and pyarrow imported) on first use, as in the module."""
    if name == "BENCH_SAMPLES_SCHEMA":
        return ledger_store.BENCH_SAMPLES_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
