"""The analysis of an engine build, kept on disk by the build's hash.

A wheel analysed once is read back in a second or two. The key is the wheel's SHA-256 (a
folder's: its files' names, sizes and times) and the index format, so a rebuilt wheel or a
newer tuneledger never reads a stale entry. Entries are written atomically; an unreadable one
is ignored and rebuilt. Two processes that need the same build at once (an MCP server beside a
CLI, two test workers) build it once, and download its wheel once: the second waits on the
first's lock and reads what it left.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .index import INDEX_FORMAT, VersionIndex


def cache_dir() -> Path:
    configured = os.environ.get("TUNELEDGER_RESEARCH_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tuneledger" / "research"


def _entry(directory: Path, engine: str, version: str, key: str) -> Path:
    safe_version = "".join(c if c.isalnum() or c in ".-+" else "_" for c in version)
    return directory / f"{engine}-{safe_version}-{key[:24]}-f{INDEX_FORMAT}.pickle"


@contextmanager
def building(engine: str, version: str, key: str, directory: Path | None = None) -> Iterator[None]:
    """Held while this process builds the entry."""
    with held(_entry(directory or cache_dir(), engine, version, key).with_suffix(".lock")):
        yield


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """An exclusive lock on the file ``lock``, waited for; a folder that cannot hold the lock
    file goes without one, as a cache that cannot be written is skipped."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = lock.open("w")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle closes, or the process ends
        yield


def load(engine: str, version: str, key: str, directory: Path | None = None) -> VersionIndex | None:
    path = _entry(directory or cache_dir(), engine, version, key)
    try:
        with path.open("rb") as handle:
            index = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError):
        return None
    if not isinstance(index, VersionIndex) or index.key != key or index.format != INDEX_FORMAT:
        return None
    return index


def store(index: VersionIndex, directory: Path | None = None) -> Path | None:
    """Write the index; a cache that cannot be written is skipped, never an error."""
    folder = directory or cache_dir()
    path = _entry(folder, index.engine, index.version, index.key)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pickle")
        with os.fdopen(handle, "wb") as out:
            pickle.dump(index, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
    except OSError:
        return None
    return path
