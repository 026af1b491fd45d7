"""The resident process that serves `tuneledger append` (ledger/frontdoor/launcher.py, ledger/frontdoor/resident.py):
the same output and exit codes as in-process, stdin read only when the command reads it, the
DuckDB file free after each call, and the process's life (auto-start, one winner of a race,
idle exit, restart on a code change, a stale socket, a server killed mid-call, Ctrl-C, the
opt-out, an unsafe folder refused).

Real processes on purpose: the console script, a real server on a real Unix socket. Each test
has its own runtime folder (`TUNELEDGER_RUNTIME_DIR`) and stops every server it started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ledger.frontdoor import launcher
from ledger.resident_socket import ask_server
from ledger.write import jsonl

TUNELEDGER = str(Path(sys.executable).with_name("tuneledger"))
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_forwardable_finds_the_command_after_the_group_options() -> None:
    yes = (
        ["append"],
        ["append", "--help"],
        ["--ledger", "x.duckdb", "append", "note_added"],
        ["--ledger=x.duckdb", "--actor", "agent:a", "--session", "s", "append"],
        ["--actor=agent:a", "append", "-"],
    )
    no = (
        [],
        ["events"],
        ["--help", "append"],
        ["--version"],
        ["--ledger", "append"],  # "append" is the ledger's name here
        ["--", "append"],
        ["-h", "append"],
        ["--ledgerx", "append"],
        ["init", "append"],
    )
    for argv in yes:
        assert launcher.forwardable(argv), argv
    for argv in no:
        assert not launcher.forwardable(argv), argv


def test_the_group_options_the_launcher_skips_are_clicks() -> None:
    # The launcher's table of group options that take a value equals the CLI group's.
    import click

    from ledger.cli.main import cli

    taking_value = {
        opt
        for param in cli.params
        if isinstance(param, click.Option) and not param.is_flag
        for opt in param.opts
    }
    assert taking_value == set(launcher.GROUP_VALUE_OPTIONS)


# --- real processes -------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not reaped by its parent, does not)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reaps it if it is a child of this process
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait(predicate: Any, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Resident:
    """One test's runtime folder and the servers started in it."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.env = {
            **os.environ,
            "TUNELEDGER_RESIDENT": "1",
            "TUNELEDGER_RUNTIME_DIR": folder,
            "TUNELEDGER_RESIDENT_IDLE_S": "300",
        }
        self.pids: set[int] = set()

    @property
    def socket(self) -> str:
        return launcher.socket_path(self.folder, launcher.identity(self.env))

    def run(
        self,
        args: list[str],
        *,
        stdin: bytes | None = None,
        cwd: Path | None = None,
        resident: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        environ = {**self.env, **(env or {})}
        if not resident:
            environ["TUNELEDGER_RESIDENT"] = "0"
        return subprocess.run(
            [TUNELEDGER, *args],
            input=stdin if stdin is not None else b"",
            capture_output=True,
            cwd=cwd,
            env=environ,
            timeout=120,
        )

    def init(self, folder: Path) -> Path:
        """A new ledger ``l.duckdb`` in ``folder``, made in-process."""
        ledger = folder / "l.duckdb"
        assert self.run(["--ledger", str(ledger), "init"], resident=False).returncode == 0
        return ledger

    def status(self) -> tuple[int, int] | None:
        """(the server's pid, calls it ran), or None when none answers."""
        answer = ask_server("status", self.env)
        if answer is None:
            return None
        self.pids.add(int(answer[1]))
        return int(answer[1]), int(answer[2])

    def calls(self) -> int:
        status = self.status()
        assert status is not None, "no resident process answers"
        return status[1]

    def start(self) -> int:
        """Start a server and wait until it answers; its pid."""
        pid = launcher.start_server(self.env)
        assert pid is not None
        self.pids.add(pid)
        return self.wait_up()

    def wait_up(self) -> int:
        _wait(lambda: self.status() is not None, what="a resident process")
        status = self.status()
        assert status is not None
        return status[0]

    def stop(self) -> None:
        ask_server("stop", self.env)
        for pid in self.pids:
            try:
                _wait(lambda pid=pid: not _alive(pid), timeout=20, what=f"server {pid} to end")
            except AssertionError:
                os.kill(pid, signal.SIGKILL)
                _wait(lambda pid=pid: not _alive(pid), timeout=20, what=f"server {pid} killed")


@pytest.fixture
def resident() -> Iterator[Resident]:
    # A short folder name: a Unix socket's path is limited to 107 bytes.
    folder = tempfile.mkdtemp(prefix="tl-rt-")
    os.chmod(folder, 0o700)
    helper = Resident(folder)
    try:
        yield helper
    finally:
        helper.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _norm(data: bytes) -> str:
    return UUID.sub("<id>", data.decode("utf-8", "replace"))


def _events(ledger: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(ledger), read_only=True)
    try:
        return con.execute(
            "SELECT seq, type, stream, stream_version, payload::VARCHAR FROM events ORDER BY seq"
        ).fetchall()
    finally:
        con.close()


def _jsonl(n: int, text: str) -> bytes:
    return "".join(
        json.dumps({"type": "note_added", "text": f"{text} {i}"}) + "\n" for i in range(n)
    ).encode()


LEDGER = ["--ledger", "l.duckdb"]
#: (argv, stdin, expected exit code): every case runs in-process and forwarded.
PARITY: list[tuple[list[str], bytes | None, int]] = [
    ([*LEDGER, "append", "note_added", "-f", "text=x"], None, 0),
    (
        [
            "--ledger=l.duckdb",
            "--actor",
            "agent:t",
            "append",
            "--json",
            "note_added",
            "-f",
            "text=y",
        ],
        None,
        0,
    ),
    ([*LEDGER, "append", "note_added", "-f", "text"], None, 3),
    ([*LEDGER, "append", "note_added", "-f", "text=x", "--host", "{bad"], None, 3),
    (["--ledger", "missing.duckdb", "append", "note_added", "-f", "text=x"], None, 5),
    (["--ledger", "new.duckdb", "append", "--create", "note_added", "-f", "text=new"], None, 0),
    ([*LEDGER, "append", "--expected-version", "0", "note_added", "-f", "text=z"], None, 4),
    ([*LEDGER, "append", "no_such_type", "-f", "a=b"], None, 3),
    ([*LEDGER, "append", "--help"], None, 0),
    ([*LEDGER, "append", "note_added", "--help"], None, 0),
    ([*LEDGER, "append", "-f", "text=x"], None, 2),
    ([*LEDGER, "append", "--no-such-option"], None, 2),
    ([*LEDGER, "append"], b'{"type": "note_added", "text": "one"}', 0),
    ([*LEDGER, "append", "--json", "-"], _jsonl(3, "lines"), 0),
    ([*LEDGER, "append", "--json"], _jsonl(1200, "bulk"), 0),
    ([*LEDGER, "append"], b'{"type": "note_added", "text": "\xff\xfe"}\n', 3),
    ([*LEDGER, "append"], b"", 3),
    ([*LEDGER, "--actor", "robot:x", "append", "note_added", "-f", "text=x"], None, 2),
]


@pytest.mark.slow
def test_forwarded_calls_give_the_in_process_output_and_exit_codes(
    resident: Resident, tmp_path: Path
) -> None:
    here, there = tmp_path / "in-process", tmp_path / "forwarded"
    for folder in (here, there):
        folder.mkdir()
        assert resident.run([*LEDGER, "init"], cwd=folder, resident=False).returncode == 0
    resident.start()
    for argv, stdin, expected in PARITY:
        local = resident.run(argv, stdin=stdin, cwd=here, resident=False)
        before = resident.calls()
        forwarded = resident.run(argv, stdin=stdin, cwd=there)
        assert resident.calls() == before + 1, ("not forwarded", argv)
        assert local.returncode == expected, (argv, local.stderr)
        assert (forwarded.returncode, _norm(forwarded.stdout), _norm(forwarded.stderr)) == (
            local.returncode,
            _norm(local.stdout),
            _norm(local.stderr),
        ), argv
    # A terminal on stdin: the command says to pipe JSON (it reads nothing).
    import pty

    controller, terminal = pty.openpty()
    try:
        results = []
        for folder, resident_on in ((here, False), (there, True)):
            out = subprocess.run(
                [TUNELEDGER, *LEDGER, "append"],
                stdin=terminal,
                capture_output=True,
                cwd=folder,
                env={**resident.env, "TUNELEDGER_RESIDENT": "1" if resident_on else "0"},
                timeout=120,
            )
            results.append((out.returncode, out.stdout, out.stderr))
    finally:
        os.close(controller)
        os.close(terminal)
    assert results[0] == results[1] and results[0][0] == 2, results
    # The same events were stored by both paths (the second --create ledger too).
    for name in ("l.duckdb", "new.duckdb"):
        assert _events(here / name) == _events(there / name), name
    assert len(_events(there / "l.duckdb")) == 2 + 1 + 3 + 1200


@pytest.mark.slow
def test_stdin_is_read_only_when_the_command_reads_it(resident: Resident, tmp_path: Path) -> None:
    # An agent's stdin may be a pipe that never closes: `append TYPE -f ...` must not wait on it.
    ledger = resident.init(tmp_path)
    resident.start()
    for resident_on in ("1", "0"):
        before = resident.calls()
        process = subprocess.Popen(
            [TUNELEDGER, "--ledger", str(ledger), "append", "note_added", "-f", "text=open pipe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**resident.env, "TUNELEDGER_RESIDENT": resident_on},
        )
        try:
            code = process.wait(timeout=60)
            out = process.stdout.read() if process.stdout else b""
        finally:
            if process.stdin:
                process.stdin.close()
            if process.poll() is None:
                process.kill()
        assert code == 0 and out.startswith(b"appended seq"), out
        assert resident.calls() == before + (resident_on == "1")


@pytest.mark.slow
def test_the_ledger_file_is_free_right_after_a_forwarded_append(
    resident: Resident, tmp_path: Path
) -> None:
    ledger = resident.init(tmp_path)
    resident.start()
    for i in range(3):
        out = resident.run(["--ledger", str(ledger), "append", "note_added", "-f", f"text=n{i}"])
        assert out.returncode == 0, out.stderr
        con = duckdb.connect(str(ledger))  # read-write: no other process holds the file
        try:
            assert con.execute("SELECT count(*) FROM events").fetchone() == (i + 1,)
        finally:
            con.close()
    assert not Path(f"{ledger}.wal").exists()


@pytest.mark.slow
def test_the_first_call_starts_a_server_and_off_means_off(
    resident: Resident, tmp_path: Path
) -> None:
    ledger = tmp_path / "l.duckdb"
    args = ["--ledger", str(ledger), "append", "--create", "note_added", "-f", "text=x"]
    # Off: no server started, nothing in the folder.
    assert resident.run(args, resident=False).returncode == 0
    time.sleep(1.0)
    assert os.listdir(resident.folder) == [] and resident.status() is None
    # On: the call runs in-process and starts a server, which serves the next call.
    assert resident.run(args).returncode == 0
    resident.wait_up()
    before = resident.calls()
    assert resident.run(args).returncode == 0
    assert resident.calls() == before + 1
    # Off with a server up: not forwarded.
    assert resident.run(args, resident=False).returncode == 0
    assert resident.calls() == before + 1
    assert len(_events(ledger)) == 4
    # Other commands are never forwarded.
    assert resident.run(["--ledger", str(ledger), "events"]).returncode == 0
    assert resident.calls() == before + 1


@pytest.mark.slow
def test_two_starters_race_and_one_server_wins(resident: Resident) -> None:
    starters = [
        subprocess.Popen(
            [sys.executable, "-P", "-m", "ledger.frontdoor.resident"],
            env=resident.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    resident.pids.update(p.pid for p in starters)
    try:
        # Waited on events, not a fixed time (a 1 s sleep failed at load 8-10): a loser's exit,
        # then the winner answering on the socket; the one that answers is the other starter.
        _wait(lambda: sum(p.poll() is not None for p in starters) >= 1, what="a loser to exit")
        pid = resident.wait_up()
        ended = [p for p in starters if p.poll() is not None]
        assert [p.returncode for p in ended] == [0]
        (winner,) = (p for p in starters if p.poll() is None)
        assert pid == winner.pid
    finally:
        resident.stop()
        for p in starters:
            p.wait(timeout=30)


@pytest.mark.slow
def test_an_idle_server_exits(resident: Resident) -> None:
    resident.env["TUNELEDGER_RESIDENT_IDLE_S"] = "1"
    pid = resident.start()
    _wait(lambda: not _alive(pid), timeout=30, what="the idle server to exit")
    assert not os.path.exists(resident.socket)


@pytest.mark.slow
def test_a_changed_module_restarts_the_server(resident: Resident, tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    args = ["--ledger", str(ledger), "append", "--create", "note_added", "-f"]
    first = resident.start()
    assert resident.run([*args, "text=one"]).returncode == 0
    source = Path(jsonl.__file__)  # a module the server loaded
    stat = source.stat()
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        out = resident.run([*args, "text=two"])
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # Run in-process (the server answered "restart"), once, and a fresh server started.
    assert out.returncode == 0 and out.stdout.startswith(b"appended seq 2"), out
    _wait(lambda: not _alive(first), timeout=30, what="the old server to exit")
    second = resident.wait_up()
    assert second != first
    assert [row[0] for row in _events(ledger)] == [1, 2]


@pytest.mark.slow
def test_a_stale_socket_is_removed(resident: Resident, tmp_path: Path) -> None:
    # A server that died without cleaning up leaves its socket file: nothing listens on it.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(resident.socket)
    stale.close()
    ledger = tmp_path / "l.duckdb"
    out = resident.run(
        ["--ledger", str(ledger), "append", "--create", "note_added", "-f", "text=x"]
    )
    assert out.returncode == 0, out.stderr
    resident.wait_up()  # the client removed it and started a server
    assert len(_events(ledger)) == 1


def _waiting_on_stdin(pid: int) -> bool:
    """Whether ``pid`` is blocked reading fd 0 (``/proc/PID/syscall``: read is syscall 0 on
    x86-64, 63 on arm64)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] in ("0", "63") and fields[1] == "0x0"


def _client_asked_for_stdin(
    resident: Resident, tmp_path: Path
) -> tuple[Path, int, subprocess.Popen[bytes]]:
    """(a new ledger, a started server's pid, a forwarded ``append --json`` to that ledger whose
    server has asked for stdin: the call is running)."""
    ledger = resident.init(tmp_path)
    pid = resident.start()
    process = subprocess.Popen(
        [TUNELEDGER, "--ledger", str(ledger), "append", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=resident.env,
    )
    if not Path(f"/proc/{process.pid}/syscall").exists():
        process.kill()
        pytest.skip("no /proc/PID/syscall to see the client wait on its stdin")
    _wait(lambda: _waiting_on_stdin(process.pid), what="the client to read its stdin")
    return ledger, pid, process


@pytest.mark.slow
def test_a_server_killed_mid_call_is_an_error_not_a_second_run(
    resident: Resident, tmp_path: Path
) -> None:
    ledger, pid, process = _client_asked_for_stdin(resident, tmp_path)
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: not _alive(pid), what="the server to die")
    out, err = process.communicate(b'{"type": "note_added", "text": "lost?"}', timeout=60)
    assert process.returncode == launcher.GONE_EXIT, err
    assert err.startswith(b"tuneledger: error: the resident process ended before answering")
    assert b"--event-id, or an event_id in each event on stdin" in err
    assert err.count(b"\n") == 1 and out == b""
    assert _events(ledger) == []  # not run again in the client


@pytest.mark.slow
def test_ctrl_c_in_the_client_exits_130_and_the_server_serves_on(
    resident: Resident, tmp_path: Path
) -> None:
    ledger, pid, process = _client_asked_for_stdin(resident, tmp_path)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    # interrupted before the server had its input: nothing stored (seq 1 below)
    assert process.returncode == 130, err
    assert err.endswith(
        b"tuneledger: interrupted; the resident process may still complete the call (look with `tuneledger events --newest`)\n"
    )
    out = resident.run(["--ledger", str(ledger), "append", "note_added", "-f", "text=after"])
    assert out.returncode == 0 and out.stdout.startswith(b"appended seq 1"), out
    assert resident.status() == (pid, 2)


@pytest.mark.slow
def test_a_runtime_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = tempfile.mkdtemp(prefix="tl-rt-")
    try:
        os.chmod(folder, 0o755)
        env = {**os.environ, "TUNELEDGER_RESIDENT": "1", "TUNELEDGER_RUNTIME_DIR": folder}
        out = subprocess.run(
            [TUNELEDGER, "--ledger", str(tmp_path / "l.duckdb"), "append", "--create"]
            + ["note_added", "-f", "text=x"],
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        time.sleep(1.0)
        assert os.listdir(folder) == []  # no server, no socket
        # ... and `resident status` says why, not just "not running".
        status = subprocess.run(
            [TUNELEDGER, "resident", "status"], capture_output=True, env=env, timeout=60
        )
        assert status.returncode == 0
        assert status.stdout.decode() == (
            f"resident process: off: its folder {folder} has mode 0755, not 0700 "
            "(`chmod 700` it); appends run in-process\n"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_forwarded_call_imports_nothing_but_the_standard_library(
    resident: Resident, tmp_path: Path
) -> None:
    # What start-up the client pays: `-X importtime` lists every module the process imported.
    ledger = resident.init(tmp_path)
    resident.start()
    before = resident.calls()
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ledger.frontdoor.launcher"]
        + ["--ledger", str(ledger), "append", "note_added", "-f", "text=light"],
        capture_output=True,
        env=resident.env,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.startswith(b"appended seq 1"), out.stderr
    assert resident.calls() == before + 1
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in out.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    heavy = {"click", "pydantic", "duckdb", "schemas", "ledger.cli.main", "typing", "socket"}
    assert "ledger" in imported and not imported & heavy, sorted(imported & heavy)


@pytest.mark.slow
def test_resident_status_and_stop(resident: Resident) -> None:
    out = resident.run(["resident", "status"])
    assert out.returncode == 0 and out.stdout.startswith(b"resident process: not running")
    pid = resident.start()
    out = resident.run(["resident", "status"])
    assert out.stdout.startswith(f"resident process: pid {pid}, 0 calls served".encode())
    out = resident.run(["resident", "stop"])
    assert out.returncode == 0 and out.stdout == f"stopped pid {pid}\n".encode()
    _wait(lambda: not _alive(pid), timeout=30, what="the stopped server to exit")
    out = resident.run(["resident", "status"], resident=False)
    assert out.stdout.startswith(b"resident process: off")


@pytest.mark.slow
def test_a_ledger_created_by_a_forwarded_call_gets_the_clients_umask(
    resident: Resident, tmp_path: Path
) -> None:
    resident.start()
    for mask in (0o077, 0o022):
        ledger = tmp_path / f"l{mask:o}.duckdb"
        before = resident.calls()
        out = subprocess.run(
            [
                TUNELEDGER,
                "--ledger",
                str(ledger),
                "append",
                "--create",
                "note_added",
                "-f",
                "text=m",
            ],
            capture_output=True,
            env=resident.env,
            umask=mask,
            timeout=120,
        )
        assert out.returncode == 0 and resident.calls() == before + 1, out.stderr
        assert ledger.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.slow
def test_a_call_waiting_on_its_stdin_holds_up_no_other_call(
    resident: Resident, tmp_path: Path
) -> None:
    ledger, pid, waiting = _client_asked_for_stdin(resident, tmp_path)
    try:
        # The server handed its socket over: this call runs (in-process, starting a new server).
        out = resident.run(["--ledger", str(ledger), "append", "note_added", "-f", "text=other"])
        assert out.returncode == 0 and out.stdout.startswith(b"appended seq 1"), out
        second = resident.wait_up()
        assert second != pid
        out_w, err_w = waiting.communicate(b'{"type": "note_added", "text": "typed"}', timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    # The waiting call was finished by its server, which then exited.
    assert waiting.returncode == 0 and b'"seq": 2' in out_w, err_w
    _wait(lambda: not _alive(pid), timeout=30, what="the handing-over server to exit")
    assert resident.status() == (second, 0)
