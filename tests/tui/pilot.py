"""Helpers of the TUI tests (no tests here): a demo ledger with a fixed clock, waiting on a pilot.
The fixtures are in tests/tui/conftest.py."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from textual.pilot import Pilot, WaitForScreenTimeout

from ledger.cli.demo import build_demo
from ledger.store import LedgerStore

#: The clock of the demo ledger in the TUI tests (snapshots must not show wall-clock time).
DEMO_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SIZE = (160, 45)


#: The demo ledger this process built first, copied for every later test (below).
_TEMPLATE: list[Path] = []


def make_demo(folder: Path) -> LedgerStore:
    """The demo campaign at ``folder/demo.duckdb``, every event stamped ``DEMO_NOW``.

    Built once per test process and copied for each test (every build holds the same events:
    fixed ids, a fixed clock): a build costs 0.22-0.45 s of CPU, a copy ~1 ms, for some fifty
    TUI tests (docs/performance.md, *The test suite*). Each test still gets a file of its own."""
    if not _TEMPLATE:
        where = Path(tempfile.mkdtemp(prefix="tuneledger-demo-"))
        atexit.register(shutil.rmtree, where, ignore_errors=True)
        build_demo(where / "demo.duckdb", clock=lambda: DEMO_NOW)
        _TEMPLATE.append(where / "demo.duckdb")
    path = folder / "demo.duckdb"
    shutil.copyfile(_TEMPLATE[0], path)
    return LedgerStore(path, clock=lambda: DEMO_NOW)


async def wait_for(
    pilot: Pilot, condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition"
) -> float:
    """Let the app run until ``condition()`` holds; return the seconds it took.

    ``timeout`` bounds a hang, it is no speed check: generous, for a busy 2-core machine.

    Raises:
        AssertionError: not within ``timeout`` seconds.
    """
    start = time.perf_counter()
    while not condition():
        if time.perf_counter() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)
    return time.perf_counter() - start


async def wait_loaded(pilot: Pilot) -> None:
    """Wait until the first refresh has shown everything (board rows, timeline, head)."""
    app = pilot.app
    head = app.store.head()
    await wait_for(
        pilot,
        lambda: (
            app.board.loaded
            and app.last_seq == head
            and not app.refreshing
            and app.timeline.last_seq == head
        ),
        what="the first refresh",
    )
    await settle(pilot)


async def settle(pilot: Pilot, tries: int = 4) -> None:
    """``pilot.pause()``, whose wait for every widget to take its pending messages gives up after
    Textual's 30 s: on a 2-core machine at load 8-10 that was not enough once (docs/performance.md,
    *The test suite*). Waiting again is safe: the messages are still queued, nothing is lost."""
    for attempt in range(tries):
        try:
            await pilot.pause()
            return
        except WaitForScreenTimeout:
            if attempt == tries - 1:
                raise
