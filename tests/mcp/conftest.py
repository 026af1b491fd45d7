"""Fixtures of the MCP server's tests (``tests/support/mcp_client.py`` drives the server)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The SDK's client and server run on anyio; the tests on asyncio (Textual's too)."""
    return "asyncio"
