"""A trivial but real streaming server (aiohttp.web) speaking the three benchmark endpoints.

``POST /v1/chat/completions`` and ``POST /v1/completions`` stream ``--chunks`` SSE chunks of
one token each, then a usage chunk (``usage.completion_tokens``) and ``data: [DONE]``;
``POST /generate`` streams SGLang-style cumulative ``text`` with ``meta_info.completion_tokens``,
``--tokens-per-chunk`` tokens per chunk. ``--delay-ms`` sleeps between chunks (0: instant,
for measuring client overhead). ``--reject-unknown`` answers 422 to bodies carrying
``ignore_eos``, as ``transformers serve`` does. ``--openai-tokens-per-chunk K`` puts K tokens in
each OpenAI chunk (coarse streaming, as ``transformers serve`` does on a CPU). ``--keepalive-s`` closes a connection idle that
long (uvicorn, under ``transformers serve``, SGLang and vLLM, closes after 5 s; aiohttp's default
is 75 s). ``--fail-posts N`` answers the first N POSTs with HTTP 500 (a server that breaks
under its first requests); with ``--fail-marker PATH`` only while PATH does not exist, and the
server creates it when it starts failing (so a restarted server works: fails once per plan).
``GET /health`` and ``/v1/models`` answer 200.

Run: ``python tests/fake_servers/openai_stream.py [MODEL] [--host H] --port 0`` prints ``PORT <n>`` once
listening (MODEL is ignored: it lets a server runner launch this like an engine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys

from aiohttp import web


def make_app(
    chunks: int = 8,
    delay_s: float = 0.0,
    tokens_per_chunk: int = 2,
    reject_unknown: bool = False,
    fail_posts: int = 0,
    openai_tokens_per_chunk: int = 1,
    burst: bool = False,
) -> web.Application:
    """The aiohttp application (see the module docstring)."""
    failures_left = [fail_posts]

    @web.middleware
    async def failing(request: web.Request, handler):
        if request.method == "POST" and failures_left[0] > 0:
            failures_left[0] -= 1
            return web.json_response({"error": "injected failure (--fail-posts)"}, status=500)
        return await handler(request)

    async def openai(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if reject_unknown and "ignore_eos" in body:
            return web.json_response(
                {
                    "detail": [
                        {"loc": ["body", "ignore_eos"], "msg": "Extra inputs are not permitted"}
                    ]
                },
                status=422,
            )
        n = min(int(body.get("max_tokens", chunks)), chunks)
        chat = request.path.endswith("chat/completions")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        events = []
        for i in range(0, n, openai_tokens_per_chunk):
            if delay_s and not (burst and events):
                await asyncio.sleep(delay_s)
            text = "".join(f"t{j} " for j in range(i, min(n, i + openai_tokens_per_chunk)))
            choice = (
                {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
            )
            events.append(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
            if not burst:
                await resp.write(events.pop())
        if burst:  # every content event in one write: the client reads them as one burst
            await resp.write(b"".join(events))
        usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
        await resp.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = min(int(body.get("sampling_params", {}).get("max_new_tokens", chunks)), chunks)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        done = 0
        while done < n:
            if delay_s:
                await asyncio.sleep(delay_s)
            done = min(n, done + tokens_per_chunk if done else done + 1)
            data = {
                "text": "x" * done,
                "meta_info": {"completion_tokens": done, "prompt_tokens": 1},
            }
            await resp.write(b"data: " + json.dumps(data).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def ok(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    app = web.Application(middlewares=[failing])
    app.router.add_post("/v1/chat/completions", openai)
    app.router.add_post("/v1/completions", openai)
    app.router.add_post("/generate", generate)
    app.router.add_get("/health", ok)
    app.router.add_get("/v1/models", ok)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "model", nargs="?", help="ignored (accepted so server runners can pass one)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=2)
    parser.add_argument("--reject-unknown", action="store_true")
    parser.add_argument("--keepalive-s", type=float, default=75.0)
    parser.add_argument("--fail-posts", type=int, default=0)
    parser.add_argument("--openai-tokens-per-chunk", type=int, default=1)
    parser.add_argument("--fail-marker")
    parser.add_argument("--burst", action="store_true", help="all content events in one write")
    args = parser.parse_args(argv)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    # Listen before telling the port: a client connecting between bind and run_app's own listen
    # would be refused (seen on a loaded machine).
    sock.listen(1024)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    fail_posts = args.fail_posts
    if args.fail_marker:
        try:
            open(args.fail_marker, "x").close()
        except FileExistsError:
            fail_posts = 0
    app = make_app(
        args.chunks,
        args.delay_ms / 1000.0,
        args.tokens_per_chunk,
        args.reject_unknown,
        fail_posts,
        args.openai_tokens_per_chunk,
        args.burst,
    )
    web.run_app(
        app,
        sock=sock,
        print=None,
        access_log=None,
        backlog=1024,
        keepalive_timeout=args.keepalive_s,
    )


if __name__ == "__main__":
    sys.exit(main())
