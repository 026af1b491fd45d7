"""A small real HTTP server that answers like an SGLang server running speculative decoding
(stdlib only; for tests/runners/test_spec.py — SGLang cannot run on these machines).

It replays SGLang's real formats: ``GET /server_info`` is the recorded body of
tests/fixtures/sglang/server/native_api.get_server_info.response.json (SGLang's documentation
CI run), with ``speculative_*`` server args filled in from the command line and, when an
algorithm is given, ``internal_states[0].avg_spec_accept_length`` (the field SGLang adds under
speculation); after each request it prints a ``Decode batch`` line in SGLang 0.5.x's format with
``accept len: X, accept rate: Y`` (docs/engines.md); non-streamed ``POST /generate`` returns
``meta_info.spec_accept_length``. ``POST /v1/chat/completions`` streams ``--chunks`` one-token SSE
chunks with ``--delay-ms`` between them, divided by the accept length under speculation (each
verify step emits that many tokens), then a usage chunk and ``[DONE]``.

Launched by the real server runner through the sglang adapter's ``command``:
``python sglang_spec_server.py --model-path M --host H --port P [--speculative-algorithm A ...]``.
``--fake-accept X`` sets the accept length (default 2.5).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

INFO = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "sglang"
    / "server"
    / "native_api.get_server_info.response.json"
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--fake-accept", type=float, default=2.5)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--delay-ms", type=float, default=4.0)
    args, _unknown = p.parse_known_args()
    spec = args.speculative_algorithm is not None
    accept = args.fake_accept if spec else 1.0
    draft = args.speculative_num_draft_tokens or 4
    rate = (accept - 1) / max(1, draft - 1) if spec else None

    info = json.loads(INFO.read_text())
    info.update(
        speculative_algorithm=args.speculative_algorithm,
        speculative_num_steps=args.speculative_num_steps,
        speculative_eagle_topk=args.speculative_eagle_topk,
        speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        port=args.port,
    )
    if spec:
        info["internal_states"][0]["avg_spec_accept_length"] = accept
    lock = threading.Lock()

    def decode_line(running: int) -> str:
        spec_part = f"accept len: {accept:.2f}, accept rate: {rate:.2f}, " if spec else ""
        return (
            f"[2026-11-30 21:00:00] Decode batch, #running-req: {running}, #token: {64 * running}, "
            f"token usage: 0.01, {spec_part}cuda graph: True, gen throughput (token/s): 321.50, #queue-req: 0"
        )

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            return

        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/health":
                self._json(200, {})
            elif self.path in ("/server_info", "/get_server_info"):
                self._json(200, info)
            elif self.path == "/v1/models":
                self._json(200, {"data": [{"id": args.model_path}]})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(
                self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"
            )
            if self.path == "/generate":
                meta = {"completion_tokens": 8, "prompt_tokens": 8, "e2e_latency": 0.01}
                if spec:
                    meta.update(spec_accept_length=accept, spec_verify_ct=max(1, round(8 / accept)))
                self._json(200, {"text": "ok", "meta_info": meta})
                return
            if self.path != "/v1/chat/completions":
                self._json(404, {"detail": "Not Found"})
                return
            n = min(int(body.get("max_tokens", args.chunks)), args.chunks)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(n):
                time.sleep(args.delay_ms / 1000 / accept)
                chunk = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": n}}
            self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            with lock:
                print(decode_line(1), flush=True)
            self.close_connection = True

    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    print(
        f"[2026-11-30 21:00:00] INFO:     Uvicorn running on http://{args.host}:{args.port}",
        flush=True,
    )
    print("[2026-11-30 21:00:00] The server is fired up and ready to roll!", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        httpd.server_close()


if __name__ == "__main__":
    main()
