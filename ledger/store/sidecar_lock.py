"""A readers-writer lock between processes on a sidecar file, fair enough for tight append loops.

Why not a polling lock (fasteners, filelock): a writer appending in a tight loop
holds the lock ~95% of the time and re-takes it within a millisecond of
letting go; a competitor that polls every few milliseconds almost never lands
in that gap and starves (the two-writers contract test timed out that way).
A *blocking* ``flock`` is queued by the kernel and woken the moment the lock is
released, so it gets its turn. ``flock`` cannot time out, so the blocking call
runs in a helper thread and the caller waits on it with a timeout; a waiter
that gave up releases the lock as soon as it gets it.

A long-lived holder (``ledger.store``'s kept-open writer) must know when
someone waits, to hand the file over. A waiter therefore also holds a POSIX
record lock (``fcntl.lockf``, shared) on byte 1 of the same file while it
blocks; ``someone_waits`` probes that byte with a non-blocking exclusive record
lock. Record locks and ``flock`` locks are independent on Linux, so the probe
never disturbs the readers-writer lock itself.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from contextlib import suppress
from pathlib import Path

#: What ``acquire`` returns for a reader on read-only storage without a lock file (nothing held).
NO_LOCK = -1


class LockTimeout(Exception):
    """The lock was not had within the timeout."""


def acquire(path: Path, *, shared: bool, timeout_s: float) -> int:
    """Take the lock on ``path`` (created if missing); return the fd to pass to ``release``.

    ``shared``: a reader's lock (many at once); else a writer's (alone).

    Raises:
        LockTimeout: not had within ``timeout_s`` seconds.
        OSError: the lock file cannot be opened (a directory there; a writer on read-only storage).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        # A reader on read-only storage: flock works on a read-only descriptor, and where the
        # lock file cannot even be created no writer can be at work on that storage either.
        if not shared or exc.errno not in (errno.EROFS, errno.EACCES):
            raise
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return NO_LOCK
    operation = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        pass

    granted = threading.Event()
    guard = threading.Lock()
    abandoned = False
    # Tell a long-lived holder that someone waits (it then lets go within its hand-off time).
    fcntl.lockf(fd, fcntl.LOCK_SH, 1, 1)

    def wait_for_it() -> None:
        fcntl.flock(fd, operation)
        with guard:
            if abandoned:
                release(fd)
            else:
                _stop_signalling(fd)
                granted.set()

    threading.Thread(target=wait_for_it, name="ledger-lock-wait", daemon=True).start()
    if granted.wait(timeout_s):
        return fd
    with guard:
        if granted.is_set():
            return fd
        abandoned = True
        _stop_signalling(fd)
    raise LockTimeout(f"{path}: not locked within {timeout_s:g} s")


def _stop_signalling(fd: int) -> None:
    with suppress(OSError):
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 1)


def someone_waits(fd: int) -> bool:
    """True while another process waits in ``acquire`` for the lock held through ``fd``.

    One non-blocking ``fcntl`` call (microseconds): cheap enough to poll every few ms.
    """
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 1)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, 1)
    return False


def release(fd: int) -> None:
    """Let go of a lock taken by ``acquire``."""
    if fd == NO_LOCK:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
