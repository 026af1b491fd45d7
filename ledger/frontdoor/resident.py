"""The resident process: serves ``tuneledger append`` calls forwarded by ``ledger.frontdoor.launcher``.

Started by the first ``tuneledger append`` that finds none (``python -P -m ledger.frontdoor.resident``,
detached), it imports click, pydantic, the event models and DuckDB once, then answers calls on
a Unix socket in the user's private runtime folder (``ledger.resident_socket.runtime_dir``): each call
is ``ledger.cli.main(argv)`` run here with the client's stdin, working directory and
environment swapped in, its stdout and stderr captured, so output and exit codes are the
in-process ones (``call``; the tests' in-process CLI uses it too).

What it does not change (docs/cli.md, "The resident process"): it holds no DuckDB file between calls
(every append is the one-shot store: open, one transaction, close), so the one-writer rule,
the hand-off and DuckDB's shell reading the file right after an append are as without it. One
call at a time (the environment and working directory are process-wide).

It exits when idle for ``TUNELEDGER_RESIDENT_IDLE_S`` seconds (default 60), on ``stop``, when a
module file it loaded changed (it answers "restart" and the client runs in-process), and after
a call that left work for the interpreter's exit (threads, exit handlers), which it runs
first, as the console script does. A call whose stdin does not arrive within ``STDIN_WAIT_S``
(a person typing, a pipe that never closes) makes it hand its socket over at once (the next
call starts a fresh server) and exit after that call: no call waits behind another's stdin. Nothing of a call's environment is logged or kept.
"""

from __future__ import annotations

import atexit
import io
import os
import select
import shutil
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ledger import resident_socket

#: Seconds without a call after which the server exits (env ``TUNELEDGER_RESIDENT_IDLE_S``).
IDLE_S = 60.0
#: Seconds a connected client has to send its call before it is dropped.
REQUEST_TIMEOUT_S = 10.0
#: Seconds a call may wait for the client's stdin before the server hands its socket over to a
#: fresh server (piped input arrives in milliseconds; a person typing or a pipe that never
#: closes would otherwise hold up every other call).
STDIN_WAIT_S = 0.5
#: Signals whose handlers a command may set (``run bench``: SIGTERM); restored after each call.
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ClientGone(BaseException):
    """The client closed the connection while the command waited for its stdin (Ctrl-C): the
    command is abandoned before it stored anything. A BaseException so that no ``except
    Exception`` in a command takes it for an error of its own."""


class _AskedStdin(io.RawIOBase):
    """The client's stdin, fetched whole on the first read (``ask``): the client reads its stdin
    only if the command does."""

    def __init__(self, ask: Callable[[], bytes], tty: bool) -> None:
        super().__init__()
        self._ask, self._tty = ask, tty
        self._data: bytes | None = None
        self._pos = 0

    def readable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._tty

    def readinto(self, buffer: Any) -> int:
        if self._data is None:
            self._data = self._ask()
        view = memoryview(buffer).cast("B")
        n = min(len(view), len(self._data) - self._pos)
        view[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


class _Captured(io.BytesIO):
    """Captured output that answers ``isatty`` as the client's stream would (click strips
    colours for a non-terminal)."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@contextmanager
def _swapped(
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    terminal: Sequence[int] | None,
    umask: int | None,
) -> Iterator[None]:
    """The process's working directory, environment, umask and terminal size set to a call's;
    the signal handlers and warning filters a command may set restored afterwards, and the
    warnings already shown forgotten (a fresh process would show them again)."""
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    old_size = shutil.get_terminal_size
    old_umask = os.umask(umask) if umask is not None else None
    warnings_kept = warnings.catch_warnings()  # entering it resets the "shown once" registries
    warnings_kept.__enter__()
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if terminal is not None:
            # shutil's answer in the client's process: $COLUMNS/$LINES first, then its terminal.
            size = os.terminal_size((int(terminal[0]), int(terminal[1])))

            def client_size(fallback: tuple[int, int] = (80, 24)) -> os.terminal_size:
                columns = int(os.environ.get("COLUMNS", 0) or 0) or size.columns
                lines = int(os.environ.get("LINES", 0) or 0) or size.lines
                return os.terminal_size((columns, lines))

            shutil.get_terminal_size = client_size
        yield
    finally:
        warnings_kept.__exit__(None, None, None)
        if old_umask is not None:
            os.umask(old_umask)
        shutil.get_terminal_size = old_size
        os.chdir(old_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(old_env)
        for s, handler in handlers.items():
            signal.signal(s, handler)


def call(
    argv: Sequence[str],
    *,
    stdin: bytes | Callable[[], bytes] = b"",
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin_tty: bool = False,
    stdout_tty: bool = False,
    terminal: Sequence[int] | None = None,
    encoding: str = "utf-8",
    errors: str = "strict",
    umask: int | None = None,
) -> tuple[int, bytes, bytes]:
    """``tuneledger ARGV`` in this process: (exit code, stdout bytes, stderr bytes), what the
    console script would give.

    ``stdin`` is the bytes on standard input, or a function returning them, called only when
    the command reads stdin. ``cwd`` and ``env`` (the whole environment) are set for the call
    and restored after it; ``stdin_tty`` / ``stdout_tty`` are what ``isatty`` answers;
    ``terminal`` (columns, lines) the terminal size ``shutil`` reports when stdout is a
    terminal. ``encoding`` / ``errors`` are stdout's (stderr: ``backslashreplace``, as Python's);
    ``umask`` the client's (files a command creates get its permissions; None: unchanged).
    An unexpected exception comes back as a process shows it: the traceback, exit 1.

    Raises:
        ClientGone: from ``stdin`` (the caller's stdin source went away).
    """
    from ledger.cli.main import main

    ask = stdin if callable(stdin) else (lambda: stdin)
    out, err = _Captured(stdout_tty), _Captured(stdout_tty)
    streams = (
        io.TextIOWrapper(io.BufferedReader(_AskedStdin(ask, stdin_tty)), encoding="utf-8"),
        io.TextIOWrapper(out, encoding=encoding, errors=errors, write_through=True),
        io.TextIOWrapper(err, encoding=encoding, errors="backslashreplace", write_through=True),
    )
    old = sys.stdin, sys.stdout, sys.stderr
    code = 0
    with _swapped(cwd, env, terminal if stdout_tty else None, umask):
        sys.stdin, sys.stdout, sys.stderr = streams
        try:
            main([str(a) for a in argv])
        except SystemExit as exc:
            if isinstance(exc.code, int) or exc.code is None:
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except Exception:  # what a process prints before exiting 1
            traceback.print_exc()
            code = 1
        finally:
            for stream in streams[1:]:
                try:
                    stream.flush()
                except ValueError:  # closed by the command
                    pass
            sys.stdin, sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


# --- the server ----------------------------------------------------------------------------


class _Sources:
    """The files of the loaded modules outside the standard library, with their mtimes: a
    changed, removed or replaced file means the code that serves calls is not what a fresh
    process would run."""

    def __init__(self) -> None:
        self._stdlib = os.path.dirname(os.__file__) + os.sep
        self._mtimes: dict[str, int] = {}
        self._seen: set[str] = set()
        self.update()

    def update(self) -> None:
        """Note the modules loaded since the last call."""
        for name, module in list(sys.modules.items()):
            if name in self._seen:
                continue
            self._seen.add(name)
            path = getattr(module, "__file__", None)
            if not path or path in self._mtimes or self._in_stdlib(path):
                continue
            try:
                self._mtimes[path] = os.stat(path).st_mtime_ns
            except OSError:
                continue

    def _in_stdlib(self, path: str) -> bool:
        # A system-wide install's site-packages lies under the standard library's folder.
        return path.startswith(self._stdlib) and not (
            "/site-packages/" in path or "/dist-packages/" in path
        )

    def changed(self) -> bool:
        """Whether any noted file changed since it was loaded."""
        for path, mtime in self._mtimes.items():
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False


def _warm_up() -> None:
    """Import what an append uses and run one on a scratch ledger (validators built, DuckDB's
    first connection made), so the first forwarded call costs what the others do."""
    import tempfile

    # imported for their start-up cost
    from ledger import store  # noqa: F401
    from ledger.cli import main  # noqa: F401
    from ledger.write import bulk, commands  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="tuneledger-warm-") as folder:
        ledger = os.path.join(folder, "warm.duckdb")
        for args in (
            ["--ledger", ledger, "append", "--create", "note_added", "-f", "text=warm"],
            ["--ledger", ledger, "append", "--json"],
        ):
            call(
                args,
                stdin=b'{"type": "note_added", "text": "warm"}',
                cwd=folder,
                env=dict(os.environ),
            )


class Server:
    """One resident process on its socket (see the module's docstring)."""

    def __init__(self, folder: str, ident: str, idle_s: float) -> None:
        self.folder, self.ident, self.idle_s = folder, ident, idle_s
        self.path = resident_socket.socket_path(folder, ident)
        self._lock_fd: int | None = None
        self._listener: Any = None
        #: Calls run so far (``status`` reports it: tests tell a forwarded call by it).
        self.calls = 0

    def claim(self) -> bool:
        """Take the lock of this socket; False if another server holds it."""
        import fcntl

        fd = os.open(self.path[: -len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def listen(self) -> None:
        """Listen on a temporary name, then rename it into place: a client never finds a socket
        that refuses connections while its server starts (it would remove it as stale)."""
        import socket

        temporary = f"{self.path}.{os.getpid()}.tmp"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is created 0600
        try:
            listener.bind(temporary)
        finally:
            os.umask(old_umask)
        listener.listen(16)
        os.rename(temporary, self.path)
        self._listener = listener

    def release(self) -> None:
        """Remove the socket, then let go of the lock (a new server may start at once)."""
        if self._listener is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def serve(self) -> None:
        """Answer calls until idle, stopped, or the code changed."""
        sources = _Sources()
        try:
            while self._listener is not None:
                self._listener.settimeout(self.idle_s)
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    return
                with conn:
                    if not self._handle(conn, sources):
                        return
        finally:
            self.release()

    def _handle(self, conn: Any, sources: _Sources) -> bool:
        """One connection; False when the server is to exit."""
        conn.settimeout(REQUEST_TIMEOUT_S)
        try:
            if resident_socket.peer_uid(conn) != os.getuid():
                return True
            message = resident_socket.recv(conn)
        except (OSError, ValueError):
            return True
        if message is None:
            return True
        if message[0] == "stop":
            self.release()
            _send_quietly(conn, ("stopped", os.getpid()))
            return False
        if message[0] == "status":
            _send_quietly(conn, ("status", os.getpid(), self.calls))
            return True
        request = message[1] if message[0] == "call" and len(message) > 1 else None
        if (
            not isinstance(request, dict)
            or request.get("protocol") != resident_socket.PROTOCOL
            or request.get("identity") != self.ident
        ):
            _send_quietly(conn, ("refused",))
            return True
        if sources.changed():
            self.release()  # before answering: the client's next server may start at once
            _send_quietly(conn, ("restart",))
            return False
        if not _send_quietly(conn, ("accepted",)):
            return True
        conn.settimeout(None)  # the command may wait on the client's stdin (a person typing)
        return self._run(conn, request, sources)

    def _run(self, conn: Any, request: dict[str, Any], sources: _Sources) -> bool:
        handed_over = False

        def ask() -> bytes:
            nonlocal handed_over
            try:
                resident_socket.send(conn, ("stdin",))
                if not select.select([conn], [], [], STDIN_WAIT_S)[0]:
                    # A person typing, or a pipe that never closes: other calls must not wait
                    # behind this one. Hand the socket over (the next client starts a fresh
                    # server), finish this call, then exit.
                    self.release()
                    handed_over = True
                answer = resident_socket.recv(conn)
            except (OSError, ValueError):
                answer = None
            if answer is None or answer[0] != "stdin":
                raise ClientGone
            return bytes(answer[1])

        self.calls += 1
        callbacks = atexit._ncallbacks()
        threads = set(threading.enumerate())
        try:
            code, out, err = call(
                request["argv"],
                stdin=ask,
                cwd=request["cwd"],
                env=request["env"],
                stdin_tty=bool(request["stdin_tty"]),
                stdout_tty=bool(request["stdout_tty"]),
                terminal=request.get("terminal"),
                encoding=request.get("encoding") or "utf-8",
                errors=request.get("errors") or "strict",
                umask=request.get("umask"),
            )
        except ClientGone:
            return not handed_over
        sources.update()
        left = [t for t in threading.enumerate() if t not in threads and not t.daemon]
        if left or atexit._ncallbacks() != callbacks:
            # Work left for the interpreter's exit: done now, as the console script does
            # (ledger.cli.main.run), before answering; then this process ends.
            self.release()
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
            _send_quietly(conn, ("done", code, out, err))
            return False
        _send_quietly(conn, ("done", code, out, err))
        return not handed_over


def _send_quietly(conn: Any, message: tuple[Any, ...]) -> bool:
    """Send; False if the client is gone (Ctrl-C): the call's outcome stands."""
    try:
        resident_socket.send(conn, message)
    except OSError:
        return False
    return True


def idle_seconds() -> float:
    """``TUNELEDGER_RESIDENT_IDLE_S`` (seconds, > 0), else ``IDLE_S``."""
    try:
        value = float(os.environ.get("TUNELEDGER_RESIDENT_IDLE_S", IDLE_S))
    except ValueError:
        return IDLE_S
    return value if value > 0 else IDLE_S


def main() -> None:
    """``python -m ledger.frontdoor.resident``: become this user's server, unless one runs already."""
    if os.environ.get(resident_socket.ENV_SWITCH, "1") == "0":
        return
    folder = resident_socket.private_dir(resident_socket.runtime_dir(), create=True)
    if folder is None:
        return
    server = Server(folder, resident_socket.identity(), idle_seconds())
    if not server.claim():
        return
    os.chdir("/")  # keep no client's folder busy (each call sets its own)
    from ledger.cli.main import _skip_pydantic_plugin_scan

    _skip_pydantic_plugin_scan()  # as the console script does (the identity holds PYDANTIC_*)
    try:
        try:
            _warm_up()
        except Exception:  # only a speed-up: the first call then builds what it needs
            pass
        server.listen()
    except BaseException:
        server.release()
        raise
    server.serve()


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy (its classes would be other objects).
    from ledger.frontdoor.resident import main as _main

    _main()
