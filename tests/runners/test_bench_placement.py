"""The benchmark client keeps off the CPUs a local server pinned its threads to (vLLM's CPU
worker pinned to CPU 0, a client there preempting it: docs/vllm-cpu.md), unless fewer than two
would be left (the one CPU the worker leaves on a 2-core machine is the server's own scheduler's
and frontend's). A real listening process pinned to some CPUs stands for the server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

from runners.bench.placement import keep_off_server_cores, server_pinned_cpus

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux CPU affinity and 2+ CPUs",
)

# a server whose one worker thread is pinned to CPU 0, as vLLM's CPU worker is (PIN: {0})
_SERVER = """
import os, socket, sys, threading, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
def worker():
    if PIN:
        os.sched_setaffinity(0, PIN)
    time.sleep(60)
threading.Thread(target=worker, daemon=True).start()
time.sleep(0.2)
print(s.getsockname()[1], flush=True)
time.sleep(60)
"""


def _server(pin: str):
    code = f"PIN = {pin}\n{_SERVER}"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def pinned_server():
    yield from _server("{0}")


@pytest.fixture
def unpinned_server():
    yield from _server("None")


def _free_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_the_servers_pinned_cpus_are_read(pinned_server: str) -> None:
    assert server_pinned_cpus(pinned_server) == {0}
    assert server_pinned_cpus(_free_port_url()) == set()  # nobody listens
    assert server_pinned_cpus("http://example.invalid:8000") == set()  # not this machine


def test_the_client_moves_off_them_and_says_so(pinned_server: str) -> None:
    said: list[str] = []
    seen: dict[str, set[int] | None] = {}

    def in_a_thread() -> None:  # the affinity is the calling thread's: keep the test's own
        # min_free=1: the narrowing itself, on any machine of 2+ CPUs
        seen["kept"] = keep_off_server_cores(pinned_server, said.append, min_free=1)
        seen["now"] = os.sched_getaffinity(0)
        seen["child"] = set(
            map(
                int,
                subprocess.run(
                    [sys.executable, "-c", "import os; print(*os.sched_getaffinity(0))"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split(),
            )
        )

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    everything = os.sched_getaffinity(0)
    assert seen["kept"] == seen["now"] == seen["child"] == everything - {0}  # a tool inherits it
    assert said == [
        f"benchmark client on CPU {','.join(map(str, sorted(everything - {0})))}: the server "
        "pinned threads to CPU 0 (a client there preempts its forward pass)"
    ]
    assert os.sched_getaffinity(0) == everything  # the test's thread untouched


def test_an_unpinned_server_changes_nothing() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        assert server_pinned_cpus(url) == set()  # this test process: no pinned thread
        assert keep_off_server_cores(url) is None


def test_a_plans_next_server_without_pinned_threads_gets_every_cpu_back(
    pinned_server: str, unpinned_server: str
) -> None:
    seen: dict[str, object] = {}

    def in_a_thread() -> None:
        seen["off"] = keep_off_server_cores(pinned_server, min_free=1)
        seen["back"] = keep_off_server_cores(unpinned_server, min_free=1)
        seen["again"] = keep_off_server_cores(unpinned_server, min_free=1)  # nothing to change

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    everything = os.sched_getaffinity(0)
    assert seen == {"off": everything - {0}, "back": everything, "again": None}


@pytest.fixture
def server_leaving_one_cpu():
    # pinned to every CPU but the last: what vLLM's CPU worker leaves on the 2-core machine
    everything = sorted(os.sched_getaffinity(0))
    yield from _server(repr(set(everything[:-1])))


def test_one_cpu_left_is_the_servers_own_so_the_client_stays_where_it_was(
    server_leaving_one_cpu: str,
) -> None:
    seen: dict[str, object] = {}

    def in_a_thread() -> None:
        seen["pinned"] = server_pinned_cpus(server_leaving_one_cpu)
        seen["kept"] = keep_off_server_cores(server_leaving_one_cpu)
        seen["now"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    everything = os.sched_getaffinity(0)
    assert seen["pinned"] == set(sorted(everything)[:-1])
    # not confined to the one CPU left (the server's scheduler and API server run there)
    assert seen["kept"] is None
    assert seen["now"] == everything
