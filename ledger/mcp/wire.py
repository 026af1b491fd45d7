"""Standard input of the MCP stdio server, read in lines of a bounded size.

The SDK's ``stdio_server`` reads its standard input with ``TextIOWrapper.readline``, which holds
a whole line however long it is: a client that sends a gigabyte without a newline grows the
server's memory without bound (under a 3 GiB address-space limit: a ``MemoryError``). Here
standard input is read in chunks and a line is held only up to ``MAX_MESSAGE_BYTES``; past
that, the rest of the line is read and dropped as it streams, and the line is handed to the
SDK as ``OVER_LONG``, which ``ledger.mcp.server.malformed_answer`` answers with a JSON-RPC
parse error (``id`` null). The server goes on serving the next line.

The bound is the 8 MiB of the ``sql`` answer cap (``ledger.read.sql_sandbox.MAX_ANSWER_BYTES``):
no tool's arguments need more (the longest are a record tool's event, a few KB).
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import anyio.to_thread

#: The longest message line the server reads, in bytes (its newline not counted).
MAX_MESSAGE_BYTES = 8 << 20

#: Handed to the SDK in place of a line past the bound: not JSON, so the SDK's parse of it fails
#: and the failure reaches ``answer_malformed``, which tells it apart by this text.
OVER_LONG = "\x00tuneledger: a message line longer than the bound"

#: How much one read takes off the descriptor.
CHUNK_BYTES = 256 * 1024


class BoundedLines:
    """The lines of descriptor ``fd`` as text (UTF-8, undecodable bytes replaced, as the SDK
    reads them), each at most ``limit`` bytes; a longer one is dropped as it streams and comes
    out as ``OVER_LONG``. Iterated by the SDK's ``stdio_server`` in place of its own reader."""

    def __init__(self, fd: int, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._fd = fd
        self._limit = limit
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already searched for a newline
        self._skipping = False  # inside a line past the bound: drop until its newline
        self._eof = False

    def __bool__(self) -> bool:
        return True  # the SDK takes a stream it was given only when it is truthy

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = self._take()
            if line is not None:
                return line
            if self._eof:
                raise StopAsyncIteration
            # abandoned on cancel: the server going away must not wait for the client's next byte
            chunk = await anyio.to_thread.run_sync(
                os.read, self._fd, CHUNK_BYTES, abandon_on_cancel=True
            )
            if not chunk:
                self._eof = True
            self._buf += chunk

    def _take(self) -> str | None:
        """The next whole line held in the buffer (the last one at end of input), or None when
        more must be read."""
        buf = self._buf
        newline = buf.find(b"\n", self._scanned)
        if newline < 0:
            if self._skipping or len(buf) > self._limit:
                self._skipping = True
                buf.clear()
                self._scanned = 0
                if self._eof:
                    self._skipping = False
                    return OVER_LONG
                return None
            self._scanned = len(buf)
            if self._eof and buf:
                return self._cut(len(buf))
            return None
        if self._skipping or newline > self._limit:
            del buf[: newline + 1]
            self._scanned = 0
            self._skipping = False
            return OVER_LONG
        return self._cut(newline + 1)

    def _cut(self, end: int) -> str:
        line = bytes(self._buf[:end]).decode("utf-8", errors="replace")
        del self._buf[:end]  # a bytearray drops its head without moving the rest
        self._scanned = 0
        return line


@contextmanager
def claimed_stdin() -> Iterator[int]:
    """Standard input moved to a private descriptor while the server reads it, the null device
    put on descriptor 0 meanwhile (as the SDK does with the standard input it reads itself: a
    handler or a child process reads end of input, never the client's messages); put back after.

    The private descriptor is never closed: a reader thread abandoned at shutdown may still be
    blocked on it, and a closed number could be reused under it."""
    try:
        wire_fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        wire_fd = 0
    private = fcntl.fcntl(wire_fd, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, wire_fd)
    finally:
        os.close(null)
    try:
        yield private
    finally:
        os.dup2(private, wire_fd)
