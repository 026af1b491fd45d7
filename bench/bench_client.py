"""Benchmark the benchmark client: how many streamed requests/s it sustains, next to aiohttp.

Numbers from this script go in docs/performance.md; they are not tests. Run::

    .venv/bin/python bench/bench_client.py                       # c = 64 and 256
    .venv/bin/python bench/bench_client.py --concurrency 64 --requests 3000 --rounds 5

Setup: ``tests/fake_servers/openai_stream.py`` in its own process(es) streams ``--chunks``
SSE chunks instantly (no delay) plus a usage chunk and ``[DONE]``, on ``/v1/chat/completions``.
``--servers N`` starts N such processes on one port (SO_REUSEPORT) so the server is less of a
bottleneck. Each client sends ``--requests`` requests closed-loop at each concurrency:

- ``ours``: ``runners.bench.client.timed_run`` with ``runners.bench.http.client_slots`` — the exact
  code path of ``tuneledger run bench`` (slot semaphore, SSE parsing, per-chunk timestamps), on
  the client it picks (``--transport``: ``auto`` = aiohttp directly (``AiohttpClient``) when it
  is installed, else plain httpx sharded over ``ClientShards``);
- ``aiohttp``: a client written the way sglang's bench_serving is (one ``ClientSession``,
  ``TCPConnector(limit=c)``, lines from ``response.content``, ``json.loads`` and a
  ``perf_counter`` per chunk), as the reference.

Reported per client and concurrency (best of ``--rounds``, interleaved): requests/s
(completed / wall time), and client CPU time per request in microseconds (``time.process_time``
of this process: the server runs elsewhere), which is the overhead that matters when the
client shares a machine with the server. The ratio is ours / aiohttp's requests/s.
On a 2-core machine the client and the server share the CPUs: the absolute numbers are a
lower bound; the ratio and the CPU per request are what carry over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runners.bench.client import BenchTarget, timed_run  # noqa: E402
from runners.bench.http import TRANSPORT, client_slots  # noqa: E402
from runners.bench.workload import WorkloadSpec, build_workload  # noqa: E402

FAKE = ROOT / "tests" / "fake_servers" / "openai_stream.py"


def start_servers(count: int, chunks: int) -> tuple[list[subprocess.Popen], str]:
    """``count`` fake server processes sharing one port via SO_REUSEPORT; return them and the URL.

    Each listens before it says ``PORT``: a socket only bound refuses connections, and on a
    busy machine the app took long enough to start that every request of the first client
    measured was refused ("only 0 of 20 requests succeeded"); a listening one queues them."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        f"import socket,sys; sys.path.insert(0, {str(FAKE.parent)!r}); from openai_stream import make_app; from aiohttp import web\n"
        f"s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1); s.bind(('127.0.0.1', {port:d})); s.listen(4096)\n"
        f"print('PORT', flush=True); web.run_app(make_app({chunks:d}, 0.0), sock=s, print=None, access_log=None, backlog=4096)"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    for p in procs:
        assert p.stdout.readline().startswith("PORT")
    return procs, f"http://127.0.0.1:{port}"


#: The transport of ``run_ours`` (None: ``runners.bench.http.TRANSPORT``); set by ``--transport``.
OURS_TRANSPORT: str | None = None


async def run_ours(url: str, concurrency: int, requests: int, chunks: int) -> tuple[int, float]:
    workload = build_workload(WorkloadSpec(16, chunks, requests, seed=0))
    target = BenchTarget(
        url=url, endpoint="chat", model="fake", workload=workload, ignore_eos=False
    )
    async with client_slots(concurrency, transport=OURS_TRANSPORT) as shards:
        results, duration = await timed_run(shards, target, concurrency=concurrency)
    return sum(r.ok for r in results), duration


async def run_aiohttp(url: str, concurrency: int, requests: int, chunks: int) -> tuple[int, float]:
    workload = build_workload(WorkloadSpec(16, chunks, requests, seed=0))
    api = url + "/v1/chat/completions"
    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=600)
    ) as session:

        async def one(text: str) -> bool:
            async with sem:
                body = {
                    "model": "fake",
                    "messages": [{"role": "user", "content": text}],
                    "max_tokens": chunks,
                    "temperature": 0.0,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
                st = time.perf_counter()
                ttft, itl, last = 0.0, [], st
                async with session.post(api, json=body) as resp:
                    if resp.status != 200:
                        return False
                    async for raw in resp.content:
                        raw = raw.strip()
                        if not raw:
                            continue
                        chunk = raw.decode().removeprefix("data: ")
                        now = time.perf_counter()
                        if chunk == "[DONE]":
                            continue
                        data = json.loads(chunk)
                        choices = data.get("choices") or []
                        if choices and choices[0].get("delta", {}).get("content"):
                            if ttft == 0.0:
                                ttft = now - st
                            else:
                                itl.append(now - last)
                            last = now
                return ttft > 0

        t0 = time.perf_counter()
        ok = await asyncio.gather(*(one(p.text) for p in workload.prompts))
        return sum(ok), time.perf_counter() - t0


CLIENTS = {"ours": run_ours, "aiohttp": run_aiohttp}


def measure(
    url: str, concurrency: int, requests: int, chunks: int, rounds: int
) -> dict[str, dict[str, float]]:
    best: dict[str, dict[str, float]] = {}
    for _ in range(rounds):
        for name, fn in CLIENTS.items():  # interleaved: drift hits both
            cpu0 = time.process_time()
            ok, duration = asyncio.run(fn(url, concurrency, requests, chunks))
            cpu = time.process_time() - cpu0
            if ok != requests:
                raise SystemExit(f"{name}: only {ok} of {requests} requests succeeded")
            rate = requests / duration
            if name not in best or rate > best[name]["req_s"]:
                best[name] = {"req_s": rate, "cpu_us_per_req": 1e6 * cpu / requests}
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="client overhead: ours vs plain aiohttp")
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--chunks", type=int, default=4, help="content chunks per response")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--servers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument(
        "--transport",
        choices=["auto", "aiohttp", "httpx"],
        default="auto",
        help="transport of our client (auto: aiohttp when httpx-aiohttp is installed)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON instead of a markdown table"
    )
    args = parser.parse_args(argv)
    global OURS_TRANSPORT
    OURS_TRANSPORT = None if args.transport == "auto" else args.transport
    transport = OURS_TRANSPORT or TRANSPORT
    procs, url = start_servers(args.servers, args.chunks)
    rows = []
    try:
        for c in (int(x) for x in args.concurrency.split(",")):
            load = os.getloadavg()[0]  # the machine may be shared: the numbers need their load
            best = measure(url, c, args.requests, args.chunks, args.rounds)
            ours, ref = best["ours"], best["aiohttp"]
            rows.append(
                {
                    "concurrency": c,
                    "transport": transport,
                    "ours_req_s": ours["req_s"],
                    "aiohttp_req_s": ref["req_s"],
                    "ratio": ours["req_s"] / ref["req_s"],
                    "ours_cpu_us": ours["cpu_us_per_req"],
                    "aiohttp_cpu_us": ref["cpu_us_per_req"],
                    "load_1m": load,
                    "load_1m_after": os.getloadavg()[0],
                }
            )
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{args.requests} requests x {args.chunks} chunks, best of {args.rounds}, {args.servers} server process(es), "
        f"{os.cpu_count()} CPUs, our transport: {transport}\n"
    )
    print(
        "| concurrency | ours req/s | aiohttp req/s | ratio | ours CPU us/req | aiohttp CPU us/req "
        "| load 1m before/after |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['concurrency']} | {r['ours_req_s']:.0f} | {r['aiohttp_req_s']:.0f} | {r['ratio']:.2f} | "
            f"{r['ours_cpu_us']:.0f} | {r['aiohttp_cpu_us']:.0f} | {r['load_1m']:.2f} / {r['load_1m_after']:.2f} |"
        )


if __name__ == "__main__":
    main()
