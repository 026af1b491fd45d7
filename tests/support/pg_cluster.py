"""A throwaway PostgreSQL cluster for the hub tests: ``initdb`` + ``pg_ctl`` in a temp dir.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as
the ``postgres`` system user (``runuser``). It listens on a Unix socket in its own
directory and on 127.0.0.1 at a port picked free by the OS (never a fixed port: the
machine is shared). Trust authentication on the socket for the superuser; the hub's
writer role authenticates with a password over TCP (scram-sha-256), which is how the
tests prove credentials come from the environment and are never stored.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Where Debian's packages put the server binaries (``initdb``/``pg_ctl`` are also on PATH here).
_DEBIAN_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))


def _binary(name: str) -> str | None:
    for folder in reversed(_DEBIAN_BIN):
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


def available() -> bool:
    """True when ``initdb`` and ``pg_ctl`` can be found."""
    return _binary("initdb") is not None and _binary("pg_ctl") is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Cluster:
    """A running cluster: ``superuser_dsn`` (socket, trust) and TCP ``host``/``port``."""

    root: Path
    port: int
    socket_dir: Path
    user: str

    @property
    def superuser_dsn(self) -> str:
        return f"host={self.socket_dir} port={self.port} user={self.user} dbname=postgres"

    def url(self, user: str, dbname: str = "postgres", **options: str) -> str:
        """A ``postgresql://`` URL over TCP, without any password."""
        query = "&".join(f"{key}={value}" for key, value in options.items())
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}" + (
            f"?{query}" if query else ""
        )

    def server_cpu_s(self) -> float:
        """CPU seconds (user + system) used by the server so far: the postmaster, its live
        children, and the children it has reaped (every closed connection's backend)."""
        tick = os.sysconf("SC_CLK_TCK")
        postmaster = int((self.root / "data" / "postmaster.pid").read_text().split()[0])

        def fields(pid: int) -> list[str]:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

        own = fields(postmaster)
        total = sum(int(v) for v in own[11:15])  # utime, stime, cutime, cstime
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != postmaster:
                try:
                    stat = fields(int(entry.name))
                except OSError:
                    continue
                if int(stat[1]) == postmaster:  # ppid
                    total += int(stat[11]) + int(stat[12])
        return total / tick

    def stop(self) -> None:
        _run_as(
            self.user,
            [_binary("pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop"],
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _run_as(
    user: str, argv: list[str | None], check: bool = True
) -> subprocess.CompletedProcess[str]:
    command = [str(arg) for arg in argv]
    if os.geteuid() == 0:
        command = ["runuser", "-u", user, "--", *command]
    return subprocess.run(command, check=check, capture_output=True, text=True)


def start(*, durable: bool = False) -> Cluster:
    """Create and start a cluster; the caller stops it (``Cluster.stop``).

    Tests run it without fsync (nothing to keep); ``durable=True`` keeps the server's
    defaults (fsync, synchronous_commit), as the sync benchmark wants.
    """
    user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    root = Path(tempfile.mkdtemp(prefix="tuneledger-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, user)
    data, sockets = root / "data", root / "sock"
    _run_as(user, ["mkdir", "-p", sockets])
    _run_as(
        user,
        [
            _binary("initdb"),
            "-D",
            data,
            "-U",
            user,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ],
    )
    port = _free_port()
    options = f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={sockets} -c max_connections=60"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    _run_as(
        user,
        [_binary("pg_ctl"), "-D", data, "-l", root / "server.log", "-w", "-o", options, "start"],
    )
    return Cluster(root=root, port=port, socket_dir=sockets, user=user)


# --- helpers of the hub tests (the fixtures are in tests/conftest.py) --------------------

#: The password of the ``writer`` login role the ``pg_server`` fixture creates (given to libpq
#: via PGPASSWORD).
WRITER_PASSWORD = "s3cret-hub-pw"


def admin_url(cluster: Cluster) -> str:
    """The superuser's URL (Unix socket, trust): what an admin runs ``remote init`` with."""
    return f"postgresql://{cluster.user}@/postgres?host={cluster.socket_dir}&port={cluster.port}"


def make_hub(cluster: Cluster, schema: str):  # -> ledger.sync.remote.Remote
    """Create the hub schema ``schema`` as the admin, writable by ``writer``; return the writer's remote."""
    from ledger.sync import hub
    from ledger.sync.remote import Remote, parse_remote

    hub.init_schema(Remote("admin", admin_url(cluster), schema), grant=["writer"])
    return parse_remote("hub", cluster.url("writer"), schema)
