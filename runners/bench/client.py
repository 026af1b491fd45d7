"""The benchmark client: one shared ``httpx.AsyncClient`` streaming OpenAI-compatible or SGLang requests.

Endpoints (``endpoint``): ``chat`` -> ``POST /v1/chat/completions``, ``completions`` ->
``POST /v1/completions`` (both ``stream=True`` with ``stream_options.include_usage`` so the
server reports ``usage.completion_tokens``), ``generate`` -> SGLang's native ``POST /generate``
(SSE with cumulative ``text`` and ``meta_info.completion_tokens``).

Load: closed loop (``concurrency`` c: every request is queued at t=0 behind a semaphore of c;
a request's start time is taken after it acquires its slot) or open loop (``request_rate`` in
requests/s: Poisson arrivals from a seeded generator, optionally capped by ``concurrency``).
``duration`` runs from the first dispatch after warmup to the last completion. Metric
definitions: ``runners.bench.metrics`` (identical to sglang bench_serving).

Connections: one keep-alive connection per concurrency slot, through ``runners.bench.http``
(``client_slots(c)``: aiohttp directly by default, httpx with sharded pools as the fallback).
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from ledger.store.gc_pause import no_cyclic_gc
from runners.bench.http import (
    _REQUEST_ERRORS,
    TRANSPORT,
    AiohttpClient,
    ClientShards,
    SharedClient,
    _AiohttpResponse,
    aiohttp,
    client_slots,
    make_client,
    transport_label,
)

# Re-exported names (``X as X``): callers import a run's identity, result and event from here.
from runners.bench.identity import RunIdentity as RunIdentity
from runners.bench.identity import event_workload
from runners.bench.identity import run_id_for as run_id_for
from runners.bench.metrics import RequestResult
from runners.bench.record import TOOL_NAME as TOOL_NAME
from runners.bench.record import RunResult as RunResult
from runners.bench.record import SweepPoint as SweepPoint
from runners.bench.record import benchmark_event as benchmark_event
from runners.bench.record import format_point as format_point
from runners.bench.record import gate_run, record_run
from runners.bench.server_metrics import MetricsWatch
from runners.bench.workload import BuiltWorkload, Prompt

ENDPOINT_PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate": "/generate",
}


@dataclass
class BenchTarget:
    """Where and what to send: server ``url`` (base, no path), ``endpoint``, served ``model`` name.

    ``ignore_eos``: ask the server to generate exactly ``output_len`` tokens. Engines
    that reject the field (``transformers serve``) are detected during warmup and the
    run continues without it, with the output-length check waived and noted.
    """

    url: str
    endpoint: str
    model: str
    workload: BuiltWorkload
    ignore_eos: bool = True
    timeout_s: float = 600.0
    #: Fields added to every request body (per-request generation options, e.g. transformers'
    #: ``generation_config`` JSON for prompt-lookup speculation; ``runners.spec``).
    extra_body: dict = field(default_factory=dict)
    #: Scrape the server's Prometheus ``/metrics`` around each timed run into the event's
    #: ``server_metrics`` (``runners.bench.server_metrics``; vLLM exports it).
    server_metrics: bool = False

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINT_PATHS:
            raise ValueError(
                f"endpoint must be one of {sorted(ENDPOINT_PATHS)}, not {self.endpoint!r}"
            )
        self.url = self.url.rstrip("/")

    @property
    def api_url(self) -> str:
        """The full request URL."""
        return self.url + ENDPOINT_PATHS[self.endpoint]

    @property
    def httpx_url(self) -> httpx.URL:
        """``api_url`` parsed once (httpx's pure-Python URL parser is a cost a request)."""
        text = self.api_url
        cached = self.__dict__.get("_httpx_url")
        if cached is None or cached[0] != text:
            cached = self.__dict__["_httpx_url"] = (text, httpx.URL(text))
        return cached[1]


def make_payload(target: BenchTarget, prompt: Prompt, ignore_eos: bool) -> dict:
    """The JSON body of one request (greedy, streamed, output length asked)."""
    if target.endpoint == "generate":
        params: dict = {"temperature": 0.0, "max_new_tokens": prompt.output_len}
        if ignore_eos:
            params["ignore_eos"] = True
        return {"text": prompt.text, "sampling_params": params, "stream": True, **target.extra_body}
    body: dict = {
        "model": target.model,
        "max_tokens": prompt.output_len,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if target.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    if ignore_eos:
        body["ignore_eos"] = True
    return {**body, **target.extra_body} if target.extra_body else body


async def _lines(response: httpx.Response | _AiohttpResponse):
    """``(line, arrival)`` for the non-empty lines of a streamed body, split on ``\\n`` without
    text decoding; ``arrival`` is the ``perf_counter`` of the network read that completed the
    line, the same for every line of one read (lines that came together have no gap between
    them: the streaming rule counts them as one chunk)."""
    reads = response.reads() if isinstance(response, _AiohttpResponse) else response.aiter_bytes()
    buf = b""
    async for chunk in reads:
        arrival = time.perf_counter()
        buf += chunk
        if b"\n" not in buf:
            continue
        *complete, buf = buf.split(b"\n")
        for line in complete:
            line = line.strip()
            if line:
                yield line, arrival
    if buf.strip():
        yield buf.strip(), time.perf_counter()


async def send_request(
    client: httpx.AsyncClient | AiohttpClient,
    target: BenchTarget,
    prompt: Prompt,
    ignore_eos: bool,
    start: float | None = None,
) -> RequestResult:
    """Send one streamed request and time it (see ``runners.bench.metrics`` for the definitions).

    ``start`` defaults to now. Never raises: a failure is a result with ``ok=False`` and ``error``.
    """
    out = RequestResult(prompt_tokens=prompt.prompt_len)
    payload = make_payload(target, prompt, ignore_eos)
    generate = target.endpoint == "generate"
    chat = target.endpoint == "chat"
    st = time.perf_counter() if start is None else start
    out.start = st
    last = st
    latency = None
    tokens_seen = 0
    try:
        async with client.stream("POST", target.httpx_url, json=payload) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                out.error = f"HTTP {response.status_code}: {body[:500]}"
                return out
            async for raw, now in _lines(response):
                latency = now - st
                if not raw.startswith(b"data:"):
                    continue  # SSE comments / event names
                data_text = raw[5:].strip()
                if data_text == b"[DONE]":
                    continue
                data = json.loads(data_text)
                usage = data.get("usage") if not generate else None
                if usage and usage.get("completion_tokens") is not None:
                    out.output_tokens = int(usage["completion_tokens"])
                if generate:
                    if not data.get("text"):
                        continue
                    count = int((data.get("meta_info") or {}).get("completion_tokens", tokens_seen))
                    out.output_tokens = count
                    if out.ttft is None:
                        out.ttft = now - st
                    else:
                        new = count - tokens_seen
                        if new <= 0:
                            continue  # no new token: sglang ignores such a chunk (keeps the previous stamp)
                        out.itl.extend([(now - last) / new] * new)
                    out.chunks += now != last or out.chunks == 0
                    last = now
                    tokens_seen = count
                    continue
                choices = data.get("choices") or []
                if not choices:
                    continue
                text = (
                    (choices[0].get("delta") or {}).get("content")
                    if chat
                    else choices[0].get("text")
                )
                if not text:
                    continue
                # a chunk is a read that carried content: lines of one read came as one burst
                out.chunks += now != last or out.chunks == 0
                if out.ttft is None:
                    out.ttft = now - st
                else:
                    out.itl.append(now - last)
                last = now
    except _REQUEST_ERRORS as exc:
        out.error = describe_error(exc, target.url)
        return out
    if out.ttft is None:
        out.error = "the stream carried no content"
        return out
    out.latency = latency
    out.ok = True
    return out


def describe_error(exc: BaseException, url: str = "") -> str:
    """``"Type: message"`` of a failed request, naming what really went wrong.

    httpx-aiohttp turns every ``aiohttp.ClientConnectionError`` into ``httpx.ConnectTimeout``
    (its exception map lets the general entry win), so a refused connection or a connection the
    server closed read "ConnectTimeout". The error's cause chain says which: a refused
    connection becomes ``"connection refused: URL (...)"``, an aiohttp error its own type name.
    """
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for link in chain:
        os_error = getattr(link, "os_error", None)  # aiohttp.ClientConnectorError
        if isinstance(link, ConnectionRefusedError) or isinstance(os_error, ConnectionRefusedError):
            return f"connection refused: {url or 'the server'} ({exc})"
    if isinstance(exc, httpx.HTTPError) and aiohttp is not None:
        cause = next((link for link in chain if isinstance(link, aiohttp.ClientError)), None)
        if cause is not None:
            return f"{type(cause).__name__}: {cause}"
    return f"{type(exc).__name__}: {exc}"


class WarmupFailed(RuntimeError):
    """Every warmup request of a run failed: the message gives the URL and the first cause."""


def _rejects_ignore_eos(result: RequestResult) -> bool:
    """True when a failed request looks like the server refusing the ``ignore_eos`` field."""
    return (
        (not result.ok)
        and result.error.startswith(("HTTP 400", "HTTP 422"))
        and "ignore_eos" in result.error
    )


async def warmup(
    client: httpx.AsyncClient, target: BenchTarget, count: int, ignore_eos: bool
) -> tuple[bool, list[str]]:
    """Send ``count`` uncounted requests; return the ``ignore_eos`` setting that works and notes.

    Raises:
        WarmupFailed: every warmup request failed (the server or the arguments are wrong).
    """
    notes: list[str] = []
    if count <= 0:
        return ignore_eos, notes
    prompts = [target.workload.prompts[i % len(target.workload.prompts)] for i in range(count)]
    results = await asyncio.gather(*(send_request(client, target, p, ignore_eos) for p in prompts))
    if ignore_eos and all(_rejects_ignore_eos(r) for r in results):
        ignore_eos = False
        notes.append("server rejected ignore_eos (unknown field): sent without it")
        results = await asyncio.gather(
            *(send_request(client, target, p, ignore_eos) for p in prompts)
        )
    if not any(r.ok for r in results):
        raise WarmupFailed(
            f"every warmup request to {target.api_url} failed: {results[0].error[:500]}"
        )
    return ignore_eos, notes


async def timed_run(
    shards: SharedClient | ClientShards,
    target: BenchTarget,
    *,
    concurrency: int | None,
    request_rate: float | None = None,
    seed: int = 0,
    ignore_eos: bool = True,
    progress: object | None = None,
) -> tuple[list[RequestResult], float]:
    """Send every prompt once under the load pattern; return results (prompt order) and duration in s.

    Closed loop (``request_rate`` None): all requests are queued at t=0 behind the ``shards``'
    slots (as many as ``concurrency``: ``client_slots(concurrency)``, a ``SharedClient`` or
    ``ClientShards``). Open loop: arrivals are Poisson at ``request_rate`` requests/s from
    ``numpy.random.default_rng(seed)``, capped by the slots (give ``client_slots(num_prompts)``
    for no cap). ``concurrency`` is only checked against
    the slots. ``progress``: an optional callable called once per finished request.

    Raises:
        ValueError: fewer slots than ``concurrency``, or a non-positive request rate.
    """
    prompts = target.workload.prompts
    if concurrency and shards.slots < concurrency:
        raise ValueError(f"{concurrency} concurrent requests need client_slots({concurrency})")

    async def one(prompt: Prompt) -> RequestResult:
        async with shards.slot() as client:
            # The start time is taken inside send_request, after the slot is acquired.
            result = await send_request(client, target, prompt, ignore_eos)
        if progress is not None:
            progress()  # type: ignore[operator]
        return result

    if request_rate is not None and request_rate <= 0:
        raise ValueError(f"request rate must be positive, got {request_rate}")
    # A run keeps a result (and its ITL list) per request: a full collection walks them all
    # and lands inside some request's timing (~10% of the client's CPU at c=64).
    with no_cyclic_gc(freeze=True):
        return await _send_all(prompts, one, request_rate, seed)


async def _send_all(
    prompts: Sequence[Prompt],
    one: Callable[[Prompt], Coroutine[Any, Any, RequestResult]],
    request_rate: float | None,
    seed: int,
) -> tuple[list[RequestResult], float]:
    """``timed_run``'s load pattern over ``one``: all at t=0, or Poisson arrivals."""
    t0 = time.perf_counter()
    if request_rate is None:
        tasks = [asyncio.create_task(one(p)) for p in prompts]
    else:
        gaps = np.random.default_rng(seed).exponential(1.0 / request_rate, size=len(prompts))
        # each arrival at its planned time from t0, not a gap after the last one: a sleep that
        # overruns (a busy loop or machine) would delay every later arrival, and the rate sent
        # would fall short of the rate asked for
        arrivals = np.cumsum(gaps)
        tasks = []
        for i, p in enumerate(prompts):
            tasks.append(asyncio.create_task(one(p)))
            if i + 1 < len(prompts):
                await asyncio.sleep(max(0.0, t0 + float(arrivals[i]) - time.perf_counter()))
    results = list(await asyncio.gather(*tasks))
    return results, time.perf_counter() - t0


@dataclass
class Measurement:
    """What one timed run measured, before the gate: results, duration, the server's counters.

    ``ignore_eos`` and ``length_enforced``: as the warmup left them (an engine that rejects
    ``ignore_eos`` is sent none, and its output lengths are not gated from then on).
    """

    results: list[RequestResult]
    duration_s: float
    server_metrics: dict[str, Any]
    ignore_eos: bool
    length_enforced: bool


async def measure_run(
    target: BenchTarget,
    identity: RunIdentity,
    *,
    warmup_requests: int,
    warmup_slots: int,
    ignore_eos: bool,
    length_enforced: bool,
    bar: Any,
) -> Measurement:
    """Warm up, then time one run of every prompt at ``identity``'s load (``timed_run``).

    Raises:
        WarmupFailed: the warmup failed entirely (server down or wrong arguments).
    """
    prompts = target.workload.prompts
    c = identity.concurrency
    # A fresh client per warmup: a connection kept idle through the previous timed
    # run can outlive the server's keep-alive and fail when reused (KEEPALIVE_S).
    async with make_client(warmup_slots, target.timeout_s) as client:
        ignore_eos, warm_notes = await warmup(client, target, warmup_requests, ignore_eos)
    if warm_notes:
        length_enforced = False
    label = f"{identity.config_name} " + (
        f"c={c}" if identity.request_rate is None else f"rate={identity.request_rate:g}/s"
    )
    task = bar.add_task(f"{label} rep {identity.repeat}", total=len(prompts))
    watch = MetricsWatch(target.url) if target.server_metrics else None
    if watch is not None:
        await watch.start()
    async with client_slots(c or len(prompts), target.timeout_s) as shards:
        # A fresh set of connections per run: each run starts from the same state.
        results, duration = await timed_run(
            shards,
            target,
            concurrency=c,
            request_rate=identity.request_rate,
            seed=target.workload.spec.seed + identity.repeat,
            ignore_eos=ignore_eos,
            progress=functools.partial(bar.advance, task),
        )
    bar.remove_task(task)
    server_metrics = await watch.stop() if watch is not None else {}
    return Measurement(results, duration, server_metrics, ignore_eos, length_enforced)


async def sweep(
    target: BenchTarget,
    identity: RunIdentity,
    *,
    concurrencies: Sequence[int | None],
    repeats: Sequence[int] = (0,),
    warmup_requests: int = 1,
    store=None,
    progress: bool = True,
    on_point=None,
) -> list[SweepPoint]:
    """Benchmark every (repeat, concurrency) of ``identity``: measure, gate, record one event per run.

    ``identity`` names what every run is (configuration, request rate, baseline, candidate,
    session, server run, host, source); each run's is it at its concurrency and repeat, with
    the workload it sent. The steps of a run: ``measure_run`` (warm up, time),
    ``runners.bench.record.gate_run`` (the validity gate), ``benchmark_event`` and, with a
    ``store`` (``ledger.store.LedgerStore``), ``record_run``: the event and its per-request
    samples in one transaction as soon as the run ends, so an interrupted sweep keeps what it
    finished. ``on_point`` is called with each ``SweepPoint``.

    Raises:
        WarmupFailed: the warmup failed entirely (server down or wrong arguments).
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    points: list[SweepPoint] = []
    ignore_eos = target.ignore_eos
    length_enforced = target.ignore_eos
    if progress and TRANSPORT != "aiohttp":
        # only the degraded client is worth a line (printed on every bench, it read as debug output)
        console.print(f"[dim]bench client: {transport_label()}[/dim]")
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (progress and console.is_terminal),
    )
    max_c = max([c for c in concurrencies if c] or [len(target.workload.prompts)])
    with bar:
        for repeat in repeats:
            for c in concurrencies:
                run_identity = identity.at(c, repeat)
                if store is not None:
                    # Let go of a kept-open ledger before the timed run: its watcher thread
                    # wakes every 5 ms and, WRITER_HOLD_S after the last append, catches the
                    # projections up and checkpoints in this process, in the middle of the run;
                    # on a loaded machine the event loop then read whole answers late, as bursts
                    # (docs/vllm-cpu.md, "The client's own ledger"). The next append reopens it.
                    store.close()
                measured = await measure_run(
                    target,
                    run_identity,
                    warmup_requests=warmup_requests,
                    warmup_slots=max(1, min(warmup_requests, max_c)),
                    ignore_eos=ignore_eos,
                    length_enforced=length_enforced,
                    bar=bar,
                )
                ignore_eos, length_enforced = measured.ignore_eos, measured.length_enforced
                run = gate_run(
                    measured.results,
                    measured.duration_s,
                    run_identity,
                    target.workload,
                    length_enforced=length_enforced and ignore_eos,
                    server_metrics=measured.server_metrics,
                )
                run_identity = run_identity.with_workload(
                    event_workload(
                        target.workload.spec,
                        dataset=target.workload.dataset,
                        endpoint=target.endpoint,
                        ignore_eos=ignore_eos,
                        request_rate=identity.request_rate,
                    )
                )
                event = benchmark_event(run_identity, run, server_metrics=measured.server_metrics)
                if store is not None:
                    await record_run(store, event, run)
                point = SweepPoint(c, identity.request_rate, repeat, run, event)
                points.append(point)
                if on_point is not None:
                    on_point(point)
    return points


def main_sync(coro):  # pragma: no cover - thin wrapper used by the CLI
    """Run a coroutine; a Ctrl-C propagates as KeyboardInterrupt after the loop's cleanup."""
    return asyncio.run(coro)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `tuneledger run bench`")
