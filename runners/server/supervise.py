"""Servers die with their owner: a watchdog per engine server, and the orphan sweep.

Why: an engine server runs in its own session (Ctrl-C in the terminal must not reach it), so
when the process that started it dies without stopping it (SIGKILL, a client's SIGTERM that
interrupts the shutdown, an OOM kill), nothing stops it: it kept the GPU and the port, the
ledger said ``ready`` forever and ``run plan --resume`` started a second server beside it.

- ``watch``: right after a server starts, a small watchdog process (``python -m
  runners.server.supervise``, in a session of its own) holds the read end of a pipe whose
  write end only the owner holds. Whatever ends the owner, SIGKILL included, the kernel closes
  that end: the watchdog reads EOF, stops the server's process group (SIGTERM, then SIGKILL)
  and records ``server_stopped`` with the reason, unless the owner recorded the end itself. An
  owner releases its end only after recording the run's end (a server it stopped: nothing
  to do), so a server that ended while its owner died unrecorded is recorded too.
  A pipe, not ``PR_SET_PDEATHSIG``: the parent-death signal follows the *thread* that forked
  the child, and the MCP server starts servers from worker threads that come and go.
- ``sweep``: when a runner starts (the next command), a ``starting``/``ready`` run recorded on
  this host with no watchdog left is an orphan (the watchdog itself was killed, or the run
  predates it): its process is stopped if it is still alive and still that server, and
  ``server_stopped`` is recorded with reason ``orphaned``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runners.server.process import group_alive

if TYPE_CHECKING:
    from ledger.store import LedgerStore

#: The watchdog's command-line marker (``sweep`` finds a run's watchdog by it in /proc).
MODULE = "runners.server.supervise"
#: How long a server stopped by its watchdog has after SIGTERM before SIGKILL, seconds.
TERM_WAIT_S = 10.0


def watch(
    ledger: Path, run_id: str, pgid: int, session_id: str | None, log_path: Path | None = None
) -> int:
    """Start the watchdog of server run ``run_id`` (process group ``pgid``); returns the write
    end of its pipe, which the caller keeps open as long as it owns the server (``release``).
    What the watchdog has to say (an error recording the stop) goes to ``log_path``.

    Raises:
        OSError: the watchdog could not start (the caller stops the server: unsupervised
            servers are what this module prevents).
    """
    read_end, write_end = os.pipe()  # not inheritable: no later child holds the write end
    argv = [sys.executable, "-m", MODULE, "--ledger", str(ledger), "--run-id", run_id]
    argv += ["--pgid", str(pgid), "--fd", str(read_end)]
    if session_id:
        argv += ["--session", session_id]
    log = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(read_end,),
            start_new_session=True,  # the owner's group killed at once (a terminal) spares it
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
        if log_path is not None:
            log.close()  # type: ignore[union-attr]
    return write_end


def release(fd: int | None, recorded: bool = False) -> None:
    """Close the owner's end of a watchdog's pipe (the server ended: the watchdog exits);
    ``recorded``: the owner recorded the run's end, said with one byte before closing, so the
    watchdog leaves without opening the ledger."""
    if fd is not None:
        try:
            if recorded:
                os.write(fd, b"1")
            os.close(fd)
        except OSError:
            pass


def stop_group(pgid: int, term_wait_s: float = TERM_WAIT_S) -> str | None:
    """SIGTERM the group, SIGKILL what is left after ``term_wait_s``; the last signal sent."""
    sent = None
    for sig, wait_s in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, term_wait_s)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        sent = sig.name
        deadline = time.monotonic() + wait_s
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not group_alive(pgid):
            break
    return sent


def record_stop(
    path: Path, run_id: str, session_id: str | None, reason: str, sig: str | None
) -> bool:
    """Record ``server_stopped`` for ``run_id`` if its start is recorded and its end is not;
    whether it was recorded."""
    from ledger.read import lookups
    from ledger.store import LedgerStore
    from ledger.write import commands
    from runners.host import fingerprint
    from runners.server.runner import RUNNER_ACTOR
    from schemas import ServerStopped

    store = LedgerStore(path)
    if lookups.server_run_state(store, run_id) != "open":
        return False  # recorded by its owner, or never recorded as started (a failed start)
    commands.record(
        store,
        ServerStopped(
            run_id=run_id,
            session_id=session_id,
            actor=RUNNER_ACTOR,
            host=fingerprint().host,
            signal=sig,
            reason=reason,
        ),
    )
    return True


def _watchdog(args: argparse.Namespace) -> int:
    """Wait for the owner's end of the pipe to close: the owner released it after recording the
    run's end, or it died. Then stop what is left of the server's group and record the end
    unless the owner did. Why not exit once the group is gone: an owner killed after its
    server ended and before recording the end left the run ``ready`` forever."""
    recorded = os.read(args.fd, 1)  # b"1": the end is recorded; b"": the owner is gone
    if recorded and not group_alive(args.pgid):
        return 0
    if group_alive(args.pgid):
        sig = stop_group(args.pgid)
        reason = "its owner process died without stopping it: stopped by its watchdog"
    else:
        sig = None
        reason = "it ended and its owner died before recording the end: recorded by its watchdog"
    record_stop(Path(args.ledger), args.run_id, args.session, reason, sig)
    return 0


# --- the orphan sweep ----------------------------------------------------------------------


def _watchdog_alive(run_id: str) -> bool:
    """Whether a watchdog of ``run_id`` runs on this machine (read from /proc)."""
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if MODULE.encode() in argv and run_id.encode() in argv:
            return True
    return False


def _same_server(pid: int, argv0: str | None) -> bool:
    """Whether ``pid`` is alive and still the server recorded (a group leader running the
    recorded program: a reused pid is left alone)."""
    try:
        if os.getpgid(pid) != pid:
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (ProcessLookupError, PermissionError, FileNotFoundError, OSError):
        return False
    return argv0 is None or (bool(cmdline) and cmdline[0].decode(errors="replace") == argv0)


def _live_runs(store: LedgerStore, hostname: str) -> list[dict[str, Any]]:
    if not store.path.exists() or not Path("/proc").is_dir():
        return []
    from ledger.read import lookups

    return lookups.live_server_runs(store, hostname)


def served(store: LedgerStore, hostname: str, session_id: str | None) -> list[dict[str, Any]]:
    """The runs of ``session_id`` on ``hostname`` that a live owner still serves (their
    watchdog runs): ``run_id``, ``pid``, ``port``. ``run plan --resume`` refuses to start a
    second server beside them."""
    return [
        row
        for row in _live_runs(store, hostname)
        if row["session_id"] == session_id and _watchdog_alive(row["run_id"])
    ]


def sweep(store: LedgerStore, hostname: str, say: Callable[[str], None]) -> list[str]:
    """Record (and stop, if alive) the ``starting``/``ready`` runs of ``hostname`` whose
    watchdog is gone; returns their run ids."""
    orphans = []
    for row in _live_runs(store, hostname):
        if _watchdog_alive(row["run_id"]):
            continue  # owned: its owner (an MCP server, a plan) is alive
        sent = None
        if row["pid"] and _same_server(row["pid"], row["argv0"]):
            sent = stop_group(row["pid"])
        reason = "orphaned: its owner and watchdog were gone when the next command looked"
        if record_stop(store.path, row["run_id"], row["session_id"], reason, sent):
            orphans.append(row["run_id"])
            say(f"server run {row['run_id']} was orphaned: recorded as stopped")
    return orphans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The watchdog of one engine server.")
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--pgid", type=int, required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--session")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the owner's business
    return _watchdog(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
