"""``settle``: the TUI tests' pause that waits again when Textual's 30 s wait for the widgets'
pending messages gives up (seen once at load 8-10 on the 2-core machine). A stand-in pilot
raises the timeout: a fault a busy machine provokes, not one a test can provoke on demand."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from textual.pilot import Pilot, WaitForScreenTimeout

from tests.tui.pilot import settle


class _SlowScreens:
    """Times out ``failures`` times, then settles."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def pause(self, delay: float | None = None) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise WaitForScreenTimeout("Timed out while waiting for widgets")


def _run(pilot: _SlowScreens) -> None:
    asyncio.run(settle(cast(Pilot[Any], pilot)))


def test_settle_waits_again_after_a_timeout() -> None:
    pilot = _SlowScreens(failures=2)
    _run(pilot)
    assert pilot.calls == 3


def test_settle_gives_up_after_its_tries() -> None:
    pilot = _SlowScreens(failures=10)
    with pytest.raises(WaitForScreenTimeout):
        _run(pilot)
    assert pilot.calls == 4
