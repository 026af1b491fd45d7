"""Threads of ours still running when the test session ends: the exit abort's cause, found.

Python 3.11 ends a daemon thread that takes the GIL back during the interpreter's shutdown with
``pthread_exit``; when that thread was inside a C++ extension's ``catch (...)`` (DuckDB's, in a
query), the unwinding aborts the process after pytest's summary (``FATAL: exception not
rethrown``, exit 134: ``make`` said "Aborted"). A thread of ours that is still running at the
end (a kept-open ledger's watcher catching up, an MCP job appending) is where that can happen,
and a non-daemon one would hang the exit instead. So the session ends as the interpreter's exit
would (kept-open ledgers let go: ``ledger.store.connection.let_go_all``), gives our threads a
moment to see it, and fails naming each one still running and where it is
(``tests/conftest.py``'s ``pytest_sessionfinish``; under pytest-xdist each worker reports its
own to the controller).

"Ours": a thread with a frame in the project's code (ledger/, runners/, tui/, schemas/,
tests/). Threads of libraries (tqdm's monitor, asyncio's executors idle in the standard
library) are not: they wait in Python, never inside DuckDB.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Where the project's code lives: a thread with a frame in one of these is ours.
OURS = tuple(str(ROOT / part) + "/" for part in ("ledger", "runners", "tui", "schemas", "tests"))
#: How long the threads of ours get to end once the ledgers are let go (the watchers wake every
#: 5 ms: ``ledger.store.connection.WATCH_INTERVAL_S``).
GRACE_S = 5.0


def _where(thread: threading.Thread) -> str | None:
    """The innermost frame of ours of ``thread`` (``file:line``), or None when it has none."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(OURS):
            return f"{Path(frame.f_code.co_filename).relative_to(ROOT)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def running() -> list[str]:
    """Each thread of ours alive now but the calling one: ``name (daemon) at file:line``."""
    found = []
    for thread in threading.enumerate():
        if thread is threading.current_thread() or not thread.is_alive():
            continue
        where = _where(thread)
        if where is not None:
            kind = "daemon" if thread.daemon else "non-daemon"
            found.append(f"{thread.name} ({kind}) at {where}")
    return found


def left_at_exit(grace_s: float = GRACE_S) -> list[str]:
    """Let go of the kept-open ledgers as the exit will, then the threads of ours still running
    after ``grace_s`` (an empty list: the exit has nothing of ours to cut short)."""
    from ledger.store import connection

    connection.let_go_all()
    deadline = time.monotonic() + grace_s
    while (left := running()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return left
