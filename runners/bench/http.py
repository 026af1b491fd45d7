"""The HTTP clients the benchmark sends its requests through.

Connections: one keep-alive connection per concurrency slot, so nothing churns (httpx's
default pool keeps only 20). The timed requests go through ``client_slots(c)``:

- ``aiohttp`` (default, when aiohttp and ``httpx-aiohttp`` are installed): ``SharedClient``
  over an ``AiohttpClient``, aiohttp directly, one ``ClientSession`` with
  ``TCPConnector(limit=c)``, lines read from ``response.content`` as sglang's bench_serving
  does: httpx's own model was 27.5% of the client's CPU, and without it the client costs
  about what a bare aiohttp client does (bench/bench_client.py; docs/performance.md).
  ``make_client`` (warm-up, other callers) still gives an ``httpx.AsyncClient``
  whose transport is ``httpx_aiohttp.AiohttpTransport`` over the same kind of session.
  aiohttp's HTTP/1.1 parser is C (llhttp) and its pool hands a connection out in O(1);
  what is left of httpx's cost is its own request/response model (URL, headers,
  Request/Response objects, cookie and logging hooks, much of it in ``AsyncClient.send``),
  not the wire (the figures: docs/performance.md). Two of its costs are cut here: the URL is parsed
  once per target (``BenchTarget.httpx_url``) and the client keeps no cookies (``_NoCookies``).
  Streaming is chunk by chunk: the transport reads ``response.content.iter_chunked(16 KiB)``, which returns
  whatever bytes have arrived, so a chunk's timestamp is its arrival, not the body's end
  (tests/runners/test_bench_metrics.py checks TTFT and ITL against a server that paces its chunks).
- ``httpx`` (fallback without the package, or ``transport="httpx"``): plain httpcore/h11/anyio.
  httpcore's pool scans every connection of its pool on each request and response (O(c) per
  event, O(c^2) per wave): at c=64 one shared client spent ten times aiohttp's whole
  per-request cost in that scan. So the slots are spread over
  ``ClientShards``: several clients of at most ``SHARD_SIZE`` connections each.

``client_slots(c)`` returns whichever of the two applies; ``TRANSPORT`` names the default and
``sweep`` says which one it uses in its progress output.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from http.cookiejar import CookieJar

import httpx

try:  # optional: an aiohttp transport under the httpx API (see the module docstring)
    import aiohttp
    from httpx_aiohttp import AiohttpTransport
except ImportError:  # pragma: no cover - depends on the environment
    aiohttp = None  # type: ignore[assignment]
    AiohttpTransport = None  # type: ignore[assignment,misc]


#: Seconds an idle connection stays in the client's pool. Below the 5 s after which uvicorn (the
#: HTTP server of SGLang, vLLM and transformers serve) closes an idle keep-alive connection: a
#: connection the server may already have closed is never reused, even when the client's loop was
#: too busy to read the server's FIN (a reused one fails "Can not write request body" / "Server
#: disconnected"; tests/runners/test_bench_resilience.py). A closed-loop run reuses connections at once.
KEEPALIVE_S = 2.0

#: The transport ``make_client`` uses by default: ``"aiohttp"`` when httpx-aiohttp is installed.
TRANSPORT = "aiohttp" if AiohttpTransport is not None else "httpx"

#: What a failed request may raise, beyond httpx's own errors (the aiohttp transport maps most
#: aiohttp errors to httpx ones, not all of them).
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    (aiohttp.ClientError, TimeoutError) if aiohttp is not None else (TimeoutError,)
)
#: Everything one request may raise that makes it a failed request (recorded, not raised).
_REQUEST_ERRORS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    *_TRANSPORT_ERRORS,
    json.JSONDecodeError,
    ValueError,
    KeyError,
    TypeError,
)


class _NoCookies(CookieJar):
    """A cookie jar that keeps nothing: a benchmark sends no cookies, and httpx's per-response
    ``extract_cookies`` through ``http.cookiejar`` cost ~10% of a request's client CPU."""

    def extract_cookies(self, response, request) -> None:
        return None


def transport_label(transport: str | None = None) -> str:
    """A human-readable name of the transport, for the progress output."""
    if (transport or TRANSPORT) == "aiohttp":
        return "aiohttp (one shared session, its pool sized to the concurrency)"
    return "plain httpx (httpx-aiohttp not installed; clients of 8 connections)"


def make_client(
    max_connections: int, timeout_s: float = 600.0, transport: str | None = None
) -> httpx.AsyncClient:
    """One AsyncClient for a whole run, its pool sized to the concurrency.

    ``transport``: ``"aiohttp"`` (an ``aiohttp.TCPConnector(limit=max_connections)`` under the
    httpx API), ``"httpx"`` (httpcore), or None for ``TRANSPORT``.
    """
    n = max(1, max_connections)
    transport = transport or TRANSPORT
    timeout = httpx.Timeout(timeout_s, connect=30.0)
    if transport == "aiohttp":
        if AiohttpTransport is None:
            raise RuntimeError("the aiohttp transport needs the httpx-aiohttp package")

        def session() -> aiohttp.ClientSession:
            # Made on the first request, inside the running loop (aiohttp wants one); the transport
            # closes it with the client. limit = concurrency: one connection per slot, kept alive
            # between requests for KEEPALIVE_S (shorter than the server's keep-alive).
            connector = aiohttp.TCPConnector(
                limit=n, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
            )
            return aiohttp.ClientSession(
                connector=connector, trust_env=False, auto_decompress=False
            )

        return httpx.AsyncClient(
            transport=AiohttpTransport(client=session),
            timeout=timeout,  # passed to aiohttp per request (connect, read, pool)
            trust_env=False,
            cookies=_NoCookies(),
        )
    if transport != "httpx":
        raise ValueError(f"transport must be 'aiohttp' or 'httpx', not {transport!r}")
    return httpx.AsyncClient(
        limits=httpx.Limits(
            max_connections=n, max_keepalive_connections=n, keepalive_expiry=KEEPALIVE_S
        ),
        timeout=timeout,
        trust_env=False,  # a proxy from the environment would sit between us and a local server
        cookies=_NoCookies(),
    )


class AiohttpClient:
    """The benchmark's requests straight on one ``aiohttp.ClientSession`` (``TCPConnector(limit=c)``),
    behind the one method ``send_request`` uses: ``stream(method, url, json=...)``.

    Why not httpx over the aiohttp transport: httpx's request/response model (URL, headers,
    Request/Response objects, hooks) was 27.5% of the client's CPU, which kept it at 1.7-2.0x
    a bare aiohttp client's CPU per request (bench/bench_client.py). Here a request is what
    sglang's bench_serving does: the JSON body encoded once, ``session.post``, lines read from
    ``response.content``. The session is made on the first request, inside the running loop.
    """

    def __init__(self, limit: int, timeout_s: float = 600.0) -> None:
        self.limit = max(1, limit)
        # per read, like httpx's Timeout (a long generation is not cut off as a whole)
        self.timeout = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=timeout_s)
        self.session: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            # one connection per slot, kept alive between requests for KEEPALIVE_S as
            # make_client's: below uvicorn's 5 s, so no connection the server closed is reused
            connector = aiohttp.TCPConnector(
                limit=self.limit, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
            )
            self.session = aiohttp.ClientSession(
                connector=connector, trust_env=False, auto_decompress=False, timeout=self.timeout
            )
        return self.session

    @asynccontextmanager
    async def stream(self, method: str, url: object, *, json: dict):
        """One request; yields a response with ``status_code``, ``aread()`` and ``lines()``."""
        body = _json_bytes(json)
        async with self._session().request(
            method, str(url), data=body, headers=_JSON_HEADERS
        ) as response:
            yield _AiohttpResponse(response)

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()


_JSON_HEADERS = {"Content-Type": "application/json"}


def _json_bytes(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class _AiohttpResponse:
    """The parts of an ``httpx.Response`` that ``send_request`` reads, over an aiohttp response."""

    __slots__ = ("_response", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code = response.status

    async def aread(self) -> bytes:
        return await self._response.read()

    async def reads(self):
        """The body's data as it arrives, one ``bytes`` per network read (aiohttp's
        ``iter_any``): lines that came in one read came together, which the streaming rule
        must see (a burst of tokens is one chunk, not one per line)."""
        async for data in self._response.content.iter_any():
            yield data


class SharedClient:
    """``slots`` concurrency slots over one shared client (the aiohttp pool is O(1)).

    With ``transport="aiohttp"`` the client is an ``AiohttpClient`` (aiohttp directly),
    else one ``httpx.AsyncClient`` from ``make_client``. Same interface as
    ``ClientShards``: ``async with slots.slot() as client`` waits for a free slot (the
    closed loop's semaphore of c). Use as an async context manager (closes the client).
    """

    def __init__(self, slots: int, timeout_s: float = 600.0, transport: str | None = None) -> None:
        self.slots = max(1, slots)
        if (transport or TRANSPORT) == "aiohttp":
            self.client: AiohttpClient | httpx.AsyncClient = AiohttpClient(self.slots, timeout_s)
        else:
            self.client = make_client(self.slots, timeout_s, transport)
        self.clients = [self.client]
        self._free = asyncio.Semaphore(self.slots)

    async def __aenter__(self) -> SharedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

    @asynccontextmanager
    async def slot(self):
        """Hold one slot; yields the shared client."""
        async with self._free:
            yield self.client


#: Connections per httpx client: small enough that httpcore's per-event pool scan stays cheap.
SHARD_SIZE = 8


class ClientShards:
    """``slots`` concurrency slots over ``ceil(slots / SHARD_SIZE)`` plain httpx clients (see the module docstring).

    The fallback when httpx-aiohttp is missing: httpcore's pool costs O(connections) per event.

    ``async with shards.slot() as client`` waits for a free slot (this is the closed loop's
    semaphore of c) and yields the client that owns it; every slot keeps its connection alive.
    Use as an async context manager (closes the clients).
    """

    def __init__(self, slots: int, timeout_s: float = 600.0) -> None:
        slots = max(1, slots)
        self.slots = slots
        self.clients = [
            make_client(min(SHARD_SIZE, slots - start), timeout_s, "httpx")
            for start in range(0, slots, SHARD_SIZE)
        ]
        self._free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
        for i in range(slots):
            self._free.put_nowait(self.clients[i // SHARD_SIZE])

    async def __aenter__(self) -> ClientShards:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self.clients:
            await client.aclose()

    @asynccontextmanager
    async def slot(self):
        """Hold one slot; yields its client."""
        client = await self._free.get()
        try:
            yield client
        finally:
            self._free.put_nowait(client)


def client_slots(
    slots: int, timeout_s: float = 600.0, transport: str | None = None
) -> SharedClient | ClientShards:
    """``slots`` concurrency slots: one ``SharedClient`` over aiohttp, else ``ClientShards`` of httpx clients."""
    if (transport or TRANSPORT) == "aiohttp":
        return SharedClient(slots, timeout_s, "aiohttp")
    return ClientShards(slots, timeout_s)
