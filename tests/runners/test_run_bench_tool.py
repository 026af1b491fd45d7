"""``tuneledger run bench --tool X``: the tool runs as a real subprocess and its result is imported.

The real-tool tests need GuideLLM / AIPerf / sglang (not project dependencies: each is
installed in a venv of its own, see tests/fixtures/MANIFEST.md) and torch + transformers.
The tool is found by ``TUNELEDGER_TEST_GUIDELLM`` / ``TUNELEDGER_TEST_AIPERF`` (a path to
its program) or on PATH, sglang by ``TUNELEDGER_TEST_SGLANG_PYTHON`` (a Python that has it);
without it the test is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.store import LedgerStore

#: Process-based on purpose (real benchmark tools and servers as processes): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
HERE = Path(__file__).parents[1]
# The console script, not ``python -m ledger.cli.main``: under ``-m`` the CLI module is loaded
# twice (as __main__ and as ledger.cli.main) and the runners' commands find no context.
TUNELEDGER = [str(BIN / "tuneledger")]


def _run(
    ledger: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TUNELEDGER, "--ledger", str(ledger), "run", "bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_missing_tool_exits_11(tmp_path: Path) -> None:
    out = _run(
        tmp_path / "l.duckdb",
        "--url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--tool",
        "guidellm",
        "--tool-path",
        str(tmp_path / "no-such-guidellm"),
    )
    assert out.returncode == 11, out.stderr
    assert "no-such-guidellm: not an executable file" in out.stderr


def test_failing_tool_exits_13_and_records_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    out = _run(
        ledger,
        "--url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--tool",
        "aiperf",
        "--tool-path",
        shutil.which("false") or "/bin/false",
    )
    assert out.returncode == 13, out.stderr
    assert "aiperf: exit 1, no result profile_export_aiperf.json" in out.stderr
    rows = (
        LedgerStore(ledger)
        .query_arrow("SELECT count(*) AS n FROM benchmarks")
        .column("n")
        .to_pylist()
    )
    assert rows == [0]


def test_unreachable_server_without_model_exits_13_in_one_line(tmp_path: Path) -> None:
    """Without --model the served model is asked first; a server that is not there is one line, exit 13."""
    out = _run(
        tmp_path / "l.duckdb",
        "--url",
        "http://127.0.0.1:9",
        "--tool",
        "aiperf",
        "--tool-path",
        shutil.which("false") or "/bin/false",
    )
    assert out.returncode == 13
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith("tuneledger: error: cannot ask http://127.0.0.1:9/v1/models")
    )
    assert "Traceback" not in out.stderr


def _tool(env_name: str, program: str) -> str:
    path = os.environ.get(env_name) or shutil.which(program)
    if not path:
        pytest.skip(f"{program} is not installed (set {env_name} to its program or put it on PATH)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real ``transformers serve`` of the tiny random-weight model on a free loopback port."""
    from tests.support.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = (tmp_path_factory.mktemp("serve") / "serve.log").open("w")
    proc = subprocess.Popen(
        [
            str(BIN / "transformers"),
            "serve",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("transformers serve exited before it was ready")
                time.sleep(1)
        else:
            pytest.fail("transformers serve was not ready within 180 s")
        yield url, model
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.engine("torch", "transformers", "fastapi")
@pytest.mark.parametrize(
    ("tool", "env_name"),
    [("guidellm", "TUNELEDGER_TEST_GUIDELLM"), ("aiperf", "TUNELEDGER_TEST_AIPERF")],
)
def test_real_tool_against_transformers_serve(
    tool: str, env_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    program = _tool(env_name, tool)
    # the server only once the tool is known to be here: started first, a real `transformers
    # serve` (torch, the tiny model) was paid for and thrown away where neither tool is installed
    url, model = request.getfixturevalue("served_model")
    ledger = tmp_path / "l.duckdb"
    # transformers serve rejects ignore_eos (422): the output is capped by max_tokens instead
    out = _run(
        ledger,
        "--url",
        url,
        "--model",
        str(model),
        "--tokenizer",
        str(model),
        "--input-len",
        "16",
        "--output-len",
        "4",
        "--num-prompts",
        "4",
        "--concurrency",
        "1,2",
        "--no-ignore-eos",
        "--warmup",
        "0",
        "--config-name",
        "cand",
        "--tool",
        tool,
        "--tool-path",
        program,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = (
        LedgerStore(ledger)
        .query_arrow(
            "SELECT b.seq, b.tool, b.config_name, b.is_baseline, b.concurrency, b.completed, b.failed, "
            "b.output_throughput, b.median_ttft_ms, count(s.benchmark_event_id) AS samples "
            "FROM benchmarks b LEFT JOIN bench_samples s ON s.benchmark_event_id = b.event_id GROUP BY ALL ORDER BY b.seq"
        )
        .to_pylist()
    )
    assert [(r["tool"], r["config_name"], r["is_baseline"], r["concurrency"]) for r in rows] == [
        (tool, "cand", False, 1),
        (tool, "cand", False, 2),
    ]
    assert all(
        r["completed"] == 4
        and r["failed"] == 0
        and r["output_throughput"] > 0
        and r["median_ttft_ms"] > 0
        for r in rows
    )
    assert all(r["samples"] == 4 for r in rows)  # the tool's per-request records are kept
    assert f"{tool} c=1 repeat=0: 4 ok" in out.stdout
    artifacts = list((tmp_path / "l.artifacts" / "bench").iterdir())
    assert len(artifacts) == 2 and all((a / "tool-output.txt").exists() for a in artifacts)


@pytest.fixture()
def streaming_server() -> Iterator[str]:
    """tests/fake_servers/openai_stream.py: a real aiohttp server streaming 4 one-token chunks
    with 2 ms between them. sglang's client always sends ``ignore_eos``, which ``transformers
    serve`` refuses (422), so sglang is measured against this server instead (its completions
    client also trips on this server's usage chunk without choices: chat is used)."""
    script = HERE / "fake_servers" / "openai_stream.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--chunks", "4", "--delay-ms", "2"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.engine("torch")
def test_real_sglang_bench_serving(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    python = os.environ.get("TUNELEDGER_TEST_SGLANG_PYTHON")
    if not python:
        pytest.skip(
            "sglang is not installed here (set TUNELEDGER_TEST_SGLANG_PYTHON to a Python that has it)"
        )
    streaming_server: str = request.getfixturevalue("streaming_server")  # once sglang is here
    from tests.support.tiny_model import build_tiny_model

    tokenizer = build_tiny_model(tmp_path / "tiny")  # sglang's client loads a tokenizer folder
    ledger = tmp_path / "l.duckdb"
    out = _run(
        ledger,
        "--url",
        streaming_server,
        "--endpoint",
        "chat",
        "--model",
        "m",
        "--tokenizer",
        str(tokenizer),
        "--input-len",
        "16",
        "--output-len",
        "4",
        "--num-prompts",
        "8",
        "--concurrency",
        "2",
        "--tool",
        "sglang",
        "--tool-path",
        python,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (row,) = (
        LedgerStore(ledger)
        .query_arrow(
            "SELECT b.tool, b.concurrency, b.completed, b.failed, b.median_tpot_ms, count(s.benchmark_event_id) AS samples "
            "FROM benchmarks b LEFT JOIN bench_samples s ON s.benchmark_event_id = b.event_id GROUP BY ALL"
        )
        .to_pylist()
    )
    assert (row["tool"], row["concurrency"], row["completed"], row["failed"], row["samples"]) == (
        "sglang.bench_serving",
        2,
        8,
        0,
        8,
    )
    assert row["median_tpot_ms"] > 0
