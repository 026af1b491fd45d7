"""The append-only event store: one DuckDB file, many processes, one writer at a time.

DuckDB lets one process hold a database file read-write, and lets others read
it only while nobody writes (https://duckdb.org/docs/stable/connect/concurrency). tuneledger works with that
rule in two ways:

- **One-shot** (the default, the CLI): every operation opens the file, does its
  work in one transaction and closes it (about 10 ms for open + close, plus the
  checkpoint DuckDB runs at close). An append projects its events in the same
  transaction.
- **Kept open** (``hold_s`` > 0: a runner, a plan, the TUI, a Python API user
  appending in a loop): the first operation opens the file read-write and keeps
  it; an append is then one transaction holding only the events (the projections
  catch up later, in batches: ``ledger.derive.projections``). A watcher thread lets go
  of the file - catching the projections up first - when the process has been
  idle for ``hold_s``, or within ``HANDOFF_S`` once another process waits for the
  file (it sees the waiter through the sidecar lock, ``sidecar_lock.someone_waits``).
  The projections are also caught up when idle for ``IDLE_CATCH_UP_S``, when
  ``MAX_LAG`` events wait, and before any read through the kept connection; and
  at interpreter exit. So a view never answers from stale tables, through
  tuneledger or through DuckDB's own shell (which cannot open the file while it
  is held). Only a process killed while holding the file leaves projections
  behind; the next tuneledger process to open the file catches them up before
  anything reads them (a test kills one to check).

An open that finds the file locked is retried with jittered exponential backoff
(tenacity) until ``lock_timeout_s``. Around every connection tuneledger also
holds a readers-writer lock on a sidecar file (``<ledger>.lock``, flock):
shared for readers, exclusive for writers, released only once DuckDB's close
has returned (see ``_acquire`` for why). Within a process a lock per file
serialises operations, because DuckDB refuses to open the same file twice in
one process with different settings. The result: a CLI append, a runner and the
TUI's refresh can run side by side; none of them sees a lock error unless a lock
is held longer than the timeout (``LedgerBusy``).

Guarantees (each proven by a test in ``tests/store/test_store_contract.py``, run against
one-shot and kept-open stores):

- append is idempotent by ``event_id``: a retry returns the original ``seq``;
  the same id with other content is ``EventIdReused``;
- a batch is atomic: all its events are stored, or none;
- ``expected_version`` conflicts raise ``ConcurrencyConflict``;
- ``seq`` is gapless and in commit order (the head ``seq`` + 1, read or cached
  inside the single writer's hold, never from a non-transactional sequence);
- a writer killed mid-append leaves a valid prefix (DuckDB's WAL);
- rows are never updated or deleted; older schema versions are upcast on read.

The duplicate and stream-head checks do not grow with the ledger: an append
inserts directly and lets the unique indexes on ``event_id`` and ``(stream,
stream_version)`` refuse a retry (then a careful path looks the ids up by
index), and stream heads come from the ``stream_heads`` projection plus the
unprojected tail (zone maps skip the rest of the log).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

import duckdb

from ledger.derive import projections, views
from ledger.errors import (
    ConcurrencyConflict,
    EventIdReused,
    InvalidInput,
    LedgerBusy,
    NotFound,
    StorageError,
)
from ledger.store import ledger_file, readonly_copy, sidecar_lock
from ledger.store.gc_pause import no_cyclic_gc
from ledger.write.input_checks import dumped_payload, host_json, no_secret_ids, payload_json
from schemas import Event, parse_event
from schemas.secrets import mask_json, mask_text, may_hold_secret

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.read.model import EventFilter

#: File suffixes DuckDB treats as data to scan, not as a database to open.
_DATA_SUFFIXES = frozenset(
    {".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet", ".txt", ".log", ".xlsx"}
)

_ID_PREFIX = re.compile(r"[0-9a-f]{8}(?:[0-9a-f-]{0,28})")

#: Bump when the table layout changes (a migration is then needed: ``MIGRATIONS``). 2: the
#: ``occurred_at`` column; 3: catch-up projections with a stored position
#: (``ledger_meta.projected_seq``) and the ``stream_heads`` projection (``_ensure_schema``).
LAYOUT_VERSION = 3

#: How often a kept-open connection's watcher looks for a process waiting for the file (s).
WATCH_INTERVAL_S = 0.005
#: A kept-open writer idle this long catches its projections up (s).
IDLE_CATCH_UP_S = 0.02
#: A kept-open writer catches up at once when this many events wait to be projected: bounds
#: the work left for the hand-off (a batch's cost is mostly per statement, not per row:
#: 5,000 notes were caught up in 74 ms at load 9, against ~13 ms for a single event).
MAX_LAG = 10_000
#: The stated hand-off time: a process waiting for a file that a kept-open writer holds gets
#: it within this long (watch interval + the writer's current append + catch-up of at most
#: ``MAX_LAG`` events + close with its checkpoint). Measured p50 and p99 in bench/bench_store.py;
#: a test checks it. Under heavy load (load average far above the cores) it stretches.
HANDOFF_S = 2.0
#: ``hold_s`` of ``LedgerStore.kept_open``: a long-lived writer (a runner, a plan, a sync, the
#: TUI's writes) keeps the file this long after its last operation, so a burst of appends
#: pays one open and one close; it lets go sooner when another process waits (``HANDOFF_S``).
WRITER_HOLD_S = 2.0
#: A batch this large is turned into rows and stored with the cyclic GC off
#: (``gc_pause``): 1,000 notes 45-47k -> 52-54k events per CPU second, idle.
GC_FREE_BATCH = 100

EVENTS_DDL = """
CREATE TABLE IF NOT EXISTS events (
    seq            BIGINT PRIMARY KEY,
    event_id       UUID NOT NULL UNIQUE,
    type           VARCHAR NOT NULL,
    schema_version INTEGER NOT NULL,
    stream         VARCHAR NOT NULL,
    stream_version BIGINT NOT NULL,
    recorded_at    TIMESTAMPTZ NOT NULL,
    actor_kind     VARCHAR NOT NULL,
    actor_name     VARCHAR NOT NULL,
    session_id     VARCHAR,
    causation_id   UUID,
    correlation_id UUID,
    source         VARCHAR,
    host           JSON,
    -- Zstandard for the payloads (most of a ledger's bytes): a 100k-event import compressed
    -- them in 0.45 s of CPU against 0.9 s for DuckDB's default choice, into 51 MB against 84
    -- (bench/bench_store.py --only import). Files made before keep DuckDB's default choice.
    payload        JSON NOT NULL USING COMPRESSION ZSTD,
    occurred_at    TIMESTAMPTZ,
    UNIQUE (stream, stream_version)
);
CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
-- Where synced events sit on a PostgreSQL hub and which ledger they came from (ledger.sync.replicate).
CREATE TABLE IF NOT EXISTS sync_events (
    event_id              UUID PRIMARY KEY,
    seq                   BIGINT NOT NULL,
    remote                VARCHAR NOT NULL,
    position              BIGINT NOT NULL,
    origin_ledger         UUID NOT NULL,
    origin_name           VARCHAR NOT NULL,
    origin_seq            BIGINT NOT NULL,
    origin_stream_version BIGINT NOT NULL,
    seen_position         BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS bench_samples (
    benchmark_event_id UUID NOT NULL,
    request_index      INTEGER NOT NULL,
    ok                 BOOLEAN NOT NULL,
    ttft_ms            DOUBLE,
    e2e_ms             DOUBLE,
    tpot_ms            DOUBLE,
    prompt_tokens      INTEGER,
    output_tokens      INTEGER,
    itl_ms             DOUBLE[],
    error              VARCHAR,
    PRIMARY KEY (benchmark_event_id, request_index)
);
"""

#: Named layout migrations, in order, each idempotent: (layout version it brings a file to, SQL).
#: A ledger written by older code is migrated the first time it is opened for writing.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    # 2: when the fact happened (an imported log line's time), beside when it was recorded.
    (2, "ALTER TABLE events ADD COLUMN IF NOT EXISTS occurred_at TIMESTAMPTZ"),
)

#: The ``events`` table's columns, in order (``event_values`` gives one event's values so).
COLUMNS = (
    "seq",
    "event_id",
    "type",
    "schema_version",
    "stream",
    "stream_version",
    "recorded_at",
    "actor_kind",
    "actor_name",
    "session_id",
    "causation_id",
    "correlation_id",
    "source",
    "host",
    "payload",
    "occurred_at",
)

# pyarrow is imported on first use, not at import: it is ~100 ms of CPU that a CLI append
# (one event, no samples) never needs.


@functools.cache
def _bench_samples_schema() -> pa.Schema:
    """Arrow schema of per-request samples as ``append(samples=...)`` takes them: the columns
    of ``bench_samples`` but ``benchmark_event_id``. Times in ms, token counts in tokens."""
    import pyarrow as pa

    return pa.schema(
        [
            ("request_index", pa.int32()),
            ("ok", pa.bool_()),
            ("ttft_ms", pa.float64()),
            ("e2e_ms", pa.float64()),
            ("tpot_ms", pa.float64()),
            ("prompt_tokens", pa.int32()),
            ("output_tokens", pa.int32()),
            ("itl_ms", pa.list_(pa.float64())),
            ("error", pa.string()),
        ]
    )


@functools.cache
def _arrow_schema() -> pa.Schema:
    """The Arrow schema a batch of events is inserted through (JSON and UUIDs as text)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("seq", pa.int64()),
            ("event_id", pa.string()),
            ("type", pa.string()),
            ("schema_version", pa.int32()),
            ("stream", pa.string()),
            ("stream_version", pa.int64()),
            ("recorded_at", pa.timestamp("us", tz="UTC")),
            ("actor_kind", pa.string()),
            ("actor_name", pa.string()),
            ("session_id", pa.string()),
            ("causation_id", pa.string()),
            ("correlation_id", pa.string()),
            ("source", pa.string()),
            ("host", pa.string()),
            ("payload", pa.string()),
            ("occurred_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def __getattr__(name: str) -> Any:
    """``BENCH_SAMPLES_SCHEMA`` and ``_ARROW_SCHEMA``, built (and pyarrow imported) on first use."""
    if name == "BENCH_SAMPLES_SCHEMA":
        return _bench_samples_schema()
    if name == "_ARROW_SCHEMA":
        return _arrow_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The columns that make two events with one id "the same event" (a retry). Provenance
#: that a retry may legitimately change — recorded_at, actor, source — is left out.
_IDENTITY = ("type", "payload", "session_id", "causation_id", "correlation_id", "host")


def _identity(row: dict[str, Any]) -> tuple[Any, ...]:
    def norm(column: str) -> Any:
        value = row[column]
        if column in ("payload", "host") and isinstance(value, str):
            return json.loads(value)
        return str(value) if value is not None else None

    return tuple(norm(column) for column in _IDENTITY)


#: The key of a row dict holding its event's ``UUID`` object, where the caller has one
#: (``append``); not a column. Parsing 1,000 ids back from text cost ~0.8 ms a batch.
_EVENT_UUID = "_event_uuid"


def _twice(ids: Sequence[Any]) -> EventIdReused:
    """The refusal of a batch that holds one event id twice, naming the id."""
    seen: set[str] = set()
    for event_id in map(str, ids):
        if event_id in seen:
            return EventIdReused(f"the batch holds event_id {event_id} twice", event_id=event_id)
        seen.add(event_id)
    return EventIdReused("the batch holds an event_id twice")


def _uuid_of(row: dict[str, Any]) -> UUID:
    """The row's event id as a ``UUID`` (the event's own object when ``append`` kept it)."""
    known = row.get(_EVENT_UUID)
    return known if known is not None else UUID(row["event_id"])


class _NotFresh(Exception):
    """The fast path met a conflict that may be a retry in disguise: take the careful path."""


class _Held:
    """A kept-open read-write connection, the sidecar lock held with it, and what it may cache.

    While it is held nobody else writes the file, so the head ``seq``, the projected
    position and the stream heads read once stay true until ``let_go``. Every method is
    called with ``lock`` (the per-file lock) held, except the watcher's loop.
    """

    def __init__(
        self,
        key: str,
        con: duckdb.DuckDBPyConnection,
        fd: int,
        lock: threading.RLock,
        hold_s: float,
    ) -> None:
        self.key, self.con, self.fd, self.lock, self.hold_s = key, con, fd, lock, hold_s
        self.heads: dict[str, int] = {}
        self.projected = self.head = 0
        self.closed = False
        self.last_used = time.monotonic()
        self.refresh()

    def refresh(self) -> None:
        """Re-read the positions (after a caller used the connection for anything)."""
        _, self.projected, self.head = LedgerStore._state(self.con)
        self.heads.clear()

    def catch_up(self) -> None:
        """Project the events appended since the last catch-up (one transaction)."""
        if self.closed or self.head <= self.projected:
            return
        self.con.execute("BEGIN")
        try:
            self.projected = projections.catch_up(self.con, self.projected)
            self.con.execute("COMMIT")
        except BaseException:
            with suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise

    def done(self) -> None:
        """After an operation: stamp the time; hand over at once if another process waits."""
        self.last_used = time.monotonic()
        if sidecar_lock.someone_waits(self.fd):
            self.let_go()

    def let_go(self) -> None:
        """Catch the projections up, close, release the sidecar lock; idempotent."""
        if self.closed:
            return
        self.closed = True
        if _HELD.get(self.key) is self:
            del _HELD[self.key]
        try:
            if self.head > self.projected:
                self.closed = False
                try:
                    self.catch_up()
                finally:
                    self.closed = True
        finally:
            try:
                self.con.close()
            finally:
                sidecar_lock.release(self.fd)

    def start_watching(self) -> None:
        threading.Thread(target=self._watch, name="ledger-hold-watch", daemon=True).start()

    def _watch(self) -> None:
        """Let go when idle for ``hold_s`` or when another process waits; catch up when idle."""
        while not self.closed:
            time.sleep(WATCH_INTERVAL_S)
            idle = time.monotonic() - self.last_used
            lagging = self.head > self.projected and idle >= IDLE_CATCH_UP_S
            if idle < self.hold_s and not lagging and not self._waited_for():
                continue
            with self.lock:  # waits for the operation in progress, if any
                if self.closed:
                    return
                try:
                    # Re-measured under the lock: an operation that just ended is not idleness.
                    idle = time.monotonic() - self.last_used
                    if idle >= self.hold_s or sidecar_lock.someone_waits(self.fd):
                        self.let_go()
                        return
                    if idle >= IDLE_CATCH_UP_S:
                        self.catch_up()
                except Exception:  # noqa: BLE001 (the next reader or writer catches up and reports)
                    with suppress(Exception):
                        self.let_go()
                    return

    def _waited_for(self) -> bool:
        try:
            return not self.closed and sidecar_lock.someone_waits(self.fd)
        except OSError:  # let go of meanwhile (the fd is closed)
            return False


_T = TypeVar("_T")

#: Kept-open connections of this process, by resolved ledger path.
_HELD: dict[str, _Held] = {}


@atexit.register
def _let_go_all() -> None:
    """At interpreter exit: catch up and close every kept-open connection (no stale views left)."""
    for held in list(_HELD.values()):
        with held.lock, suppress(Exception):
            held.let_go()


_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()


#: Rows per row group that a writer gives DuckDB (its default: 122,880). A large append's full
#: row groups are compressed and written while the transaction goes on ("optimistic writes",
#: one row group at a time: ``write_buffer_row_group_count``), so a 100k-event import's
#: commit no longer compresses them all at the end: COMMIT 1.1 s -> 0.1 s, the compression
#: done meanwhile, beside the validation workers. A multiple of DuckDB's vector (2,048 rows).
ROW_GROUP_ROWS = 16_384


def _connect(path: Path, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """Open the ledger: a reader plainly; a writer as an attached database (DuckDB sets the
    row group size at ``ATTACH`` only: ``ROW_GROUP_ROWS``) made the connection's default
    catalog, so every statement reads as on a plain connection.

    Raises:
        duckdb.Error: as ``duckdb.connect`` (a lock held elsewhere, not a database file).
    """
    if read_only:
        return duckdb.connect(str(path), read_only=True, config=config)
    # where DuckDB spills when the file is opened plainly (for an in-memory database: ./.tmp)
    con = duckdb.connect(":memory:", config={"temp_directory": f"{path}.tmp", **config})
    try:
        quoted = str(path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS ledger (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
        con.execute("USE ledger")
        con.execute("SET write_buffer_row_group_count = 1")
    except BaseException:
        con.close()
        raise
    return con


def _repair_copy(path: Path) -> None:
    """Catch up the ledger copy at ``path`` as a writer (``ledger.store.readonly_copy``)."""
    LedgerStore(path)._repair()


def _lock_for(path: Path) -> threading.RLock:
    key = os.path.realpath(path)  # not Path.resolve(): it raises on a symlink loop (refused later)
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


def is_lock_error(exc: BaseException) -> bool:
    """True for DuckDB's "Could not set lock on file" (another process holds the file)."""
    if not isinstance(exc, duckdb.Error):
        return False
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


@dataclass(frozen=True)
class AppendResult:
    """Where one event landed: global ``seq``, ``stream`` and ``stream_version``.

    ``duplicate`` is true when the event was already stored (an idempotent retry):
    the positions are then the original ones.
    """

    event_id: UUID
    seq: int
    stream: str
    stream_version: int
    duplicate: bool = False


class AppendResults(Sequence[AppendResult]):
    """Where each event of a bulk append landed, kept column-wise.

    A sequence of ``AppendResult`` in input order; each is built only when looked at
    (building 100,000 of them, a ``UUID`` parse each, cost more than inserting the rows).
    ``seqs`` (ints, input order) and ``applied`` (how many were new) need no object per event.
    """

    def __init__(
        self,
        event_ids: Any,
        seqs: Sequence[int],
        streams: Any,
        versions: Any,
        duplicates: Sequence[bool] | None = None,
    ) -> None:
        # ids, streams, versions: lists, or Arrow arrays turned into lists on first access.
        self._columns: list[Any] = [event_ids, streams, versions]
        self.seqs = seqs
        self._duplicates = duplicates

    @classmethod
    def of(cls, results: Sequence[AppendResult]) -> AppendResults:
        """The same results, from ``AppendResult`` objects (the careful path's)."""
        return cls(
            [str(r.event_id) for r in results],
            [r.seq for r in results],
            [r.stream for r in results],
            [r.stream_version for r in results],
            [r.duplicate for r in results],
        )

    @property
    def applied(self) -> int:
        """How many events this append stored (the others were already stored)."""
        if self._duplicates is None:
            return len(self.seqs)
        return len(self._duplicates) - sum(self._duplicates)

    def __len__(self) -> int:
        return len(self.seqs)

    def _lists(self) -> list[list[Any]]:
        if not isinstance(self._columns[0], list):
            self._columns = [column.to_pylist() for column in self._columns]
        return self._columns

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        ids, streams, versions = self._lists()
        duplicate = bool(self._duplicates[index]) if self._duplicates is not None else False
        return AppendResult(
            UUID(ids[index]), self.seqs[index], streams[index], versions[index], duplicate
        )

    def __repr__(self) -> str:
        return f"AppendResults({len(self)} events, {self.applied} new)"


class LedgerStore:
    """An append-only ledger in one DuckDB file.

    Args:
        path: the ``.duckdb`` file; created by ``init()``.
        clock: returns the UTC time stamped on events that carry no ``recorded_at``
            (tests pass a fixed clock for deterministic snapshots).
        lock_timeout_s: how long to retry when another process holds the file lock.
        hold_s: 0 (default): open and close the file for every operation (one-shot). Above
            0: keep it open read-write across operations (a long-lived writer: appends cost
            about one commit instead of ~25 ms) and let go when idle this many seconds, or
            within ``HANDOFF_S`` when another process waits for the file. Other processes,
            and DuckDB's own shell, cannot open the file while it is held; ``close()``
            lets go at once, and interpreter exit does too.
        hold_reads: with ``hold_s``, whether a read opens (and keeps) the file too. False
            (the TUI): only writes keep it open; a read uses the kept-open connection while
            one is held, else opens read-only for that read, as a one-shot store does.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] | None = None,
        lock_timeout_s: float = 30.0,
        hold_s: float = 0.0,
        hold_reads: bool = True,
    ) -> None:
        self.path = Path(path)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.lock_timeout_s = lock_timeout_s
        self.hold_s = hold_s
        self.hold_reads = hold_reads
        self._key = os.path.realpath(self.path)
        self._lock = _lock_for(self.path)
        #: (connection, projected, head) as ``_ensure_schema`` last found them current.
        self._fresh_position: tuple[duckdb.DuckDBPyConnection, int, int] | None = None

    # --- connections ------------------------------------------------------------

    def check_path(self) -> None:
        """Refuse a path that is not (or cannot become) a ledger file, before DuckDB sees it.

        DuckDB opens ``:memory:`` and data-file names (``x.jsonl``, ``x.csv``) as an
        in-memory database: appends would "succeed" and vanish. An existing file must
        carry DuckDB's magic bytes.

        Raises:
            InvalidInput: one line naming the path and what to do instead.
        """
        name = str(self.path)
        ledger_file.check_name(self.path)  # md:, http://, a symlink loop
        if name.startswith(":") or self.path.suffix.lower() in _DATA_SUFFIXES:
            raise InvalidInput(
                f"{name}: not a ledger file name (use e.g. ledger.duckdb; to load JSONL events "
                "use `tuneledger append < FILE`, to import tool outputs `tuneledger import FILE`)"
            )
        if self.path.is_dir():
            raise InvalidInput(f"{name}: is a directory, not a ledger file")
        # DuckDB locks the file with a POSIX record lock, which the kernel drops when the
        # process closes *any* descriptor of that file: reading the header while this process
        # keeps the file open would let another process (DuckDB's shell) open it read-write.
        # A kept-open file was checked when it was opened; the lock keeps one from opening now.
        with self._lock:
            if _HELD.get(self._key) is None and self.path.exists() and self.path.stat().st_size:
                with self.path.open("rb") as handle:
                    header = handle.read(12)
                if header[8:12] != b"DUCK":
                    raise InvalidInput(f"{name}: not a DuckDB ledger file")

    @contextmanager
    def connect(
        self, *, read_only: bool = True, config: dict[str, Any] | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work; views read through it are never stale.

        With ``hold_s`` > 0 this is the kept-open read-write connection (opened on first
        use); else the file is opened for this unit of work, retrying while another process
        holds it, and closed after. Before a read the projections are caught up (a reader
        that finds them behind, after a writer was killed, catches them up first). A
        sandboxed read (``config``) never runs on a kept-open writer's connection: that
        one is let go first.

        Raises:
            InvalidInput: the path is not a ledger file (``check_path``).
            NotFound: the file does not exist (read-only open).
            LedgerBusy: the lock was not had within ``lock_timeout_s``.
        """
        self.check_path()
        if read_only and not self.path.exists():
            raise NotFound(f"no ledger at {self.path} (create it with `tuneledger init`)")
        with self._lock:
            held = self._held(create=not config and (self.hold_reads or not read_only))
            if held is not None and config:
                held.let_go()
                held = None
            if held is None:
                with self._connect_once(read_only, config or {}) as con:
                    yield con
                return
            if read_only:
                held.catch_up()
            held.last_used = time.monotonic()
            try:
                yield held.con
            finally:
                if not read_only:  # the caller may have written anything: re-read what is cached
                    held.refresh()
                held.done()

    def kept_open(self, hold_s: float = WRITER_HOLD_S) -> LedgerStore:
        """A store on the same file that keeps it open for ``hold_s`` after each operation.

        For long-lived writers (runners, plans, a sync): a run of appends costs one open and
        one close instead of one each (a one-shot append opens, checkpoints and closes the
        file: ~25 ms). The one-writer rule still holds: another process that waits for the
        file gets it within ``HANDOFF_S``; ``close()`` or interpreter exit lets go at once.
        """
        return LedgerStore(
            self.path,
            clock=self.clock,
            lock_timeout_s=self.lock_timeout_s,
            hold_s=max(self.hold_s, hold_s),
            hold_reads=self.hold_reads,
        )

    def close(self) -> None:
        """Let go of a kept-open connection now (catching the projections up first); idempotent."""
        with self._lock:
            held = _HELD.get(self._key)
            if held is not None:
                held.let_go()

    def _held(self, *, create: bool) -> _Held | None:
        """This file's kept-open connection in this process (opened now when ``create`` and ``hold_s``)."""
        held = _HELD.get(self._key)
        if held is None and create and self.hold_s > 0:
            con, fd = self._open_locked(read_only=False, config={})
            try:
                self._ensure_schema(con)
                held = _Held(self._key, con, fd, self._lock, self.hold_s)
            except BaseException:
                con.close()
                sidecar_lock.release(fd)
                raise
            _HELD[self._key] = held
            held.start_watching()
        return held

    @contextmanager
    def _connect_once(
        self, read_only: bool, config: dict[str, Any]
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        con, locked = self._open_locked(read_only, config)
        fd: int | None = locked
        try:
            if read_only and not self._ready(con):
                # Written by older code, or a writer was killed before it caught the projections
                # up: bring the file up to date as a writer, then read (rare: one extra open).
                con.close()
                sidecar_lock.release(locked)
                fd = None
                try:
                    self._repair()
                except StorageError:  # may not write here: catch up a private copy and read it
                    copy = readonly_copy.repaired_copy(self.path, _repair_copy)
                    try:
                        with LedgerStore(copy)._connect_once(read_only, config) as copied:
                            yield copied
                    finally:
                        readonly_copy.remove_copy(copy)
                    return
                con, fd = self._open_locked(read_only, config)
            yield con
        finally:
            if fd is not None:
                try:
                    con.close()
                finally:
                    sidecar_lock.release(fd)

    def _open_locked(
        self, read_only: bool, config: dict[str, Any]
    ) -> tuple[duckdb.DuckDBPyConnection, int]:
        """Check the path, take the sidecar lock (``_acquire``), then open the file; the lock is
        let go on failure. Every connection of the store is opened here."""
        self.check_path()
        fd = self._acquire(shared=read_only)
        try:
            return self._open(read_only, config), fd
        except BaseException:
            sidecar_lock.release(fd)
            raise

    def _acquire(self, *, shared: bool) -> int:
        """Take ``<ledger>.lock`` (shared for readers, exclusive for writers) before a connection.

        DuckDB's own lock on the database file is not enough: under heavy load the
        racing-writers contract test saw two writers both commit the same ``seq``
        (one commit lost), as if the second opened the file before the first's
        close had finished with the write-ahead log. This lock is taken before
        ``duckdb.connect`` and released only after ``close()`` has returned, so
        tuneledger processes never overlap on the file. Returns the fd to release.

        Raises:
            LedgerBusy: not had within ``lock_timeout_s``.
        """
        try:
            return sidecar_lock.acquire(
                self.lock_path, shared=shared, timeout_s=self.lock_timeout_s
            )
        except OSError as exc:
            raise ledger_file.lock_error(self.lock_path, exc) from None
        except sidecar_lock.LockTimeout:
            raise LedgerBusy(
                f"ledger {self.path} stayed locked by another process for {self.lock_timeout_s:g} s"
            ) from None

    @property
    def lock_path(self) -> Path:
        """The sidecar lock file next to the ledger (``ledger.duckdb.lock``)."""
        return self.path.with_name(self.path.name + ".lock")

    def _open(self, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        """``duckdb.connect``, retried with jittered backoff while another process holds the file.

        Raises:
            LedgerBusy: still locked after ``lock_timeout_s``.
        """
        try:
            return _connect(self.path, read_only, config)
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise ledger_file.open_error(self.path, exc) or exc from None
        # tenacity only now: most opens succeed at once, and its import costs a CLI call ~20 ms.
        from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

        retrying = Retrying(
            retry=retry_if_exception(is_lock_error),
            wait=wait_random_exponential(multiplier=0.002, max=0.05),
            stop=stop_after_delay(self.lock_timeout_s),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return _connect(self.path, read_only, config)
        except duckdb.Error as exc:
            if is_lock_error(exc):
                raise LedgerBusy(
                    f"ledger {self.path} stayed locked by another process for {self.lock_timeout_s:g} s"
                ) from exc
            raise ledger_file.open_error(self.path, exc) or exc from None
        raise AssertionError("unreachable")  # pragma: no cover

    # --- set-up -----------------------------------------------------------------------

    def init(self) -> bool:
        """Create the tables and views if needed; refresh views written by older code.

        Returns True when the file was created by this call.
        """
        self.check_path()
        created = ledger_file.nothing_stored(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with (
            ledger_file.removed_on_failure(self.path, created),
            self.connect(read_only=False) as con,
        ):
            self._ensure_schema(con)
        return created

    @staticmethod
    def _state(con: duckdb.DuckDBPyConnection) -> tuple[bool, int, int]:
        """(tables and views current, projected position, head ``seq``).

        The head is looked for only at and after the projected position: DuckDB skips the
        row groups before it (zone maps), so the cost does not grow with the ledger.
        """
        # Three plain queries, not one with correlated subqueries: on a fresh connection the
        # one query took 4-6 ms to plan, these 1.5-3 ms together (each CLI append runs this).
        try:
            meta = dict(
                con.execute(
                    "SELECT key, value FROM ledger_meta WHERE key IN (?, ?, ?)",
                    ["views_version", "layout_version", projections.POSITION_KEY],
                ).fetchall()
            )
            try:
                projected = int(meta.get(projections.POSITION_KEY) or 0)
            except ValueError:
                projected = 0
            head = con.execute(
                "SELECT coalesce(max(seq), ?) FROM events WHERE seq >= ?", [projected, projected]
            ).fetchall()[0][0]
            # a column this code does not know is a newer (or foreign) layout: check it then
            found = con.execute(
                "SELECT column_count FROM duckdb_tables() WHERE table_name = 'events' "
                "AND schema_name = 'main' AND database_name = current_database()"
            ).fetchall()
        except duckdb.CatalogException:
            return False, 0, 0
        views_version, layout = meta.get("views_version"), meta.get("layout_version")
        columns = found[0][0] if found else 0
        current = (
            views_version == views.VIEWS_VERSION
            and layout == str(LAYOUT_VERSION)
            and columns == len(COLUMNS)
        )
        return current, projected, head

    def _ready(self, con: duckdb.DuckDBPyConnection) -> bool:
        current, projected, head = self._state(con)
        if not current:
            self._check_compatible(con)
        return current and head <= projected

    def _check_compatible(self, con: duckdb.DuckDBPyConnection) -> None:
        """Refuse a ledger written by newer code (``ledger_file.check_compatible``), before
        anything could rewrite it; only needed when ``_state`` says it is not current."""
        ledger_file.check_compatible(
            con,
            self.path,
            views_version=views.VIEWS_VERSION,
            layout_version=LAYOUT_VERSION,
            columns=COLUMNS,
        )

    def ensure_current(self) -> None:
        """Bring a ledger written by older code, or left behind by a killed writer, up to date.

        Cheap when it is current (one read-only query). Every read does this check itself;
        this method is for callers that want it done up front.
        """
        if not self.path.exists():
            return
        with self._lock:
            with self.connect(read_only=True):
                pass

    def _repair(self) -> None:
        con, fd = self._open_locked(read_only=False, config={})
        try:
            self._ensure_schema(con)
        finally:
            try:
                con.close()
            finally:
                sidecar_lock.release(fd)

    def _ensure_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        """Tables, views and projections up to date (in one transaction); cheap when they are."""
        current, projected, head = self._state(con)
        if current and head <= projected:
            # what the append about to run on ``con`` would read again (``_position``)
            self._fresh_position = (con, projected, head)
            return
        if not current:
            self._check_compatible(con)  # refuses a newer ledger: never "upgrade" it back to ours
        con.execute("BEGIN")
        try:
            con.execute(EVENTS_DDL)
            meta = dict(con.execute("SELECT key, value FROM ledger_meta").fetchall())
            # The stored layout says which migrations the file still needs (none stored: a new
            # file or one from before layout versions: all of them, each is idempotent).
            stored_layout = int(meta.get("layout_version") or 0)
            for version, migration in MIGRATIONS:
                if version > stored_layout:
                    con.execute(migration)
            projections.create(con)
            if meta.get("views_version") != views.VIEWS_VERSION:
                # Written by other code: the projections are a cache of the log, so rebuild them.
                projections.rebuild(con)
                views.create_views(con)
            elif (
                meta.get("layout_version") != str(LAYOUT_VERSION)
                and projections.POSITION_KEY not in meta
            ):
                # Layout 1 projected inside every append (so all is projected) and had no
                # stream_heads: fill that one table and store the position.
                con.execute(
                    "INSERT INTO stream_heads SELECT stream, max(stream_version) FROM events GROUP BY stream "
                    "ON CONFLICT (stream) DO UPDATE SET version = greatest(version, EXCLUDED.version)"
                )
                projections.set_position(
                    con, con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
                )
            else:
                projections.catch_up(con)
            con.execute(
                "INSERT OR REPLACE INTO ledger_meta VALUES ('views_version', ?), ('layout_version', ?)",
                [views.VIEWS_VERSION, str(LAYOUT_VERSION)],
            )
            con.execute("COMMIT")
        except BaseException:
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise

    # --- writing --------------------------------------------------------------------

    def _position(self, con: duckdb.DuckDBPyConnection, held: _Held | None) -> tuple[int, int]:
        """(projected position, head ``seq``) for an append on ``con``: the kept-open writer's
        cached ones, else what ``_ensure_schema`` just read on this connection (one state
        query a one-shot append instead of two: ~1.5-3 ms), else read now."""
        if held is not None:
            return held.projected, held.head
        checked, self._fresh_position = self._fresh_position, None
        if checked is not None and checked[0] is con:
            return checked[1], checked[2]
        _, projected, head = self._state(con)
        return projected, head

    def append(
        self,
        events: Event | Sequence[Event],
        *,
        expected_version: int | None = None,
        samples: Mapping[UUID, pa.Table] | None = None,
    ) -> list[AppendResult]:
        """Append events atomically, in order; return where each landed.

        ``expected_version`` (optimistic concurrency) requires every event of the
        batch to be in one stream, and that stream to be at exactly this version
        before the append (0: the stream must not exist yet). An event's own
        ``stream_version``, when set, must be the version it gets.

        Events already stored (same ``event_id``, same content) are not stored
        again: their result carries the original positions and ``duplicate=True``.

        ``samples`` maps a benchmark event's ``event_id`` to its per-request
        samples (columns of ``bench_samples`` but ``benchmark_event_id``); they
        are stored in the same transaction, for newly stored events only.

        One-shot (``hold_s`` 0): open, one transaction (events, then the projections
        caught up), close. Kept open: one transaction with the events only; the
        projections catch up in batches (see the class docstring).

        Raises:
            ConcurrencyConflict: a stream is not at the expected version.
            EventIdReused: an ``event_id`` is stored with different content,
                or appears twice in the batch.
            InvalidInput: a batch mixing streams with ``expected_version``.
            LedgerBusy: the file stayed locked.
        """
        batch = [events] if isinstance(events, Event) else list(events)
        if not batch:
            return []
        # a row dict an event and their columns, no lasting cycles: no collector walks
        with no_cyclic_gc() if len(batch) >= GC_FREE_BATCH else nullcontext():
            rows = [event_row(event) for event in batch]
            for row, event in zip(rows, batch, strict=True):
                # the id as the event holds it: a result needs no UUID parsed back from text
                row[_EVENT_UUID] = event.event_id
            return self.append_rows(rows, expected_version=expected_version, samples=samples)

    def append_rows(
        self,
        rows: list[dict[str, Any]],
        *,
        expected_version: int | None = None,
        samples: Mapping[UUID, pa.Table] | None = None,
        record: Callable[[duckdb.DuckDBPyConnection, list[AppendResult]], None] | None = None,
    ) -> list[AppendResult]:
        """``append`` for events already turned into rows by ``event_row`` (the bulk import
        validates and converts in worker processes). Same guarantees, same errors.
        ``record(con, results)`` runs inside the append's transaction (sync bookkeeping)."""
        if not rows:
            return []
        ids = [row["event_id"] for row in rows]
        if len(set(ids)) != len(ids):
            raise _twice(ids)
        if expected_version is not None and len({row["stream"] for row in rows}) != 1:
            raise InvalidInput("expected_version needs every event of the batch in one stream")
        return self._writing(
            lambda con, held: self._write(con, rows, expected_version, samples, held, record)
        )

    def _writing(self, write: Callable[[duckdb.DuckDBPyConnection, _Held | None], _T]) -> _T:
        """Run ``write(con, held)`` as the file's single writer: on the kept-open connection
        (catching the projections up when ``MAX_LAG`` events wait), or one-shot."""
        if not self.path.exists():
            self.init()
        with self._lock:
            held = self._held(create=True)
            if held is None:
                with self._connect_once(False, {}) as con:
                    self._ensure_schema(con)
                    return write(con, None)
            held.last_used = time.monotonic()
            try:
                results = write(held.con, held)
                if held.head - held.projected >= MAX_LAG:
                    held.catch_up()
            finally:
                held.done()
            return results

    def append_columns(
        self,
        table: pa.Table,
        *,
        record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None = None,
    ) -> AppendResults:
        """Append many events at once, in table order, atomically: the bulk path.

        For the bulk import (``ledger.write.bulk``) and sync's pull (``ledger.sync.replicate``). ``table``
        holds ``events`` rows as ``event_row`` makes them, one column each (the
        ``_arrow_schema()`` columns; ``seq`` is ignored, ``stream_version`` may be null, a
        null ``recorded_at`` is stamped with the store's clock inside the transaction).
        The text columns are stored as they are: secrets must be masked already.

        One transaction: one narrow query numbers the events (``seq`` from the head, each
        stream's version from its head, by window function), one ``INSERT ... SELECT``
        stores them; no Python object per event. Same guarantees and errors as ``append``:
        anything that may be a retry or a conflict (a stored ``event_id``, a given
        ``stream_version`` that differs, a retraction of an event not found) rolls back and
        takes ``append_rows``'s careful path, which stores the new events and words the error.
        ``record(con, results)`` runs inside the transaction (sync bookkeeping).

        Raises:
            EventIdReused, ConcurrencyConflict, NotFound, LedgerBusy: as ``append``.
        """
        if table.num_rows == 0:
            return AppendResults([], [], [], [])
        # An event_id twice in the batch: the unique index refuses the insert, and the
        # careful path names the error (no check of the whole batch on the fast path).
        return self._writing(lambda con, held: self._write_columns(con, table, held, record))

    def append_column_chunks(
        self, chunks: Iterable[pa.Table], *, threads: int | None = None
    ) -> AppendResults | None:
        """``append_columns`` for a batch that arrives in parts (the bulk import's validated
        chunks, in file order): each part is numbered, inserted and projected (from its own
        rows: ``projections.catch_up``'s ``source``) as it comes, so the store works while
        the next parts are validated; one transaction for them all.

        Returns None, with nothing stored, when a part may be a retry or a conflict (an
        ``event_id`` already stored, twice in the batch or a retraction of an event not
        stored before it): the caller then appends the whole batch by ``append_columns``,
        whose careful path stores the new events or words the error. An error raised by
        ``chunks`` (a bad line) rolls back everything and propagates.

        ``threads``: DuckDB's threads while the parts arrive (None: as configured), e.g. the
        cores the validation workers leave; the commit, after the last part, runs as
        configured. On 2 cores one thread took 30 µs of CPU an event against 33.5 with two,
        and no more wall time (100k events, load 4.2-4.7); with the parts projected as they
        come, two threads cost ~10% more CPU and 0.1-0.3 s more wall time (idle).

        Raises:
            LedgerBusy: as ``append``; whatever ``chunks`` raises.
        """
        try:
            return self._writing(
                lambda con, held: self._write_column_chunks(con, chunks, held, threads)
            )
        except (duckdb.ConstraintException, _NotFresh):
            return None

    def _write_column_chunks(
        self,
        con: duckdb.DuckDBPyConnection,
        chunks: Iterable[pa.Table],
        held: _Held | None,
        threads: int | None,
    ) -> AppendResults:
        """One bulk transaction over parts (``append_column_chunks``); a doubt propagates
        (``_NotFresh``, ``ConstraintException``) after the rollback."""
        import pyarrow as pa

        parts: list[AppendResults] = []
        (configured,) = con.execute("SELECT current_setting('threads')").fetchone() or (1,)
        try:
            if threads is not None:
                con.execute(f"SET threads = {int(threads)}")
            with self._transaction(con, held):
                if held is not None:
                    projected, head = held.projected, held.head
                else:
                    _, projected, head = self._state(con)
                # Each part is projected as it is inserted, read from the part itself (not
                # from ``events``: no scan of the transaction's rows so far, no decompressing
                # its payloads again), so the projections are done by the time the last part
                # is in, while the workers validate: the earlier events first.
                projected = projections.catch_up(con, projected)
                first = head
                for table in chunks:
                    if table.num_rows:
                        parts.append(self._insert_columns(con, table, projected, head, True))
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
                self._commit(con, results, None, held, projected)
        finally:
            if threads is not None:  # after a rollback too: a kept-open connection goes on
                with suppress(duckdb.Error):
                    con.execute(f"SET threads = {int(configured)}")
        if held is not None:
            held.heads.clear()  # the batch moved many streams: read them again when needed
            held.head = max(held.head, head)
            held.projected = max(held.projected, projected)
        return results

    def append_replicated(
        self,
        rows: Sequence[dict[str, Any]] | pa.Table,
        *,
        record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None = None,
    ) -> AppendResults:
        """Append events pulled from a sync hub, in the given (hub) order, atomically.

        For ``ledger.sync.replicate``. ``rows``: an Arrow table of ``events`` columns as
        ``append_columns`` takes it, or one dict per event with the envelope columns:
        ``event_id``, ``type``, ``schema_version``, ``stream``, ``recorded_at`` (aware
        datetime), ``actor_kind``, ``actor_name``, ``session_id``, ``causation_id``,
        ``correlation_id``, ``source`` (str or None), ``host`` and ``payload`` (JSON text),
        ``occurred_at`` (aware datetime or None). They are stored as they are (secrets
        masked, as for every event), at their own ``schema_version`` (upcast on read, like
        every stored row). Each gets the next local ``seq`` and the next version of its
        stream *in this ledger* (a hub's ``stream_version`` is ignored): two hosts may both
        have appended at one stream version while offline, and both events are kept (the
        origin's version stays in ``sync_events``). Idempotent by ``event_id`` like
        ``append``. ``record(con, results)`` runs inside the same transaction, so the sync
        bookkeeping commits with the events or not at all.

        Raises:
            EventIdReused: an ``event_id`` is stored here with different content.
            NotFound: a retraction of an event this ledger does not hold.
            LedgerBusy: the file stayed locked.
        """
        import pyarrow as pa

        schema = _arrow_schema()
        if isinstance(rows, pa.Table):
            table = rows
        else:
            table = pa.Table.from_pylist(
                [{**row, "seq": None, "stream_version": None} for row in rows], schema=schema
            )
        table = table.set_column(
            schema.get_field_index("stream_version"),
            "stream_version",
            pa.nulls(table.num_rows, pa.int64()),
        )
        return self.append_columns(_masked_columns(table), record=record)

    def _write(
        self,
        con: duckdb.DuckDBPyConnection,
        rows: list[dict[str, Any]],
        expected_version: int | None,
        samples: Mapping[UUID, pa.Table] | None,
        held: _Held | None,
        record: Callable[[duckdb.DuckDBPyConnection, list[AppendResult]], None] | None = None,
    ) -> list[AppendResult]:
        """One append transaction. The fast path assumes every event is new and inserts at
        once (the ``event_id`` and ``(stream, stream_version)`` unique indexes are the
        check); a retry, a conflict or a doubt rolls back and takes the careful path, which
        looks each id up and raises the precise error."""
        if held is not None and len(rows) == 1 and not samples and record is None:
            single = self._write_single(con, rows, expected_version, held)
            if single is not None:
                return single
        with self._transaction(con, held):
            projected, head = self._position(con, held)
            streams = sorted({row["stream"] for row in rows})
            heads = self._stream_heads(con, streams, projected, held)
            try:
                results, new_heads = self._insert(
                    con, rows, rows, {}, expected_version, heads, head
                )
            except (duckdb.ConstraintException, ConcurrencyConflict, NotFound, _NotFresh):
                con.execute("ROLLBACK")
                con.execute("BEGIN")
                stored = self._stored(con, rows)
                fresh = [row for row in rows if row["event_id"] not in stored]
                results, new_heads = self._insert(
                    con, rows, fresh, stored, expected_version, heads, head
                )
            for result in results:
                if samples and not result.duplicate and result.event_id in samples:
                    self._insert_samples(con, result.event_id, samples[result.event_id])
            self._commit(con, results, record, held, projected)
        if held is not None:
            held.heads.update(new_heads)
            held.head = max([head, *(r.seq for r in results)])
        return results

    def _write_single(
        self,
        con: duckdb.DuckDBPyConnection,
        rows: list[dict[str, Any]],
        expected_version: int | None,
        held: _Held,
    ) -> list[AppendResult] | None:
        """A kept-open writer's one new event: one auto-committed ``INSERT`` (its own
        transaction: stored whole or not at all), without BEGIN and COMMIT as statements of
        their own — DuckDB plans and runs each statement, and the pair costs ~0.25 ms of the
        ~1.6 ms an append takes (``bench/bench_store.py``). None when it may not be new (a
        retry, a conflict, a retraction): nothing was stored, and the caller's transaction
        takes the careful path, which words the error."""
        if rows[0]["type"] == "event_retracted":
            return None  # its target is looked up in the transaction
        heads = self._stream_heads(con, [rows[0]["stream"]], held.projected, held)
        try:
            results, new_heads = self._insert(
                con, rows, rows, {}, expected_version, heads, held.head
            )
        except (duckdb.ConstraintException, ConcurrencyConflict, _NotFresh):
            held.heads.clear()
            return None
        held.heads.update(new_heads)
        held.head = max(held.head, results[0].seq)
        return results

    @staticmethod
    @contextmanager
    def _transaction(con: duckdb.DuckDBPyConnection, held: _Held | None) -> Iterator[None]:
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

    @staticmethod
    def _commit(
        con: duckdb.DuckDBPyConnection,
        results: Any,
        record: Callable[[duckdb.DuckDBPyConnection, Any], None] | None,
        held: _Held | None,
        projected: int,
    ) -> None:
        """The end of an append transaction: the caller's bookkeeping (``record``), the
        projections caught up (one-shot only: a kept-open writer batches them), COMMIT."""
        if record is not None:
            record(con, results)
        if held is None:
            projections.catch_up(con, projected)
        con.execute("COMMIT")

    def _write_columns(
        self,
        con: duckdb.DuckDBPyConnection,
        table: pa.Table,
        held: _Held | None,
        record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None,
    ) -> AppendResults:
        """One bulk append transaction (``append_columns``); the careful path on any doubt."""
        with self._transaction(con, held):
            projected, head = self._position(con, held)
            # A one-shot append projects the batch from its own rows (a kept-open writer
            # batches its catch-ups instead: ``MAX_LAG``).
            project = held is None and projected == head
            try:
                results = self._insert_columns(con, table, projected, head, project)
                if project:
                    projected = head + table.num_rows  # the batch's projection is done
            except (duckdb.ConstraintException, _NotFresh):
                con.execute("ROLLBACK")
                con.execute("BEGIN")
                rows = table.to_pylist()
                if len({row["event_id"] for row in rows}) != len(rows):
                    raise _twice([row["event_id"] for row in rows]) from None
                stored = self._stored(con, rows)
                fresh = [row for row in rows if row["event_id"] not in stored]
                heads = self._stream_heads(
                    con, sorted({row["stream"] for row in rows}), projected, None
                )
                found, _ = self._insert(con, rows, fresh, stored, None, heads, head)
                results = AppendResults.of(found)
            self._commit(con, results, record, held, projected)
        if held is not None:
            held.heads.clear()  # the batch moved many streams: read them again when needed
            held.head = max(held.head, max(results.seqs, default=0))
        return results

    def _insert_columns(
        self,
        con: duckdb.DuckDBPyConnection,
        table: pa.Table,
        projected: int,
        head: int,
        project: bool = False,
    ) -> AppendResults:
        """Number and insert a batch assumed new; ``_NotFresh`` (or the unique indexes'
        ``ConstraintException``) when it may not be. ``project``: project the batch too,
        from its own rows (``projections.catch_up``'s ``source``: every event up to ``head``
        must be projected already, ``projected == head``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = table.num_rows
        retractions = pc.equal(table.column("type"), "event_retracted")
        if pc.any(retractions).as_py():
            targets = [
                json.loads(text)["retracted_event_id"]
                for text in table.filter(retractions).column("payload").to_pylist()
            ]
            in_batch = pc.is_in(
                pa.array(targets, pa.string()), value_set=table.column("event_id")
            ).to_pylist()
            outside = [t for t, inside in zip(targets, in_batch, strict=True) if not inside]
            stored = self._stored_types(con, outside) if outside else {}
            # a target not stored, or a retraction of a retraction (here or stored, an earlier
            # part's included): the careful path decides (the command layer's rules)
            retracting = pc.is_in(
                table.filter(retractions).column("event_id"), value_set=pa.array(targets)
            )
            if (
                len(stored) != len(set(outside))
                or "event_retracted" in stored.values()
                or pc.any(retracting).as_py()
            ):
                raise _NotFresh
        schema = _arrow_schema()
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
                raise _NotFresh
            table = table.set_column(
                schema.get_field_index("stream_version"), "stream_version", versions
            )
            stamped = schema.get_field_index("recorded_at")
            if table.column(stamped).null_count:  # stamped now, inside the write transaction
                now = pa.scalar(self.clock(), schema.field(stamped).type)
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
                projections.catch_up(con, projected, source="incoming")
        finally:
            with suppress(duckdb.Error):  # aborted by a conflict: the rollback drops it
                con.unregister("incoming")
        return AppendResults(
            table.column("event_id"),
            range(head + 1, head + n + 1),
            table.column("stream"),
            versions,
        )

    @staticmethod
    def _stream_heads(
        con: duckdb.DuckDBPyConnection, streams: list[str], projected: int, held: _Held | None
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

    @staticmethod
    def _stored(
        con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]
    ) -> dict[str, tuple[Any, ...]]:
        """event_id -> (seq, stream, stream_version, *identity) of the batch's already stored events.

        Raises:
            EventIdReused: one is stored with other content.
        """
        stored = {
            str(record[0]): record[1:]
            for record in con.execute(
                f"SELECT event_id, seq, stream, stream_version, {', '.join(_IDENTITY)} "
                "FROM events WHERE event_id IN (SELECT unnest(?::UUID[]))",
                [[row["event_id"] for row in rows]],
            ).fetchall()
        }
        for row in rows:
            old = stored.get(row["event_id"])
            if old is not None and _identity(
                dict(zip(_IDENTITY, old[3:], strict=True))
            ) != _identity(row):
                raise EventIdReused(
                    f"event_id {row['event_id']} is already stored with other content",
                    event_id=str(row["event_id"]),
                )
        return stored

    def _insert(
        self,
        con: duckdb.DuckDBPyConnection,
        rows: list[dict[str, Any]],
        fresh: list[dict[str, Any]],
        stored: dict[str, tuple[Any, ...]],
        expected_version: int | None,
        heads: dict[str, int],
        head_seq: int,
    ) -> tuple[list[AppendResult], dict[str, int]]:
        """Check and number the ``fresh`` rows, insert them; return every row's result and the new heads.

        The fast path calls this with every row as fresh (``stored`` empty): any conflict
        there may be a retry in disguise, so it raises ``_NotFresh`` to take the careful path.
        """
        careful = bool(stored) or fresh is not rows
        heads = dict(heads)
        if expected_version is not None and fresh:
            actual = heads.get(fresh[0]["stream"], 0)
            if actual != expected_version:
                if not careful:
                    raise _NotFresh
                raise ConcurrencyConflict(fresh[0]["stream"], expected_version, actual)
        targets = [
            json.loads(row["payload"])["retracted_event_id"]
            for row in fresh
            if row["type"] == "event_retracted"
        ]
        if targets:
            batch_ids = {row["event_id"] for row in fresh}
            known = self._stored_types(con, targets)
            missing = [t for t in targets if t not in known and t not in batch_ids]
            if missing:
                raise NotFound(f"event_retracted: no event {missing[0]} to retract")
        positions: dict[str, tuple[int, int]] = {}
        for row in fresh:
            head_seq += 1
            version = heads.get(row["stream"], 0) + 1
            if row["stream_version"] is not None and row["stream_version"] != version:
                if not careful:
                    raise _NotFresh
                raise ConcurrencyConflict(row["stream"], row["stream_version"] - 1, version - 1)
            heads[row["stream"]] = version
            positions[row["event_id"]] = (head_seq, version)
        if fresh:
            # Stamped here, under the writer's lock, so recorded_at never goes backwards in seq order.
            now = self.clock()
            for row in fresh:
                if row["recorded_at"] is None:
                    row["recorded_at"] = now
            self._insert_rows(con, fresh, positions)
        results = []
        for row in rows:
            old = stored.get(row["event_id"])
            if old is None:
                seq, version = positions[row["event_id"]]
                results.append(AppendResult(_uuid_of(row), seq, row["stream"], version))
            else:
                results.append(AppendResult(_uuid_of(row), old[0], old[1], old[2], duplicate=True))
        return results, {row["stream"]: heads[row["stream"]] for row in fresh}

    @staticmethod
    def _stored_types(con: duckdb.DuckDBPyConnection, ids: list[str]) -> dict[str, str]:
        """The event type of each of ``ids`` that is stored. A few ids: one index lookup each
        (a join with a list scans the whole log: 1.8 s in a 100k-event import); many: one
        join."""
        if len(ids) > 64:
            return {
                str(event_id): kind
                for event_id, kind in con.execute(
                    "SELECT event_id, type FROM events "
                    "WHERE event_id IN (SELECT unnest(?::UUID[]))",
                    [ids],
                ).fetchall()
            }
        found = {}
        for i in ids:
            rows = con.execute("SELECT type FROM events WHERE event_id = ?::UUID", [i]).fetchall()
            if rows:
                found[i] = rows[0][0]
        return found

    @staticmethod
    def _insert_rows(
        con: duckdb.DuckDBPyConnection,
        fresh: list[dict[str, Any]],
        positions: dict[str, tuple[int, int]],
    ) -> None:
        if len(fresh) == 1:
            # One event: a parameterised VALUES row binds faster than registering an Arrow table.
            row = fresh[0]
            seq, version = positions[row["event_id"]]
            con.execute(
                f"INSERT INTO events ({', '.join(COLUMNS)}) "
                "VALUES (?, ?::UUID, ?, ?, ?, ?, ?, ?, ?, ?, ?::UUID, ?::UUID, ?, ?::JSON, ?::JSON, ?)",
                [
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
                ],
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
            with suppress(
                duckdb.TransactionException
            ):  # aborted by a conflict: the rollback drops it
                con.unregister("incoming")

    @staticmethod
    def _insert_samples(con: duckdb.DuckDBPyConnection, event_id: UUID, samples: pa.Table) -> None:
        con.register("samples", samples)
        con.execute(
            "INSERT INTO bench_samples SELECT ?::UUID, request_index, ok, ttft_ms, e2e_ms, tpot_ms, "
            "prompt_tokens, output_tokens, itl_ms, error FROM samples",
            [str(event_id)],
        )
        con.unregister("samples")

    # --- reading ------------------------------------------------------------------

    def head(self) -> int:
        """The highest ``seq`` stored (0 for an empty ledger)."""
        with self.connect() as con:
            return int(con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0])

    def stream_version(self, stream: str) -> int:
        """The version of ``stream`` (0 when it has no events)."""
        with self.connect() as con:
            return int(
                con.execute(
                    "SELECT coalesce(max(stream_version), 0) FROM events WHERE stream = ?", [stream]
                ).fetchall()[0][0]
            )

    def read(
        self,
        flt: EventFilter | None = None,
        *,
        after_seq: int = 0,
        types: Iterable[str] | None = None,
        session_id: str | None = None,
        stream: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Event]:
        """Events in ``seq`` order (oldest first unless ``newest_first``), as current models.

        ``flt`` (``ledger.read.model.EventFilter``, the read model's one filter) or the
        keyword filters; they combine with AND; ``types`` matches any of the given type names.
        """
        from ledger.read.model import EventFilter, event_rows

        if flt is None:
            flt = EventFilter(
                types=tuple(types or ()), session_id=session_id, stream=stream, after_seq=after_seq
            )
        with self.connect() as con:
            rows = event_rows(con, flt, COLUMNS, limit=limit, newest_first=newest_first)
        return [row_to_event(dict(zip(COLUMNS, row, strict=True))) for row in rows]

    def get(self, event_id: str | UUID) -> Event:
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
            raise NotFound(
                f"event {event_id} not found (not an event id or an 8+ digit prefix of one)"
            )
        with self.connect() as con:
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

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run one trusted read query (views included) and return an Arrow table."""
        with self.connect() as con:
            return con.sql(sql, params=list(params) if params else None).to_arrow_table()


def _masked_columns(table: pa.Table) -> pa.Table:
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

    schema = _arrow_schema()
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
    at once (``input_checks.stored_payloads``, the bulk import's).
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
