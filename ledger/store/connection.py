"""Connections to the ledger file: opening it (retried while another process holds it), the
sidecar lock around every connection, and the kept-open writer's hold and hand-off.

DuckDB lets one process hold a database file read-write, and lets others read it only while
nobody writes. A kept-open connection (``Held``) is the file held read-write by this process
across operations; a watcher thread lets go of it when the process has been idle for
``hold_s``, or within ``HANDOFF_S`` once another process waits for the file (it sees the
waiter through the sidecar lock, ``sidecar_lock.someone_waits``), catching the projections
up first. See ``ledger.store.ledger_store`` for the whole picture.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import duckdb

from ledger.errors import LedgerBusy
from ledger.store import ledger_file, sidecar_lock
from ledger.store.derived import installed
from ledger.store.schema import state

#: How often a kept-open connection's watcher looks for a process waiting for the file (s).
WATCH_INTERVAL_S = 0.005
#: A kept-open writer idle this long catches its projections up (s).
IDLE_CATCH_UP_S = 0.02
#: A kept-open writer catches up at once when this many events wait to be projected: bounds
#: the work left for the hand-off (a batch's cost is mostly per statement, not per row:
#: docs/performance.md).
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


class Held:
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
        #: the file opened (device, inode): another file at the path is not this connection's
        self.file = file_id(key)
        self.heads: dict[str, int] = {}
        #: the views made on the connection for reads through it (``LedgerStore._readable``)
        self.views: set[str] = set()
        self.projected = self.head = 0
        self.closed = False
        self.last_used = time.monotonic()
        self.refresh()

    def refresh(self) -> None:
        """Re-read the positions (after a caller used the connection for anything)."""
        _, self.projected, self.head = state(self.con)
        self.heads.clear()

    def catch_up(self) -> None:
        """Project the events appended since the last catch-up (one transaction)."""
        if self.closed or self.head <= self.projected:
            return
        self.con.execute("BEGIN")
        try:
            self.projected = installed().catch_up(self.con, self.projected)
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
        if HELD.get(self.key) is self:
            del HELD[self.key]
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

    def replaced(self) -> bool:
        """The file at the path is not the one held any more (removed, or another put there,
        as a new ``init`` after deleting the old one): what this connection writes would go to
        a file nobody reads."""
        return file_id(self.key) != self.file

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


HELD: dict[str, Held] = {}


def file_id(path: str) -> tuple[int, int] | None:
    """The file at ``path`` as (device, inode); None where there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


@atexit.register
def let_go_all() -> None:
    """At interpreter exit: catch up and close every kept-open connection (no stale views left)."""
    for held in list(HELD.values()):
        with held.lock, suppress(Exception):
            held.let_go()


_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()


#: Rows per row group that a writer gives DuckDB (its default: 122,880). A large append's full
#: row groups are compressed and written while the transaction goes on ("optimistic writes",
#: one row group at a time: ``write_buffer_row_group_count``), so a large import's commit no
#: longer compresses them all at the end: the compression is done meanwhile, beside the
#: validation workers (docs/performance.md). A multiple of DuckDB's vector (2,048 rows).
ROW_GROUP_ROWS = 16_384


def connect_file(path: Path, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
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


def lock_for(path: Path) -> threading.RLock:
    key = os.path.realpath(path)  # not Path.resolve(): it raises on a symlink loop (refused later)
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


def is_lock_error(exc: BaseException) -> bool:
    """True for DuckDB's "Could not set lock on file" (another process holds the file)."""
    if not isinstance(exc, duckdb.Error):
        return False
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def lock_path(path: Path) -> Path:
    """The sidecar lock file next to the ledger (``ledger.duckdb.lock``)."""
    return path.with_name(path.name + ".lock")


def acquire(path: Path, *, shared: bool, timeout_s: float) -> int:
    """Take ``<ledger>.lock`` (shared for readers, exclusive for writers) before a connection.

    DuckDB's own lock on the database file is not enough: under heavy load the
    racing-writers contract test saw two writers both commit the same ``seq``
    (one commit lost), as if the second opened the file before the first's
    close had finished with the write-ahead log. This lock is taken before
    ``duckdb.connect`` and released only after ``close()`` has returned, so
    tuneledger processes never overlap on the file. Returns the fd to release.

    Raises:
        LedgerBusy: not had within ``timeout_s``.
    """
    try:
        return sidecar_lock.acquire(lock_path(path), shared=shared, timeout_s=timeout_s)
    except OSError as exc:
        raise ledger_file.lock_error(lock_path(path), exc) from None
    except sidecar_lock.LockTimeout:
        raise LedgerBusy(
            f"ledger {path} stayed locked by another process for {timeout_s:g} s"
        ) from None


def open_file(
    path: Path, read_only: bool, config: dict[str, Any], timeout_s: float
) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``, retried with jittered backoff while another process holds the file.

    Raises:
        LedgerBusy: still locked after ``timeout_s``.
    """
    try:
        return connect_file(path, read_only, config)
    except duckdb.Error as exc:
        if not is_lock_error(exc):
            raise ledger_file.open_error(path, exc) or exc from None
    # tenacity only now: most opens succeed at once, and its import costs a CLI call time.
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

    retrying = Retrying(
        retry=retry_if_exception(is_lock_error),
        wait=wait_random_exponential(multiplier=0.002, max=0.05),
        stop=stop_after_delay(timeout_s),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                return connect_file(path, read_only, config)
    except duckdb.Error as exc:
        if is_lock_error(exc):
            raise LedgerBusy(
                f"ledger {path} stayed locked by another process for {timeout_s:g} s"
            ) from exc
        raise ledger_file.open_error(path, exc) or exc from None
    raise AssertionError("unreachable")  # pragma: no cover
