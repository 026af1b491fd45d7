"""The fake SGLang server the runner tests start (tests/fake_servers/sglang_server.py): a
configuration that launches it through the sglang adapter's ``command``, and a server runner
with short waits, on a fixed CPU host. Shared by tests/runners/, tests/engines/ and
tests/schemas/ (the secret tests)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from ledger.store import LedgerStore
from runners.host import from_gpus
from runners.server.configs import ServerConfig
from runners.server.runner import ServerRunner

FAKE_SERVERS = Path(__file__).resolve().parents[1] / "fake_servers"
FAKE = FAKE_SERVERS / "sglang_server.py"
FAKE_SMI = FAKE_SERVERS / "nvidia_smi.py"
#: A CPU host, as this machine is (fixed so that tests do not depend on the machine).
CPU_HOST = from_gpus([], hostname="test", versions={"python": "3.11"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fake_config(name: str = "baseline", **flags: object) -> ServerConfig:
    return ServerConfig(
        name=name,
        engine="sglang",
        model="/models/Qwen3.5-122B-A10B",
        port=free_port(),
        command=[sys.executable, str(FAKE)],
        flags={"tp": 4, **flags},
    )


def make_runner(store: LedgerStore, **kw: object) -> ServerRunner:
    options = dict(
        session_id="s1",
        host=CPU_HOST,
        poll_interval_s=0.05,
        sigint_wait_s=1.0,
        sigterm_wait_s=1.0,
        sigkill_wait_s=5.0,
        crash_grace_s=0.5,
    )
    options.update(kw)
    return ServerRunner(store, **options)  # type: ignore[arg-type]
