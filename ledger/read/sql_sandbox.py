"""The read-only SQL console over the ledger and its views (``tuneledger sql``, the TUI's SQL tab).

Two fences, so that neither alone has to be perfect:

1. The statement is parsed (DuckDB's own parser, on an empty in-memory
   database) and only a single ``SELECT`` (``WITH``, ``FROM``, ``DESCRIBE``,
   ``SHOW``, ``SUMMARIZE`` parse as SELECT) or ``EXPLAIN`` is let through:
   INSERT, UPDATE, DELETE, CREATE, ATTACH, COPY, EXPORT, SET, PRAGMA, CALL,
   INSTALL/LOAD are refused with a clear message.
2. The ledger is then opened ``read_only`` with ``enable_external_access``
   off and the configuration locked, so a SELECT cannot read or write files
   (``read_csv('/etc/passwd')``, ``COPY``), attach databases or load extensions.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from ledger.errors import InvalidInput, QueryTimeout, Refused
from ledger.store import LedgerStore
from ledger.store.ledger_file import open_error

_STATEMENT_NAMES = {duckdb.StatementType.LOAD: "INSTALL/LOAD"}
_ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
_EXPLAIN_RE = re.compile(r"^\s*EXPLAIN\s+(?:\(\s*[^)]*\)\s*|ANALY[SZ]E\s+)?", re.IGNORECASE)

#: DuckDB's memory limit for a console query (its buffer pool: joins, sorts, aggregates).
#: What DuckDB allocates outside it (a string a function builds, ``repeat('x', 2000000000)``)
#: is bounded by the ``sql`` command's process limit (``ledger.cli.sql_guard``).
SANDBOX_MEMORY_BYTES = 2**30

#: Connection settings of the sandbox (DuckDB configuration options).
SANDBOX_CONFIG = {
    "enable_external_access": False,
    "memory_limit": f"{SANDBOX_MEMORY_BYTES // 2**20}MB",
    "lock_configuration": True,
}


def check_readonly(sql: str) -> None:
    """Raise ``Refused`` unless ``sql`` is exactly one SELECT or EXPLAIN statement.

    Raises:
        Refused: empty input, several statements, a statement that writes,
            attaches, sets options or touches files, or SQL that does not parse.
    """
    parser = duckdb.connect(":memory:")
    try:
        statements = parser.extract_statements(sql)
    except duckdb.Error as exc:
        raise InvalidInput(f"SQL does not parse: {str(exc).splitlines()[0]}") from None
    finally:
        parser.close()
    if not statements:
        raise Refused("no SQL statement given")
    if len(statements) > 1:
        raise Refused(f"one statement at a time, got {len(statements)}")
    kind = statements[0].type
    if kind == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs its statement: the statement explained must be a SELECT too.
        inner = _EXPLAIN_RE.sub("", sql, count=1)
        if inner != sql and inner.strip():
            check_readonly(inner)
    if kind not in _ALLOWED:
        name = _STATEMENT_NAMES.get(kind, str(kind).rsplit(".", 1)[-1])
        raise Refused(
            f"the ledger is read-only here: {name} statements are not allowed (SELECT and EXPLAIN are)"
        )


#: Default limit of one console query, in seconds. A query holds the ledger's shared lock
#: while it runs, and writers wait for it (for their 30 s lock timeout at most): a runaway
#: ad-hoc query must not make a runner's appends fail.
DEFAULT_TIMEOUT_S = 10.0


def run_readonly(
    store: LedgerStore,
    sql: str,
    *,
    max_rows: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> pa.Table:
    """Run one read-only query on the ledger and return its result as an Arrow table.

    ``max_rows`` caps the rows fetched (the TUI fetches a window); ``timeout_s`` interrupts
    the query after that many seconds (None: no limit). For results of any size, stream
    them with ``stream_readonly`` instead.

    Raises:
        as ``stream_readonly``.
    """
    return pa.Table.from_batches(
        list(stream_readonly(store, sql, max_rows=max_rows, timeout_s=timeout_s))
    )


#: Rows per Arrow batch when streaming a result (memory stays at about one batch).
BATCH_ROWS = 10_000


def stream_readonly(
    store: LedgerStore,
    sql: str,
    *,
    max_rows: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Run one read-only query and yield its result in Arrow batches of ``batch_rows`` rows.

    The ledger stays open (its shared lock held) until the generator ends or is closed, so
    ``timeout_s`` covers the query, the fetching *and* the caller's work between batches
    (rendering): past it, the next batch raises ``QueryTimeout``. At least one batch is yielded
    (empty, with the result's schema, when there are no rows).

    Raises:
        Refused: the statement is not a single SELECT/EXPLAIN (see ``check_readonly``), it
            tried to write (a write in a CTE, ``EXPLAIN ANALYZE INSERT``), reach files or
            change settings.
        ledger.errors.InvalidInput: the query fails (unknown column, type error), one line.
        ledger.errors.NotFound: no ledger at the store's path.
        QueryTimeout: (exit 14) the query, its fetching or the caller's work between
            batches ran longer than ``timeout_s``.
    """
    check_readonly(sql)
    with store.connect(read_only=True, config=SANDBOX_CONFIG, views=sql) as con:
        # from here: the wait for the file is the store's (busy: exit 7, retried), not the
        # query's (parallel MCP calls queued behind writers timed out before their query ran)
        deadline = time.monotonic() + timeout_s if timeout_s else None
        timer = threading.Timer(timeout_s, con.interrupt) if timeout_s else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            with _sql_errors(timeout_s, store.path):
                relation = con.sql(sql)
                if relation is None:
                    yield pa.RecordBatch.from_pylist([])
                    return
                if max_rows is not None:
                    relation = relation.limit(max_rows)
                reader = relation.to_arrow_reader(batch_rows)
            yielded = False
            while True:
                with _sql_errors(timeout_s, store.path):
                    if deadline is not None and time.monotonic() > deadline:
                        raise duckdb.InterruptException("timeout")
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        break
                yielded = True
                yield batch
            if not yielded:
                yield pa.RecordBatch.from_pylist([], schema=reader.schema)
        finally:
            if timer is not None:
                timer.cancel()


def timeout_message(timeout_s: float | None) -> str:
    """The one line of a query stopped by its time limit."""
    return f"query stopped after {timeout_s or 0:g} s: writers wait while it runs (sql --timeout to allow longer)"


@contextmanager
def _sql_errors(timeout_s: float | None, path: Path | None = None) -> Iterator[None]:
    """DuckDB's errors of a console query as one-line ledger errors."""
    try:
        yield
    except duckdb.InterruptException:
        raise QueryTimeout(timeout_message(timeout_s)) from None
    except duckdb.OutOfMemoryException as exc:
        raise QueryTimeout(
            f"query stopped: it needs more memory than the SQL console allows "
            f"({SANDBOX_MEMORY_BYTES / 2**30:g} GiB for DuckDB): {_first_line(exc)}"
        ) from None
    except duckdb.PermissionException as exc:
        raise Refused(f"the SQL console cannot touch files: {str(exc).splitlines()[0]}") from None
    except duckdb.InvalidInputException as exc:
        if "configuration has been locked" in str(exc):
            raise Refused("settings cannot be changed here") from None
        if "read-only mode" in str(
            exc
        ):  # a write hidden in a CTE: DuckDB's read-only open stops it
            raise Refused(
                "the ledger is read-only here: the statement writes (SELECT and EXPLAIN only)"
            ) from None
        raise InvalidInput(f"query failed: {_first_line(exc)}") from None
    except duckdb.Error as exc:
        damage = open_error(path, exc) if path is not None else None
        if damage is not None:  # a checksum or a block that fails to read, met mid-query
            raise damage from None
        raise InvalidInput(f"query failed: {_first_line(exc)}") from None
    except MemoryError:
        raise QueryTimeout(
            "query stopped: its result needs more memory than the SQL console allows"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: The most bytes of values (Arrow's count) one capped answer holds: an MCP ``sql`` result is
#: built into JSON and checked against its schema in the server's one process, so a 100 MB
#: value held it for minutes and no other call was answered meanwhile (docs/reliability.md).
MAX_ANSWER_BYTES = 8 << 20


def run_readonly_capped(
    store: LedgerStore,
    sql: str,
    *,
    max_rows: int,
    max_bytes: int = MAX_ANSWER_BYTES,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> tuple[pa.Table, bool]:
    """``run_readonly`` capped in rows *and* bytes before the answer is built: the result and
    whether rows were left out (more than ``max_rows``, or past ``max_bytes``).

    Fetched in small batches, the bytes counted as they come; the batch that passes the cap is
    cut to the rows that fit (a single row past it: none), and the query is closed there. The
    one place both the MCP server and the CLI cap an answer.

    Raises:
        as ``stream_readonly``.
    """
    kept: list[pa.RecordBatch] = []
    total = rows = 0
    truncated = False
    schema = None
    batches = stream_readonly(store, sql, max_rows=max_rows + 1, timeout_s=timeout_s, batch_rows=64)
    assert isinstance(batches, Generator)  # closed below: the ledger's lock is let go at once
    try:
        for batch in batches:
            schema = batch.schema
            if rows + batch.num_rows > max_rows:
                batch, truncated = batch.slice(0, max_rows - rows), True
            if total + batch.nbytes > max_bytes:
                batch, truncated = _fitting(batch, max_bytes - total), True
            kept.append(batch)
            total += batch.nbytes
            rows += batch.num_rows
            if truncated:
                break
    finally:
        batches.close()
    if not kept:
        return pa.Table.from_batches([], schema=schema or pa.schema([])), truncated
    return pa.Table.from_batches(kept), truncated


def _fitting(batch: pa.RecordBatch, room: int) -> pa.RecordBatch:
    """The longest head of ``batch`` within ``room`` bytes (a binary search on its slices)."""
    low, high = 0, batch.num_rows
    while low < high:
        middle = (low + high + 1) // 2
        if batch.slice(0, middle).nbytes <= room:
            low = middle
        else:
            high = middle - 1
    return batch.slice(0, low)
