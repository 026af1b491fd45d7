"""Fixtures shared by every layer's tests: a ledger path in a temporary folder, an initialised
store with a fixed clock, no resident process, and the throwaway PostgreSQL server of the sync
tests (``tests/support/pg_cluster.py``; one per test session, for tests/sync/ and tests/tui/).

Helpers that are functions rather than fixtures live in ``tests/support/`` (imported as
``tests.support.<module>``); test modules never import each other."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import ledger.derive  # noqa: F401  (the store keeps the derived tables current)
from ledger.store import LedgerStore
from tests.support import pg_cluster

#: The time stamped on events without ``recorded_at`` by the ``store`` fixture.
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


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

    Skips when PostgreSQL is not installed (``.ci/run`` installs it).
    """
    if not pg_cluster.available():
        pytest.skip("PostgreSQL (initdb, pg_ctl) is not installed")
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
