"""Fixtures of the TUI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests (``pytest.mark.anyio``) on asyncio only: Textual needs asyncio."""
    return "asyncio"
