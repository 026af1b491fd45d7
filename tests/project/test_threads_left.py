"""The session's end fails on a thread of ours left running (``tests/support/threads_left.py``:
the exit abort, ``FATAL: exception not rethrown``, came from one inside DuckDB at exit)."""

from __future__ import annotations

import threading
from pathlib import Path

from ledger.store import LedgerStore
from schemas.events import NoteAdded
from tests.support import threads_left


def test_a_thread_of_ours_is_named_until_it_ends() -> None:
    release = threading.Event()

    def waits() -> None:  # a frame of ours (tests/) for as long as it runs
        release.wait(30)

    thread = threading.Thread(target=waits, name="left-behind", daemon=True)
    thread.start()
    try:
        (found,) = [t for t in threads_left.running() if t.startswith("left-behind")]
        assert found.startswith("left-behind (daemon) at tests/project/test_threads_left.py:")
        assert found in threads_left.left_at_exit(grace_s=0.05)
    finally:
        release.set()
        thread.join()
    assert not [t for t in threads_left.running() if t.startswith("left-behind")]


def test_a_library_thread_is_not_ours() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="library-wait", daemon=True)
    thread.start()
    try:
        assert not [t for t in threads_left.running() if t.startswith("library-wait")]
    finally:
        release.set()
        thread.join()


def test_a_kept_open_ledgers_watcher_ends_as_the_exit_lets_it_go(tmp_path: Path) -> None:
    """The watcher of a kept-open ledger (a daemon thread that catches the projections up inside
    DuckDB) is one of ours while the ledger is held, and ends once the exit lets go of it."""
    store = LedgerStore(tmp_path / "l.duckdb").kept_open(hold_s=600)
    store.init()
    store.append(NoteAdded(text="held", session_id="s"))
    assert any(t.startswith("ledger-hold-watch (daemon)") for t in threads_left.running())
    assert not [t for t in threads_left.left_at_exit() if t.startswith("ledger-hold-watch")]
    assert [e.type for e in LedgerStore(tmp_path / "l.duckdb").read()] == ["note_added"]
