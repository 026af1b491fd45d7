"""Values as JSON: the one conversion of every JSON output (``tuneledger ... --json``, the MCP
server's structured content): timestamps in ISO 8601, UUIDs and decimals as strings, and
``null`` for Infinity and NaN, which JSON does not have (``JSON.parse`` and jq refuse them)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID


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
