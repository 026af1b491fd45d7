"""No ``None`` or ``?`` on screen in any pane (docs/tui.md): a pilot over the demo ledger shows
each of the six panes in turn and reads the text the terminal would show, every cell of it, so
a value the views leave NULL that a pane prints as Python's ``None`` (or a ``?`` standing in
for something not recorded) is caught wherever it comes from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.cli.demo import DEMO_SESSION
from schemas.envelope import Actor
from tests.tui.pilot import SIZE, make_demo, wait_loaded
from tui.app import TuneLedgerApp
from tui.panes import PANES

pytestmark = pytest.mark.anyio

#: ``None`` as a word, and a ``?`` alone between spaces or at a cell's edge ("on ? / None ?"):
#: a question mark inside a word or a sentence ("what?") is text, not a missing value.
MISSING = re.compile(r"\bNone\b|(?:^|[\s│|/(])\?(?=$|[\s│|/)])")

#: The one ``?`` that is a value: the short spelling of the ``inconclusive`` verdict
#: (tui.render.short_delta_verdict), after a change ("+3.1% ?") and in the Benchmarks pane's
#: legend that says so; taken out before the scan.
VERDICT_MARK = re.compile(r"(?<=\d%) \?(?=$|\s)|(?<=no change) +\?(?= +n<3)")


def _screen_text(app: TuneLedgerApp) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


async def test_no_pane_shows_none_or_a_lone_question_mark(tmp_path: Path) -> None:
    store = make_demo(tmp_path)
    app = TuneLedgerApp(
        store.path, DEMO_SESSION, actor=Actor(kind="person", name="tester"), watch=False, poll_s=0
    )
    seen: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        for pane in PANES:
            app.action_show_tab(pane.NAME)
            await pilot.pause(0.2)
            await pilot.pause()
            seen[pane.NAME] = _screen_text(app)
    assert len(seen) == 6
    for name, text in seen.items():
        assert text.strip(), name  # the pane drew something
        lines = [VERDICT_MARK.sub("", line) for line in text.splitlines()]
        found = [line.strip() for line in lines if MISSING.search(line)]
        assert not found, (name, found)
