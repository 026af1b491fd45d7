"""A tiny real HTTP server that behaves like an SGLang server from the outside (stdlib only).

Launched by the real runner with the argv of the sglang adapter (the config's
``command`` replaces ``python -m sglang.launch_server``), so it receives
``--model-path M --host H --port P [flags]``; unknown flags (``--tp 4``) are
ignored, like a real server would accept them. ``--fake-*`` flags choose the behaviour:

--fake-log NAME         print tests/fixtures/sglang/server/sm120_qwen35_NAME.log's startup lines
                        (baseline, flashinfer_fusion, fp8_capture_crash) or none
--fake-unhealthy-s S    /health answers 503 for S seconds, then 200 (and the ready line is printed)
--fake-never-ready      /health answers 503 forever
--fake-crash KIND       print the crash fixture (``resources``) or a CUDA OOM traceback (``oom``) and exit 1
--fake-ignore SIGS      ignore these signals (``INT`` or ``INT,TERM``): proves the stop escalation
--fake-children N       start N worker processes in the group that ignore SIGINT (like TP workers
                        that outlive the leader)
--fake-no-server-info   /server_info and /get_server_info answer 404
--fake-old-server-info  only /get_server_info answers (older SGLang)
--api-key KEY           printed in the ``server_args=ServerArgs(... api_key='KEY' ...)`` line, as SGLang does

After ready, POST /generate prints the fixture's running lines (decode batches) and, with
``--fake-eager-decode``, a decode line at #running-req 64 with ``cuda graph: False``.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "server"
OOM_LINES = [
    "[2026-11-21 09:31:21 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/venv/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 1501, in init_memory_pool',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 94.97 GiB",
]
EAGER_LINE = (
    "[2026-11-20 14:07:00 TP0] Decode batch, #running-req: 64, #token: 70011, token usage: 0.17, "
    "cuda graph: False, gen throughput (token/s): 1402.10, #queue-req: 0"
)


def say(line: str) -> None:
    print(line, flush=True)


def with_api_key(lines: list[str], api_key: str | None) -> list[str]:
    """The log lines with ``api_key=None`` replaced by the key, as SGLang prints its server args."""
    return (
        [line.replace("api_key=None", f"api_key={api_key!r}") for line in lines]
        if api_key
        else lines
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--fake-log", default="baseline")
    parser.add_argument("--fake-unhealthy-s", type=float, default=0.3)
    parser.add_argument("--fake-never-ready", action="store_true")
    parser.add_argument("--fake-crash")
    parser.add_argument("--fake-ignore", default="")
    parser.add_argument("--fake-children", type=int, default=0)
    parser.add_argument("--fake-no-server-info", action="store_true")
    parser.add_argument("--fake-old-server-info", action="store_true")
    parser.add_argument("--fake-eager-decode", action="store_true")
    parser.add_argument("--api-key")  # echoed into the server_args line, as SGLang logs it
    args, _unknown = parser.parse_known_args()

    for name in filter(None, args.fake_ignore.split(",")):
        signal.signal(getattr(signal, f"SIG{name}"), signal.SIG_IGN)
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)",
            ]
        )
        for _ in range(args.fake_children)
    ]
    _ = children  # they belong to our process group: the runner must end them

    if args.fake_crash:
        lines = (
            (FIXTURES / "sm120_qwen35_fp8_capture_crash.log").read_text().splitlines()
            if args.fake_crash == "resources"
            else OOM_LINES
        )
        for line in with_api_key(lines, args.api_key):
            say(line)
        time.sleep(0.1)
        sys.exit(1)

    lines = (
        []
        if args.fake_log == "none"
        else (FIXTURES / f"sm120_qwen35_{args.fake_log}.log").read_text().splitlines()
    )
    lines = with_api_key(lines, args.api_key)
    ready_at = next(
        (i for i, line in enumerate(lines) if "fired up and ready to roll" in line), len(lines) - 1
    )
    head, running = lines[:ready_at], lines[ready_at + 1 :]
    ready_line = lines[ready_at] if lines else "The server is fired up and ready to roll!"
    for line in head:
        say(line)

    state = {"healthy": False}
    server_info = {
        "model_path": args.model_path,
        "port": args.port,
        "status": "ready",
        "version": "0.5.12",
        "max_total_num_tokens": 20480,
        "attention_backend": "fa3",
        "internal_states": [
            {"effective_max_running_requests_per_dp": 128, "last_gen_throughput": 0.0}
        ],
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: object) -> None:  # noqa: A002 - quiet access log
            return

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/health":
                self._send(200 if state["healthy"] else 503, {})
            elif self.path == "/server_info" and not (
                args.fake_no_server_info or args.fake_old_server_info
            ):
                self._send(200, server_info)
            elif self.path == "/get_server_info" and not args.fake_no_server_info:
                self._send(200, server_info)
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self.path == "/generate" and state["healthy"]:
                for line in running:
                    say(line)
                if args.fake_eager_decode:
                    say(EAGER_LINE)
                self._send(
                    200,
                    {"text": "hello", "meta_info": {"completion_tokens": 1, "prompt_tokens": 1}},
                )
            else:
                self._send(404, {"detail": "Not Found"})

    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    say(
        f"[2026-11-20 14:04:45] INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)"
    )
    if not args.fake_never_ready:
        time.sleep(args.fake_unhealthy_s)
        state["healthy"] = True
        say(ready_line)
    try:
        while True:
            time.sleep(0.2)
    except KeyboardInterrupt:
        say("[2026-11-20 14:10:00] Received SIGINT: shutting down")
        httpd.shutdown()
        sys.exit(0)


if __name__ == "__main__":
    main()
