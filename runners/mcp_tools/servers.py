"""``start_server``, ``stop_server``, ``running_servers``: servers an agent keeps running between calls.

``tuneledger run server start CONFIG`` stays in the foreground until Ctrl-C; an agent cannot
hold a call open for that, so ``start_server`` returns once the server is healthy (run id, port,
URL) and the MCP server keeps it in a ``ServerPool`` until ``stop_server`` or until the client
goes (every server it started is then stopped and recorded: ``server_stopped``, reason "the MCP
server ended"). A watcher thread records a server that exits by itself (``server_failed`` with
the crash, or ``server_stopped``), as ``run server start`` does while it watches. The
recording is the server runner's (``runners.server.runner.ServerRunner``), on a one-shot store:
nothing holds the ledger between calls.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ledger.errors import NotFound
from ledger.mcp.toolbox import Arguments, Call, Cancelled, Seat, Toolbox, tool_from_models
from runners.server.runner import ServerRun
from runners.usecases import Served, server_ended, stop_server

#: How often the watcher looks for servers that exited by themselves, seconds.
WATCH_INTERVAL_S = 2.0


class ServerPool:
    """The servers this MCP server started and that still run, by run id."""

    def __init__(self, seat: Seat) -> None:
        self.seat = seat
        self._lock = threading.Lock()
        self._running: dict[str, Served] = {}
        self._ended: dict[str, Any] = {}
        self._stop_watching = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self, call: Call, args: StartArgs) -> ServerRun:
        """Start ``args.config`` and keep it (``ServerRunner.start``'s errors and exit codes)."""
        from runners.usecases import ServerRequest, start_server

        request = ServerRequest(
            Path(args.configs),
            args.config,
            args.port,
            args.health_timeout_s,
            args.session_id or self.seat.session_id,
        )
        served = start_server(
            self.seat.store(),
            request,
            lambda line: call.progress(line),
            given_up=call.cancelled.is_set,  # the agent gave up while it started: stopped
        )
        if served.run.ended:
            raise Cancelled("cancelled by the MCP client")
        with self._lock:
            self._running[served.run_id] = served
        self._watch()
        return served.run

    def stop(self, run_id: str, reason: str) -> dict[str, Any]:
        """Stop a server of the pool and record it; one that had exited says how.

        Raises:
            NotFound: no server with this run id was started by this MCP server (exit 5).
        """
        with self._lock:
            found = self._running.pop(run_id, None)
            if found is None:
                ended = self._ended.get(run_id)
                if ended is None:
                    raise NotFound(
                        f"no server {run_id!r} started by this MCP server "
                        "(running_servers lists them)"
                    )
                return _end_json(run_id, ended, already=True)
            stopped = stop_server(found, reason)
        return _end_json(run_id, stopped, already=stopped is None)

    def running(self) -> list[dict[str, Any]]:
        self._reap()
        with self._lock:
            return [
                {
                    "run_id": run.run_id,
                    "config": run.config.name,
                    "port": run.port,
                    "base_url": run.base_url,
                    "pid": run.pid,
                    "log": str(run.log_path),
                }
                for run in (served.run for served in self._running.values())
            ]

    def _reap(self) -> None:
        """Record the servers that exited by themselves and drop them from the pool."""
        with self._lock:
            for run_id, served in list(self._running.items()):
                ended = server_ended(served)
                if ended is not None:
                    del self._running[run_id]
                    self._ended[run_id] = ended

    def _watch(self) -> None:
        if self._watcher is not None:
            return

        def loop() -> None:
            while not self._stop_watching.wait(WATCH_INTERVAL_S):
                try:
                    self._reap()
                except Exception as exc:  # noqa: BLE001 - the next round tries again
                    print(f"tuneledger mcp: watching servers: {exc}", file=sys.stderr)

        self._watcher = threading.Thread(target=loop, name="mcp-server-watch", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        """Stop every server still running (the client went away)."""
        self._stop_watching.set()
        with self._lock:
            runs = list(self._running.values())
            self._running.clear()
        for served in runs:
            stop_server(served, "the MCP server ended")


def _end_json(run_id: str, event: Any, *, already: bool) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "already_ended": already,
        "event_type": getattr(event, "type", None),
        "event_id": str(event.event_id) if event is not None else None,
        "exit_code": getattr(event, "exit_code", None),
        "signal": getattr(event, "signal", None),
        "reason": getattr(event, "reason", None) or getattr(event, "message", None),
    }


class StartArgs(Arguments):
    config: str = Field(description="The configuration's name in the configs file.")
    configs: str = Field(
        default_factory=lambda: os.environ.get("TUNELEDGER_SERVERS", "servers.toml"),
        description="The TOML file of server configurations (relative to the MCP server's "
        "working directory; default $TUNELEDGER_SERVERS or servers.toml).",
    )
    port: int | None = Field(None, ge=1, le=65535, description="Default: the configuration's.")
    health_timeout_s: float | None = Field(
        None, ge=1, description="Seconds to wait for health (default: the configuration's)."
    )
    session_id: str | None = Field(None, description="Default: the server's --session.")


class StartedOut(BaseModel):
    run_id: str
    config: str
    port: int
    base_url: str
    pid: int
    log: str = Field(description="The server's log file.")


class StopArgs(Arguments):
    run_id: str = Field(description="The run_id start_server returned.")
    reason: str = Field("stopped by the agent", description="Recorded on server_stopped.")


class StoppedOut(BaseModel):
    run_id: str
    already_ended: bool = Field(description="It had exited by itself (event_type says how).")
    event_type: str | None
    event_id: str | None
    exit_code: int | None
    signal: str | None
    reason: str | None


class NoArgs(Arguments):
    pass


class RunningOut(BaseModel):
    servers: list[dict[str, Any]]


def add_server_tools(toolbox: Toolbox, pool: ServerPool) -> None:
    def start(args: StartArgs, call: Call) -> dict[str, Any]:
        run = pool.start(call, args)
        return {
            "run_id": run.run_id,
            "config": run.config.name,
            "port": run.port,
            "base_url": run.base_url,
            "pid": run.pid,
            "log": str(run.log_path),
        }

    toolbox.add(
        tool_from_models(
            "start_server",
            "Start a server configuration (engine, model, flags from a TOML file, as `tuneledger "
            "run server start`), wait until healthy and return its run_id, port and base_url; it "
            "keeps running until stop_server (or until this MCP server ends). Records "
            "server_started / server_ready and what the log says went wrong. Exit 10 port in use, "
            "11 engine not installed, 12 failed to start (server_failed holds the log tail).",
            StartArgs,
            StartedOut,
            start,
            long_running=True,
        )
    )
    toolbox.add(
        tool_from_models(
            "stop_server",
            "Stop a server started by start_server (SIGINT, SIGTERM, SIGKILL to its process "
            "group) and record server_stopped with the findings of its log.",
            StopArgs,
            StoppedOut,
            lambda args, _call: pool.stop(args.run_id, args.reason),
            destructive=True,
        )
    )
    toolbox.add(
        tool_from_models(
            "running_servers",
            "The servers start_server started that still run (run_id, config, port, base_url).",
            NoArgs,
            RunningOut,
            lambda _args, _call: {"servers": pool.running()},
            read_only=True,
        )
    )
