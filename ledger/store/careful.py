"""The careful write path: an event at a time, each id looked up when in doubt.

An append transaction assumes every event is new and inserts at once (the ``event_id`` and
``(stream, stream_version)`` unique indexes are the check); a retry, a conflict or a doubt
rolls back and takes the careful path, which looks each id up and raises the precise error.
The column paths (``ledger.store.columns``) fall back to it too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import duckdb

from ledger.errors import ConcurrencyConflict, EventIdReused
from ledger.store.derived import installed
from ledger.store.encoding import columns_table
from ledger.store.results import AppendResult
from ledger.store.schema import COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.store.connection import Held

#: (projected position, head ``seq``) of the file an append is about to write.
Position = Callable[[], tuple[int, int]]

#: The columns that make two events with one id "the same event" (a retry). Provenance
IDENTITY = ("type", "payload", "session_id", "causation_id", "correlation_id", "host")


def identity(row: dict[str, Any]) -> tuple[Any, ...]:
    def norm(column: str) -> Any:
        value = row[column]
        if column in ("payload", "host") and isinstance(value, str):
            return json.loads(value)
        return str(value) if value is not None else None

    return tuple(norm(column) for column in IDENTITY)


#: The key of a row dict holding its event's ``UUID`` object, where the caller has one
#: (``append``); not a column: a result needs no id parsed back from text.
EVENT_UUID = "_event_uuid"


def twice(ids: Sequence[Any]) -> EventIdReused:
    """The refusal of a batch that holds one event id twice, naming the id."""
    seen: set[str] = set()
    for event_id in map(str, ids):
        if event_id in seen:
            return EventIdReused(f"the batch holds event_id {event_id} twice", event_id=event_id)
        seen.add(event_id)
    return EventIdReused("the batch holds an event_id twice")


def uuid_of(row: dict[str, Any]) -> UUID:
    """The row's event id as a ``UUID`` (the event's own object when ``append`` kept it)."""
    known = row.get(EVENT_UUID)
    return known if known is not None else UUID(row["event_id"])


class NotFresh(Exception):
    """The fast path met a conflict that may be a retry in disguise: take the careful path."""


def write_rows(
    con: duckdb.DuckDBPyConnection,
    rows: list[dict[str, Any]],
    expected_version: int | None,
    samples: Mapping[UUID, pa.Table] | None,
    held: Held | None,
    record: Callable[[duckdb.DuckDBPyConnection, list[AppendResult]], None] | None,
    *,
    position: Position,
    clock: Callable[[], datetime],
) -> list[AppendResult]:
    """One append transaction. The fast path assumes every event is new and inserts at
    once (the ``event_id`` and ``(stream, stream_version)`` unique indexes are the
    check); a retry, a conflict or a doubt rolls back and takes the careful path, which
    looks each id up and raises the precise error."""
    if held is not None and len(rows) == 1 and not samples and record is None:
        single = write_single(con, rows, expected_version, held, clock)
        if single is not None:
            return single
    with transaction(con, held):
        projected, head = position()
        streams = sorted({row["stream"] for row in rows})
        heads = stream_heads(con, streams, projected, held)
        try:
            results, new_heads = insert(con, rows, rows, {}, expected_version, heads, head, clock)
        except (duckdb.ConstraintException, ConcurrencyConflict, NotFresh):
            con.execute("ROLLBACK")
            con.execute("BEGIN")
            stored = stored_rows(con, rows)
            fresh = [row for row in rows if row["event_id"] not in stored]
            results, new_heads = insert(
                con, rows, fresh, stored, expected_version, heads, head, clock
            )
        for result in results:
            if samples and not result.duplicate and result.event_id in samples:
                insert_samples(con, result.event_id, samples[result.event_id])
        commit(con, results, record, held, projected)
    if held is not None:
        held.heads.update(new_heads)
        held.head = max([head, *(r.seq for r in results)])
    return results


def write_single(
    con: duckdb.DuckDBPyConnection,
    rows: list[dict[str, Any]],
    expected_version: int | None,
    held: Held,
    clock: Callable[[], datetime],
) -> list[AppendResult] | None:
    """A kept-open writer's one new event: one auto-committed ``INSERT`` (its own
    transaction: stored whole or not at all), without BEGIN and COMMIT as statements of
    their own — DuckDB plans and runs each statement, and the pair is a part of an append's
    time worth saving (docs/performance.md). None when it may not be new (a
    retry, a conflict): nothing was stored, and the caller's transaction takes the careful
    path, which words the error."""
    heads = stream_heads(con, [rows[0]["stream"]], held.projected, held)
    try:
        results, new_heads = insert(con, rows, rows, {}, expected_version, heads, held.head, clock)
    except (duckdb.ConstraintException, ConcurrencyConflict, NotFresh):
        held.heads.clear()
        return None
    held.heads.update(new_heads)
    held.head = max(held.head, results[0].seq)
    return results


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection, held: Held | None) -> Iterator[None]:
    """BEGIN; on any error ROLLBACK (and forget a kept-open writer's cached stream heads)."""
    con.execute("BEGIN")
    try:
        yield
    except BaseException:
        # After an interrupt DuckDB may already have aborted the transaction; a failing
        # ROLLBACK must not hide the original error (KeyboardInterrupt included).
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if held is not None:
            held.heads.clear()
        raise


def commit(
    con: duckdb.DuckDBPyConnection,
    results: Any,
    record: Callable[[duckdb.DuckDBPyConnection, Any], None] | None,
    held: Held | None,
    projected: int,
) -> None:
    """The end of an append transaction: the caller's bookkeeping (``record``), the
    projections caught up (one-shot only: a kept-open writer batches them), COMMIT."""
    if record is not None:
        record(con, results)
    if held is None:
        installed().catch_up(con, projected)
    con.execute("COMMIT")


def stream_heads(
    con: duckdb.DuckDBPyConnection, streams: list[str], projected: int, held: Held | None
) -> dict[str, int]:
    """stream -> its current version (0: new), from ``stream_heads`` plus the unprojected tail.

    A kept-open writer caches what it read: nobody else writes while it holds the file.
    """
    missing = streams if held is None else [s for s in streams if s not in held.heads]
    found: dict[str, int] = {}
    if missing:
        found = {stream: 0 for stream in missing}
        found.update(
            con.execute(
                "SELECT stream, max(v) FROM ("
                "  SELECT stream, version AS v FROM stream_heads WHERE stream IN (SELECT unnest($s::VARCHAR[]))"
                "  UNION ALL SELECT stream, stream_version FROM events"
                "  WHERE seq > $after AND stream IN (SELECT unnest($s::VARCHAR[]))"
                ") GROUP BY stream",
                {"s": missing, "after": projected},
            ).fetchall()
        )
        if held is not None:
            held.heads.update(found)
    if held is None:
        return found
    return {stream: held.heads[stream] for stream in streams}


def stored_rows(
    con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]
) -> dict[str, tuple[Any, ...]]:
    """event_id -> (seq, stream, stream_version, *identity) of the batch's already stored events.

    Raises:
        EventIdReused: one is stored with other content.
    """
    stored = {
        str(record[0]): record[1:]
        for record in con.execute(
            f"SELECT event_id, seq, stream, stream_version, {', '.join(IDENTITY)} "
            "FROM events WHERE event_id IN (SELECT unnest(?::UUID[]))",
            [[row["event_id"] for row in rows]],
        ).fetchall()
    }
    for row in rows:
        old = stored.get(row["event_id"])
        if old is not None and identity(dict(zip(IDENTITY, old[3:], strict=True))) != identity(row):
            raise EventIdReused(
                f"event_id {row['event_id']} is already stored with other content",
                event_id=str(row["event_id"]),
            )
    return stored


def insert(
    con: duckdb.DuckDBPyConnection,
    rows: list[dict[str, Any]],
    fresh: list[dict[str, Any]],
    stored: dict[str, tuple[Any, ...]],
    expected_version: int | None,
    heads: dict[str, int],
    head_seq: int,
    clock: Callable[[], datetime],
) -> tuple[list[AppendResult], dict[str, int]]:
    """Check and number the ``fresh`` rows, insert them; return every row's result and the new heads.

    The fast path calls this with every row as fresh (``stored`` empty): any conflict
    there may be a retry in disguise, so it raises ``NotFresh`` to take the careful path.
    """
    careful = bool(stored) or fresh is not rows
    heads = dict(heads)
    if expected_version is not None and fresh:
        actual = heads.get(fresh[0]["stream"], 0)
        if actual != expected_version:
            if not careful:
                raise NotFresh
            raise ConcurrencyConflict(fresh[0]["stream"], expected_version, actual)
    positions: dict[str, tuple[int, int]] = {}
    for row in fresh:
        head_seq += 1
        version = heads.get(row["stream"], 0) + 1
        if row["stream_version"] is not None and row["stream_version"] != version:
            if not careful:
                raise NotFresh
            raise ConcurrencyConflict(row["stream"], row["stream_version"] - 1, version - 1)
        heads[row["stream"]] = version
        positions[row["event_id"]] = (head_seq, version)
    if fresh:
        # Stamped here, under the writer's lock, so recorded_at never goes backwards in seq order.
        now = clock()
        for row in fresh:
            if row["recorded_at"] is None:
                row["recorded_at"] = now
        insert_rows(con, fresh, positions)
    results = []
    for row in rows:
        old = stored.get(row["event_id"])
        if old is None:
            seq, version = positions[row["event_id"]]
            results.append(AppendResult(uuid_of(row), seq, row["stream"], version))
        else:
            results.append(AppendResult(uuid_of(row), old[0], old[1], old[2], duplicate=True))
    return results, {row["stream"]: heads[row["stream"]] for row in fresh}


#: A batch of at most this many rows is inserted as parameterised ``VALUES`` rows: a few rows
#: bind faster than registering an Arrow table (at 16 rows Arrow is faster), and an
#: import of a server log (a few events) needs no pyarrow (docs/reliability.md).
VALUES_ROWS = 8

#: One ``events`` row's parameters in ``VALUES`` (in ``COLUMNS`` order).
_VALUES_ROW = "(?, ?::UUID, ?, ?, ?, ?, ?, ?, ?, ?, ?::UUID, ?::UUID, ?, ?::JSON, ?::JSON, ?)"


def insert_rows(
    con: duckdb.DuckDBPyConnection,
    fresh: list[dict[str, Any]],
    positions: dict[str, tuple[int, int]],
) -> None:
    if len(fresh) <= VALUES_ROWS:
        params: list[Any] = []
        for row in fresh:
            seq, version = positions[row["event_id"]]
            params += [
                seq,
                row["event_id"],
                row["type"],
                row["schema_version"],
                row["stream"],
                version,
                row["recorded_at"],
                row["actor_kind"],
                row["actor_name"],
                row["session_id"],
                row["causation_id"],
                row["correlation_id"],
                row["source"],
                row["host"],
                row["payload"],
                row.get("occurred_at"),
            ]
        con.execute(
            f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES "
            + ", ".join([_VALUES_ROW] * len(fresh)),
            params,
        )
        return
    columns = {name: [row.get(name) for row in fresh] for name in COLUMNS}
    columns["seq"] = [positions[row["event_id"]][0] for row in fresh]
    columns["stream_version"] = [positions[row["event_id"]][1] for row in fresh]
    con.register("incoming", columns_table(columns, len(fresh)))
    try:
        con.execute(
            f"INSERT INTO events ({', '.join(COLUMNS)}) SELECT seq, event_id::UUID, type, schema_version, "
            "stream, stream_version, recorded_at, actor_kind, actor_name, session_id, causation_id::UUID, "
            "correlation_id::UUID, source, host::JSON, payload::JSON, occurred_at FROM incoming"
        )
    finally:
        with suppress(duckdb.TransactionException):  # aborted by a conflict: the rollback drops it
            con.unregister("incoming")


def insert_samples(con: duckdb.DuckDBPyConnection, event_id: UUID, samples: pa.Table) -> None:
    con.register("samples", samples)
    con.execute(
        "INSERT INTO bench_samples SELECT ?::UUID, request_index, ok, ttft_ms, e2e_ms, tpot_ms, "
        "prompt_tokens, output_tokens, itl_ms, error FROM samples",
        [str(event_id)],
    )
    con.unregister("samples")
