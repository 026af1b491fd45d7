"""The long test files started first under pytest-xdist (``tests/conftest.py``'s ``LONG_FILES``)
are files of the tree: a moved file would silently fall back to the end of the run."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONG_FILES

ROOT = Path(__file__).resolve().parents[2]


def test_the_long_files_exist_once_each() -> None:
    assert len(set(LONG_FILES)) == len(LONG_FILES)
    assert [f for f in LONG_FILES if not (ROOT / f).is_file()] == []
