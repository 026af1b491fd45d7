"""A new ledger linked into place whole, from the empty ledger this process built once.

An empty ledger holds nothing of its own (no id, no time: the tables, the views, the layout's
version and the projections' position), so every new one of the same code is the same file.
Building one binds every view, ~0.1-0.2 s of CPU, most of an ``init``; a process that makes
many paid it each time (the test suite makes over a thousand: a third of some folders' time,
docs/performance.md, *The test suite*). So the second ``init`` of a process builds the empty
ledger once in a scratch folder and keeps its bytes, and every ``init`` from then on writes
them to a scratch file beside the ledger and links it to the ledger's name (``os.link``:
atomic, and never over a file that appeared meanwhile). The first ``init`` builds in place as
before: a command that makes one ledger pays nothing more. Where the bytes cannot be placed
(a file there, a folder that takes no hard link, a write refused), ``place`` says so and the
caller builds in place, as the first one did, with the same errors.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import duckdb

from ledger.store.derived import installed

_lock = threading.Lock()
_inits = 0
#: (the derivation's version, the layout's, DuckDB's) -> the empty ledger's bytes
_built: dict[tuple[str, int, str], bytes | None] = {}


def place(path: Path, layout: int, build: Callable[[Path], None]) -> bool:
    """Link this code's empty ledger at ``path`` (which holds nothing); ``build(scratch)``
    makes one in place, once a process. False where nothing was placed: build in place."""
    global _inits
    key = (installed().version, layout, duckdb.__version__)
    with _lock:
        _inits += 1
        if _inits == 1:
            return False
        if key not in _built:
            _built[key] = _empty(build)
        data = _built[key]
    if data is None:
        return False
    try:
        handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".new")
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.link(scratch, path)
        return True
    except OSError:
        return False
    finally:
        with suppress(OSError):
            os.unlink(scratch)


def _empty(build: Callable[[Path], None]) -> bytes | None:
    """The bytes of an empty ledger built in a scratch folder; None when it left more than one
    closed file (a write-ahead log: not a file to copy)."""
    with tempfile.TemporaryDirectory(prefix="tuneledger-empty-") as folder:
        path = Path(folder) / "empty.duckdb"
        try:
            build(path)
        except Exception:
            return None
        if Path(f"{path}.wal").exists():
            return None
        return path.read_bytes()
