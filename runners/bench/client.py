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
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from ledger.store.gc_pause import no_cyclic_gc
from ledger.write import commands
from runners.bench.http import (
    _REQUEST_ERRORS,
    AiohttpClient,
    ClientShards,
    SharedClient,
    _AiohttpResponse,
    aiohttp,
    client_slots,
    make_client,
    transport_label,
)
from runners.bench.metrics import (
    RequestResult,
    mask_coarse_streaming,
    samples_table,
    summarize,
    validity,
)
from runners.bench.server_metrics import MetricsWatch
from runners.bench.workload import BuiltWorkload, Prompt
from schemas import Actor, Host
from schemas.events import BenchmarkCompleted, BenchMetrics, Workload

ENDPOINT_PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "generate": "/generate",
}

TOOL_NAME = "tuneledger-bench"


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


@dataclass
class RunResult:
    """One timed run: per-request results, duration in s, summary metrics, validity gate."""

    results: list[RequestResult]
    duration_s: float
    metrics: BenchMetrics
    valid: bool
    notes: list[str] = field(default_factory=list)


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
    """Non-empty lines of a streamed body, split on ``\\n`` without text decoding overhead."""
    if isinstance(response, _AiohttpResponse):
        async for line in response.lines():
            yield line
        return
    buf = b""
    async for chunk in response.aiter_bytes():
        buf += chunk
        if b"\n" not in buf:
            continue
        *complete, buf = buf.split(b"\n")
        for line in complete:
            line = line.strip()
            if line:
                yield line
    if buf.strip():
        yield buf.strip()


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
            async for raw in _lines(response):
                now = time.perf_counter()
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
                    out.chunks += 1
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
                out.chunks += 1
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
        tasks = []
        for i, p in enumerate(prompts):
            tasks.append(asyncio.create_task(one(p)))
            if i + 1 < len(prompts):
                await asyncio.sleep(float(gaps[i]))
    results = list(await asyncio.gather(*tasks))
    return results, time.perf_counter() - t0


def run_id_for(
    config_name: str, concurrency: int | None, request_rate: float | None, repeat: int
) -> str:
    """A readable unique run id: ``<config>-c<c>|r<rate>-rep<r>-<8 hex>``."""
    load = f"c{concurrency}" if request_rate is None else f"rate{request_rate:g}"
    return f"{config_name}-{load}-rep{repeat}-{uuid.uuid4().hex[:8]}"


def benchmark_event(
    target: BenchTarget,
    run: RunResult,
    *,
    config_name: str,
    concurrency: int | None,
    request_rate: float | None,
    repeat: int,
    ignore_eos: bool,
    is_baseline: bool = False,
    server_run_id: str | None = None,
    session_id: str | None = None,
    host: Host | None = None,
    actor: Actor | None = None,
    notes: str | None = None,
    candidate_id: str | None = None,
    source: str | None = None,
) -> BenchmarkCompleted:
    """The ``benchmark_completed`` summary event of one run (``candidate_id``: the board item it was run for)."""
    wl = target.workload
    return BenchmarkCompleted(
        run_id=run_id_for(config_name, concurrency, request_rate, repeat),
        config_name=config_name,
        is_baseline=is_baseline,
        server_run_id=server_run_id,
        tool=TOOL_NAME,
        workload=Workload(
            dataset=wl.dataset,
            input_len=wl.spec.input_len,
            output_len=wl.spec.output_len,
            range_ratio=1.0,
            num_prompts=wl.spec.num_prompts,
            load="closed-loop" if request_rate is None else "open-loop",
            request_rate=request_rate,
            seed=wl.spec.seed,
            ignore_eos=ignore_eos,
            endpoint=target.endpoint,
            shared_prefix_len=wl.spec.shared_prefix_len or None,
        ),
        concurrency=concurrency,
        repeat=repeat,
        metrics=run.metrics,
        valid=run.valid,
        validity_notes=run.notes,
        notes=notes,
        candidate_id=candidate_id,
        source=source,
        session_id=session_id,
        host=host,
        actor=actor or Actor(kind="runner", name="bench"),
    )


@dataclass
class SweepPoint:
    """One finished run of a sweep and its event (not yet appended when ``store`` was None)."""

    concurrency: int | None
    request_rate: float | None
    repeat: int
    run: RunResult
    event: BenchmarkCompleted


def judged_run(
    target: BenchTarget,
    results: list[RequestResult],
    duration: float,
    *,
    concurrency: int | None,
    length_enforced: bool,
    speculative: bool = False,
) -> RunResult:
    """A timed run's metrics and its validity gate (``metrics.validity``: ``concurrency`` the
    closed loop's, None for an open loop), TPOT and ITL masked when the stream is too coarse
    (``speculative``: the server accepted draft tokens), and a note when the prompts' lengths
    are approximate."""
    metrics = summarize(results, duration)
    valid, notes = validity(
        results,
        metrics,
        concurrency=concurrency,
        output_len=target.workload.spec.output_len,
        length_enforced=length_enforced,
    )
    metrics, coarse = mask_coarse_streaming(results, metrics, speculative=speculative)
    if coarse:
        notes.append(coarse)
    if not target.workload.exact_length:
        notes.append(
            "prompt lengths approximate: "
            + (
                "the tokenizer's decode/encode did not round-trip"
                if target.workload.spec.tokenizer
                else "no tokenizer, random words of ~1 token each"
            )
        )
    return RunResult(results, duration, metrics, valid, notes)


def with_server_metrics(
    event: BenchmarkCompleted, server_metrics: dict[str, Any]
) -> BenchmarkCompleted:
    """The run's event with what the server's ``/metrics`` said over it (and the accept length
    the engine counted, when it says one)."""
    update: dict[str, Any] = {"server_metrics": server_metrics}
    if "spec_accept_length" in server_metrics:
        # the engine's own count over this run (vLLM: 1 + accepted / drafts)
        update["metrics"] = event.metrics.model_copy(
            update={"accept_length": server_metrics["spec_accept_length"]}
        )
    return event.model_copy(update=update)


async def sweep(
    target: BenchTarget,
    *,
    config_name: str,
    concurrencies: Sequence[int | None],
    request_rate: float | None = None,
    repeats: Sequence[int] = (0,),
    warmup_requests: int = 1,
    is_baseline: bool = False,
    server_run_id: str | None = None,
    session_id: str | None = None,
    host: Host | None = None,
    store=None,
    progress: bool = True,
    on_point=None,
    candidate_id: str | None = None,
    source: str | None = None,
) -> list[SweepPoint]:
    """Benchmark every (repeat, concurrency): warm up, time, gate, record one event per run.

    With a ``store`` (``ledger.store.LedgerStore``) each run's event and its per-request
    samples are appended in one transaction as soon as the run ends, so an interrupted
    sweep keeps what it finished. ``on_point`` is called with each ``SweepPoint``.
    ``candidate_id`` is recorded on every run (the board item the runs were made for), and
    ``source`` as its envelope source (what reproduces it: the command line, or the plan file).

    Raises:
        WarmupFailed: the warmup failed entirely (server down or wrong arguments).
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    max_c = max([c for c in concurrencies if c] or [len(target.workload.prompts)])
    points: list[SweepPoint] = []
    ignore_eos = target.ignore_eos
    length_enforced = target.ignore_eos
    if progress:
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
    with bar:
        for repeat in repeats:
            for c in concurrencies:
                # A fresh client per warmup: a connection kept idle through the previous timed
                # run can outlive the server's keep-alive and fail when reused (KEEPALIVE_S).
                async with make_client(
                    max(1, min(warmup_requests, max_c)), target.timeout_s
                ) as client:
                    ignore_eos, warm_notes = await warmup(
                        client, target, warmup_requests, ignore_eos
                    )
                if warm_notes:
                    length_enforced = False
                label = f"{config_name} " + (
                    f"c={c}" if request_rate is None else f"rate={request_rate:g}/s"
                )
                task = bar.add_task(f"{label} rep {repeat}", total=len(target.workload.prompts))
                slots = c or len(target.workload.prompts)
                watch = MetricsWatch(target.url) if target.server_metrics else None
                if watch is not None:
                    await watch.start()
                async with client_slots(slots, target.timeout_s) as shards:
                    # A fresh set of connections per run: each run starts from the same state.
                    results, duration = await timed_run(
                        shards,
                        target,
                        concurrency=c,
                        request_rate=request_rate,
                        seed=target.workload.spec.seed + repeat,
                        ignore_eos=ignore_eos,
                        progress=functools.partial(bar.advance, task),
                    )
                bar.remove_task(task)
                server_metrics = await watch.stop() if watch is not None else {}
                run = judged_run(
                    target,
                    results,
                    duration,
                    concurrency=c if request_rate is None else None,
                    length_enforced=length_enforced and ignore_eos,
                    speculative=server_metrics.get("vllm:spec_decode_num_accepted_tokens", 0) > 0,
                )
                event = benchmark_event(
                    target,
                    run,
                    config_name=config_name,
                    concurrency=c,
                    request_rate=request_rate,
                    repeat=repeat,
                    ignore_eos=ignore_eos,
                    is_baseline=is_baseline,
                    server_run_id=server_run_id,
                    session_id=session_id,
                    host=host,
                    candidate_id=candidate_id,
                    source=source,
                )
                if server_metrics:
                    event = with_server_metrics(event, server_metrics)
                if store is not None:
                    # Off the event loop: under load an append can wait on the ledger's lock.
                    await asyncio.to_thread(
                        commands.record_benchmark, store, event, samples_table(results)
                    )
                point = SweepPoint(c, request_rate, repeat, run, event)
                points.append(point)
                if on_point is not None:
                    on_point(point)
    return points


def format_point(point: SweepPoint) -> str:
    """One line per run for the console: throughput, median TTFT/TPOT, validity."""
    m = point.run.metrics
    load = (
        f"c={point.concurrency}" if point.request_rate is None else f"rate={point.request_rate:g}/s"
    )

    def f(x: float | None, spec: str = ".1f") -> str:
        return "-" if x is None else format(x, spec)

    gate = "valid" if point.run.valid else "INVALID: " + "; ".join(point.run.notes)
    return (
        f"{point.event.config_name} {load} rep {point.repeat}: {f(m.output_throughput)} tok/s out, "
        f"{f(m.request_throughput, '.2f')} req/s, median TTFT {f(m.median_ttft_ms)} ms, "
        f"median TPOT {f(m.median_tpot_ms, '.2f')} ms, concurrency {f(m.achieved_concurrency, '.2f')} [{gate}]"
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `tuneledger run bench`")
