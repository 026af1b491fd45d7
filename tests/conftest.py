"""Shared fixtures: a ledger path in a temporary folder and an initialised store with a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.store import LedgerStore

#: The time stamped on events without ``recorded_at`` by the ``store`` fixture.
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_resident_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test starts or uses a resident process (``ledger.frontdoor.resident``) unless it says so: the
    ``tuneledger`` processes the tests start inherit ``TUNELEDGER_RESIDENT=0``, so no server
    outlives the suite; tests/test_resident.py sets its own runtime folder and stops its servers."""
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
