"""The column write paths: a batch as one Arrow table (``append_columns``), or in parts
(``append_column_chunks``), numbered and inserted in SQL with no Python object per event.

One narrow query numbers the events (``seq`` from the head, each stream's version from its
head, by window function), one ``INSERT ... SELECT`` stores them. Anything that may be a
retry or a conflict rolls back and takes the careful path (``ledger.store.careful``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import suppress
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from ledger.store.careful import (
    NotFresh,
    Position,
    commit,
    insert,
    stored_rows,
    stream_heads,
    transaction,
    twice,
)
from ledger.store.derived import installed
from ledger.store.results import AppendResults
from ledger.store.schema import COLUMNS, arrow_schema, state

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.store.connection import Held

#: A writer's check of one part of a batch, run inside the transaction before the part is
#: inserted (``con`` sees the earlier parts): False is a doubt, and nothing is stored.
Check = Callable[[duckdb.DuckDBPyConnection, "pa.Table"], bool]


def write_columns(
    con: duckdb.DuckDBPyConnection,
    table: pa.Table,
    held: Held | None,
    record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None,
    *,
    position: Position,
    clock: Callable[[], datetime],
) -> AppendResults:
    """One bulk append transaction (``append_columns``); the careful path on any doubt."""
    with transaction(con, held):
        projected, head = position()
        # A one-shot append projects the batch from its own rows (a kept-open writer
        # batches its catch-ups instead: ``MAX_LAG``).
        project = held is None and projected == head
        try:
            results = insert_columns(con, table, projected, head, clock, project)
            if project:
                projected = head + table.num_rows  # the batch's projection is done
        except (duckdb.ConstraintException, NotFresh):
            con.execute("ROLLBACK")
            con.execute("BEGIN")
            rows = table.to_pylist()
            if len({row["event_id"] for row in rows}) != len(rows):
                raise twice([row["event_id"] for row in rows]) from None
            stored = stored_rows(con, rows)
            fresh = [row for row in rows if row["event_id"] not in stored]
            heads = stream_heads(con, sorted({row["stream"] for row in rows}), projected, None)
            found, _ = insert(con, rows, fresh, stored, None, heads, head, clock)
            results = AppendResults.of(found)
        commit(con, results, record, held, projected)
    if held is not None:
        held.heads.clear()  # the batch moved many streams: read them again when needed
        held.head = max(held.head, max(results.seqs, default=0))
    return results


def insert_columns(
    con: duckdb.DuckDBPyConnection,
    table: pa.Table,
    projected: int,
    head: int,
    clock: Callable[[], datetime],
    project: bool = False,
) -> AppendResults:
    """Number and insert a batch assumed new; ``NotFresh`` (or the unique indexes'
    ``ConstraintException``) when it may not be. ``project``: project the batch too,
    from its own rows (``projections.catch_up``'s ``source``: every event up to ``head``
    must be projected already, ``projected == head``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    schema = arrow_schema()
    table = table.select(schema.names).cast(schema)
    table = table.set_column(0, "seq", pa.array(range(head + 1, head + n + 1), pa.int64()))
    # Each stream's versions continue from its head (``stream_heads`` plus the not yet
    # projected tail), in table order: a window over two narrow columns, fetched back in
    # order so the wide rows are inserted as they are (sorting them would move the payloads).
    con.register("incoming", table)
    try:
        versions = (
            con.sql(
                "WITH s AS (SELECT DISTINCT stream FROM incoming), h AS ("
                "  SELECT stream, max(v) AS v FROM ("
                "    SELECT stream, version AS v FROM stream_heads WHERE stream IN (FROM s)"
                "    UNION ALL SELECT stream, stream_version FROM events"
                "    WHERE seq > $after AND stream IN (FROM s)) GROUP BY stream)"
                " SELECT coalesce(h.v, 0) + row_number() OVER (PARTITION BY i.stream ORDER BY i.seq)"
                " AS version FROM incoming i LEFT JOIN h USING (stream) ORDER BY i.seq",
                params={"after": projected},
            )
            .to_arrow_table()
            .column(0)
        )
        given = table.column("stream_version")
        if given.null_count < n and pc.any(pc.not_equal(given, versions)).as_py():
            raise NotFresh
        table = table.set_column(
            schema.get_field_index("stream_version"), "stream_version", versions
        )
        stamped = schema.get_field_index("recorded_at")
        if table.column(stamped).null_count:  # stamped now, inside the write transaction
            now = pa.scalar(clock(), schema.field(stamped).type)
            table = table.set_column(
                stamped, "recorded_at", pc.fill_null(table.column(stamped), now)
            )
        con.unregister("incoming")
        con.register("incoming", table)
        con.execute(
            f"INSERT INTO events ({', '.join(COLUMNS)}) SELECT seq, event_id::UUID, type, "
            "schema_version, stream, stream_version, recorded_at, actor_kind, "
            "actor_name, session_id, causation_id::UUID, correlation_id::UUID, source, "
            "host::JSON, payload::JSON, occurred_at FROM incoming"
        )
        if project:
            installed().catch_up(con, projected, source="incoming")
    finally:
        with suppress(duckdb.Error):  # aborted by a conflict: the rollback drops it
            con.unregister("incoming")
    return AppendResults(
        table.column("event_id"),
        range(head + 1, head + n + 1),
        table.column("stream"),
        versions,
    )


def write_column_chunks(
    con: duckdb.DuckDBPyConnection,
    chunks: Iterable[pa.Table],
    held: Held | None,
    threads: int | None,
    clock: Callable[[], datetime],
    check: Check | None = None,
) -> AppendResults:
    """One bulk transaction over parts (``append_column_chunks``); a doubt propagates
    (``NotFresh``: ``check`` said no, or a conflict; ``ConstraintException``) after the
    rollback."""
    import pyarrow as pa

    parts: list[AppendResults] = []
    (configured,) = con.execute("SELECT current_setting('threads')").fetchone() or (1,)
    try:
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        with transaction(con, held):
            if held is not None:
                projected, head = held.projected, held.head
            else:
                _, projected, head = state(con)
            # Each part is projected as it is inserted, read from the part itself (not
            # from ``events``: no scan of the transaction's rows so far, no decompressing
            # its payloads again), so the projections are done by the time the last part
            # is in, while the workers validate: the earlier events first.
            projected = installed().catch_up(con, projected)
            first = head
            for table in chunks:
                if check is not None and table.num_rows and not check(con, table):
                    raise NotFresh
                if table.num_rows:
                    parts.append(insert_columns(con, table, projected, head, clock, True))
                    head = projected = head + table.num_rows
            if threads is not None:  # the commit (its checkpoint): as configured
                con.execute(f"SET threads = {int(configured)}")
            columns = [
                pa.chunked_array(
                    [c for part in parts for c in pa.chunked_array(part._columns[i]).chunks],
                    pa.int64() if i == 2 else pa.string(),
                )
                for i in range(3)
            ]
            results = AppendResults(columns[0], range(first + 1, head + 1), *columns[1:])
            commit(con, results, None, held, projected)
    finally:
        if threads is not None:  # after a rollback too: a kept-open connection goes on
            with suppress(duckdb.Error):
                con.execute(f"SET threads = {int(configured)}")
    if held is not None:
        held.heads.clear()  # the batch moved many streams: read them again when needed
        held.head = max(held.head, head)
        held.projected = max(held.projected, projected)
    return results
