"""A server's output into its artifacts log with secrets masked (docs/reliability.md).

A server prints its secrets: SGLang logs ``server_args=ServerArgs(... api_key='sk-proj-…')``
at start-up, a crash can print its environment. The server runner gave the server the log
file itself as stdout and stderr, so the artifacts log (``<ledger>.artifacts/servers/``) kept
them in clear, though the ledger masked them. Now the server writes into a pipe and this small
process writes each line to the log with ``schemas.secrets.mask_text`` applied, as the ledger
stores text.

The runner reads the log while the server runs (start-up facts once it is healthy, findings
later), so it must know when the log holds everything the server wrote so far: it writes
``SYNC`` into the same pipe (after whatever the server wrote before it: a pipe keeps order;
one write of a few bytes is atomic), and the pump, once every complete line before it is in
the log, answers with one byte on its standard output (``ServerRunner._lines``). A ``SYNC``
that lands inside a server's line is taken out and the line kept whole.

Run as ``python -m runners.server.log_pump LOG``; it ends when every writer of the pipe (the
server, its tensor-parallel workers, the runner) has closed it. It runs in a session of its
own, like the server, so that a Ctrl-C in the terminal does not end it before the server's
last lines are written.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

from schemas.secrets import mask_text, may_hold_secret

#: What the runner writes into the pipe to ask for an answer once the log has caught up.
SYNC = b"\x00tuneledger-log-sync\x00"
#: The most bytes of a line held back waiting for its end: a longer line without a newline
#: (a progress bar drawn with carriage returns) is written in pieces of this size.
MAX_LINE_BYTES = 1 << 20


def _masked(data: bytes) -> bytes:
    text = data.decode("utf-8", "surrogateescape")
    if may_hold_secret(text):
        text = mask_text(text)
    return text.encode("utf-8", "surrogateescape")


def pump(source_fd: int, log_path: Path, answer_fd: int | None = None) -> None:
    """Copy what ``source_fd`` delivers to the end of ``log_path`` line by line, secrets
    masked, each line written as it completes; answer each ``SYNC`` on ``answer_fd``."""
    pending = b""
    with open(log_path, "ab", buffering=0) as log:
        while True:
            chunk = os.read(source_fd, 1 << 16)
            if not chunk:
                if pending:
                    log.write(_masked(pending))
                return
            pending += chunk
            syncs = 0
            while SYNC in pending:
                before, after = pending.split(SYNC, 1)
                pending = before + after  # a line the sync landed in stays whole
                syncs += 1
            # a sync's bytes split across two reads: keep the start of it for the next read
            keep = next((n for n in range(len(SYNC) - 1, 0, -1) if pending.endswith(SYNC[:n])), 0)
            body, held = (pending[:-keep], pending[-keep:]) if keep else (pending, b"")
            cut = body.rfind(b"\n") + 1
            if cut == 0 and len(body) > MAX_LINE_BYTES:
                cut = len(body)
            if cut:
                log.write(_masked(body[:cut]))
            pending = body[cut:] + held
            if syncs and answer_fd is not None:
                try:
                    os.write(answer_fd, b"\n" * syncs)
                except OSError:  # the runner is gone: the log goes on all the same
                    answer_fd = None


# --- the runner's side ------------------------------------------------------------------------

#: Seconds to wait for the pump to catch up with what a running server wrote.
SYNC_S = 5.0
#: Seconds to wait, once a server has exited, for the pump to write the last lines.
DRAIN_S = 10.0


def start(log_path: Path) -> subprocess.Popen[bytes] | None:
    """The pump for ``log_path``, waiting on its standard input (None if it cannot start: the
    server then writes the log directly)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "runners.server.log_pump", str(log_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,  # its answers to ``SYNC``
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def sync(pump: subprocess.Popen[bytes]) -> None:
    """Wait (``SYNC_S`` at most) until the log holds every line the server wrote before now."""
    if pump.stdin is None or pump.stdin.closed or pump.stdout is None:
        return
    try:
        os.write(pump.stdin.fileno(), SYNC)
    except OSError:  # the pump is gone: the log is what it is
        return
    ready, _, _ = select.select([pump.stdout], [], [], SYNC_S)
    if ready:
        os.read(pump.stdout.fileno(), 4096)  # this answer and any earlier ones left unread


def end(pump: subprocess.Popen[bytes]) -> None:
    """Let the pump end once the server's side of the pipe is closed, and wait for its last
    lines (``DRAIN_S`` at most: a worker that outlives the leader holds the pipe)."""
    if pump.stdin is not None and not pump.stdin.closed:
        pump.stdin.close()
    try:
        pump.wait(timeout=DRAIN_S)
    except subprocess.TimeoutExpired:
        return
    if pump.stdout is not None and not pump.stdout.closed:
        pump.stdout.close()


if __name__ == "__main__":
    pump(0, Path(sys.argv[1]), 1)
