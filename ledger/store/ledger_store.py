"""The append-only event store: one DuckDB file, many processes, one writer at a time.

DuckDB lets one process hold a database file read-write, and lets others read
it only while nobody writes (https://duckdb.org/docs/stable/connect/concurrency). tuneledger works with that
rule in two ways:

- **One-shot** (the default, the CLI): every operation opens the file, does its
  work in one transaction and closes it (with the checkpoint DuckDB runs at close).
  An append projects its events in the same transaction.
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
  behind; the next writer catches them up, and a reader in between derives the
  missing tail on its own connection, writing nothing (a test kills one to check).

A read never writes the file and never runs SQL stored in it: it reads through the
running code's views, made on its own connection (``connect``'s ``views``; the
derivation's ``prepare_read``).

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
one-shot and kept-open stores, and through every write path of ``ledger.write``):

- append is idempotent by ``event_id``: a retry returns the original ``seq``;
  the same id with other content is ``EventIdReused``;
- a batch is atomic: all its events are stored, or none;
- ``expected_version`` conflicts raise ``ConcurrencyConflict``;
- ``seq`` is gapless and in commit order (the head ``seq`` + 1, read or cached
  inside the single writer's hold, never from a non-transactional sequence);
- a writer killed mid-append leaves a valid prefix (DuckDB's WAL); not yet one killed
  inside the checkpoint at close, which DuckDB writes partly in place (a torn block:
  docs/performance.md, *The test suite*);
- rows are never updated or deleted; older schema versions are upcast on read.

The duplicate and stream-head checks do not grow with the ledger: an append
inserts directly and lets the unique indexes on ``event_id`` and ``(stream,
stream_version)`` refuse a retry (then a careful path looks the ids up by
index), and stream heads come from the ``stream_heads`` projection plus the
unprojected tail (zone maps skip the rest of the log).

The modules: ``connection`` (opening, the sidecar lock, the kept-open hold and hand-off),
``schema`` (tables, layout, migrations, the current-file check), ``encoding`` and
``payloads`` (events as rows and back), ``careful`` and ``columns`` (the write paths),
``reading`` (the read API), ``derived`` (the hook the derived tables come through),
``results``; this one puts them together as ``LedgerStore``. The store only stores: the
rules of what may be written are ``ledger.write``'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

import duckdb

from ledger.errors import InvalidInput, NotFound
from ledger.store import careful, columns, ledger_file, reading, schema, sidecar_lock, template
from ledger.store.connection import (
    HELD,
    MAX_LAG,
    WRITER_HOLD_S,
    Held,
    acquire,
    lock_for,
    open_file,
)
from ledger.store.connection import lock_path as _lock_path
from ledger.store.derived import installed
from ledger.store.encoding import event_row, masked_columns
from ledger.store.gc_pause import no_cyclic_gc
from ledger.store.results import AppendResult, AppendResults
from schemas import Event

if TYPE_CHECKING:
    import pyarrow as pa

#: A batch this large is turned into rows and stored with the cyclic GC off (``gc_pause``):
#: the collector walked the rows and models just made (docs/performance.md).
GC_FREE_BATCH = 100

_T = TypeVar("_T")


class LedgerStore:
    """An append-only ledger in one DuckDB file.

    Args:
        path: the ``.duckdb`` file; created by ``init()``.
        clock: returns the UTC time stamped on events that carry no ``recorded_at``
            (tests pass a fixed clock for deterministic snapshots).
        lock_timeout_s: how long to retry when another process holds the file lock.
        hold_s: 0 (default): open and close the file for every operation (one-shot). Above
            0: keep it open read-write across operations (a long-lived writer: an append costs
            about one commit instead of an open and a close) and let go when idle this many seconds, or
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
        self._lock = lock_for(self.path)
        #: (connection, projected, head) as ``_ensure_schema`` last found them current.
        self._fresh_position: tuple[duckdb.DuckDBPyConnection, int, int] | None = None
        #: id of each open read connection -> what makes more views on it (``read_views``)
        self._reads: dict[int, Callable[[Iterable[str] | str], None]] = {}

    # --- connections ------------------------------------------------------------

    def check_path(self) -> None:
        """Refuse a path that is not (or cannot become) a ledger file, before DuckDB sees it.

        DuckDB opens ``:memory:`` and data-file names (``x.jsonl``, ``x.csv``) as an
        in-memory database: appends would "succeed" and vanish. An existing file must
        carry DuckDB's magic bytes.

        Raises:
            InvalidInput: one line naming the path and what to do instead.
        """
        # DuckDB locks the file with a POSIX record lock, which the kernel drops when the
        # process closes *any* descriptor of that file: reading the header while this process
        # keeps the file open would let another process (DuckDB's shell) open it read-write.
        # A kept-open file was checked when it was opened; the lock keeps one from opening now.
        with self._lock:
            ledger_file.check_ledger_path(self.path, read_header=HELD.get(self._key) is None)

    @contextmanager
    def connect(
        self,
        *,
        read_only: bool = True,
        config: dict[str, Any] | None = None,
        views: Iterable[str] | str | None = None,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work; views read through it are never stale.

        With ``hold_s`` > 0 this is the kept-open read-write connection (opened on first
        use); else the file is opened for this unit of work, retrying while another process
        holds it, and closed after. A sandboxed read (``config``) never runs on a kept-open
        writer's connection: that one is let go first.

        A read never writes the file and never runs SQL stored in it: it reads through this
        code's views, made on its own connection (``views``: the views it reads, as names or
        as the SQL text about to run; None: every view), with external access off; derived
        tables made by other code, or left behind the log by a killed writer, are derived
        again on that connection (the derivation's ``prepare_read``). A kept-open writer's
        connection catches its projections up before a read.

        Raises:
            InvalidInput: the path is not a ledger file (``check_path``).
            NotFound: the file does not exist (read-only open).
            NewerLedger: written by a newer tuneledger.
            LedgerBusy: the lock was not had within ``lock_timeout_s``.
        """
        self.check_path()
        if read_only and not self.path.exists():
            raise NotFound(f"no ledger at {self.path} (create it with `tuneledger init`)")
        with self._lock:
            held = self._held(
                create=not config and (self.hold_reads or not read_only), reading=read_only
            )
            if held is not None and config:
                held.let_go()
                held = None
            if held is None:
                with self._connect_once(read_only, config or {}, views) as con:
                    yield con
                return
            path = None
            if read_only:
                held.catch_up()
                path = held.con.execute("SELECT current_setting('search_path')").fetchall()[0][0]
                self._readable(held, views)
            held.last_used = time.monotonic()
            try:
                yield held.con
            finally:
                if path is not None:  # the writer's own statements create in its schema again
                    with suppress(duckdb.Error):
                        held.con.execute("SET search_path = ?", [path])
                if not read_only:  # the caller may have written anything: re-read what is cached
                    held.refresh()
                held.done()

    def kept_open(self, hold_s: float = WRITER_HOLD_S) -> LedgerStore:
        """A store on the same file that keeps it open for ``hold_s`` after each operation.

        For long-lived writers (runners, plans, a sync): a run of appends costs one open and
        one close instead of one each (a one-shot append opens, checkpoints and closes the
        file). The one-writer rule still holds: another process that waits for the
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
            held = HELD.get(self._key)
            if held is not None:
                held.let_go()

    def _live_held(self) -> Held | None:
        """This file's kept-open connection, let go of where the file at the path is another
        now (removed and made again under this process, as ``rm`` then ``init``): it would
        write where nobody reads, and DuckDB refuses a second attach of the path meanwhile."""
        held = HELD.get(self._key)
        if held is not None and held.replaced():
            with suppress(duckdb.Error, OSError):
                held.let_go()
            return None
        return held

    def _held(self, *, create: bool, reading: bool = False) -> Held | None:
        """This file's kept-open connection in this process (opened now when ``create`` and
        ``hold_s``; for a read, only when the file needs no writing: else None, and the read
        opens it read-only)."""
        held = self._live_held()
        if held is None and create and self.hold_s > 0:
            con, fd = self._open_locked(read_only=False, config={})
            try:
                if reading and not schema.ready(con, self.path):
                    con.close()
                    sidecar_lock.release(fd)
                    return None
                self._ensure_schema(con)
                held = Held(self._key, con, fd, self._lock, self.hold_s)
            except BaseException:
                con.close()
                sidecar_lock.release(fd)
                raise
            HELD[self._key] = held
            held.start_watching()
        return held

    @staticmethod
    def _readable(held: Held, views: Iterable[str] | str | None) -> None:
        """A kept-open writer's connection made to read through this code's views (each
        made once a hold; the file is current: its writer keeps it so)."""
        installed().prepare_read(
            held.con,
            current=True,
            projected=held.projected,
            head=held.projected,
            has_occurred_at=True,
            wanted=views,
            made=held.views,
        )

    @contextmanager
    def _connect_once(
        self,
        read_only: bool,
        config: dict[str, Any],
        views: Iterable[str] | str | None = None,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        if read_only:  # a reader reaches no file but the ledger (a view stored in it could)
            config = {"enable_external_access": False, **config}
        con, fd = self._open_locked(read_only, config)
        try:
            if read_only:
                self._reads[id(con)] = self._prepare_read(con, views)
            yield con
        finally:
            self._reads.pop(id(con), None)
            try:
                con.close()
            finally:
                sidecar_lock.release(fd)

    def _prepare_read(
        self, con: duckdb.DuckDBPyConnection, views: Iterable[str] | str | None
    ) -> Callable[[Iterable[str] | str], None]:
        """A read-only connection made to read the file through this code's views, writing
        nothing: a file of another version or layout, or one a killed writer left behind, is
        read through temporary tables (the derivation's ``prepare_read``). Returns what makes
        more views on it (``read_views``)."""
        current, projected, head = schema.state(con)
        has_occurred_at = True
        if not current:
            schema.check_compatible(con, self.path)  # a newer ledger is refused, not misread
            if not schema.has_table(con, "events"):  # a DuckDB file no tuneledger wrote yet
                schema.create_empty(con)
            has_occurred_at = schema.has_column(con, "events", "occurred_at")
        made: set[str] = set()

        def prepare(wanted: Iterable[str] | str | None) -> None:
            installed().prepare_read(
                con,
                current=current,
                projected=projected,
                head=head,
                has_occurred_at=has_occurred_at,
                wanted=wanted,
                made=made,
            )

        prepare(views)
        return prepare

    def read_views(self, con: duckdb.DuckDBPyConnection, views: Iterable[str] | str) -> None:
        """Make the views ``views`` names (names, or SQL text) readable on ``con``, a read
        connection of this store's ``connect`` opened with fewer: a reader that learns what
        it reads as it goes (the TUI's refresh) makes only those."""
        held = HELD.get(self._key)
        if held is not None and held.con is con:
            self._readable(held, views)
            return
        self._reads[id(con)](views)

    def _open_locked(
        self, read_only: bool, config: dict[str, Any]
    ) -> tuple[duckdb.DuckDBPyConnection, int]:
        """Check the path, take the sidecar lock (``_acquire``), then open the file; the lock is
        let go on failure. Every connection of the store is opened here."""
        self._live_held()  # one held on a file removed since is let go first
        self.check_path()
        fd = self._acquire(shared=read_only)
        try:
            return self._open(read_only, config), fd
        except BaseException:
            sidecar_lock.release(fd)
            raise

    def _acquire(self, *, shared: bool) -> int:
        """Take the sidecar lock (``connection.acquire``); returns the fd to release."""
        return acquire(self.path, shared=shared, timeout_s=self.lock_timeout_s)

    @property
    def lock_path(self) -> Path:
        """The sidecar lock file next to the ledger (``ledger.duckdb.lock``)."""
        return _lock_path(self.path)

    def _open(self, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        """Open the file (``connection.open_file``: retried while another process holds it)."""
        return open_file(self.path, read_only, config, self.lock_timeout_s)

    # --- set-up -----------------------------------------------------------------------

    def init(self) -> bool:
        """Create the tables and views if needed; refresh views written by older code.

        Returns True when the file was created by this call.
        """
        self.check_path()
        created = ledger_file.nothing_stored(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with ledger_file.removed_on_failure(self.path, created):
            if created:  # this process's empty ledger, linked in whole (``template``)
                template.place(self.path, schema.LAYOUT_VERSION, _build_in_place)
            self._build()  # then cheap where it was placed: the schema is current
        return created

    def _build(self) -> None:
        """Tables, views and projections made, or checked current, in the file."""
        with self.connect(read_only=False) as con:
            self._ensure_schema(con)

    def ensure_current(self) -> None:
        """Bring a ledger written by older code, or left behind by a killed writer, up to date:
        a write (its layout migrated, its views and projections made by this code); cheap when
        it is current (one read-only query). Reads never do this: they read such a file
        through temporary tables and views of their own (``connect``)."""
        if not self.path.exists():
            return
        with self._lock:
            if HELD.get(self._key) is not None:  # a kept-open writer keeps its file current
                return
            con, fd = self._open_locked(read_only=True, config={})
            try:
                ready = schema.ready(con, self.path)
            finally:
                try:
                    con.close()
                finally:
                    sidecar_lock.release(fd)
            if not ready:
                self._repair()

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
        """Tables, views and projections up to date (``schema.ensure_schema``); cheap when they are."""
        fresh = schema.ensure_schema(con, self.path)
        if fresh is not None:
            # what the append about to run on ``con`` would read again (``_position``)
            self._fresh_position = (con, *fresh)

    # --- writing --------------------------------------------------------------------

    def _position(self, con: duckdb.DuckDBPyConnection, held: Held | None) -> tuple[int, int]:
        """(projected position, head ``seq``) for an append on ``con``: the kept-open writer's
        cached ones, else what ``_ensure_schema`` just read on this connection (one state
        query a one-shot append instead of two), else read now."""
        if held is not None:
            return held.projected, held.head
        checked, self._fresh_position = self._fresh_position, None
        if checked is not None and checked[0] is con:
            return checked[1], checked[2]
        _, projected, head = schema.state(con)
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
                row[careful.EVENT_UUID] = event.event_id
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
            raise careful.twice(ids)
        if expected_version is not None and len({row["stream"] for row in rows}) != 1:
            raise InvalidInput("expected_version needs every event of the batch in one stream")
        return self._writing(
            lambda con, held: careful.write_rows(
                con,
                rows,
                expected_version,
                samples,
                held,
                record,
                position=lambda: self._position(con, held),
                clock=self.clock,
            )
        )

    def _writing(self, write: Callable[[duckdb.DuckDBPyConnection, Held | None], _T]) -> _T:
        """Run ``write(con, held)`` as the file's single writer: on the kept-open connection
        (catching the projections up when ``MAX_LAG`` events wait), or one-shot."""
        if not self.path.exists():
            if self.hold_s == 0:
                return self._creating(write)
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

    def _creating(self, write: Callable[[duckdb.DuckDBPyConnection, Held | None], _T]) -> _T:
        """A one-shot write that creates the file: one connection makes the tables and views
        (as ``init``) and writes, where ``init`` then the write opened and closed the file twice
        (an ``import --create`` of a server log: docs/reliability.md). A failure before the write
        removes the file this made, as ``init``'s does."""
        self.check_path()
        created = ledger_file.nothing_stored(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            with ledger_file.removed_on_failure(self.path, created), ExitStack() as opened:
                con = opened.enter_context(self._connect_once(False, {}))
                self._ensure_schema(con)
                kept = opened.pop_all()  # made: open for the write (a failure closed it first)
            with kept:
                return write(con, None)

    def append_columns(
        self,
        table: pa.Table,
        *,
        record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None = None,
    ) -> AppendResults:
        """Append many events at once, in table order, atomically: the bulk path.

        For the write layer's column paths (``commands.append_table``, ``ledger.write.replicated``). ``table``
        holds ``events`` rows as ``event_row`` makes them, one column each (the
        ``schema.arrow_schema()`` columns; ``seq`` is ignored, ``stream_version`` may be null, a
        null ``recorded_at`` is stamped with the store's clock inside the transaction).
        The text columns are stored as they are: secrets must be masked already.

        One transaction: one narrow query numbers the events (``seq`` from the head, each
        stream's version from its head, by window function), one ``INSERT ... SELECT``
        stores them; no Python object per event. Same guarantees and errors as ``append``:
        anything that may be a retry or a conflict (a stored ``event_id``, a given
        ``stream_version`` that differs) rolls back and takes ``append_rows``'s careful path,
        which stores the new events and words the error. The rules of what may be written
        (a retraction's target, a triage's version) are the write layer's
        (``ledger.write.rules``), checked before.
        ``record(con, results)`` runs inside the transaction (sync bookkeeping).

        Raises:
            EventIdReused, ConcurrencyConflict, LedgerBusy: as ``append``.
        """
        if table.num_rows == 0:
            return AppendResults([], [], [], [])
        # An event_id twice in the batch: the unique index refuses the insert, and the
        # careful path names the error (no check of the whole batch on the fast path).
        return self._writing(
            lambda con, held: columns.write_columns(
                con,
                table,
                held,
                record,
                position=lambda: self._position(con, held),
                clock=self.clock,
            )
        )

    def append_column_chunks(
        self,
        chunks: Iterable[pa.Table],
        *,
        check: columns.Check | None = None,
        threads: int | None = None,
    ) -> AppendResults | None:
        """``append_columns`` for a batch that arrives in parts (the bulk import's validated
        chunks, in file order): each part is checked (``check(con, part)``: the writer's
        rules, run inside the transaction), then numbered, inserted and projected (from its
        own rows: the derivation's ``catch_up`` ``source``) as it comes, so the store works
        while the next parts are validated; one transaction for them all.

        Returns None, with nothing stored, when a part may be a retry or a conflict (an
        ``event_id`` already stored, or twice in the batch) or ``check`` says no: the caller
        then appends the whole batch by ``append_columns``, whose careful path stores the new
        events or words the error. An error raised by ``chunks`` (a bad line) rolls back
        everything and propagates.

        ``threads``: DuckDB's threads while the parts arrive (None: as configured), e.g. the
        cores the validation workers leave; the commit, after the last part, runs as
        configured: on 2 cores one thread took less CPU than two, and no more wall time
        (docs/performance.md).

        Raises:
            LedgerBusy: as ``append``; whatever ``chunks`` raises.
        """
        try:
            return self._writing(
                lambda con, held: columns.write_column_chunks(
                    con, chunks, held, threads, self.clock, check
                )
            )
        except (duckdb.ConstraintException, careful.NotFresh):
            return None

    def append_replicated(
        self,
        rows: Sequence[dict[str, Any]] | pa.Table,
        *,
        record: Callable[[duckdb.DuckDBPyConnection, AppendResults], None] | None = None,
    ) -> AppendResults:
        """Append events pulled from a sync hub, in the given (hub) order, atomically.

        For ``ledger.write.replicated`` (sync's pull), which checks the rows first. ``rows``: an Arrow table of ``events`` columns as
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
            LedgerBusy: the file stayed locked.
        """
        import pyarrow as pa

        arrow = schema.arrow_schema()
        if isinstance(rows, pa.Table):
            table = rows
        else:
            table = pa.Table.from_pylist(
                [{**row, "seq": None, "stream_version": None} for row in rows], schema=arrow
            )
        table = table.set_column(
            arrow.get_field_index("stream_version"),
            "stream_version",
            pa.nulls(table.num_rows, pa.int64()),
        )
        return self.append_columns(masked_columns(table), record=record)

    # --- reading ------------------------------------------------------------------

    def head(self) -> int:
        """The highest ``seq`` stored (0 for an empty ledger)."""
        return reading.head(self)

    def stream_version(self, stream: str) -> int:
        """The version of ``stream`` (0 when it has no events)."""
        return reading.stream_version(self, stream)

    def read(
        self,
        *,
        after_seq: int = 0,
        types: Iterable[str] | None = None,
        session_id: str | None = None,
        stream: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Event]:
        """Events in ``seq`` order (oldest first unless ``newest_first``), as current models
        (``reading.read``: the keyword filters, combined with AND)."""
        return reading.read(
            self,
            after_seq=after_seq,
            types=types,
            session_id=session_id,
            stream=stream,
            limit=limit,
            newest_first=newest_first,
        )

    def get(self, event_id: str | UUID) -> Event:
        """The event with this id, or a unique prefix of 8+ hex digits (``reading.get``).

        Raises:
            NotFound: no such event (exit 5).
            InvalidInput: the prefix is ambiguous (exit 3).
        """
        return reading.get(self, event_id)

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run one trusted read query (views included) and return an Arrow table."""
        return reading.query_arrow(self, sql, params)


def _build_in_place(path: Path) -> None:
    """An empty ledger at ``path``, built there (``template``'s one build a process)."""
    LedgerStore(path)._build()
