"""Process-level helpers of the server runner: process groups, ports, log files.

Linux first (``/proc``), with a POSIX fallback where ``/proc`` is absent.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path


def group_alive(pgid: int) -> bool:
    """True while any live (non-zombie) process is in group ``pgid``.

    Zombies are ignored: an orphaned worker that died is only waiting for init
    to reap it (in a container, PID 1 may never do so). Without ``/proc``, any
    process (zombie or not) that ``killpg(pgid, 0)`` reaches counts.
    """
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited while we looked
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 3 or int(fields[2]) != pgid:
            continue
        if fields[0] not in ("Z", "X") or _threads_left(entry):
            return True
    return False


def _threads_left(proc_entry: Path) -> bool:
    """A process whose main thread exited shows state Z while its other threads still run."""
    try:
        return len(list((proc_entry / "task").iterdir())) > 1
    except OSError:
        return False


def connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def free_port(host: str) -> int:
    """A TCP port nothing listens on at ``host`` now (the kernel's pick for a bind to port 0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """True when something accepts connections on ``host:port`` or the port cannot be bound."""
    try:
        with socket.create_connection((connect_host(host), port), timeout=0.5):
            return True
    except OSError:
        pass
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR as the servers set it: a TIME_WAIT leftover is not "in use", a listener is.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def read_lines(path: Path) -> list[str]:
    """The log's lines (undecodable bytes replaced; ``[]`` when it does not exist)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []


def exit_status(process: subprocess.Popen[bytes]) -> int | None:
    """The leader's exit status once its group is gone (negative: killed by that signal)."""
    try:
        return process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def follow_lines(path: Path, offset: int, on_line: Callable[[str], None]) -> int:
    """Pass complete lines written after ``offset`` to ``on_line``; return the new offset."""
    with open(path, "rb") as log:
        log.seek(offset)
        data = log.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].decode("utf-8", errors="replace").splitlines():
        on_line(line)
    return offset + end
