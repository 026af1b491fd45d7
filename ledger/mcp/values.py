"""Rows and events as JSON values for tool outputs (structured content is JSON).

The conventions of ``tuneledger sql --format json``: timestamps in ISO 8601, UUIDs and
decimals as strings, and ``null`` for Infinity and NaN, which JSON does not have.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    import pyarrow as pa

    from schemas import Event


def jsonable(value: Any) -> Any:
    """``value`` with every part a JSON value (recursively through lists and mappings)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, Sequence) or isinstance(value, (set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """An Arrow table's rows as JSON objects keyed by column name."""
    return [jsonable(row) for row in table.to_pylist()]


def event_json(event: Event) -> dict[str, Any]:
    """One event as flat JSON (envelope and payload), ``None`` fields left out, as ``tuneledger
    events --format json`` and ``show`` print it."""
    data: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    return data
