"""Fixtures shared by every layer's tests: a ledger path in a temporary folder, an initialised
store with a fixed clock, no resident process, and the throwaway PostgreSQL server of the sync
tests (``tests/support/pg_cluster.py``; one per test session, for tests/sync/ and tests/tui/).

Helpers that are functions rather than fixtures live in ``tests/support/`` (imported as
``tests.support.<module>``); test modules never import each other."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from tests.support import needs, pg_cluster

#: The time stamped on events without ``recorded_at`` by the ``store`` fixture.
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_in_a_terminal() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in the test process, and its children start with
    SIGINT's default, as in a terminal's foreground job, whatever the suite was started from:
    a shell starts a background job (``make test &``) with SIGINT ignored, CI runners may do the
    same, and an ignored signal stays ignored across ``exec`` (a caught one is reset to its
    default), so the Ctrl-C tests' SIGINT reached processes that ignored it."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the daemon threads still running when the session ends, and where each is: Python
    3.11 ends one that takes the GIL back during the interpreter's shutdown with
    ``pthread_exit``, whose unwinding through a C++ extension's ``catch (...)`` (DuckDB's, when
    the thread was in a query) aborts the process after the summary (``FATAL: exception not
    rethrown``, exit 134)."""
    frames = sys._current_frames()
    left = [t for t in threading.enumerate() if t.daemon and t.is_alive()]
    for thread in left:
        frame = frames.get(thread.ident or -1)
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "?"
        terminalreporter.write_line(f"daemon thread left running: {thread.name} at {where}")


@pytest.fixture(autouse=True)
def _no_resident_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test starts or uses a resident process (``ledger.frontdoor.resident``) unless it says so: the
    ``tuneledger`` processes the tests start inherit ``TUNELEDGER_RESIDENT=0``, so no server
    outlives the suite; tests/cli/test_resident.py sets its own runtime folder and stops its servers."""
    monkeypatch.setenv("TUNELEDGER_RESIDENT", "0")


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """Where a test's ledger file lives (not created)."""
    return tmp_path / "ledger.duckdb"


@pytest.fixture
def store(ledger_path: Path) -> LedgerStore:
    """An initialised ledger whose clock always says ``FIXED_NOW``."""
    ledger = LedgerStore(ledger_path, clock=lambda: FIXED_NOW)
    ledger.init()
    return ledger


# --- the PostgreSQL hub (tests/sync/, tests/tui/test_tui_sync.py) ---------------------------

_schemas = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg_cluster.Cluster]:
    """One throwaway PostgreSQL server for the session, with a ``writer`` login role.

    Skips when PostgreSQL is not installed, fails where every test must run (``tests/support/needs.py``).
    """
    if not pg_cluster.available():
        needs.absent("PostgreSQL (initdb, pg_ctl) is not installed (.ci/run installs it)")
    import psycopg

    cluster = pg_cluster.start()
    try:
        with psycopg.connect(cluster.superuser_dsn, autocommit=True) as con:
            con.execute(f"CREATE ROLE writer LOGIN PASSWORD '{pg_cluster.WRITER_PASSWORD}'")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def hub_schema(pg_server: pg_cluster.Cluster) -> str:
    """A schema name no other test uses (one hub per test)."""
    return f"hub_{os.getpid()}_{next(_schemas)}"


@pytest.fixture
def writer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq finds the writer's password in the environment (as a user's shell would give it)."""
    monkeypatch.setenv("PGPASSWORD", pg_cluster.WRITER_PASSWORD)
