"""``import`` says each imported server log's engine, status and root cause, from standard
input as from a file (README.md: ``import - < pasted-tail.txt``); it printed only a count."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli_inprocess import invoke

SERVER_LOGS = Path(__file__).parents[1] / "fixtures" / "sglang" / "server"
CRASH = SERVER_LOGS / "sm120_qwen35_fp8_capture_crash.log"
ROOT_CAUSE = (
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, "
    "Hardware limit: 101376. Reducing block sizes or `num_stages` may help."
)


def _servers_line(stdout: str) -> str:
    lines = stdout.splitlines()
    assert len(lines) == 2, stdout
    return lines[1].split(": ", 1)[1]


def test_a_pasted_tail_and_its_file_say_engine_status_and_root_cause(tmp_path: Path) -> None:
    text = CRASH.read_text()
    piped = invoke(["--ledger", tmp_path / "a.duckdb", "import", "--create", "-"], stdin=text)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines()[0] == "-: sglang-server-log, 3 new, 0 already stored"
    read = invoke(["--ledger", tmp_path / "b.duckdb", "import", "--create", CRASH])
    assert read.returncode == 0, read.stderr
    expected = f"sglang, failed (crash): {ROOT_CAUSE}"
    assert _servers_line(piped.stdout) == _servers_line(read.stdout) == expected
    as_json = invoke(
        ["--ledger", tmp_path / "c.duckdb", "import", "--create", "--json", "-"], stdin=text
    )
    [row] = json.loads(as_json.stdout)
    [server] = row["servers"]
    assert {k: v for k, v in server.items() if k != "run_id"} == {
        "engine": "sglang",
        "engine_version": None,
        "status": "failed",
        "cause": "crash",
        "message": ROOT_CAUSE,
    }


def test_a_log_that_got_ready_says_ready(tmp_path: Path) -> None:
    out = invoke(
        [
            "--ledger",
            tmp_path / "r.duckdb",
            "import",
            "--create",
            SERVER_LOGS / "sm120_qwen35_baseline.log",
        ]
    )
    assert out.returncode == 0, out.stderr
    assert _servers_line(out.stdout) == "sglang, ready"
