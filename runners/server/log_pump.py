"""A server's output into its artifacts log with secrets masked (issue 26, point 4).

A server prints its secrets: SGLang logs ``server_args=ServerArgs(... api_key='sk-proj-…')``
at start-up, a crash can print its environment. The server runner gave the server the log
file itself as stdout and stderr, so the artifacts log (``<ledger>.artifacts/servers/``) kept
them in clear, though the ledger masked them. Now the server writes into a pipe and this small
process writes each line to the log with ``schemas.secrets.mask_text`` applied, as the ledger
stores text.

Run as ``python -m runners.server.log_pump LOG`` with the server's output on standard input;
it ends when the server and every process that shares its output (tensor-parallel workers)
have closed it. It runs in a session of its own, like the server, so that neither a Ctrl-C in
the terminal nor the runner's end stops it before the server's last lines are written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

from schemas.secrets import mask_text, may_hold_secret

#: The longest piece written at once: a line without a newline for longer (a progress bar
#: drawn with carriage returns) is written in pieces of this size.
MAX_LINE_BYTES = 1 << 20


def pump(source: BinaryIO, log_path: Path) -> None:
    """Copy ``source`` to the end of ``log_path`` line by line, secrets masked, each line
    flushed as it comes (the runner reads the log while the server runs)."""
    with open(log_path, "ab", buffering=0) as log:
        while True:
            line = source.readline(MAX_LINE_BYTES)
            if not line:
                return
            text = line.decode("utf-8", "surrogateescape")
            if may_hold_secret(text):
                text = mask_text(text)
            log.write(text.encode("utf-8", "surrogateescape"))


if __name__ == "__main__":
    pump(sys.stdin.buffer, Path(sys.argv[1]))
