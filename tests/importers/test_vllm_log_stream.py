"""A served vLLM log past 8 MiB is read as a stream, in bounded memory, as an SGLang one is
(docs/reliability.md, "Server log import speed and memory"): a real ``tuneledger import`` under an
address-space limit far below what holding the log would take imports a log past the 256 MiB of a
result file with every ``SpecDecoding metrics`` line counted, and the events of a log read as a
stream are those of the same log read whole.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ledger.importers import detect, import_file
from ledger.input_files import HEAD_BYTES, LIMITS
from tests.importers.test_server_log_memory import ACCEPT, import_and_count
from tests.importers.test_server_log_stream import ADDRESS_SPACE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: a real vLLM 0.32 start with a speculative config, up to its first served lines
STARTUP = FIXTURES / "vllm_cpu" / "spec-start.log"
STARTUP_LINES = 130


def _served_block(steps: int) -> tuple[str, int]:
    """``steps`` steps of a served log (uvicorn's access lines, the API server's throughput line
    and a ``SpecDecoding metrics`` line with an accept length of ``ACCEPT`` in turn, each equally
    often when ``steps`` is a multiple of 4), times rising; the text and its metrics lines."""
    clock = datetime(2026, 12, 1, 14, 50, 0)
    out = []
    for step in range(steps):
        stamp = clock.strftime("%m-%d %H:%M:%S")
        out.extend(
            f'INFO:     127.0.0.1:{40000 + (step * 8 + i) % 20000} - "POST /v1/completions '
            f'HTTP/1.1" 200 OK\n'
            for i in range(8)
        )
        tag = "(APIServer pid=4848)"
        out.append(
            f"{tag} INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: "
            f"{step % 900}.5 tokens/s, Avg generation throughput: {100 + step % 3000}.0 tokens/s, "
            f"Running: {step % 64} reqs, Waiting: 0 reqs, CPU KV cache usage: {step % 90}.0%, "
            f"Prefix cache hit rate: 0.0%\n"
        )
        out.append(
            f"{tag} INFO {stamp} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            f"{ACCEPT[step % 4]:.2f}, Accepted throughput: 18.00 tokens/s, Drafted throughput: "
            f"19.69 tokens/s, Accepted: 180 tokens, Drafted: 197 tokens, Per-position acceptance "
            f"rate: 0.935, 0.727, 0.675, Avg Draft acceptance rate: 91.4%\n"
        )
        clock += timedelta(seconds=10)
    return "".join(out), steps


def write_served_vllm_log(path: Path, size: int) -> int:
    """A real vLLM start, then a block of served steps written again and again until ``size``
    bytes; the number of ``SpecDecoding metrics`` lines."""
    head = STARTUP.read_text(encoding="utf-8").splitlines(keepends=True)[:STARTUP_LINES]
    text, per_block = _served_block(2000)
    block = text.encode()
    metrics = 0
    with path.open("wb") as out:
        out.write("".join(head).encode())
        while out.tell() < size:
            out.write(block)
            metrics += per_block
    return metrics


@pytest.mark.slow  # a real process fed 257 MiB: a minute of CPU
def test_a_vllm_log_past_256_mib_imports_as_a_stream_under_a_memory_limit(
    tmp_path: Path,
) -> None:
    log = tmp_path / "served.log"
    metrics = write_served_vllm_log(log, LIMITS["result"] + (1 << 20))
    assert log.stat().st_size > LIMITS["result"]
    import_and_count(tmp_path, log, metrics, ADDRESS_SPACE)
    assert metrics > 100_000


def test_a_vllm_log_read_as_a_stream_gives_the_events_of_the_log_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same 2 MB log read whole and, past a lowered ``STREAM_FROM``, as a stream: the same
    events, id for id; and the same with an engine core's crash at its end."""
    log = tmp_path / "served.log"
    write_served_vllm_log(log, 2_000_000)
    crashed = tmp_path / "crashed.log"
    core = "(EngineCore_DP0 pid=4918) ERROR 12-01 16:00:00 [core.py:710]"
    crashed.write_text(
        log.read_text(encoding="utf-8")
        + f"{core} EngineCore encountered a fatal error.\n"
        + f"{core} Traceback (most recent call last):\n"
        + f'{core}   File "/vllm/v1/engine/core.py", line 701, in run_engine_core\n'
        + f"{core}     engine_core.run_busy_loop()\n"
        + f"{core} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        + 'INFO:     127.0.0.1:40001 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n',
        encoding="utf-8",
    )
    whole = [import_file(x) for x in (log, crashed)]
    monkeypatch.setattr(detect, "STREAM_FROM", 1 << 20)
    for path, before in zip((log, crashed), whole, strict=True):
        streamed = import_file(path)
        assert [e.model_dump(mode="json") for e in streamed.events] == [
            e.model_dump(mode="json") for e in before.events
        ]
        assert detect.read_input(path).streamed
        assert len(detect.read_input(path).text) <= HEAD_BYTES
    types = [e.type for e in whole[0].events]
    assert "server_ready" in types and "spec_decoding_trial_completed" in types
    assert "server_failed" in [e.type for e in whole[1].events]
