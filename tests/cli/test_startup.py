"""CLI start-up: `tuneledger append` imports only what appending needs, `--help` lists the
plugin commands without their heavy imports, and the fast exit loses nothing (docs/performance.md).

Timing is measured by bench/bench_store.py, not here; this checks the cause of the cost -
which heavy modules a real process loads - so a stray top-level import shows up. These tests
run real processes on purpose: the process boundary (imports, exit) is what is under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

#: Process-based on purpose (start-up of fresh interpreters): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

#: Imported only by commands that need them (tables, samples, HTTP, the hub, statistics,
#: plots, tokenizers, the runners, the TUI).
HEAVY = (
    "pyarrow",
    "numpy",
    "rich",
    "httpx",
    "aiohttp",
    "tenacity",
    "textual",
    "textual_plotext",
    "watchfiles",
    "scipy",
    "psycopg",
    "yaml",
    "tokenizers",
)
LAZY = (*HEAVY, "runners", "tui")

PROBE = """
import sys
from ledger.cli import main as cli

try:
    cli.main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(m for m in {lazy!r} if m in sys.modules))
"""


def _loaded(args: list[str], lazy: tuple[str, ...], stdin: str = "") -> tuple[str, str]:
    """(the command's output, the names of ``lazy`` it left imported)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(lazy=lazy), *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )
    assert out.returncode == 0, (args, out.stderr)
    *printed, loaded = out.stdout.splitlines()
    return "\n".join(printed), loaded


def test_append_loads_no_heavy_module(tmp_path: Path) -> None:
    ledger = str(tmp_path / "l.duckdb")
    for args in (
        ["init"],
        ["append", "note_added", "-f", "text=hi"],
        ["append", "--json"],
        ["append", "--help"],
        ["append", "note_added", "--help"],
    ):
        stdin = '{"type": "note_added", "text": "piped"}'
        assert _loaded(["--ledger", ledger, *args], LAZY, stdin)[1] == "", args


def test_import_of_a_server_log_loads_no_heavy_module(tmp_path: Path) -> None:
    # A server log's few events are stored without an Arrow table: an import of a log loads
    # neither pyarrow nor numpy (docs/reliability.md, "Server log import speed and memory").
    fixtures = Path(__file__).parents[1] / "fixtures"
    for log in (
        fixtures / "vllm_cpu" / "good-start.log",
        fixtures / "sglang" / "server" / "sm120_qwen35_baseline.log",
    ):
        ledger = str(tmp_path / f"{log.stem}.duckdb")
        printed, loaded = _loaded(["--ledger", ledger, "import", "--create", str(log)], LAZY)
        assert loaded == "", log
        assert "-server-log, " in printed and " new, 0 already stored" in printed, printed


def test_help_lists_plugin_commands_without_their_heavy_imports() -> None:
    # The plugins' click objects are loaded for their one-line help; what their commands
    # use (httpx, pyarrow, rich, textual, psycopg) is imported when a command runs, and
    # DuckDB when one opens a ledger.
    for args in (
        ["--help"],
        ["types"],
        ["types", "benchmark_completed"],
        ["append", "note_added", "--help"],
        ["run", "--help"],
        ["run", "server", "--help"],
        ["run", "bench", "--help"],
        ["remote", "--help"],
        ["sync", "--help"],
        ["tui", "--help"],
    ):
        printed, loaded = _loaded(args, (*HEAVY, "duckdb"))
        assert loaded == "", args
        assert printed, args
    printed, _ = _loaded(["--help"], ())
    for name in ("run", "tui", "remote", "sync"):
        assert f"\n  {name} " in printed, name


def test_plugin_commands_still_run_and_are_listed(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "  run " in out.stdout and "  tui " in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "Usage: " in out.stdout, out.stderr


#: A process that keeps a ledger open (a Python API user), then runs the console script's
#: entry point, which ends with ``os._exit``.
KEPT_OPEN_THEN_EXIT = """
import sys
from ledger.cli.main import run
from ledger.store import LedgerStore
from schemas.events import NoteAdded

store = LedgerStore(sys.argv.pop(1), hold_s=600)
store.append(NoteAdded(text="kept open"))
run()
"""


def _projected_and_head(ledger: Path) -> tuple[int, int]:
    """(the projections' stored position, the log's head), read by DuckDB alone."""
    con = duckdb.connect(str(ledger), read_only=True)
    try:
        ((projected, head),) = con.execute(
            "SELECT (SELECT CAST(value AS BIGINT) FROM ledger_meta WHERE key = 'projected_seq'), "
            "(SELECT max(seq) FROM events)"
        ).fetchall()
    finally:
        con.close()
    return projected, head


def test_the_fast_exit_flushes_output_and_closes_the_ledger_first(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    tuneledger = Path(sys.executable).with_name("tuneledger")
    base = [str(tuneledger), "--ledger", str(ledger)]
    assert subprocess.run([*base, "init"], capture_output=True, timeout=120).returncode == 0
    # The console script's append: acknowledged, stored, checkpointed (no write-ahead log left).
    out = subprocess.run(
        [*base, "append", "note_added", "-f", "text=one"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.startswith("appended seq 1: note_added"), out
    assert not Path(f"{ledger}.wal").exists()
    assert _projected_and_head(ledger) == (1, 1)
    # Output larger than a pipe's buffer arrives whole before the exit.
    out = subprocess.run(
        [*base, "sql", "SELECT range AS n FROM range(200000)", "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "n" and len(lines) == 200001 and lines[-1] == "199999"
    # A ledger the process kept open is caught up, closed and checkpointed before os._exit;
    # the exit code of the command is kept.
    out = subprocess.run(
        [sys.executable, "-c", KEPT_OPEN_THEN_EXIT, str(ledger), *base[1:], "show", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 5, out.stderr
    assert not Path(f"{ledger}.wal").exists()
    assert _projected_and_head(ledger) == (2, 2)


#: Work left running in threads when the command returns: a non-daemon thread that finishes
#: late, and a thread pool never shut down (its idle workers must be told to stop, as the
#: interpreter's own exit does, or the process would never end).
THREADS_THEN_EXIT = """
import sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from ledger.cli.main import run

def late():
    time.sleep(0.5)
    print("late thread done", flush=True)

threading.Thread(target=late).start()
ThreadPoolExecutor(2).submit(print, "pool job done", flush=True)
run()
"""


def test_the_fast_exit_waits_for_threads_like_the_interpreter() -> None:
    out = subprocess.run(
        [sys.executable, "-c", THREADS_THEN_EXIT, "types"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "late thread done" in out.stdout and "pool job done" in out.stdout
    assert "note_added" in out.stdout


#: Records which entry-point groups the process looks up, then runs the console script.
ENTRY_POINT_GROUPS = """
import importlib.metadata, sys
looked_up = []
original = importlib.metadata.entry_points

def entry_points(**kwargs):
    looked_up.append(kwargs.get("group"))
    return original(**kwargs)

importlib.metadata.entry_points = entry_points
import atexit
atexit.register(lambda: print("groups:", sorted(set(map(str, looked_up)))))
from ledger.cli.main import run
run()
"""


def test_the_cli_does_not_scan_for_pydantic_plugins(tmp_path: Path) -> None:
    # pydantic's plugin discovery reads every installed distribution's entry points; the CLI
    # tells pydantic it has none, unless PYDANTIC_DISABLE_PLUGINS says how to treat them.
    ledger = str(tmp_path / "l.duckdb")
    argv = [sys.executable, "-c", ENTRY_POINT_GROUPS, "--ledger", ledger]
    args = ["append", "--create", "note_added", "-f", "text=hi"]
    out = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("appended seq 1") and "groups: []" in out.stdout
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": ""}
    out = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and "groups: ['pydantic']" in out.stdout, out


def test_a_group_without_a_command_shows_its_help() -> None:
    # Not the help squeezed into one escaped error line (it was, with click 8.2+).
    for args, listed in (([], "append"), (["run"], "bench"), (["export"], "markdown")):
        out = subprocess.run(
            [sys.executable, "-m", "ledger.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, out
        assert out.stderr.startswith("Usage: tuneledger"), out.stderr
        assert f"\n  {listed} " in out.stderr and "\\n" not in out.stderr, out.stderr
