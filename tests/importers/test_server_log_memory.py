"""A served SGLang log of tens of MB imports under an address-space limit with every batch line
counted (docs/reliability.md, "Server log import speed and memory"). A forward SGLang log past
8 MiB is read as a stream with no size bound (``tests/importers/test_server_log_stream.py``, a
vLLM one ``test_vllm_log_stream.py``); a log read whole (newest first) is still refused past the
256 MiB of a result file (``tests/cli/test_bounded_input_rest.py``)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STARTUP = FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log"
#: as tests/cli/test_bounded_input.py: enough for the interpreter, DuckDB and pyarrow
ADDRESS_SPACE = 3 << 30
LOG_BYTES = 32_000_000
ACCEPT = (1.5, 2.0, 2.5, 3.0)


def write_served_log(path: Path, size: int) -> int:
    """A real startup, then four ranks' decode lines (each with an accept length) and uvicorn's
    access lines until ``size`` bytes; the number of decode lines."""
    head = [
        line
        for line in STARTUP.read_text(encoding="utf-8").splitlines(keepends=True)
        if "Decode batch" not in line and "Prefill batch" not in line
    ]
    decodes = 0
    with path.open("w", encoding="utf-8") as out:
        out.writelines(head)
        step = 0
        while out.tell() < size:
            stamp = f"2026-11-20 15:{step // 240 % 60:02d}:{step // 4 % 60:02d}"
            block = []
            for rank in range(4):
                block.append(
                    f"[{stamp} TP{rank}] Decode batch, #running-req: {1 + step % 64}, "
                    f"#token: {step % 9000}, token usage: 0.{step % 90:02d}, "
                    f"accept len: {ACCEPT[(step + rank) % 4]:.2f}, cuda graph: True, "
                    f"gen throughput (token/s): {100 + step % 3000}.{rank}1, #queue-req: 0\n"
                )
            block.append(
                f'[{stamp}] INFO:     127.0.0.1:{40000 + step % 9000} - "POST /generate HTTP/1.1" 200 OK\n'
            )
            out.write("".join(block))
            decodes += 4
            step += 1
    return decodes


def import_and_count(tmp_path: Path, log: Path, decodes: int, address_space: int) -> None:
    """``tuneledger import`` of ``log`` as a real process under ``RLIMIT_AS``: it succeeds, one
    server start and ready, and the spec trial counts every decode line and their mean (the four
    accept lengths equally often). The log is removed, read or not."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    ledger = tmp_path / "l.duckdb"
    env = {**os.environ, "TUNELEDGER_RESIDENT": "0"}
    cli = [sys.executable, "-m", "ledger.cli", "--ledger", str(ledger)]
    try:
        done = subprocess.run(
            [*cli, "import", "--create", str(log)],
            capture_output=True,
            text=True,
            env=env,
            preexec_fn=limited,
            check=False,
        )
    finally:
        log.unlink()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = subprocess.run(
        [*cli, "sql", "--format", "json", "select type, payload from events order by seq"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    events = json.loads(rows.stdout)
    types = [e["type"] for e in events]
    assert types.count("server_started") == 1 and types.count("server_ready") == 1
    (trial,) = [
        json.loads(e["payload"]) for e in events if e["type"] == "spec_decoding_trial_completed"
    ]
    assert trial["notes"].startswith(f"accept length read from {decodes} log line(s)")
    assert trial["accept_length"] == sum(ACCEPT) / len(ACCEPT)


@pytest.mark.slow  # a real process fed tens of MB or more: seconds of CPU
def test_a_served_log_of_tens_of_mb_imports_under_a_memory_limit(tmp_path: Path) -> None:
    log = tmp_path / "served.log"
    decodes = write_served_log(log, LOG_BYTES)
    import_and_count(tmp_path, log, decodes, ADDRESS_SPACE)
    assert decodes > 150_000
