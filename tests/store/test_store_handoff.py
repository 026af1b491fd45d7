"""A kept-open writer (``LedgerStore(hold_s=...)``) hands the file over and leaves no stale view.

Real processes on a real DuckDB file: a child keeps the ledger open and appends (or idles);
this process, a one-shot reader, must get the file within ``HANDOFF_S`` - the store's stated
hand-off time - without a lock error, and see views that agree with the log. The hand-off
bound is a timing assertion on purpose (the issue asks for the bound to be tested); it is
generous against the measured p50 (bench/bench_ledger.py) so that a loaded machine passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from ledger.store import HANDOFF_S, LedgerStore
from schemas.events import NoteAdded

#: Process-based on purpose (real processes hand a kept-open file over): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

WRITER = Path(__file__).with_name("writer_process.py")


def _holder(path: Path, *args: object) -> subprocess.Popen[str]:
    """A child whose store keeps the file open for 60 s of idleness (so only a waiter makes it let go)."""
    env = {**os.environ, "TUNELEDGER_TEST_HOLD_S": "60"}
    return subprocess.Popen(
        [
            sys.executable,
            str(WRITER),
            "append",
            str(path),
            "--writer",
            "held",
            *(str(a) for a in args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _timed_reads(store: LedgerStore, n: int) -> list[float]:
    waits = []
    for _ in range(n):
        start = time.monotonic()
        counted = store.query_arrow(
            "SELECT (SELECT count(*) FROM timeline) AS t, (SELECT count(*) FROM events) AS e"
        )
        waits.append(time.monotonic() - start)
        row = counted.to_pylist()[0]
        assert row["t"] == row["e"]  # the view is never behind the log
    return waits


def test_a_reader_gets_the_file_from_an_appending_kept_open_writer(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    LedgerStore(path).init()
    proc = _holder(path, "--count", 0)  # appends until killed, never idle
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("ack "), proc.poll()
        waits = _timed_reads(LedgerStore(path), 10)
        assert proc.poll() is None, proc.communicate()[1]
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=60)
    assert "Could not set lock" not in err and "LedgerBusy" not in err, err
    assert max(waits) <= HANDOFF_S, waits


def test_a_reader_gets_the_file_from_an_idle_kept_open_writer(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    LedgerStore(path).init()
    # one append, then the child idles with the file held (its standard input stays open)
    env = {**os.environ, "TUNELEDGER_TEST_HOLD_S": "60"}
    code = (
        "import sys; from ledger.store import LedgerStore\n"
        "from schemas.events import NoteAdded\n"
        f"s = LedgerStore({str(path)!r}, hold_s=60)\n"
        "s.append([NoteAdded(text=f'n{i}') for i in range(5)]); print('held', flush=True); sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held", proc.poll()
        waits = _timed_reads(LedgerStore(path), 1)
        # now DuckDB's own client (no tuneledger code) sees the same answers
        con = duckdb.connect(str(path), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM timeline").fetchall() == [(5,)]
            assert con.execute("SELECT count(*) FROM control_events").fetchall() == [(5,)]
        finally:
            con.close()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
    assert max(waits) <= HANDOFF_S, waits


def test_views_through_a_kept_open_store_are_never_stale(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "ledger.duckdb", hold_s=60)
    try:
        for i in range(30):
            store.append(NoteAdded(text=f"n{i}"))
            # read at once: before the idle catch-up could run
            assert store.query_arrow("SELECT count(*) AS n FROM timeline")["n"][0].as_py() == i + 1
    finally:
        store.close()
    con = duckdb.connect(str(store.path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM timeline").fetchall() == [(30,)]
    finally:
        con.close()


def test_a_store_that_holds_for_writes_only_reads_without_holding(tmp_path: Path) -> None:
    """The TUI's store (``hold_reads=False``): its reads leave the file free for another
    process at once; a write keeps it open (and reads then use that connection); ``close``
    lets go with the views caught up."""
    path = tmp_path / "ledger.duckdb"
    LedgerStore(path).append(NoteAdded(text="before"))
    tui = LedgerStore(path, hold_s=60, hold_reads=False)
    assert tui.query_arrow("SELECT count(*) AS n FROM timeline").to_pylist() == [{"n": 1}]

    def other_process_opens() -> bool:
        probe = "import duckdb, sys; duckdb.connect(sys.argv[1], read_only=False).close()"
        return subprocess.run([sys.executable, "-c", probe, str(path)], timeout=60).returncode == 0

    assert other_process_opens()  # the read held nothing
    tui.append(NoteAdded(text="from the TUI"))
    assert tui.query_arrow("SELECT count(*) AS n FROM timeline").to_pylist() == [{"n": 2}]
    assert not other_process_opens()  # the write kept the file open (plain DuckDB is refused)
    tui.close()
    assert other_process_opens()
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM timeline").fetchall() == [(2,)]


def test_kept_open_is_the_same_ledger_held_for_a_run_of_appends(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    one_shot = LedgerStore(path, lock_timeout_s=7)
    runner = one_shot.kept_open()
    assert (runner.path, runner.lock_timeout_s, one_shot.hold_s) == (path, 7, 0)
    assert runner.hold_s > 0
    runner.append([NoteAdded(text=f"n{i}") for i in range(3)])
    assert [e.seq for e in one_shot.read()] == [1, 2, 3]  # through the held connection
    runner.close()


def test_a_kept_open_writer_follows_a_ledger_made_again_at_its_path(tmp_path: Path) -> None:
    """The ledger's folder removed and a new ledger made at the same path while this process
    held the old file open (as pytest does with a test's folder, and a user may with ``rm`` and
    ``init``): the next append goes to the new file, not to the unlinked one nobody reads."""
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "ledger.duckdb"
    runner = LedgerStore(path, hold_s=60)
    runner.append(NoteAdded(text="into the old file"))
    for leftover in folder.iterdir():
        leftover.unlink()
    folder.rmdir()
    folder.mkdir()
    LedgerStore(path).append(NoteAdded(text="the new ledger's first"))
    runner.append(NoteAdded(text="into the new file"))
    runner.close()
    with duckdb.connect(str(path), read_only=True) as con:
        texts = con.execute("SELECT payload->>'text' FROM events ORDER BY seq").fetchall()
    assert texts == [("the new ledger's first",), ("into the new file",)]
