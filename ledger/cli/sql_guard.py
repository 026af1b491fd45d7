"""Hard limits for the ``sql`` command's own process (docs/reliability.md).

The SQL console's fences inside DuckDB (``ledger.read.sql_sandbox``: read-only, no file
access, DuckDB's memory limit, ``--timeout`` as an interrupt) leave two ways for one query to
run away: memory DuckDB allocates outside its buffer pool (``SELECT repeat('x', 2000000000)``
builds a 2 GB string: DuckDB's ``memory_limit`` does not count it; it ran 44 s at 3.9 GB), and
work that never checks for an interrupt (the same ``repeat`` is one call that cannot be
interrupted). When this process is the command's own (the console script, not a test or the
TUI calling in), ``sql`` therefore also

- caps the process's data memory (``RLIMIT_DATA``: heap and private writable mappings) at
  what it uses before the query plus ``HEADROOM_BYTES``: an allocation past it fails at once,
  and DuckDB reports it as its "Out of Memory Error" (one line, exit 14);
- ends the process ``GRACE_S`` after ``--timeout`` if the interrupt has not stopped the
  query by then, with the timeout's one line and exit 14. The query only reads: ending the
  process loses nothing (the kernel lets go of the file and its lock).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Set by ``ledger.cli.main.run`` (the console script): this process exists for one command.
PROCESS_OWNED = [False]
#: Data memory a query may add to the process (DuckDB's memory limit, a batch of the result
#: and the printing, with room to spare), below the 2 GB a single ``repeat`` asks for.
HEADROOM_BYTES = 3 * 2**29
#: Seconds past ``--timeout`` an uninterruptible query is given before the process ends.
GRACE_S = 1.0


def _data_bytes() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def limit_memory() -> None:
    """Cap this process's data memory at its use now plus ``HEADROOM_BYTES`` (own process only;
    a lower limit set by the user is kept)."""
    if not PROCESS_OWNED[0]:
        return
    import resource

    used = _data_bytes()
    if used is None:  # not Linux: DuckDB's own memory limit is the only one
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = used + HEADROOM_BYTES
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or cap < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


@contextmanager
def hard_deadline(timeout_s: float | None, message: str) -> Iterator[None]:
    """End this process with ``message`` and exit 14 if the block runs ``GRACE_S`` past
    ``timeout_s`` (own process only; None or 0: no deadline)."""
    if not PROCESS_OWNED[0] or not timeout_s:
        yield
        return

    def end() -> None:
        os.write(2, f"tuneledger: error: {message}\n".encode())
        os._exit(14)

    timer = threading.Timer(timeout_s + GRACE_S, end)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
