"""The ``tuneledger`` console script: forwards ``append`` to the resident process, runs the rest.

Standard library only, and only its cheapest modules (``_socket``, ``marshal``): this module is
what every ``tuneledger`` call imports before it knows whether it needs click, pydantic or
DuckDB (docs/cli.md, "The resident process"). ``run`` does one of two things:

- ``tuneledger [GROUP OPTIONS] append ...`` while a resident process (``ledger.frontdoor.resident``)
  answers on this user's socket: the call (argv, working directory, environment, whether
  stdin/stdout are terminals) goes to it; it runs the very same click command and sends back
  stdout bytes, stderr bytes and the exit code, which this process writes and exits with.
- anything else (another command, no server, ``TUNELEDGER_RESIDENT=0``, a protocol doubt, a
  server that answers "restart"): ``ledger.cli.main.run`` in this process, exactly as before. When
  no server answered, one is started first (detached), for the next call.

Standard input is read only when the server asks for it (the command reads it): an agent's
stdin may be a pipe that never closes, and ``append TYPE -f ...`` must not wait on it.

Exit codes are the command's own; the forwarding adds one (``GONE_EXIT``): the server ended
after it had accepted the call and before it answered. The append may or may not have been
stored, so the call is not run again here (retry with ``--event-id`` to make it idempotent).
"""

from __future__ import annotations

import os
import sys

from ledger.resident_socket import (
    ENV_SWITCH,
    PROTOCOL,
    identity,
    peer_uid,
    private_dir,
    recv,
    runtime_dir,
    send,
    socket_path,
)

# typing and collections.abc cost start-up time: annotations only (mypy reads this name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Exit code when the server ended after accepting the call and before answering (README, exit codes).
GONE_EXIT = 16
#: The group options of ``tuneledger`` that take a value (``--ledger X`` or ``--ledger=X``).
GROUP_VALUE_OPTIONS = ("--ledger", "--actor", "--session")
#: The only command forwarded.
FORWARDED = "append"


def forwardable(argv: list[str]) -> bool:
    """Whether ``argv`` (without the program name) is an ``append`` call: its first word that is
    not a group option (``GROUP_VALUE_OPTIONS`` with their values) is ``append``. Any other
    option before the command (``--help``, ``--version``, ``--``, a typo) says no: click's own
    handling of it runs in-process.
    """
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in GROUP_VALUE_OPTIONS:
            i += 2
            continue
        if word.startswith("--") and word.split("=", 1)[0] in GROUP_VALUE_OPTIONS and "=" in word:
            i += 1
            continue
        return word == FORWARDED
    return False


# --- the client ------------------------------------------------------------------------


class _NoServer(Exception):
    """No server took the call (none, stale, refused, restarting): run it in-process."""

    def __init__(self, start: bool) -> None:
        super().__init__()
        self.start = start


def _connect(path: str) -> Any:
    """A connection to the server at ``path``.

    Raises:
        _NoServer: no socket (start one), a stale socket (removed; start one), or a refusal.
    """
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except FileNotFoundError:
        sock.close()
        raise _NoServer(start=True) from None
    except ConnectionRefusedError:
        sock.close()
        _remove_stale(path)
        raise _NoServer(start=True) from None
    except OSError:
        sock.close()
        raise _NoServer(start=False) from None
    if peer_uid(sock) != os.getuid():
        sock.close()
        raise _NoServer(start=False)
    return sock


def _remove_stale(path: str) -> None:
    """Remove a socket no server listens on, if no server holds its lock (one that is starting
    renames its socket into place only once it listens, and holds the lock meanwhile)."""
    import fcntl

    try:
        fd = os.open(path[: -len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a live server holds it
        os.close(fd)
        return
    try:
        os.unlink(path)
    except OSError:
        pass
    os.close(fd)  # releases the lock


#: The environment a resident process starts with: what the interpreter, the socket's folder
#: and the server's own settings need, nothing else. Each call runs with the whole environment
#: of its client swapped in, and the starting call's API keys and tokens (HF_TOKEN,
#: OPENAI_API_KEY, a DATABASE_URL with a password) would otherwise stay in the long-lived
#: process's /proc/PID/environ for anyone who may read it (docs/reliability.md).
_RESIDENT_ENV_NAMES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP", "TEMP"}
    | {"VIRTUAL_ENV", "XDG_RUNTIME_DIR", "TERM", "COLUMNS", "LINES", "NO_COLOR"}
)
_RESIDENT_ENV_PREFIXES = ("LC_", "PYTHON", "PYDANTIC", "TUNELEDGER_")


def resident_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less every variable a resident process does not need to start."""
    return {
        key: value
        for key, value in environ.items()
        if key in _RESIDENT_ENV_NAMES or key.startswith(_RESIDENT_ENV_PREFIXES)
    }


def start_server(environ: Mapping[str, str] | None = None) -> int | None:
    """Start a resident process, detached (a session of its own, stdio on /dev/null, ``-P``: no
    working-directory module shadows the installed package), with only the environment it needs
    (``resident_environment``); its pid, or None if it could not start. It exits at once if
    another holds the lock."""
    env = resident_environment(os.environ if environ is None else environ)
    devnull = "/dev/null"
    try:
        return os.posix_spawn(
            sys.executable,
            [sys.executable, "-P", "-m", "ledger.frontdoor.resident"],
            env,
            setsid=True,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0),
            ],
        )
    except OSError:
        return None


def _terminal_size() -> tuple[int, int] | None:
    try:
        size = os.get_terminal_size(1)
    except OSError:
        return None
    return size.columns, size.lines


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError):
        return False


def _umask() -> int:
    """This process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except OSError:  # reader gone, or no such stream: as in-process, nothing to keep
            return
        view = view[written:]


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:
        return b""
    buffer = getattr(stream, "buffer", None)
    try:
        from ledger.input_files import (
            LIMITS,
        )  # (only json and tomllib: no start-up cost to speak of)

        # At most one byte past the bound: the server then refuses it as too large, in one line.
        limit = LIMITS["result"] + 1
        data = buffer.read(limit) if buffer is not None else stream.read(limit).encode("utf-8")
    except (OSError, ValueError):  # an unreadable or closed stdin reads as empty
        return b""
    return bytes(data)


def forward(argv: list[str], path: str, ident: str) -> int:
    """Run ``tuneledger ARGV`` in the server at ``path``; the command's exit code.

    Raises:
        _NoServer: the server did not take the call (it ran nothing): run it in-process.
    """
    try:
        cwd = os.getcwd()
    except OSError:  # a working directory removed under the caller: the CLI's own error
        raise _NoServer(start=False) from None
    sock = _connect(path)
    stdout = sys.stdout
    request = {
        "protocol": PROTOCOL,
        "identity": ident,
        "argv": argv,
        "cwd": cwd,
        "env": dict(os.environ),
        "stdin_tty": _isatty(sys.stdin),
        "stdout_tty": _isatty(stdout),
        "terminal": _terminal_size() if _isatty(stdout) else None,
        "encoding": (getattr(stdout, "encoding", None) or "utf-8"),
        "errors": (getattr(stdout, "errors", None) or "strict"),
        "umask": _umask(),
    }
    try:
        send(sock, ("call", request))
        answer = recv(sock)
    except (OSError, ValueError):  # dropped before accepting (it is ending): start another
        sock.close()
        raise _NoServer(start=True) from None
    if answer is None or answer[0] != "accepted":
        sock.close()
        # "restart": the server has let go of its socket and lock for a fresh one.
        raise _NoServer(start=answer is None or answer[0] == "restart")
    # From here the call runs in the server: never run it again here.
    try:
        while True:
            try:
                message = recv(sock)
                if message is not None and message[0] == "stdin":
                    send(sock, ("stdin", _read_stdin()))
                    continue
            except (OSError, ValueError):
                message = None
            if message is None:
                _write_all(
                    2,
                    b"tuneledger: error: the resident process ended before answering; the "
                    b"append may or may not be stored (look with `tuneledger events --newest`; "
                    b"a retry is idempotent only for events with their own ids: --event-id, "
                    b"or an event_id in each event on stdin)\n",
                )
                return GONE_EXIT
            if message[0] == "done":
                _, code, out, err = message
                _write_all(1, out)
                _write_all(2, err)
                return int(code)
    except KeyboardInterrupt:
        # The call is the resident process's now: once it has its input it runs to its end
        # (one atomic store call) whether or not anyone waits for the answer.
        _write_all(
            2,
            b"\ntuneledger: interrupted; the resident process may still complete the call "
            b"(look with `tuneledger events --newest`)\n",
        )
        return 130
    finally:
        sock.close()


def _interrupted_starting(signum: int, frame: Any) -> None:
    """SIGINT while the in-process CLI starts (imports only, nothing written yet): end at once,
    in one line. A ``KeyboardInterrupt`` raised there printed an import traceback, and one
    raised while an extension module (DuckDB's nanobind) was calling back into Python aborted
    the process (exit 134). ``ledger.cli.main`` takes SIGINT over once the command runs."""
    _write_all(2, b"\ntuneledger: aborted\n")
    os._exit(130)


_interrupted_starting.tuneledger_startup = True  # type: ignore[attr-defined]


def run() -> None:
    """The ``tuneledger`` console script (see the module's docstring); never returns."""
    argv = sys.argv[1:]
    try:
        if os.environ.get(ENV_SWITCH, "1") != "0" and forwardable(argv):
            ident = identity()
            folder = private_dir(runtime_dir(), create=True)
            if folder is not None:
                try:
                    code = forward(argv, socket_path(folder, ident), ident)
                except _NoServer as no:
                    if no.start:
                        start_server()
                else:
                    os._exit(code)
        # ``_signal``, not ``signal``: the C module alone (``signal`` imports ``enum``).
        import _signal  # type: ignore[import-not-found]

        _signal.signal(_signal.SIGINT, _interrupted_starting)
    except KeyboardInterrupt:
        _write_all(2, b"\ntuneledger: aborted\n")
        os._exit(130)
    from ledger.cli.main import run as run_in_process

    run_in_process()


if __name__ == "__main__":
    run()
