"""Servers die with their owner.

An engine server runs in a session of its own, so nothing stopped it when the process that
started it died without stopping it: SIGKILL of ``run plan`` left the server running and its
run ``starting``/``ready`` forever. Now a watchdog per server (``runners.server.supervise``)
stops it and records the stop, and the next runner records (and stops) a run whose watchdog
is gone too. Real processes: the CLI, the fake OpenAI server, the watchdog.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from runners.server import supervise
from runners.server.process import group_alive
from runners.server.runner import RUNNER_ACTOR, ServerRunner
from schemas import Host, ServerStarted, ServerStopped

FAKE = Path(__file__).parents[1] / "fake_servers" / "openai_stream.py"
TUNELEDGER = Path(sys.executable).parent / "tuneledger"

SERVERS = f"""
[defaults]
engine = "transformers"
command = ["{sys.executable}", "{FAKE}"]
port = 0
health_timeout_s = 30

[configs.baseline]
flags = {{ chunks = 6, delay-ms = 20 }}

[configs.fast]
base = "baseline"
flags = {{ delay-ms = 1 }}
"""

PLAN = """
[plan]
session = "s"
baseline = "baseline"
repeats = 3
concurrency = [1]
servers = "servers.toml"
stop_wait_s = 5

[[candidates]]
config = "fast"
flag = "delay-ms"

[bench]
endpoint = "chat"
model = "fake"
input_len = 8
output_len = 6
num_prompts = 64
warmup = 1
"""


def _until(condition: object, what: str, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.2)


def _runs(ledger: Path) -> list[dict[str, object]]:
    if not ledger.exists():
        return []
    try:
        return (
            LedgerStore(ledger)
            .query_arrow(
                "SELECT r.run_id, r.status, (s.payload->>'pid')::BIGINT AS pid FROM server_runs r "
                "JOIN (SELECT payload, payload->>'run_id' AS run_id FROM live_control "
                "WHERE type = 'server_started') s USING (run_id) ORDER BY r.started_seq"
            )
            .to_pylist()
        )
    except Exception:  # the plan is creating the ledger's views right now: look again
        return []


@pytest.mark.slow
def test_sigkill_of_the_cli_mid_plan_stops_its_server_and_records_the_stop(
    tmp_path: Path,
) -> None:
    (tmp_path / "servers.toml").write_text(SERVERS)
    (tmp_path / "plan.toml").write_text(PLAN)
    ledger = tmp_path / "l.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    env.update({"TUNELEDGER_LEDGER": str(ledger), "TUNELEDGER_RESIDENT": "0"})
    plan = subprocess.Popen(
        [TUNELEDGER, "run", "plan", tmp_path / "plan.toml"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until(lambda: any(r["status"] == "ready" for r in _runs(ledger)), "a server ready")
        (serving,) = [r for r in _runs(ledger) if r["status"] == "ready"]
        assert group_alive(int(serving["pid"]))  # type: ignore[call-overload]
        plan.send_signal(signal.SIGKILL)
        plan.wait(timeout=30)
    finally:
        if plan.poll() is None:
            plan.kill()
    _until(lambda: not group_alive(int(serving["pid"])), "the server to be stopped")  # type: ignore[call-overload]
    _until(lambda: all(r["status"] == "stopped" for r in _runs(ledger)), "the stop recorded")
    store = LedgerStore(ledger)
    stops = store.read(types=["server_stopped"])
    (stop,) = [s for s in stops if s.run_id == serving["run_id"]]  # type: ignore[attr-defined]
    assert "its owner process died without stopping it" in stop.reason  # type: ignore[attr-defined]
    assert stop.actor == RUNNER_ACTOR and stop.signal == "SIGTERM"  # type: ignore[attr-defined]
    # no watchdog left behind either (it exits once the stop is recorded)
    _until(lambda: not _watchdogs(str(serving["run_id"])), "the watchdog to exit")


def _watchdogs(run_id: str) -> list[Path]:
    """The watchdog processes of ``run_id`` on this machine."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:
            continue
        if b"runners.server.supervise" in argv and run_id.encode() in argv:
            found.append(proc)
    return found


def _sleeper() -> subprocess.Popen[bytes]:
    """A stand-in engine server: its own session and group, as the runner starts one."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )


def _started(store: LedgerStore, run_id: str, pid: int) -> ServerStarted:
    started = ServerStarted(
        run_id=run_id, engine="sglang", config_name="c", port=1, pid=pid, argv=[sys.executable],
        session_id="s", actor=RUNNER_ACTOR, host=Host(hostname=socket.gethostname()),
    )  # fmt: skip
    store.append(started)
    return started


def test_a_server_that_ended_while_its_owner_died_unrecorded_is_recorded_by_its_watchdog(
    tmp_path: Path,
) -> None:
    """This test is the owner: it holds the write end of the watchdog's pipe as a runner does
    (``supervise.watch``). Its server ends, then the owner goes (closing the end, as the kernel
    does for a killed owner) before recording the end. Before, the watchdog exited once the
    group was gone and the run stayed ``ready`` forever: in CI, the MCP server SIGKILLed by its
    client while a plan was stopping its server."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    server = _sleeper()
    _started(store, "r", server.pid)
    fd = supervise.watch(store.path, "r", server.pid, "s")
    try:
        server.kill()
        server.wait()
        time.sleep(2.5)  # the watchdog of before looked at the group every second: gone by now
        assert _watchdogs("r"), "the watchdog left while its owner still held the run"
    finally:
        supervise.release(fd)
    _until(lambda: not _watchdogs("r"), "the watchdog to exit", limit_s=60)
    (stop,) = store.read(types=["server_stopped"])
    assert stop.run_id == "r" and stop.signal is None  # type: ignore[attr-defined]
    assert "its owner died before recording the end" in stop.reason  # type: ignore[attr-defined]
    statuses = store.query_arrow("SELECT status FROM server_runs").to_pylist()
    assert [r["status"] for r in statuses] == ["stopped"]


def test_a_watchdog_records_nothing_its_owner_recorded_or_never_started(tmp_path: Path) -> None:
    """An owner records the end, then releases (``ended``): no second stop. A start the owner
    could not record (a busy ledger) and whose server it stopped: no stop of an unknown run."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    servers = {"ended": _sleeper(), "unrecorded": _sleeper()}
    ended = _started(store, "ended", servers["ended"].pid)
    fds = {run_id: supervise.watch(store.path, run_id, p.pid, "s") for run_id, p in servers.items()}
    for run_id, server in servers.items():
        server.kill()
        server.wait()
        if run_id == "ended":
            store.append(
                ServerStopped(
                    run_id="ended", session_id="s", actor=RUNNER_ACTOR, host=ended.host,
                    signal="SIGKILL", reason="stopped",
                )
            )  # fmt: skip
        supervise.release(fds[run_id])
    _until(lambda: not _watchdogs("ended") and not _watchdogs("unrecorded"), "the watchdogs")
    stops = store.read(types=["server_stopped", "server_failed"])
    assert [(s.run_id, s.reason) for s in stops] == [("ended", "stopped")]  # type: ignore[attr-defined]


def test_the_next_runner_records_an_orphaned_run_and_stops_it_if_still_its_server(
    tmp_path: Path,
) -> None:
    """A run whose owner and watchdog are gone (killed together, or from before watchdogs)."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    here = Host(hostname=socket.gethostname())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # a server still running: its own group leader, the recorded program
    alive = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    # a pid now someone else's (not a group leader of the recorded program): left alone
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        for run_id, pid, argv in (
            ("gone", dead.pid, [sys.executable]),
            ("alive", alive.pid, [sys.executable, "-c", "..."]),
            ("reused", stranger.pid, ["/opt/sglang/bin/python"]),
            ("elsewhere", alive.pid, [sys.executable]),
        ):
            host = here if run_id != "elsewhere" else Host(hostname="another-node")
            store.append(
                ServerStarted(
                    run_id=run_id, engine="sglang", config_name="c", port=1, pid=pid,
                    argv=argv, session_id="s", actor=RUNNER_ACTOR, host=host,
                )
            )  # fmt: skip
        said: list[str] = []
        ServerRunner(store, session_id="s", say=said.append)
        status = {
            r["run_id"]: r["status"]
            for r in store.query_arrow("SELECT run_id, status FROM server_runs").to_pylist()
        }
        assert status == {
            "gone": "stopped",
            "alive": "stopped",
            "reused": "stopped",
            "elsewhere": "starting",
        }
        assert alive.wait(timeout=30) == -signal.SIGTERM  # stopped: it was that server
        assert stranger.poll() is None  # a reused pid is never signalled
        reasons = {s.run_id: s.reason for s in store.read(types=["server_stopped"])}  # type: ignore[attr-defined]
        assert all(r.startswith("orphaned:") for r in reasons.values())
        assert "server run gone was orphaned: recorded as stopped" in said
        ServerRunner(store, session_id="s")  # the next one finds nothing more to record
        assert len(store.read(types=["server_stopped"])) == 3
    finally:
        for proc in (alive, stranger):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
def test_resume_never_starts_a_second_server_beside_one_still_served(tmp_path: Path) -> None:
    (tmp_path / "servers.toml").write_text(SERVERS)
    (tmp_path / "plan.toml").write_text(PLAN)
    ledger = tmp_path / "l.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    env.update({"TUNELEDGER_LEDGER": str(ledger), "TUNELEDGER_SESSION": "s"})
    env["TUNELEDGER_RESIDENT"] = "0"
    owner = subprocess.Popen(
        [TUNELEDGER, "run", "server", "start", "baseline", "--configs", tmp_path / "servers.toml"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline()  # one JSON line once ready
        resumed = subprocess.run(
            [TUNELEDGER, "run", "plan", tmp_path / "plan.toml", "--resume"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert resumed.returncode == 10, resumed.stderr
        assert "is still served" in resumed.stderr and "nothing was started" in resumed.stderr
        assert len(_runs(ledger)) == 1  # no second server
    finally:
        owner.send_signal(signal.SIGINT)
        owner.wait(timeout=60)
    assert [r["status"] for r in _runs(ledger)] == ["stopped"]
