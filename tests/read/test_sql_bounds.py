"""Bounded SQL output: csv/json stream with bounded memory, a table is
capped with a notice, --timeout covers fetching and printing, hidden writes are refused (6).
Real processes: memory is the child's peak RSS (getrusage), not an estimate."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from schemas import NoteAdded

#: Process-based on purpose (a child process's peak RSS and timeouts): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ledger.cli.main"]


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    path = tmp_path / "l.duckdb"
    LedgerStore(path).append(NoteAdded(text="x"))
    return str(path)


def sql(ledger: str, query: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--ledger", ledger, "sql", query, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_csv_streams_every_row_with_bounded_memory(ledger: str, tmp_path: Path) -> None:
    """300k rows of 300 characters: the old path built the whole result in Python (~500 MB).
    The child's own peak RSS, from GNU time (getrusage of children would report the largest
    child this test process ever waited for)."""
    if not Path("/usr/bin/time").exists():
        pytest.skip("needs GNU time for the child's peak RSS")
    report = tmp_path / "rss"
    done = subprocess.run(
        [
            "/usr/bin/time",
            "-f",
            "%M",
            "-o",
            str(report),
            *CLI,
            "--ledger",
            ledger,
            "sql",
            "SELECT i, repeat('x', 300) AS pad FROM range(300000) t(i)",
            "--format",
            "csv",
            "--timeout",
            "0",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 300_001 and lines[0] == "i,pad" and lines[-1].startswith("299999,xxx")
    peak_mib = int(report.read_text().split()[-1]) / 1024
    assert peak_mib < 300, f"peak RSS {peak_mib:.0f} MiB"


def test_json_streams_a_valid_array(ledger: str) -> None:
    done = sql(
        ledger,
        "SELECT i, [i, i + 1] AS pair, NULL AS nothing FROM range(25000) t(i)",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == 25000 and rows[-1] == {"i": 24999, "pair": [24999, 25000], "nothing": None}
    empty = sql(ledger, "SELECT 1 AS a WHERE false", "--format", "json")
    assert json.loads(empty.stdout) == []


def test_a_table_is_capped_with_a_notice(ledger: str) -> None:
    started = time.monotonic()
    done = sql(ledger, "SELECT i FROM range(1000000) t(i)")
    assert done.returncode == 0, done.stderr
    assert (
        "(the first 1,000 rows;" in done.stdout
        and "│ 999 │" in done.stdout
        and "│ 1000 │" not in done.stdout
    )
    assert time.monotonic() - started < 60
    small = sql(ledger, "SELECT i FROM range(5) t(i)", "--max-rows", "5")
    assert "the first" not in small.stdout


def test_a_table_is_capped_in_bytes_before_it_is_built(ledger: str) -> None:
    """A table keeps the rows whose values fit in 8 MiB, fetched in batches
    and cut there (``run_readonly_capped``, as MCP's sql), and says so in one line; the rows
    past a 9 MB value are never built."""
    query = (
        "SELECT i, CASE WHEN i = 3 THEN repeat('x', 9000000) ELSE 'a' END AS v FROM range(10) t(i)"
    )
    done = sql(ledger, query)
    assert done.returncode == 0, done.stderr
    assert "│ 2 │ a │" in done.stdout and "│ 3 │" not in done.stdout and "xxxx" not in done.stdout
    assert done.stdout.rstrip().endswith(
        "(the first 3 rows: a table shows at most 8 MiB of values; "
        "--format csv or json streams them all)"
    )
    alone = sql(ledger, "SELECT repeat('y', 9000000) AS big")
    assert alone.returncode == 0 and "yyyy" not in alone.stdout
    assert "(the first 0 rows: a table shows at most 8 MiB" in alone.stdout
    whole = sql(ledger, query, "--format", "csv")  # csv streams every row, the big one too
    assert whole.returncode == 0 and len(whole.stdout) > 9_000_000


def test_timeout_covers_fetching_and_printing(ledger: str) -> None:
    started = time.monotonic()
    done = sql(
        ledger,
        "SELECT i, repeat('x', 100) AS pad FROM range(100000000) t(i)",
        "--format",
        "csv",
        "--timeout",
        "2",
    )
    elapsed = time.monotonic() - started
    assert (
        done.returncode == 14
        and "stopped after 2 s" in done.stderr
        and len(done.stderr.splitlines()) == 1
    )
    assert elapsed < 30 and done.stdout.startswith("i,pad\n")


@pytest.mark.parametrize(
    "query",
    [
        "WITH t AS (INSERT INTO ledger_meta VALUES ('a', 'b') RETURNING *) SELECT * FROM t",
        "WITH t AS (DELETE FROM events RETURNING *) SELECT count(*) FROM t",
        "EXPLAIN ANALYZE INSERT INTO ledger_meta VALUES ('a', 'b')",
        "EXPLAIN ANALYZE DELETE FROM events",
        "EXPLAIN (ANALYZE) UPDATE ledger_meta SET value = 'x'",
    ],
)
def test_hidden_writes_are_refused_with_exit_6(ledger: str, query: str) -> None:
    done = sql(ledger, query)
    assert (
        done.returncode == 6 and "read-only" in done.stderr and len(done.stderr.splitlines()) == 1
    )
    assert LedgerStore(ledger).head() == 1
