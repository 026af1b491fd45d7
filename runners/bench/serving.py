"""Which configuration a benchmark measures: the server run the ledger knows on the URL's port.

``tuneledger run bench`` used to record every server as ``baseline`` unless told otherwise, so a
``continuous-batching`` server started by ``run server start`` became the baseline and every
later delta was computed against it. The ledger knows better: the server runner
recorded which configuration it started on which port (``server_started.port``), and whether
that run has ended (``server_runs.status``). This module looks that run up; the CLI takes its
configuration name when none is given, and refuses a ``--config-name`` that contradicts it.

Which runs count as "serving this URL":

- still ``starting`` or ``ready`` in ``server_runs`` (no ``server_stopped`` / ``server_failed``);
- started on the port the URL names (the scheme's default port when it names none);
- on the machine the URL points at: a loopback or own-name URL matches runs recorded on this
  machine (``host.hostname``), whose process must still be alive (a runner killed with SIGKILL
  records no stop: its run stays ``ready`` in the view, but its pid is gone); another host name
  matches runs recorded with that host name.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from ledger.errors import InvalidInput
from ledger.read.runs import open_server_runs
from ledger.store import LedgerStore

#: Host names that mean "this machine" in a URL.
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "ip6-localhost"}


class ConfigContradicted(InvalidInput):
    """``--config-name`` names another configuration than the one the ledger knows serves the port (exit 3)."""


@dataclass(frozen=True)
class ServingRun:
    """A server run the ledger holds as still serving, and what it serves."""

    run_id: str
    config_name: str | None
    port: int
    session_id: str | None
    started_at: str


def url_port(url: str) -> tuple[str, int | None]:
    """The host and port a base URL names (the scheme's default port when none is given)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        return host, None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return host, port


def _this_machine() -> set[str]:
    name = socket.gethostname().lower()
    return {name, name.split(".")[0], socket.getfqdn().lower()}


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True  # not recorded: trust the ledger's status
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def serving_runs(store: LedgerStore, url: str) -> list[ServingRun]:
    """The ledger's server runs still serving ``url``'s port, latest first (usually one)."""
    host, port = url_port(url)
    if port is None or not store.path.exists():
        return []
    here = _this_machine()
    local = host in _LOOPBACK or host in here or host.startswith("127.")
    rows = open_server_runs(store, port)
    found = []
    for row in rows:
        recorded_on = row.hostname
        if local:
            if recorded_on is not None and recorded_on not in here:
                continue
            if not _alive(row.pid):
                continue
        elif recorded_on is None or (
            recorded_on != host and recorded_on.split(".")[0] != host.split(".")[0]
        ):
            continue
        found.append(
            ServingRun(
                run_id=row.run_id,
                config_name=row.config_name,
                port=port,
                session_id=row.session_id,
                started_at=row.started_at,
            )
        )
    return found


def resolve_config_name(
    store: LedgerStore,
    url: str,
    config_name: str | None,
    server_run_id: str | None,
) -> tuple[str, str | None, str]:
    """The configuration name and server run a benchmark of ``url`` records, and what to say.

    Returns ``(config_name, server_run_id, message)``: the name given, else the one of the
    run serving the port, else ``baseline`` as before; the message says which and why.

    Raises:
        ConfigContradicted: ``config_name`` is not the configuration of the run serving the port
            (or of ``server_run_id``).
    """
    runs = serving_runs(store, url)
    if server_run_id is not None:
        runs = [r for r in runs if r.run_id == server_run_id] or runs
    run = runs[0] if runs else None
    if run is None or run.config_name is None:
        if config_name is not None:
            return config_name, server_run_id, ""
        _, port = url_port(url)
        return (
            "baseline",
            server_run_id,
            f"no server run in the ledger serves port {port}: the runs are recorded as "
            "configuration 'baseline' (the one deltas compare with); give --config-name NAME "
            "for another configuration",
        )
    if config_name is not None and config_name != run.config_name:
        raise ConfigContradicted(
            f"--config-name {config_name} contradicts the ledger: port {run.port} is served by "
            f"server run {run.run_id} of configuration '{run.config_name}' (server_runs); "
            f"leave --config-name out to record it as '{run.config_name}', or stop that server"
        )
    if server_run_id is not None and server_run_id != run.run_id:
        # a run id given that the ledger does not see serving this port: keep the user's link
        return config_name or run.config_name, server_run_id, ""
    message = (
        ""
        if config_name is not None
        else f"measuring configuration '{run.config_name}': server run {run.run_id} serves "
        f"port {run.port} (server_runs)"
    )
    return run.config_name, run.run_id, message
