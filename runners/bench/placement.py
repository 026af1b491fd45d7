"""Where the benchmark client runs: off the CPUs a local server pinned its threads to.

vLLM's CPU build pins its worker's threads to cores (``VLLM_CPU_OMP_THREADS_BIND=auto``: on the
2-core machine, ``VLLM::Worker`` and its OpenMP threads on CPU 0). A client that the scheduler
puts on that core preempts the worker in the middle of its forward pass: the whole batch waits,
and the server's answers come in bursts (every token of a request in one read, TTFT = E2E).
Measured on the vLLM CPU server of docs/vllm-cpu.md, interleaved: ``run bench`` on CPU 1 read
1,000-1,261 tok/s and a median TTFT of 10-27 ms in 3 of 4 runs where the same client left to
the scheduler read 576-931 tok/s and 70-183 ms; ``vllm bench serve``, left to the scheduler
too, 567-939 tok/s. So a client sharing the worker's core measures the contention, not the
server, and two clients compare by where they happened to run (issue 32's 0.67x).

``keep_off_server_cores(url)`` finds the process listening on a local ``url``'s port (psutil),
the CPUs its threads and its children's are pinned to (a thread whose affinity is narrower
than the server process's own), and narrows the calling thread's affinity to the others, which the
event loop, its threads made later and a tool run as a subprocess inherit. Nothing happens for
a remote server, a server with no pinned thread, or when fewer than ``MIN_FREE_CPUS`` would be
left: the CPUs the worker leaves free are not idle. vLLM's CPU build keeps them for its own
unpinned processes (its log: ``reserved_cpus=[1]``, one per rank for the engine's scheduler;
the API server that streams the answers runs there too), so a client confined to the one CPU
left on the 2-core machine queues behind the server's own scheduler and frontend and cannot
move away from them. Measured there (docs/vllm-cpu.md, "Where the client runs", 2026-12-05):
interleaved on one server, ``run bench`` confined to CPU 1 read less than the same client left
to the scheduler in each of 6 repeats (0.75x, geometric mean of the pairs) and less than
``vllm bench serve`` in each of 6 (0.78x), where the client left to the scheduler read 1.04x
vLLM's client (3 of 6 below).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from urllib.parse import urlsplit

import psutil

#: The fewest CPUs the client is narrowed to: one for the server's own unpinned processes (its
#: scheduler and frontend) and one for the client (see the module's docstring).
MIN_FREE_CPUS = 2

#: Host names of this machine a server URL may use.
_LOCAL = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}


def server_pinned_cpus(url: str) -> set[int]:
    """The CPUs the local server at ``url`` pinned threads to (empty: none, or not local, or
    its process cannot be read)."""
    parts = urlsplit(url)
    if (parts.hostname or "") not in _LOCAL:
        return set()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        listeners = [
            c.pid
            for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid
        ]
    except psutil.Error:
        return set()
    pinned: set[int] = set()
    for pid in listeners:
        try:
            server = psutil.Process(pid)
            processes = [server, *server.children(recursive=True)]
            # what the server was started with (a container's cpuset, a taskset): narrower is pinned
            machine = os.sched_getaffinity(pid)
        except (psutil.Error, OSError):
            continue
        for process in processes:
            try:
                threads = process.threads()
            except psutil.Error:
                continue
            for thread in threads:
                try:
                    cpus = os.sched_getaffinity(thread.id)
                except OSError:  # the thread ended meanwhile
                    continue
                if cpus < machine:
                    pinned |= cpus
    return pinned


def keep_off_server_cores(
    url: str, say: Callable[[str], None] | None = None, *, min_free: int = MIN_FREE_CPUS
) -> set[int] | None:
    """Set the calling thread's CPUs to the process's first ones less those the local server at
    ``url`` pinned threads to, when at least ``min_free`` are left (else all of them, as for a
    server with none: a plan's next server may pin other cores); returns the CPUs now kept
    (None: nothing changed)."""
    if not hasattr(os, "sched_setaffinity"):  # pragma: no cover - not Linux
        return None
    pinned = server_pinned_cpus(url)
    base = _first_cpus()
    free = base - pinned
    if len(free) < max(1, min_free):
        free = base
    if free == os.sched_getaffinity(0):
        return None
    os.sched_setaffinity(0, free)
    if say is not None and free != base:
        say(
            f"benchmark client on CPU {_cpus(free)}: the server pinned threads to CPU "
            f"{_cpus(pinned)} (a client there preempts its forward pass)"
        )
    return free


_FIRST: list[set[int]] = []


def _first_cpus() -> set[int]:
    """The calling thread's CPUs when this module first narrowed them (else now)."""
    if not _FIRST:
        _FIRST.append(set(os.sched_getaffinity(0)))
    return _FIRST[0]


def _cpus(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))
