"""docs/tui.md's screenshots are the snapshot baselines of tests/tui/test_tui_snapshots.py, byte
for byte: a change of the look that updates the baselines updates the docs in the same run
(``pytest tests/tui --snapshot-update`` copies them: this module runs after the snapshots'),
and a stale screenshot (the docs once showed 5 tabs of the app's 6) fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASELINES = Path(__file__).parent / "__snapshots__" / "test_tui_snapshots"

#: docs/ file -> the snapshot test whose baseline it is
SCREENSHOTS = {
    "tui-board.svg": "test_board.svg",
    "tui-benchmarks.svg": "test_benchmarks.svg",
    "tui-flags.svg": "test_flags_matrix.svg",
}


@pytest.mark.parametrize("doc", sorted(SCREENSHOTS))
def test_a_docs_screenshot_is_its_snapshot_baseline(
    doc: str, request: pytest.FixtureRequest
) -> None:
    baseline, shown = BASELINES / SCREENSHOTS[doc], ROOT / "docs" / doc
    if request.config.getoption("--snapshot-update", default=False):
        shutil.copyfile(baseline, shown)
    assert shown.read_bytes() == baseline.read_bytes(), (
        f"docs/{doc} is not {baseline.name}: pytest tests/tui --snapshot-update copies it"
    )


def test_every_screenshot_the_docs_embed_is_checked() -> None:
    text = (ROOT / "docs" / "tui.md").read_text() + (ROOT / "README.md").read_text()
    embedded = {name for name in SCREENSHOTS if name in text}
    assert embedded and embedded <= set(SCREENSHOTS)
    assert sorted(p.name for p in (ROOT / "docs").glob("tui-*.svg")) == sorted(SCREENSHOTS)
