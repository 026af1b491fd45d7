"""The store's read API: the head, a stream's version, events by filter or by id, one query.

What the store itself needs to read back (and ``get``'s id prefixes); the read model
(``ledger.read.model``) holds every other query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.errors import InvalidInput, NotFound
from ledger.store.encoding import row_to_event
from ledger.store.schema import COLUMNS
from schemas import Event

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.store.ledger_store import LedgerStore

_ID_PREFIX = re.compile(r"[0-9a-f]{8}(?:[0-9a-f-]{0,28})")


def head(store: LedgerStore) -> int:
    """The highest ``seq`` stored (0 for an empty ledger)."""
    with store.connect(views=()) as con:
        return int(con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0])


def stream_version(store: LedgerStore, stream: str) -> int:
    """The version of ``stream`` (0 when it has no events)."""
    with store.connect(views=()) as con:
        return int(
            con.execute(
                "SELECT coalesce(max(stream_version), 0) FROM events WHERE stream = ?", [stream]
            ).fetchall()[0][0]
        )


def read(
    store: LedgerStore,
    *,
    after_seq: int = 0,
    types: Iterable[str] | None = None,
    session_id: str | None = None,
    stream: str | None = None,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[Event]:
    """Events in ``seq`` order (oldest first unless ``newest_first``), as current models.

    The filters combine with AND; ``types`` matches any of the given type names. (The read
    model's ``EventFilter`` filters more: ``ledger.read.model.read_events``.)
    """
    where: list[str] = ["seq > ?"]
    params: list[Any] = [after_seq]
    if types:
        where.append("type IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(types))
    for column, value in (("session_id", session_id), ("stream", stream)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    order = " DESC" if newest_first else ""
    bound = f" LIMIT {int(limit)}" if limit is not None else ""
    with store.connect(views=()) as con:
        rows = con.execute(
            f"SELECT {', '.join(COLUMNS)} FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY seq{order}{bound}",
            params,
        ).fetchall()
    return [row_to_event(dict(zip(COLUMNS, row, strict=True))) for row in rows]


def get(store: LedgerStore, event_id: str | UUID) -> Event:
    """The event with this id (a unique prefix of at least 8 hex digits also works).

    Raises:
        NotFound: no such event (exit 5).
        InvalidInput: the prefix is ambiguous: it names several events (exit 3; an agent
            tells "give more digits" from "no such event" by the code).
    """
    text = str(event_id).strip().lower()
    if re.fullmatch(r"[0-9a-f]{32}", text):
        text = str(UUID(text))  # the undashed hex spelling of a full id
    if not _ID_PREFIX.fullmatch(text):
        raise NotFound(f"event {event_id} not found (not an event id or an 8+ digit prefix of one)")
    with store.connect(views=()) as con:
        if len(text) == 36:
            rows = con.execute(
                f"SELECT {', '.join(COLUMNS)} FROM events WHERE event_id = ?::UUID", [text]
            ).fetchall()
        elif len(text) >= 8:
            rows = con.execute(
                f"SELECT {', '.join(COLUMNS)} FROM events WHERE starts_with(event_id::VARCHAR, ?) LIMIT 2",
                [text],
            ).fetchall()
        else:
            rows = []
    if len(rows) != 1:
        if len(rows) > 1:
            raise InvalidInput(
                f"event id prefix {event_id} is ambiguous ({rows[0][1]}, {rows[1][1]}, ...): give more digits"
            )
        raise NotFound(f"event {event_id} not found")
    return row_to_event(dict(zip(COLUMNS, rows[0], strict=True)))


def query_arrow(store: LedgerStore, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
    """Run one trusted read query (views included) and return an Arrow table."""
    with store.connect(views=sql) as con:
        return con.sql(sql, params=list(params) if params else None).to_arrow_table()
