"""A server run's record: the process lifetime the runner tracks, the errors of a start, the
ids of its findings and its startup facts (the log's, completed from ``/server_info``)."""

from __future__ import annotations

import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from ledger.errors import LedgerError
from runners.server.configs import ServerConfig
from runners.server.engines import EngineAdapter
from schemas import FindingRecorded, Host, ServerFailed, StartupFacts

#: Namespace of the deterministic ids of a run's findings and of the hosts a session observed.
FINDING_NS = uuid.UUID("6f1d3b52-3c61-4d8e-9a57-1b1f8e0c2a11")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


class PortInUse(LedgerError):
    """The port is taken by another process (checked before launch: nothing started)."""

    exit_code = 10


class ServerStartFailed(LedgerError):
    """The server did not become healthy; ``event`` is the recorded ``server_failed``."""

    exit_code = 12

    def __init__(self, message: str, event: ServerFailed) -> None:
        super().__init__(message)
        self.event = event


@dataclass
class ServerRun:
    """One server process lifetime, from ``start`` to ``stop``.

    ``pgid`` equals the leader's pid (its own session). Times are ``time.monotonic()`` seconds.
    """

    run_id: str
    config: ServerConfig
    adapter: EngineAdapter
    argv: list[str]
    port: int
    base_url: str
    log_path: Path
    log_ref: str
    process: subprocess.Popen[bytes]
    host: Host
    started_event_id: UUID
    last_event_id: UUID
    started_at: float
    ready: bool = False
    #: The masking pump between the server's output and the log (None: written directly).
    pump: subprocess.Popen[bytes] | None = None
    startup: StartupFacts | None = None
    finding_ids: set[UUID] = field(default_factory=set)
    ended: bool = False
    #: The owner's end of the watchdog's pipe (``runners.server.supervise``): open while the
    #: runner owns the server; closed when the run ends.
    watchdog_fd: int | None = None

    @property
    def pid(self) -> int:
        """The leader's process id."""
        return self.process.pid

    @property
    def pgid(self) -> int:
        """The process group of the server and its workers."""
        return self.process.pid


def finding_id(run_id: str, finding: FindingRecorded) -> UUID:
    """Deterministic id of a finding of a run: uuid5 of run, kind, flag and the message with its
    numbers masked (counts in a message grow as the log grows; the finding stays the same)."""
    masked = _NUMBER_RE.sub("#", finding.message)
    return uuid.uuid5(FINDING_NS, f"{run_id}|{finding.kind}|{finding.flag or ''}|{masked}")


def merge_server_info(facts: StartupFacts, info: dict[str, Any] | None) -> StartupFacts:
    """Fill what the log did not show from ``/server_info`` (the log wins where both have a value)."""
    if not info:
        return facts
    states = info.get("internal_states") or [{}]
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    candidates = {
        "attention_backend": info.get("attention_backend"),
        "max_total_num_tokens": info.get("max_total_num_tokens"),
        "max_running_requests": state.get("effective_max_running_requests_per_dp")
        or info.get("max_running_requests"),
        "context_len": info.get("context_length")
        if isinstance(info.get("context_length"), int)
        else None,
        "cuda_graph_bs": info.get("cuda_graph_bs"),
        "chunked_prefill_size": info.get("chunked_prefill_size"),
        "max_prefill_tokens": info.get("max_prefill_tokens"),
    }
    update = {k: v for k, v in candidates.items() if v is not None and getattr(facts, k) is None}
    if not facts.server_args:
        skip = {"internal_states", "status", "version", "max_total_num_tokens", "max_req_input_len"}
        update["server_args"] = {k: v for k, v in info.items() if k not in skip}
    try:
        return facts.model_copy(update=update) if update else facts
    except ValueError:
        return facts


def facts_summary(startup: StartupFacts) -> str:
    parts = [
        f"{name}={getattr(startup, name)}"
        for name in ("max_running_requests", "max_total_num_tokens", "context_len")
        if getattr(startup, name) is not None
    ]
    if startup.piecewise_cuda_graph is not None:
        parts.append(f"piecewise_cuda_graph={'on' if startup.piecewise_cuda_graph else 'off'}")
    if startup.moe_kernel_config:
        parts.append(f"moe_config={startup.moe_kernel_config}")
    return f": {', '.join(parts)}" if parts else ""
