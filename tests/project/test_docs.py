"""The docs against the code: the generated references are current (sqlite-utils' cog check),
the README stays a front door, every view is described, every exit code is in the README's
table, and every relative link of the docs opens a file of the repository."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from ledger import errors

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_reference", ROOT / "docs" / "generate_reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_is_current() -> None:
    """docs/reference/ is what the code generates: after changing a command, an option, an
    event field, a view or an importer, `make docs` regenerates it."""
    assert _generator().stale() == []


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail to docs/"


def test_every_view_is_described_in_docs_views() -> None:
    """docs/views.md's table has a row for every view of the (checked, generated) reference."""
    table = (ROOT / "docs" / "views.md").read_text()
    described = set(re.findall(r"^\| `(\w+)`(?: / `(\w+)`)? \|", table, flags=re.M))
    names = {name for pair in described for name in pair if name}
    reference = (ROOT / "docs" / "reference" / "views.md").read_text()
    assert names == set(re.findall(r"^## `(\w+)`$", reference, flags=re.M))


def test_every_exit_code_is_in_the_readme() -> None:
    codes = {
        cls.exit_code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.LedgerError)
    }
    table = (ROOT / "README.md").read_text()
    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.M)}
    assert codes - {1} <= listed
    assert {0, 2, 3, 4, 5, 130} <= listed


def test_code_blocks_are_closed() -> None:
    """Every fenced block ends: an unclosed one swallows the rest of the page."""
    unclosed = [
        str(doc.relative_to(ROOT))
        for doc in DOCS
        if sum(line.lstrip().startswith("```") for line in doc.read_text().splitlines()) % 2
    ]
    assert unclosed == []


def test_relative_links_open_a_file() -> None:
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_docstrings_and_tests_cite_what_a_reader_can_open() -> None:
    """No citation of a document that is not in the repository, and no tracker number of ours
    in the tests: cite docs/, a file, or a public issue, pull request or page."""
    sources = [
        path
        for top in ("schemas", "ledger", "runners", "tui", "tests", "bench", "docs")
        for path in (ROOT / top).rglob("*.py")
        if "fixtures" not in path.parts
    ]
    missing_doc = re.compile(r"\bREFERENCE (section|§)|\(REFERENCE[:)]")
    tracker = re.compile(r"\b[Ii]ssues? \d+(\.\d+)?\b")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sources
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if missing_doc.search(line)
        or ("tests" in path.relative_to(ROOT).parts[:1] and tracker.search(line))
    ]
    assert found == []
