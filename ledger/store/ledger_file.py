"""Checks on the ledger file before and after DuckDB opens it: names, versions, damage, storage.

The store calls these from its open path (``LedgerStore.check_path``, ``_open``,
``_ensure_schema``, ``ensure_current``) so that every command gets the same answers:

- a name DuckDB would treat as something else (``md:x`` is MotherDuck, ``http://…`` and
  ``s3://…`` load extensions and fetch) is refused before DuckDB sees it;
- a symlink loop, a directory where the lock file goes, an empty, truncated or corrupted
  file: one line, exit 3;
- a ledger written by a newer tuneledger (a ``layout_version`` in ``ledger_meta`` above this
  code's, or an ``events`` table with columns this code does not know) is refused (exit 3)
  naming both versions, and never rewritten;
- the file system refusing (no space left, read-only, I/O error): ``StorageError``, exit 15.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import InvalidInput, LedgerError, StorageError
from ledger.store.safe_files import file_kind

if TYPE_CHECKING:  # DuckDB itself is imported where it is used: `check_ledger_path` needs none
    import duckdb

#: ``scheme:`` prefixes: DuckDB reads ``md:``/``motherduck:`` as MotherDuck and ``http(s)://``,
#: ``s3://``, ``gcs://``, ``hf://``… through extensions it would try to install and load.
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

#: Phrases of DuckDB errors that mean the file is not a (whole) DuckDB database.
_DAMAGED = (
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Corrupt database file",
    "database file with version number",
    "checksum",
    "Serialization Error",
)
#: Phrases of DuckDB/OS errors that mean the storage refused.
_STORAGE = (
    "No space left on device",
    "Read-only file system",
    "Disk quota exceeded",
    "Input/output error",
    "Permission denied",
)


class NewerLedger(InvalidInput):
    """The ledger was written by a newer tuneledger (or has a layout this code does not know)."""


def check_name(path: Path) -> None:
    """Refuse a ledger path that DuckDB would not open as a local file, and symlink loops.

    Raises:
        InvalidInput: a ``scheme:`` name (``md:x``, ``http://h/x.duckdb``), or a symlink loop.
    """
    name = str(path)
    if _SCHEME_RE.match(name):
        raise InvalidInput(
            f"{name}: not a local ledger file name (DuckDB would read it as a URL or a service; "
            f"to use a file of that name give ./{name})"
        )
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInput(f"{name}: symlink loop, not a ledger file") from None
        return
    # A device, a FIFO or a socket is no ledger: DuckDB would fail on it with a traceback
    # (``--ledger /dev/null``: "Could not fsync"), and its lock file would go next to it
    # (/dev/null.lock).
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else file_kind(mode)
        raise InvalidInput(f"{name}: {what}, not a ledger file (a ledger is a regular file)")


#: File suffixes DuckDB treats as data to scan, not as a database to open.
DATA_SUFFIXES = frozenset(
    {".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet", ".txt", ".log", ".xlsx"}
)


def check_ledger_path(path: Path, *, read_header: bool = True) -> None:
    """Refuse a path that is not (or cannot become) a ledger file, before DuckDB sees it
    (``LedgerStore.check_path``; here without DuckDB, so a front end checks its ledger at start
    without importing it: docs/mcp.md, Start-up).

    DuckDB opens ``:memory:`` and data-file names (``x.jsonl``, ``x.csv``) as an in-memory
    database: appends would "succeed" and vanish. An existing file must carry DuckDB's magic
    bytes (``read_header``: False while this process keeps the file open, see
    ``LedgerStore.check_path``).

    Raises:
        InvalidInput: one line naming the path and what to do instead.
    """
    name = str(path)
    check_name(path)  # md:, http://, a symlink loop
    if name.startswith(":") or path.suffix.lower() in DATA_SUFFIXES:
        raise InvalidInput(
            f"{name}: not a ledger file name (use e.g. ledger.duckdb; to load JSONL events "
            "use `tuneledger append < FILE`, to import tool outputs `tuneledger import FILE`)"
        )
    if path.is_dir():
        raise InvalidInput(f"{name}: is a directory, not a ledger file")
    if read_header and path.exists() and path.stat().st_size:
        with path.open("rb") as handle:
            header = handle.read(12)
        if header[8:12] != b"DUCK":
            raise InvalidInput(f"{name}: not a DuckDB ledger file")


def open_error(path: Path, exc: duckdb.Error) -> LedgerError | None:
    """The one-line ledger error for a DuckDB error met opening or reading ``path``, or None.

    Damage (not a DuckDB file, truncated, checksum mismatch) is ``InvalidInput`` (exit 3);
    the storage refusing is ``StorageError`` (exit 15). None: not one of those (re-raise it).
    """
    text = str(exc)
    first = text.splitlines()[0] if text else type(exc).__name__
    if any(phrase in text for phrase in _STORAGE):
        return StorageError(f"{path}: {first}")
    if any(phrase in text for phrase in _DAMAGED):
        return InvalidInput(f"{path}: damaged or not a ledger file ({first})")
    return None


def query_damage(path: Path, exc: BaseException) -> LedgerError | None:
    """``open_error`` for a DuckDB error met at any time, a query's included: a block whose
    checksum fails is read only when a query reaches it, long after the file opened
    ("Corrupt database file: computed checksum … does not match stored checksum … in block at
    location …"); DuckDB's internal and serialisation errors while reading are reported as
    possible damage, naming DuckDB's message, never as a traceback. None: not one of those."""
    import duckdb

    if not isinstance(exc, duckdb.Error):
        return None
    known = open_error(path, exc)
    if known is not None:
        return known
    if isinstance(exc, (duckdb.InternalException, duckdb.SerializationException)):
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        return InvalidInput(
            f"{path}: DuckDB failed reading the ledger, it may be damaged ({first})"
        )
    return None


def storage_error(exc: BaseException, path: Path | None = None) -> StorageError | None:
    """``StorageError`` when ``exc`` says the storage refused (no space, read-only, I/O), else None.

    The message is ``exc``'s first line (DuckDB's names the file), prefixed with ``path`` if given.
    """
    prefix = f"{path}: " if path is not None else ""
    if isinstance(exc, OSError) and exc.errno in (
        errno.ENOSPC,
        errno.EROFS,
        errno.EDQUOT,
        errno.EIO,
    ):
        return StorageError(f"{prefix}{exc.strerror}")
    text = str(exc)
    if any(phrase in text for phrase in _STORAGE):
        first = text.splitlines()[0]
        return StorageError(f"{prefix}{first}; what was appended before is kept")
    return None


def lock_error(lock_path: Path, exc: OSError) -> LedgerError:
    """The one-line error for the sidecar lock file that cannot be opened."""
    if exc.errno == errno.EISDIR:
        return InvalidInput(
            f"{lock_path}: is a directory; the ledger's lock file goes there (remove or rename it)"
        )
    if exc.errno == errno.ELOOP:
        return InvalidInput(f"{lock_path}: symlink loop where the ledger's lock file goes")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return StorageError(
            f"{lock_path}: {exc.strerror} (writing the ledger needs write access to its folder)"
        )
    return storage_error(exc, lock_path) or InvalidInput(
        f"{lock_path}: cannot open the lock file: {exc.strerror}"
    )


def nothing_stored(path: Path) -> bool:
    """True when ``path`` holds no ledger yet: no file, or an empty one with no write-ahead log
    (what an ``init`` cut short by a full disk left before this code removed it). An empty file
    is removed here, so ``init`` creates the ledger instead of calling it damaged."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return True
    except OSError:
        return False  # check_path has said what is wrong with it
    if size or os.path.exists(f"{path}.wal"):
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return True


@contextlib.contextmanager
def removed_on_failure(path: Path, created: bool) -> Iterator[None]:
    """Remove the ledger file (and its write-ahead log) that this ``init`` created, when the
    init fails: a full disk left a partial file that the retry then called damaged. A file
    that was there before is never touched."""
    try:
        yield
    except BaseException:
        if created:
            for leftover in (path, Path(f"{path}.wal")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        raise


def _version(value: str | None, what: str, path: Path) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise NewerLedger(
            f"{path}: unknown ledger layout ({what} {value!r} in ledger_meta)"
        ) from None


def check_compatible(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    views_version: str,
    layout_version: int,
    columns: tuple[str, ...],
) -> None:
    """Refuse a ledger this code must not read or rewrite: written by a newer tuneledger.

    Reads ``ledger_meta.layout_version`` and the ``events`` columns. A file without them (new,
    or older code) passes: the caller creates or upgrades it. ``views_version`` is a digest of
    the view SQL (``ledger.derive.views.views_version``), not an order: a different one only means the
    views and projections (a cache of the log) are rebuilt, so it is not compared here (a number
    is an older tuneledger's hand-bumped one). An event of a newer schema version (pulled from a
    newer host) is refused where it is read, naming it, not by refusing the whole file.

    Raises:
        NewerLedger: a layout version above this code's (names both), a layout version that is
            not a number, or ``events`` columns not in ``columns``.
    """
    import duckdb

    try:
        meta = dict(con.execute("SELECT key, value FROM ledger_meta").fetchall())
    except duckdb.CatalogException:
        meta = {}
    stored_layout = _version(meta.get("layout_version"), "layout_version", path)
    if stored_layout is not None and stored_layout > layout_version:
        raise NewerLedger(
            f"{path}: written by a newer tuneledger (layout version {stored_layout}; this one knows up to "
            f"{layout_version}): upgrade tuneledger to use it"
        )
    stored_columns = tuple(
        row[0]
        for row in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'events' AND schema_name = 'main' "
            "AND database_name = current_database() ORDER BY column_index"
        ).fetchall()
    )
    # Columns this code does not know mean a newer layout; missing ones are an older layout's,
    # which the store's migrations add.
    extra = [c for c in stored_columns if c not in columns]
    if extra:
        raise NewerLedger(
            f"{path}: unknown ledger layout (events table: unknown column(s) {', '.join(extra)}); "
            "this tuneledger cannot use it"
        )
