"""docs/architecture.md's module map against the tree: every folder and file it names exists,
and every package of ledger/ and runners/ and every top-level folder is on it (the map had
gone stale: it still named ledger/remote.py, hub.py, sync.py, launcher.py and resident.py
after they moved into subpackages)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _map_lines() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"^```\n(.*?)^```$", text, re.M | re.S)
    assert block, "docs/architecture.md starts with its module map in a code block"
    return block.group(1).splitlines()


def _named() -> set[str]:
    """The paths at the start of the map's lines (``ledger/store/``, ``ledger/errors.py``)."""
    return {line.split()[0] for line in _map_lines() if line and not line[0].isspace()}


def test_every_path_on_the_map_exists() -> None:
    missing = sorted(p for p in _named() if not (ROOT / p).exists())
    assert missing == []


def test_every_package_and_top_level_folder_is_on_the_map() -> None:
    named = _named()
    packages = {
        f"{p.parent.relative_to(ROOT).as_posix()}/"
        for base in ("ledger", "runners")
        for p in (ROOT / base).glob("*/__init__.py")
    }
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    folders = {f"{name.split('/')[0]}/" for name in tracked if "/" in name and name[0] != "."}
    assert sorted((packages | folders) - named - {"docs/", "ledger/"}) == []
