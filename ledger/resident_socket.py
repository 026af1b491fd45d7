"""Where this user's resident process listens and how to talk to it: the runtime folder, the
socket's name, the identity a server and its client share, the message framing, and
``ask_server`` (``resident status`` / ``stop``).

Standard library only, and only its cheapest modules (``marshal``, ``os``): the launcher
imports this before it knows whether it needs anything else, and the CLI's ``resident``
commands ask the server through it (this module sits below the CLI; the launcher and the
resident process, above it, run the CLI).
"""

from __future__ import annotations

import marshal
import os
import sys

# typing and collections.abc cost start-up time: annotations only (mypy reads this name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: ``TUNELEDGER_RESIDENT=0`` turns the resident process off: no start, no forwarding.
ENV_SWITCH = "TUNELEDGER_RESIDENT"
#: The folder of the socket and its lock file (default ``$XDG_RUNTIME_DIR/tuneledger``, else
#: ``/tmp/tuneledger-$UID``); it must be a folder of this user's with mode 0700.
ENV_RUNTIME_DIR = "TUNELEDGER_RUNTIME_DIR"
#: The protocol's version, sent with each call (a server of another version says "restart").
PROTOCOL = 1
#: Environment variables that change how an interpreter imports or validates: part of the
#: identity, so a server started under other values never serves the call.
_IDENTITY_ENV_PREFIXES = ("PYTHON", "PYDANTIC")
#: How long ``ask_server`` waits for the server's answer (s).
ASK_TIMEOUT_S = 10.0


def identity(environ: Mapping[str, str] | None = None) -> str:
    """What a server and its client must share: the interpreter (version and path), where this
    package is installed, and the ``PYTHON*`` / ``PYDANTIC*`` environment. A server refuses a
    call from another identity (the client then runs in-process)."""
    env = os.environ if environ is None else environ
    settings = sorted((k, v) for k, v in env.items() if k.startswith(_IDENTITY_ENV_PREFIXES))
    return "\n".join(
        [sys.version, sys.executable, os.path.dirname(os.path.abspath(__file__))]
        + [f"{k}={v}" for k, v in settings]
    )


def _digest(text: str) -> str:
    """64-bit FNV-1a of ``text`` in hex: names the socket per identity (a collision only means
    the server refuses the call: the identity itself is compared). No import needed (hashlib's
    costs start-up time)."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def runtime_dir(environ: Mapping[str, str] | None = None) -> str:
    """The folder of the socket: ``$TUNELEDGER_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/tuneledger``,
    else ``/tmp/tuneledger-$UID``."""
    env = os.environ if environ is None else environ
    if env.get(ENV_RUNTIME_DIR):
        return env[ENV_RUNTIME_DIR]
    if env.get("XDG_RUNTIME_DIR"):
        return os.path.join(env["XDG_RUNTIME_DIR"], "tuneledger")
    return f"/tmp/tuneledger-{os.getuid()}"


def private_dir(path: str, *, create: bool) -> str | None:
    """``path`` if it is a folder owned by this user with mode 0700 (created so when ``create``
    and missing), else None: a socket in a folder others can write to could be replaced by
    theirs, so such a folder is refused (the call runs in-process)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.lstat(path)
        except OSError:
            return None
    except OSError:
        return None
    return None if _unsafe(st) else path


def _unsafe(st: os.stat_result) -> str | None:
    """Why a folder with this ``lstat`` may not hold the socket, or None when it may."""
    if (st.st_mode & 0o170000) != 0o040000:
        return "is not a folder"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to you ({os.getuid()})"
    if st.st_mode & 0o777 != 0o700:
        return f"has mode {st.st_mode & 0o777:04o}, not 0700 (`chmod 700` it)"
    return None


def private_dir_problem(path: str) -> str | None:
    """Why ``private_dir`` refuses ``path`` (one phrase, for ``resident status``), or None when
    it is fine or missing (a missing folder is created by the next append)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return _unsafe(st)


def socket_path(folder: str, ident: str) -> str:
    """The socket of the server of ``ident`` in ``folder`` (its lock file: this + ``.lock``)."""
    return os.path.join(folder, f"resident-{_digest(ident)}.sock")


# --- framing: a 4-byte big-endian length, then a marshal'd tuple -------------------------
# marshal, not pickle or JSON: builtin (no import cost), and it loads only plain values (no
# code runs on load). Both ends are the same interpreter (the identity includes sys.version)
# and the same user (SO_PEERCRED checked, socket in a 0700 folder).


def send(sock: Any, message: tuple[Any, ...]) -> None:
    """Send one framed ``message`` (plain values only: str, bytes, int, bool, None, tuples,
    lists, dicts)."""
    data = marshal.dumps(message)
    sock.sendall(len(data).to_bytes(4, "big") + data)


def _recv_exact(sock: Any, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(sock: Any) -> tuple[Any, ...] | None:
    """One framed message, or None when the peer closed the connection first.

    Raises:
        ValueError: a frame that is not a marshal'd tuple.
    """
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    body = _recv_exact(sock, int.from_bytes(head, "big"))
    if body is None:
        return None
    message = marshal.loads(body)
    if not isinstance(message, tuple) or not message:
        raise ValueError("not a message")
    return message


def peer_uid(sock: Any) -> int:
    """The user id of the process at the other end of a Unix socket (``SO_PEERCRED``: pid, uid,
    gid as three C ints)."""
    import _socket

    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(cred[4:8], sys.byteorder)


def ask_server(message: str, environ: Mapping[str, str] | None = None) -> tuple[Any, ...] | None:
    """Send ``status`` or ``stop`` to this user's server of this install (as ``environ``, default
    this process's environment, names them); its answer (``("status", pid, calls)``,
    ``("stopped", pid)``), or None if none answers."""
    env = dict(os.environ if environ is None else environ)
    folder = private_dir(runtime_dir(env), create=False)
    if folder is None:
        return None
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(ASK_TIMEOUT_S)
    try:
        sock.connect(socket_path(folder, identity(env)))
        send(sock, (message,))
        return recv(sock)
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
