"""Rows and events as JSON values for tool outputs (structured content is JSON).

The conventions of ``tuneledger sql --format json``: timestamps in ISO 8601, UUIDs and
decimals as strings, and ``null`` for Infinity and NaN, which JSON does not have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.read.json_values import jsonable

if TYPE_CHECKING:
    import pyarrow as pa

    from schemas import Event

__all__ = ["event_json", "jsonable", "rows_of"]


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """An Arrow table's rows as JSON objects keyed by column name."""
    return [jsonable(row) for row in table.to_pylist()]


def event_json(event: Event) -> dict[str, Any]:
    """One event as flat JSON (envelope and payload), ``None`` fields left out, as ``tuneledger
    events --format json`` and ``show`` print it."""
    data: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    return data
