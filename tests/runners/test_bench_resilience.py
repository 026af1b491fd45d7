"""The benchmark client against real servers that close idle connections or refuse them.

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
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.bench.client import BenchTarget, RunIdentity, make_client, send_request, warmup
from runners.bench.workload import WorkloadSpec, build_workload

#: Process-based on purpose (real servers that drop connections): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

FAKE_SERVER = Path(__file__).parents[1] / "fake_servers" / "openai_stream.py"


@pytest.fixture()
def server_5s_keepalive():
    """A real streaming server closing connections idle for 5 s, like uvicorn."""
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--chunks", "4", "--keepalive-s", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _target(url: str) -> BenchTarget:
    return BenchTarget(
        url=url,
        endpoint="chat",
        model="fake",
        workload=build_workload(WorkloadSpec(8, 4, 4, seed=1)),
    )


def test_a_connection_idle_past_the_servers_keepalive_is_not_reused(
    server_5s_keepalive: str,
) -> None:
    target = _target(server_5s_keepalive)

    async def go():
        async with make_client(1) as client:
            first = await send_request(client, target, target.workload.prompts[0], True)
            await asyncio.sleep(4.0)  # idle, as through a timed run of the other concurrency ...
            time.sleep(
                1.5
            )  # ... then the loop blocked (the ledger append) while the server closes it
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


@pytest.fixture()
def coarse_server():
    """A real server streaming 8 tokens a chunk (as transformers serve does on a CPU)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(FAKE_SERVER),
            "--port",
            "0",
            "--chunks",
            "16",
            "--delay-ms",
            "2",
            "--openai-tokens-per-chunk",
            "8",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_coarse_streaming_leaves_tpot_and_itl_unmeasured_with_the_reason(
    coarse_server: str, tmp_path: Path
) -> None:
    """A regression: a server sending few chunks per completion gave median TPOT 0.01 ms, 'valid', compared."""
    from ledger.store import LedgerStore
    from runners.bench.client import sweep

    target = BenchTarget(
        url=coarse_server,
        endpoint="chat",
        model="fake",
        workload=build_workload(WorkloadSpec(8, 16, 6, seed=1)),
    )
    store = LedgerStore(tmp_path / "l.duckdb")
    points = asyncio.run(
        sweep(target, RunIdentity("baseline"), concurrencies=[1], store=store, progress=False)
    )
    metrics, notes = points[0].run.metrics, points[0].run.notes
    assert (
        metrics.median_tpot_ms is None and metrics.p99_itl_ms is None and metrics.max_itl_ms is None
    )
    assert metrics.median_ttft_ms > 0 and metrics.output_throughput > 0
    # two chunks of 8 tokens, 2 ms apart; on a loaded machine both may come in one read, which
    # the runner counts as one chunk (a fresh clone beside a busy neighbour saw it): coarse either way
    coarse = [
        n for n in notes if re.match(r"coarse streaming: [12] chunks for 16 output tokens", n)
    ]
    assert coarse, notes
    row = store.query_arrow(
        "SELECT median_tpot_ms, median_itl_ms, valid FROM benchmarks"
    ).to_pylist()[0]
    assert row["median_tpot_ms"] is None and row["median_itl_ms"] is None


def test_token_by_token_streaming_keeps_tpot(fine_server: str) -> None:
    from runners.bench.client import sweep

    target = BenchTarget(
        url=fine_server,
        endpoint="chat",
        model="fake",
        workload=build_workload(WorkloadSpec(8, 16, 4, seed=1)),
    )
    points = asyncio.run(sweep(target, RunIdentity("baseline"), concurrencies=[1], progress=False))
    assert points[0].run.metrics.median_tpot_ms > 0
    assert not any("coarse" in n for n in points[0].run.notes)


@pytest.fixture()
def fine_server():
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--chunks", "16", "--delay-ms", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_bad_tokenizer_is_one_line_exit_3_and_tokenizer_json_needs_no_transformers(
    tmp_path: Path,
) -> None:
    """A regression: --tokenizer read tokenizer.json through transformers and failed with a traceback."""
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    tuneledger = Path(sys.executable).parent / "tuneledger"
    out = subprocess.run(
        [
            str(tuneledger),
            "--ledger",
            str(tmp_path / "l.duckdb"),
            "run",
            "bench",
            "--url",
            "http://127.0.0.1:9",
            "--tokenizer",
            str(bad),
            "--no-progress",
            # named, so the only stderr line is the error (not the notice of the name taken)
            "--config-name",
            "baseline",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
    assert str(bad) in out.stderr and "Traceback" not in out.stderr
    # a real tokenizer.json is read by the tokenizers library alone (transformers made unimportable)
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(
        models.WordLevel({"[UNK]": 0, **{f"w{i}": i + 1 for i in range(50)}}, unk_token="[UNK]")
    )
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    good = tmp_path / "good" / "tokenizer.json"
    good.parent.mkdir()
    tok.save(str(good))
    code = (
        "import sys; sys.modules['transformers'] = None; from runners.bench.workload import load_tokenizer; "
        f"t = load_tokenizer({str(good.parent)!r}); print(t.vocab_size if hasattr(t, 'vocab_size') else 'ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_too_few_prompts_for_the_concurrency_is_warned_before_running(
    coarse_server: str, tmp_path: Path
) -> None:
    """A regression: 16 prompts at c=4 failed the achieved-concurrency rule in 2 of 3 runs, unannounced."""
    from runners.bench.metrics import min_prompts, prompts_warning

    assert prompts_warning(16, [1, 4]) is not None and "at least 32 prompts" in prompts_warning(
        16, [1, 4]
    )
    assert prompts_warning(32, [1, 4]) is None and prompts_warning(5, [None]) is None
    assert min_prompts(64) == 512
    tuneledger = Path(sys.executable).parent / "tuneledger"
    out = subprocess.run(
        [
            str(tuneledger),
            "--ledger",
            str(tmp_path / "l.duckdb"),
            "run",
            "bench",
            "--url",
            coarse_server,
            "--num-prompts",
            "8",
            "--concurrency",
            "1,4",
            "--no-progress",
            "--config-name",
            "b200",
            "--candidate",
            "kernel-tune:moe",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (
        "warning: 8 prompts at concurrency 4" in out.stderr and "at least 32 prompts" in out.stderr
    )
    # and no --model: the bench asked the server which model it serves (/v1/models lists "fake")
    assert "[valid" in out.stdout or "INVALID" in out.stdout
    from ledger.store import LedgerStore

    rows = (
        LedgerStore(tmp_path / "l.duckdb")
        .query_arrow("SELECT candidate_id FROM benchmarks")
        .to_pylist()
    )
    assert rows == [{"candidate_id": "kernel-tune:moe"}] * 2
