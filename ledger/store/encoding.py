"""Events as ``events`` rows and back: the stored form of an event.

``event_row`` / ``event_values`` turn an event into the values of its ``events`` row (payload
and host as JSON text with secrets masked, ids as text); ``columns_table`` makes an Arrow
table of many rows (the column paths' input); ``row_to_event`` reads a stored row back as its
current-version model (upcasting).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidInput
from ledger.store.payloads import dumped_payload, host_json, no_secret_ids, payload_json
from ledger.store.schema import COLUMNS, arrow_schema
from schemas import Event, parse_event
from schemas.secrets import mask_json, mask_text, may_hold_secret

if TYPE_CHECKING:
    import pyarrow as pa


def masked_columns(table: pa.Table) -> pa.Table:
    """``table`` with secrets masked in ``payload``, ``host`` and ``source`` (``schemas.secrets``).

    For rows that did not pass ``event_row`` (a hub may hold what an older client or plain
    SQL wrote). One scan of the three columns' joined text first: the usual batch holds no
    secret and is returned as it is (a hit in the joined text is a hit in some row: the scan
    looks no further back than one character, and a newline reads as a row's start).
    Masking is idempotent, so a re-pulled event still compares equal to the stored one.
    """
    import pyarrow as pa

    columns = {name: table.column(name).to_pylist() for name in ("payload", "host", "source")}
    if not may_hold_secret("\n".join(t for values in columns.values() for t in values if t)):
        return table
    maskers = {"payload": mask_json, "host": mask_json, "source": mask_text}
    for name, values in columns.items():
        masked = [maskers[name](v) if v else v for v in values]
        table = table.set_column(
            table.schema.get_field_index(name), name, pa.array(masked, pa.string())
        )
    return table


def columns_table(columns: Mapping[str, Sequence[Any]], length: int) -> pa.Table:
    """Columns of ``events`` values (``event_row``'s kinds: ids and JSON as text, aware
    datetimes) as ``append_columns``'s input; a column not given is null. ``length``: rows."""
    import pyarrow as pa

    schema = arrow_schema()
    return pa.Table.from_arrays(
        [
            (_text_array if field.type == pa.string() else pa.array)(
                columns[field.name], field.type
            )
            if field.name in columns
            else pa.nulls(length, field.type)
            for field in schema
        ],
        schema=schema,
    )


def _text_array(values: Sequence[str | None], kind: pa.DataType) -> pa.Array:
    """``pa.array(values, pa.string())`` at a quarter of its CPU for long texts (payloads):
    pyarrow grows its buffer by reallocation string by string; here one joined buffer and
    its offsets are handed over. Columns with nulls take ``pa.array``."""
    import pyarrow as pa

    if not values or any(value is None for value in values):
        return pa.array(values, kind)
    encoded = [value.encode() for value in values]  # type: ignore[union-attr]
    offsets = [0, *accumulate(map(len, encoded))]
    if offsets[-1] >= 2**31:  # beyond 32-bit offsets: pyarrow splits it
        return pa.array(values, kind)
    return pa.StringArray.from_buffers(
        len(encoded), pa.py_buffer(array("i", offsets)), pa.py_buffer(b"".join(encoded))
    )


def event_row(
    event: Event, recorded_at: datetime | None = None, *, checked: bool = True
) -> dict[str, Any]:
    """The ``events`` row of one event (``seq`` and a missing ``stream_version`` assigned at append).

    ``recorded_at``: the time for an event that carries none; None (the store's use): stamped
    inside the write transaction, so ``recorded_at`` never goes backwards in ``seq`` order.
    Payload and host are JSON text; ids are text (DuckDB casts them to UUID).
    ``checked=False``: payload and source as dumped, for the caller to check and mask many
    at once (``payloads.stored_payloads``, the bulk import's).
    """
    return dict(zip(COLUMNS, event_values(event, recorded_at, checked=checked), strict=True))


def event_values(
    event: Event, recorded_at: datetime | None = None, *, checked: bool = True
) -> tuple[Any, ...]:
    """``event_row``'s values as a tuple in ``events`` column order (``COLUMNS``): for many
    events, ``zip(*values)`` gives the columns without a dict an event (the bulk import)."""
    no_secret_ids(event)
    # model_dump_json runs in pydantic-core: ~3x faster than model_dump + json.dumps.
    return (
        None,
        str(event.event_id),
        event.type,
        event.schema_version,
        event.stream or event.default_stream(),
        event.stream_version,
        event.recorded_at or recorded_at,
        event.actor.kind,
        event.actor.name,
        event.session_id,
        str(event.causation_id) if event.causation_id else None,
        str(event.correlation_id) if event.correlation_id else None,
        # Every writer passes here: secrets masked (schemas.secrets), integers beyond BIGINT
        # refused; here, or for many rows at once by the caller (``checked=False``).
        mask_text(event.source) if event.source and checked else event.source,
        host_json(event),
        payload_json(event) if checked else dumped_payload(event, event.source or event.type),
        event.occurred_at,
    )


def row_to_event(row: dict[str, Any]) -> Event:
    """Turn one stored ``events`` row into its current-version model (upcasting).

    Raises:
        InvalidInput: the stored row does not validate (names seq and event_id).
    """
    payload = row["payload"]
    payload = json.loads(payload) if isinstance(payload, str) else payload
    host = row["host"]
    host = json.loads(host) if isinstance(host, str) else host
    if not isinstance(payload, dict):  # `[1, 2]` from a hub that checked nothing
        raise InvalidInput(
            f"stored event seq {row['seq']} ({row['event_id']}, type {row['type']!r}) does not "
            f"read: its payload is a JSON {type(payload).__name__}, not an object"
        )
    data = {
        **payload,
        "type": row["type"],
        "schema_version": row["schema_version"],
        "event_id": row["event_id"],
        "seq": row["seq"],
        "stream": row["stream"],
        "stream_version": row["stream_version"],
        "recorded_at": row["recorded_at"],
        "actor": {"kind": row["actor_kind"], "name": row["actor_name"]},
        "session_id": row["session_id"],
        "causation_id": row["causation_id"],
        "correlation_id": row["correlation_id"],
        "source": row["source"],
        "host": host,
        "occurred_at": row.get("occurred_at"),
    }
    try:
        return parse_event(data)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else None
        why = (
            f"{'.'.join(str(p) for p in first['loc'][1:]) or 'type'}: {first['msg']}"
            if first
            else str(exc).splitlines()[0]
        )
        if first and first.get("type") == "union_tag_invalid":
            why = "unknown event type"
        raise InvalidInput(
            f"stored event seq {row['seq']} ({row['event_id']}, type {row['type']!r}) does not read: {why}"
            " (written by a newer tuneledger?)"
        ) from None
