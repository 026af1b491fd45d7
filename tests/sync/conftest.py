"""Fixtures of the sync tests: a fresh hub schema on the session's PostgreSQL server
(``pg_server``, tests/conftest.py), and the writer's remote to it."""

from __future__ import annotations

import pytest

from ledger.sync.remote import Remote
from tests.support.pg_cluster import Cluster, make_hub


@pytest.fixture
def remote(pg_server: Cluster, hub_schema: str, writer_env: None) -> Remote:
    """The ``writer`` role's remote to a hub made for this test."""
    return make_hub(pg_server, hub_schema)
