"""Reading a ledger that needs catching up where it cannot be written (docs/reliability.md).

A writer killed mid-session leaves its write-ahead log beside the file and the projections
(``ledger.derive.projections``) behind the log. The next reader normally brings the file up to
date as a writer first (one extra open). Where it cannot write — read-only storage, a folder
or lock file it may not write — that failed in one line and the ledger could not be read at
all. Then the reader works on a private copy instead: the file and its log are copied to a
folder of its own (``TMPDIR``), caught up there, read, and removed when the reader closes.
The user's file is never touched; the copy costs a read of the whole file, in this rare case
only (a crashed writer, then a reader without write access).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def repaired_copy(path: Path, repair: Callable[[Path], None]) -> Path:
    """A caught-up private copy of the ledger at ``path`` (and its write-ahead log);
    ``repair(copy)`` catches it up. The caller removes it with ``remove_copy``.

    Raises:
        OSError: the copy could not be made (no space in ``TMPDIR``).
    """
    folder = Path(tempfile.mkdtemp(prefix="tuneledger-read-"))
    try:
        copy = folder / path.name
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        repair(copy)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return copy


def remove_copy(copy: Path) -> None:
    """Remove a copy made by ``repaired_copy`` (its folder, lock file and all)."""
    shutil.rmtree(copy.parent, ignore_errors=True)
