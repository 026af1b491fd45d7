"""Errors of the ledger, each with a stable process exit code for the CLI.

Exit codes (stable; coding agents branch on them):

====  ======================================================================
0     success
1     unexpected internal error
2     usage error (bad option; from click), or a command refused because it
      would overwrite or misplace a user's data (``WouldLoseData``)
3     invalid input: unparsable or mistyped event, unknown file format, an
      event id prefix that names several events
4     concurrency conflict: the stream is not at the expected version
5     not found: no such ledger file or event id
6     refused: a statement the read-only ``sql`` command does not run
7     ledger busy: the file lock could not be had within the timeout
8     event id reused with different content (also: on a sync hub)
9     remote error: a sync hub unreachable, refusing the login, or not initialised
14    a read-only query stopped by its ``--timeout`` or its memory limit (10–13 are the runners')
15    storage error: disk full, read-only file system, I/O error (what was acknowledged is kept)
====  ======================================================================
"""

from __future__ import annotations

#: What each exit code means, as one word (the MCP server's tool errors carry it beside the
#: code, ``ledger.mcp``). 10-13 are the runners' (``tuneledger run``), 16 the front door's.
EXIT_MEANINGS: dict[int, str] = {
    1: "internal-error",
    2: "usage",
    3: "invalid-input",
    4: "conflict",
    5: "not-found",
    6: "refused",
    7: "busy",
    8: "event-id-reused",
    9: "remote-error",
    10: "port-in-use",
    11: "not-installed",
    12: "server-failed",
    13: "benchmark-failed",
    14: "timeout",
    15: "storage-error",
    16: "outcome-unknown",
    130: "interrupted",
}


class LedgerError(Exception):
    """Base of every error the ledger reports to a user; ``exit_code`` is the CLI's status."""

    exit_code = 1


class WouldLoseData(LedgerError):
    """A command refused because it would replace, overwrite or misplace a user's events.

    Exit 2 like a usage error: the command line asked for the wrong thing (a
    path that holds someone's ledger, a mistyped directory); the message names
    the file and how to pick another path.
    """

    exit_code = 2


class InvalidInput(LedgerError):
    """Input that cannot become an event: names the input (file, line, field) in its message."""

    exit_code = 3


class ConcurrencyConflict(LedgerError):
    """An append expected a stream at one version and found another (optimistic concurrency)."""

    exit_code = 4

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(
            f"concurrency conflict on stream {stream!r}: expected version {expected}, found {actual}"
        )
        self.stream = stream
        self.expected = expected
        self.actual = actual


class NotFound(LedgerError):
    """No ledger at the path, or no event with that id."""

    exit_code = 5


class Refused(LedgerError):
    """A statement the read-only SQL console will not run (writes, ATTACH, file access)."""

    exit_code = 6


class LedgerBusy(LedgerError):
    """Another process held the DuckDB file lock for longer than the lock timeout."""

    exit_code = 7


class EventIdReused(LedgerError):
    """An append reused an existing ``event_id`` for an event with different content.

    ``event_id``: the reused id as text, where one id is to blame (None for a batch that
    holds one id twice); a sync names it in its advice (``sync --hold-back``).
    """

    exit_code = 8

    def __init__(self, message: str, event_id: str | None = None) -> None:
        super().__init__(message)
        self.event_id = event_id


class RemoteError(LedgerError):
    """A sync hub could not be reached, refused the login or a statement, or is not initialised."""

    exit_code = 9


class QueryTimeout(LedgerError):
    """A read-only query ran past its time limit and was stopped (``sql --timeout``)."""

    exit_code = 14


class StorageError(LedgerError):
    """The file system refused: no space left, read-only, I/O error. Names the file and the cause.

    Events already acknowledged are kept (DuckDB's WAL); the failed write left nothing behind.
    """

    exit_code = 15
