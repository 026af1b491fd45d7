"""The event store layer: one DuckDB file, many processes, one writer at a time.

It stores and reads back; the rules of what may be written live in ``ledger.write``. Other
layers import the store's public names from here, so the modules inside may be split freely:
``ledger_store`` (``LedgerStore``, which puts the others together), ``connection`` (opening,
the sidecar lock, the kept-open hold and hand-off), ``schema`` (tables, layout, migrations),
``encoding`` (events as rows and back), ``careful`` and ``columns`` (the write paths),
``reading`` (the read API), ``results``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import HANDOFF_S, ROW_GROUP_ROWS, WRITER_HOLD_S
    from .encoding import columns_table, event_values, row_to_event
    from .ledger_store import LedgerStore
    from .results import AppendResult, AppendResults
    from .schema import COLUMNS, LAYOUT_VERSION

#: Where each public name lives: imported on first use (PEP 562), so a module of this package
#: that needs no DuckDB (``ledger_file.check_ledger_path``, which ``tuneledger mcp`` runs before
#: ``initialize``) is imported without it (docs/mcp.md, Start-up).
_HOMES = {
    "HANDOFF_S": "connection",
    "ROW_GROUP_ROWS": "connection",
    "WRITER_HOLD_S": "connection",
    "columns_table": "encoding",
    "event_values": "encoding",
    "row_to_event": "encoding",
    "LedgerStore": "ledger_store",
    "AppendResult": "results",
    "AppendResults": "results",
    "COLUMNS": "schema",
    "LAYOUT_VERSION": "schema",
}

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
    "row_to_event",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use; ``BENCH_SAMPLES_SCHEMA``, built
    (and pyarrow imported) on first use."""
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(import_module(f"{__name__}.{home}"), name)
        globals()[name] = value
        return value
    if name == "BENCH_SAMPLES_SCHEMA":
        from .schema import bench_samples_schema

        return bench_samples_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
