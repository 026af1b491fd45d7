"""The benchmark client against real servers that close idle connections or refuse them (issue 7.2, 7.10).

Root cause of the plan's "ConnectTimeout ... Can not write request body" under load: the
warm-up client kept its keep-alive connection idle through the timed run, past the server's
keep-alive timeout (uvicorn, under transformers serve, SGLang and vLLM: 5 s). The server closed
it while the client's event loop was busy (the synchronous ledger append after a run: long
under load), so aiohttp still saw it as connected, reused it, and the write failed;
httpx-aiohttp then labelled that ``ConnectTimeout`` (its exception map turns every
``aiohttp.ClientConnectionError`` into one). Below, ``time.sleep`` stands for the busy loop.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.bench import BenchTarget, make_client, send_request, warmup
from runners.workload import WorkloadSpec, build_workload

FAKE_SERVER = Path(__file__).parent / "fake_servers" / "openai_stream.py"


@pytest.fixture()
def server_5s_keepalive():
    """A real streaming server closing connections idle for 5 s, like uvicorn."""
    proc = subprocess.Popen([sys.executable, str(FAKE_SERVER), "--port", "0", "--chunks", "4", "--keepalive-s", "5"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _target(url: str) -> BenchTarget:
    return BenchTarget(url=url, endpoint="chat", model="fake", workload=build_workload(WorkloadSpec(8, 4, 4, seed=1)))


def test_a_connection_idle_past_the_servers_keepalive_is_not_reused(server_5s_keepalive: str) -> None:
    target = _target(server_5s_keepalive)

    async def go():
        async with make_client(1) as client:
            first = await send_request(client, target, target.workload.prompts[0], True)
            await asyncio.sleep(4.0)  # idle, as through a timed run of the other concurrency ...
            time.sleep(1.5)  # ... then the loop blocked (the ledger append) while the server closes it
            second = await send_request(client, target, target.workload.prompts[1], True)
        return first, second

    first, second = asyncio.run(go())
    assert first.ok, first.error
    assert second.ok, second.error


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_refused_connection_is_reported_as_refused(transport: str) -> None:
    target = _target(f"http://127.0.0.1:{_closed_port()}")

    async def go():
        async with make_client(1, transport=transport) as client:
            return await send_request(client, target, target.workload.prompts[0], True)

    result = asyncio.run(go())
    assert not result.ok
    assert result.error.startswith("connection refused"), result.error
    assert "Timeout" not in result.error


def test_a_warmup_against_a_refused_port_names_the_cause() -> None:
    target = _target(f"http://127.0.0.1:{_closed_port()}")

    async def go():
        async with make_client(1) as client:
            return await warmup(client, target, 1, True)

    with pytest.raises(RuntimeError, match="connection refused"):
        asyncio.run(go())
