"""Server lifecycle: start a configuration, wait for health, record what it resolved to, stop it.

One ``ServerRunner`` per ledger (and session). ``start(config)`` launches the
engine in its own process group (``start_new_session=True``: Ctrl-C in the
terminal does not reach it, and stopping signals the whole group, TP workers
included) with stdout+stderr going to ``<ledger stem>.artifacts/servers/<run_id>.log``,
then polls the health path until it answers 200 (default timeout 30 min, for
large models) while watching that the process is alive and that the log shows
no crash. Events, appended as they happen (actor ``runner:tuneledger``, host =
the fingerprint, correlation = the run's ``server_started`` id, each caused by
the run's previous event):

``host_observed`` (once per session and fingerprint) -> ``server_started`` ->
``server_ready`` (startup facts from the SGLang log and ``/server_info``) ->
``finding_recorded``... -> ``server_stopped`` (exit code, the signal that ended
it, reason) -> findings that only appeared while it ran (found again in the
whole log at stop; ids are uuid5 of run, kind, flag and message, so re-recording
is idempotent). A failed start is one ``server_failed`` (cause ``crash``,
``out-of-memory``, ``port-in-use``, ``timeout`` or ``interrupted``, with the
last 40 log lines) and ``ServerStartFailed`` (or ``KeyboardInterrupt`` again)
is raised. Port in use and a missing engine are refused before anything
starts: no event.

Stopping: SIGINT to the group, wait ``sigint_wait_s``; SIGTERM, wait
``sigterm_wait_s``; SIGKILL. A second Ctrl-C while stopping moves to the next
signal at once. The stop is done when no process of the group is left (not just
the leader).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx

from ledger.errors import LedgerError, NotFound
from ledger.read.flag_memory import remembered_findings
from ledger.store import LedgerStore
from ledger.write import commands
from runners.artifacts import artifacts_dir, safe_name, server_log_path
from runners.host import HostFingerprint, fingerprint
from runners.server import log_pump, supervise
from runners.server.configs import DEFAULT_HEALTH_TIMEOUT_S, ServerConfig
from runners.server.engines import EngineAdapter, adapter_for
from runners.server.logs import ServerLog, read_log
from runners.server.process import (
    connect_host,
    exit_status,
    follow_lines,
    free_port,
    group_alive,
    port_in_use,
    read_lines,
)
from runners.server.runs import (
    FINDING_NS,
    PortInUse,
    ServerRun,
    ServerStartFailed,
    facts_summary,
    finding_id,
    merge_server_info,
)
from schemas import (
    Actor,
    Event,
    FindingRecorded,
    ServerFailed,
    ServerReady,
    ServerStarted,
    ServerStopped,
    StartupFacts,
)

#: Lines of the log a failure event keeps.
LOG_TAIL_LINES = 40
#: The actor of every runner event.
RUNNER_ACTOR = Actor(kind="runner", name="tuneledger")
_PORT_TAKEN_RE = re.compile(
    r"address already in use|Errno 98|port .* is (?:already )?in use", re.IGNORECASE
)


# --- the runner ----------------------------------------------------------------------


class ServerRunner:
    """Starts, watches and stops servers, recording every step in the ledger.

    Args:
        store: the ledger (created if needed by ``LedgerStore.init`` beforehand).
        session_id: session of every event (``None``: none).
        host: the fingerprint to use (default: ``runners.host.fingerprint()`` on first start).
        health_timeout_s: default wait for health, seconds (a configuration's own wins).
        poll_interval_s: how often health, process and log are checked, seconds.
        sigint_wait_s / sigterm_wait_s / sigkill_wait_s: stop escalation waits, seconds.
        crash_grace_s: how long a server whose log shows a crash may take to exit by itself.
        say: where progress lines go (default: nowhere); the CLI prints them.
    """

    def __init__(
        self,
        store: LedgerStore,
        *,
        session_id: str | None = None,
        host: HostFingerprint | None = None,
        health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S,
        poll_interval_s: float = 0.5,
        sigint_wait_s: float = 30.0,
        sigterm_wait_s: float = 15.0,
        sigkill_wait_s: float = 10.0,
        crash_grace_s: float = 10.0,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.health_timeout_s = health_timeout_s
        self.poll_interval_s = poll_interval_s
        self.sigint_wait_s = sigint_wait_s
        self.sigterm_wait_s = sigterm_wait_s
        self.sigkill_wait_s = sigkill_wait_s
        self.crash_grace_s = crash_grace_s
        self.say = say or (lambda _line: None)
        self._fingerprint = host
        self._hurry = threading.Event()
        self._shields: list[threading.Event] = []
        self.runs: list[ServerRun] = []
        try:  # the runs a dead owner left: stopped and recorded before anything starts
            supervise.sweep(store, socket.gethostname(), self.say)
        except LedgerError as exc:  # a ledger not created yet, busy: the next runner looks again
            self.say(f"orphaned runs not checked: {exc}")

    @contextmanager
    def _ending(self, run: ServerRun) -> Iterator[None]:
        """The run is over: marked ended at once (no second stop), its watchdog released only
        once the block (the end's record) is done. Why this order: released first, an owner
        killed between the release and the record (a client's SIGKILL while a plan stops its
        server) left the run ``ready`` forever; released after, its watchdog records the end."""
        run.ended = True
        recorded = False
        try:
            yield
            recorded = True
        finally:
            supervise.release(run.watchdog_fd, recorded)
            run.watchdog_fd = None

    # --- context manager: nothing left running -------------------------------------

    def __enter__(self) -> ServerRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, reason: str = "runner closed") -> None:
        """Stop every run still alive."""
        for run in list(self.runs):
            if not run.ended:
                self.stop(run, reason=reason)

    # --- events -------------------------------------------------------------------

    def _append(self, run: ServerRun | None, event: Event) -> Event:
        if run is not None:
            event = event.model_copy(
                update={
                    "correlation_id": run.started_event_id,
                    "causation_id": event.causation_id or run.last_event_id,
                }
            )
        commands.record(self.store, event)
        if run is not None:
            run.last_event_id = event.event_id
        return event

    def _common(self, run: ServerRun) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "actor": RUNNER_ACTOR,
            "host": run.host,
            "run_id": run.run_id,
        }

    def _observe_host(self, fp: HostFingerprint) -> None:
        """Record ``host_observed`` unless this session already has this fingerprint."""
        key = fp.key()
        event_id = uuid.uuid5(FINDING_NS, f"host|{self.session_id or ''}|{key}")
        for seen in self.store.read(types=["host_observed"], session_id=self.session_id):
            if seen.event_id == event_id or (
                seen.session_id == self.session_id
                and seen.host == fp.host
                and getattr(seen, "other_versions", None) == fp.other_versions
            ):
                return
        event = fp.to_event(session_id=self.session_id, actor=RUNNER_ACTOR).model_copy(
            update={"event_id": event_id, "source": f"runner fingerprint {key}"}
        )
        commands.record(self.store, event)

    def previous_startup(self, run_id: str | None = None) -> StartupFacts | None:
        """The startup facts of the session's run started before ``run_id`` (the latest run when
        ``None``): ``ledger.write.commands.previous_startup``, as for imported logs and the view."""
        return commands.previous_startup(self.store, self.session_id, run_id=run_id)

    # --- start ------------------------------------------------------------------------

    def start(
        self,
        config: ServerConfig,
        *,
        port: int | None = None,
        health_timeout_s: float | None = None,
    ) -> ServerRun:
        """Launch ``config`` and wait until it is healthy; return the running server.

        Args:
            port: overrides the configuration's port (default: the engine's).
            health_timeout_s: overrides the configuration's and the runner's wait (seconds).

        Raises:
            ConfigError: the configuration cannot launch its engine (no model).
            MissingEngine: the engine is not installed (nothing started, no event).
            PortInUse: the port is taken (nothing started, no event).
            ServerStartFailed: it crashed, ran out of memory or timed out (``server_failed`` recorded,
                nothing of it left running).
            KeyboardInterrupt: Ctrl-C while waiting (server stopped, ``server_failed`` cause
                ``interrupted`` recorded).
        """
        run = self.launch(config, port=port)
        timeout = health_timeout_s or config.health_timeout_s or self.health_timeout_s
        return self.wait_ready(run, timeout_s=timeout)

    def launch(self, config: ServerConfig, *, port: int | None = None) -> ServerRun:
        """Check, launch and record ``server_started``; does not wait (see ``wait_ready``).

        Raises:
            ConfigError, MissingEngine, PortInUse: as ``start``, before anything starts.
        """
        adapter = adapter_for(config.engine)
        adapter.check_config(config)
        probe = adapter.probe(config)
        port = port or (config.port if config.port is not None else adapter.default_port)
        if port == 0:  # `port = 0` in the configuration: any free port, picked now
            port = free_port(config.host)
        if port_in_use(config.host, port):
            raise PortInUse(
                f"port {port} on {config.host} is already in use: stop that server or give --port"
            )
        if self._fingerprint is None:
            self._fingerprint = fingerprint()
        fp = self._fingerprint.with_engine(adapter.name, probe.version)
        self._observe_host(fp)

        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        run_id = f"{safe_name(config.name)}-{stamp}-{uuid.uuid4().hex[:6]}"
        log_path = server_log_path(self.store.path, run_id)
        argv = adapter.argv(config, port)
        with self._shielded() as interrupted:
            run = self._spawn(config, adapter, argv, port, log_path, run_id, fp)
        if interrupted.is_set():
            self._interrupted(run, "while launching")
            raise KeyboardInterrupt
        self.say(f"started {run_id}: pid {run.pid}, port {port}, log {log_path}")
        return run

    def _lines(self, run: ServerRun) -> list[str]:
        """The log's lines, every one the server wrote so far (``runners.server.log_pump``)."""
        if run.pump is not None:
            if run.process.poll() is None:
                log_pump.sync(run.pump)
            else:
                log_pump.end(run.pump)
        return read_lines(run.log_path)

    def _spawn(
        self,
        config: ServerConfig,
        adapter: EngineAdapter,
        argv: list[str],
        port: int,
        log_path: Path,
        run_id: str,
        fp: HostFingerprint,
    ) -> ServerRun:
        """Popen in a new session with the log as stdout+stderr, then record ``server_started``.

        The event is built (and validated) before the process starts: a configuration the event
        cannot hold is refused with nothing started, never a server the ledger does not know of."""
        started = ServerStarted(
            run_id=run_id,
            engine=adapter.name,
            model=config.model,
            config_name=config.name,
            flags=config.flags,
            env=adapter.recorded_env(config),
            argv=argv,
            port=port,
            pid=os.getpid(),  # the server's, once it runs
            log_path=str(log_path),
            session_id=self.session_id,
            actor=RUNNER_ACTOR,
            host=fp.host,
        )
        pump = log_pump.start(log_path)  # the server's output to the log, secrets masked
        try:
            with open(log_path, "ab") as log:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log if pump is None else pump.stdin,
                    stderr=subprocess.STDOUT,
                    env=adapter.env(config),
                    start_new_session=True,
                )
        except OSError as exc:
            from runners.server.engines import MissingEngine

            if pump is not None:
                log_pump.end(pump)
            raise MissingEngine(
                f"{config.engine}: cannot run {argv[0]!r}: {exc.strerror or exc}"
            ) from None
        started = started.model_copy(
            update={"pid": process.pid, "correlation_id": started.event_id}
        )
        run = ServerRun(
            run_id=run_id,
            config=config,
            adapter=adapter,
            argv=argv,
            port=port,
            base_url=f"http://{connect_host(config.host)}:{port}",
            log_path=log_path,
            log_ref=str(log_path.relative_to(artifacts_dir(self.store.path))),
            process=process,
            pump=pump,
            host=fp.host,
            started_event_id=started.event_id,
            last_event_id=started.event_id,
            started_at=time.monotonic(),
        )
        self.runs.append(run)
        try:
            # before the ledger knows of it: a recorded run always has a watchdog (supervise)
            run.watchdog_fd = supervise.watch(
                self.store.path, run_id, process.pid, self.session_id, log_path
            )
            commands.record(self.store, started)
        except BaseException:
            self._terminate(run)  # a server the ledger does not know of must not keep running
            with self._ending(run):
                raise
        self._remember(run, started)
        return run

    def _remember(self, run: ServerRun, started: ServerStarted) -> None:
        """A flag of this run the ledger already knows to do nothing here: say so now (issue 10)."""
        for finding in remembered_findings(self.store, started):
            fid = finding_id(run.run_id, finding)
            run.finding_ids.add(fid)
            self._append(
                run,
                finding.model_copy(
                    update={
                        "event_id": fid,
                        "actor": RUNNER_ACTOR,
                        "host": run.host,
                        "source": f"flag_verdicts (event {finding.evidence[0].ref})",
                    }
                ),
            )
            self.say(f"finding: {finding.message}")

    def wait_ready(self, run: ServerRun, *, timeout_s: float | None = None) -> ServerRun:
        """Poll health until 200, then record ``server_ready`` and the findings.

        Raises:
            ServerStartFailed, KeyboardInterrupt: as ``start``.
        """
        timeout = timeout_s or run.config.health_timeout_s or self.health_timeout_s
        deadline = run.started_at + timeout
        crash_seen_at: float | None = None
        log_size, log_ready = -1, not run.adapter.ready_line
        try:
            with httpx.Client(timeout=5.0, trust_env=False) as client:
                while True:
                    if run.process.poll() is not None:
                        return self._fail_start(run)
                    size = run.log_path.stat().st_size if run.log_path.exists() else 0
                    if size != log_size:
                        log_size = size
                        log = self.read_log(run)
                        log_ready = log_ready or log.ready
                        if crash_seen_at is None and log.crash is not None:
                            # a hung server whose log shows a crash: give it a grace period
                            crash_seen_at = time.monotonic()
                    # vLLM: healthy and its ready line printed (a health answer alone could come
                    # from a process that is not this engine's finished HTTP server)
                    if log_ready and self._healthy(client, run):
                        break
                    now = time.monotonic()
                    if crash_seen_at is not None and now - crash_seen_at > self.crash_grace_s:
                        return self._fail_start(run)
                    if now > deadline:
                        return self._fail_start(run, timeout_s=timeout)
                    time.sleep(self.poll_interval_s)
                info = self._server_info(client, run) if run.adapter.sglang_log else None
        except KeyboardInterrupt:
            self._interrupted(run, "while waiting for health")
            raise
        with self._shielded() as interrupted:
            self._record_ready(run, info)
        if interrupted.is_set():
            raise KeyboardInterrupt  # ready and recorded: the caller stops it
        return run

    def _healthy(self, client: httpx.Client, run: ServerRun) -> bool:
        for path in run.adapter.health_paths:
            try:
                status = client.get(run.base_url + path).status_code
            except httpx.HTTPError:
                return False  # not listening yet
            if status == 200:
                return True
            if status != 404:
                return False  # 503 while loading
        return False

    def _server_info(self, client: httpx.Client, run: ServerRun) -> dict[str, Any] | None:
        """``/server_info`` (older builds ``/get_server_info``); ``None`` when neither answers."""
        for path in ("/server_info", "/get_server_info"):
            try:
                response = client.get(run.base_url + path, timeout=30.0)
            except httpx.HTTPError:
                return None
            if response.status_code == 200:
                try:
                    body = response.json()
                except ValueError:
                    return None
                return body if isinstance(body, dict) else None
        return None

    def read_log(self, run: ServerRun) -> ServerLog:
        """The run's log as it is now, read with its engine's grammar."""
        return read_log(run.adapter.log_grammar, self._lines(run))

    def _record_ready(self, run: ServerRun, info: dict[str, Any] | None) -> None:
        facts = self.read_log(run)
        startup = facts.startup()
        if run.adapter.sglang_log:
            startup = merge_server_info(startup, info)
        warnings = facts.warnings()
        if run.adapter.sglang_log and info is None:
            warnings.append(
                "/server_info and /get_server_info did not answer: startup facts from the log only"
            )
        ready = ServerReady(
            ready_after_s=round(time.monotonic() - run.started_at, 3),
            startup=startup,
            warnings=warnings,
            source=run.log_ref,
            **self._common(run),
        )
        previous = self.previous_startup(run.run_id)
        self._append(run, ready)
        run.ready, run.startup = True, startup
        self.say(f"ready {run.run_id} after {ready.ready_after_s:.1f} s{facts_summary(startup)}")
        self._record_findings(run, facts, previous)

    def _record_findings(
        self, run: ServerRun, facts: ServerLog, previous: StartupFacts | None
    ) -> list[FindingRecorded]:
        """Append the findings of ``facts`` not yet recorded for this run; return the new ones."""
        new = []
        for finding in facts.findings(
            host=run.host,
            previous=previous,
            run_id=run.run_id,
            session_id=self.session_id,
            source_name=run.log_ref,
        ):
            fid = finding_id(run.run_id, finding)
            if fid in run.finding_ids or self._stored(fid):
                run.finding_ids.add(fid)
                continue
            run.finding_ids.add(fid)
            event = finding.model_copy(
                update={
                    "event_id": fid,
                    "actor": RUNNER_ACTOR,
                    "host": run.host,
                    "source": finding.evidence[0].ref if finding.evidence else run.log_ref,
                }
            )
            self._append(run, event)
            new.append(event)
            self.say(f"finding: {finding.message}")
        return new

    def _stored(self, event_id: UUID) -> bool:
        """Whether the ledger has this event (a finding recorded by an earlier check or process)."""
        try:
            self.store.get(event_id)
        except NotFound:
            return False
        return True

    def check(self, run: ServerRun) -> list[FindingRecorded]:
        """Parse the whole log again and record findings that appeared since (e.g. decode batches
        above the captured CUDA graph sizes). Safe to call any time after ready."""
        if not run.ready:
            return []
        with self._shielded() as interrupted:
            found = self._record_findings(run, self.read_log(run), None)
        if interrupted.is_set():
            raise KeyboardInterrupt
        return found

    # --- failures --------------------------------------------------------------------

    def _fail_start(self, run: ServerRun, *, timeout_s: float | None = None) -> ServerRun:
        """Stop what is left, record ``server_failed`` and raise ``ServerStartFailed``."""
        with self._shielded() as interrupted:
            failed = self._record_failure(run, timeout_s)
        if interrupted.is_set():
            raise KeyboardInterrupt
        raise ServerStartFailed(
            f"server {run.config.name} ({run.run_id}) failed: {failed.cause}: {failed.message} (log: {run.log_path})",
            failed,
        )

    def _record_failure(self, run: ServerRun, timeout_s: float | None) -> ServerFailed:
        self._terminate(run)  # after a crash too: TP workers may outlive the leader
        lines = self._lines(run)
        facts = read_log(run.adapter.log_grammar, lines)
        code = exit_status(run.process)
        tail = lines[-LOG_TAIL_LINES:]
        if timeout_s is not None and facts.crash is None:
            cause, message = (
                "timeout",
                f"not healthy after {timeout_s:.0f} s (health: {', '.join(run.adapter.health_paths)})",
            )
        elif facts.crash is not None:
            cause, message = facts.crash.cause, facts.crash.message
        elif any(_PORT_TAKEN_RE.search(line) for line in tail):
            cause, message = "port-in-use", f"port {run.port} was taken when the server bound it"
        else:
            cause, message = "crash", f"exited with code {code} before becoming healthy"
        # the startup facts the log showed before the failure survive it (issue 10)
        startup = facts.startup(run.log_ref) if facts.has_startup_facts else None
        failed = ServerFailed(
            cause=cause,
            message=message,
            log_tail=tail,
            exit_code=code,
            startup=startup,
            source=run.log_ref,
            **self._common(run),
        )
        with self._ending(run):
            self._append(run, failed)
        return failed

    def _interrupted(self, run: ServerRun, when: str) -> None:
        """Stop the server and record ``server_failed`` cause ``interrupted`` (a further Ctrl-C only hurries)."""
        with self._shielded():
            sig = self._terminate(run)
            with self._ending(run):
                failed = ServerFailed(
                    cause="interrupted",
                    message=f"interrupted (Ctrl-C) {when}; stopped with {sig or 'no signal'}",
                    log_tail=self._lines(run)[-LOG_TAIL_LINES:],
                    exit_code=exit_status(run.process),
                    source=run.log_ref,
                    **self._common(run),
                )
                self._append(run, failed)

    # --- stop ---------------------------------------------------------------------------

    def _terminate(self, run: ServerRun) -> str | None:
        """Signal the group until none of it is left; return the name of the last signal sent
        (the one that ended it), ``None`` when it had already ended.

        Raises:
            LedgerError: the group survived SIGKILL (uninterruptible processes).
        """
        run.process.poll()
        if not group_alive(run.pgid):
            return None
        stages = (
            (signal.SIGINT, self.sigint_wait_s),
            (signal.SIGTERM, self.sigterm_wait_s),
            (signal.SIGKILL, self.sigkill_wait_s),
        )
        with self._shielded():
            last = None
            for sig, wait_s in stages:
                try:
                    os.killpg(run.pgid, sig)
                except ProcessLookupError:
                    return last
                last = sig.name
                self._hurry.clear()
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline and not self._hurry.is_set():
                    run.process.poll()  # reap the leader so it is not counted as alive
                    if not group_alive(run.pgid):
                        return last
                    time.sleep(0.05)
            run.process.poll()
            if group_alive(run.pgid):
                raise LedgerError(f"process group {run.pgid} of {run.run_id} survived SIGKILL")
            return last

    @contextmanager
    def _shielded(self) -> Iterator[threading.Event]:
        """Inside, Ctrl-C does not raise: it sets the yielded event and ``_hurry`` (a stop then moves
        on to the next signal at once). Why: a KeyboardInterrupt inside a ledger append makes DuckDB
        abort the commit ("Query interrupted"), and one inside a stop would abandon a running server.
        Callers re-raise KeyboardInterrupt afterwards where the interrupt must propagate."""
        hit = threading.Event()
        if threading.current_thread() is not threading.main_thread():
            yield hit  # signal handlers can only be set from the main thread
            return
        # Shields nest (a stop terminates inside its own shield): a Ctrl-C reaches every open one.
        self._shields.append(hit)

        def handler(_signum: int, _frame: Any) -> None:
            for event in self._shields:
                event.set()
            self._hurry.set()

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield hit
        finally:
            self._shields.remove(hit)
            # None: a handler not set from Python; the default one is the closest we can restore.
            signal.signal(
                signal.SIGINT, previous if previous is not None else signal.default_int_handler
            )

    def stop(self, run: ServerRun, *, reason: str = "stopped") -> ServerStopped | None:
        """Stop the server (SIGINT, SIGTERM, SIGKILL to its group), record ``server_stopped`` and
        the findings that appeared while it ran. ``None`` when the run had already ended.

        Raises:
            KeyboardInterrupt: Ctrl-C came during the stop; it moved the stop on to the next signal,
                the stop finished and was recorded, and the caller is interrupted now.
            LedgerError: the group survived SIGKILL.
        """
        if run.ended:
            return None
        if run.ready and run.process.poll() is not None:
            # It ended by itself before the stop (an engine that died after readiness, its root
            # cause in the log): that is what happened, not a stop.
            self.exited(run)
            return None
        if run.process.poll() is None:  # a draining server can take its time: say so first
            self.say(
                f"stopping {run.run_id}… (SIGINT; SIGTERM after {self.sigint_wait_s:g} s if it is "
                "still draining)"
            )
        with self._shielded() as interrupted:
            sig = self._terminate(run)
            self._lines(run)  # the pump's last lines written, and the pump ended
            with self._ending(run):
                stopped = ServerStopped(
                    exit_code=exit_status(run.process),
                    signal=sig,
                    reason=reason if sig else f"{reason} (it had already exited)",
                    source=run.log_ref,
                    **self._common(run),
                )
                self._append(run, stopped)
            self.say(
                f"stopped {run.run_id}: {sig or 'already exited'}, exit code {stopped.exit_code}"
            )
            if run.ready:
                self._record_findings(run, self.read_log(run), None)
        if interrupted.is_set():
            raise KeyboardInterrupt  # Ctrl-C during the stop: it sped the stop up, now it stops the caller
        return stopped

    def restart(
        self,
        run: ServerRun,
        config: ServerConfig | None = None,
        *,
        port: int | None = None,
        health_timeout_s: float | None = None,
    ) -> ServerRun:
        """Stop ``run`` (reason ``restart``) and start ``config`` (default: the same) on the same port.

        Raises:
            as ``start``.
        """
        self.stop(run, reason="restart")
        return self.start(
            config or run.config, port=port or run.port, health_timeout_s=health_timeout_s
        )

    def exited(self, run: ServerRun) -> Event | None:
        """When the server ended by itself (after ready): record ``server_failed`` (its log shows
        a crash) or ``server_stopped`` and return it; ``None`` while it runs."""
        if run.ended or run.process.poll() is None:
            return None
        with self._shielded() as interrupted:
            event = self._record_exit(run)
        if interrupted.is_set():
            raise KeyboardInterrupt
        return event

    def _record_exit(self, run: ServerRun) -> Event:
        self._terminate(run)  # workers may outlive the leader
        with self._ending(run):
            return self._record_end_of(run)

    def _record_end_of(self, run: ServerRun) -> Event:
        lines = self._lines(run)
        facts = read_log(run.adapter.log_grammar, lines)
        code = run.process.returncode
        if facts.crash is not None:
            event: Event = ServerFailed(
                cause=facts.crash.cause,
                message=f"died after ready: {facts.crash.message}",
                log_tail=lines[-LOG_TAIL_LINES:],
                exit_code=code,
                source=run.log_ref,
                **self._common(run),
            )
        else:
            event = ServerStopped(
                exit_code=code,
                signal=None,
                reason=f"exited by itself with code {code}",
                source=run.log_ref,
                **self._common(run),
            )
        self._append(run, event)
        self._record_findings(run, facts, None)
        return event

    def watch(
        self,
        run: ServerRun,
        *,
        on_line: Callable[[str], None] | None = None,
        check_every_s: float = 30.0,
    ) -> Event | None:
        """Block while the server runs: pass new log lines to ``on_line``, record new findings every
        ``check_every_s`` seconds. Returns the end event when it exits by itself.

        Raises:
            KeyboardInterrupt: Ctrl-C (the server still runs: the caller stops it).
        """
        offset = run.log_path.stat().st_size if on_line else 0
        next_check = time.monotonic() + check_every_s
        while True:
            if on_line is not None:
                offset = follow_lines(run.log_path, offset, on_line)
            ended = self.exited(run)
            if ended is not None:
                return ended
            if time.monotonic() >= next_check:
                self.check(run)
                next_check = time.monotonic() + check_every_s
            time.sleep(self.poll_interval_s)
