"""Each public package works from its own import, in a fresh interpreter: no other module has
to be imported first for a side effect (a library user, a notebook or a script starts so).
The store loads the derived tables it keeps current by itself (``ledger.store.derived``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOG = (
    ROOT / "tests" / "fixtures" / "cases" / "sglang-pr29927-spec-capacity-drop" / "run1_no_spec.log"
)

#: package -> a script that imports it (and the event models, the layer below all) and uses
#: it; ``LEDGER`` and ``LOG`` are given; the script prints what the test compares.
USES = {
    "ledger.store": """
from ledger.store import LedgerStore
from schemas import NoteAdded
store = LedgerStore(LEDGER)
store.init()
store.append(NoteAdded(text="alone"))
import sys
assert "ledger.derive" in sys.modules  # loaded by the store, when it first needed it
print(store.query_arrow("SELECT count(*) AS n FROM timeline")["n"].to_pylist())
""",
    "ledger.read": """
from ledger.read.model import read_report
from ledger.store import LedgerStore
LedgerStore(LEDGER).init()
print(len(read_report(LedgerStore(LEDGER)).sessions))
""",
    "ledger.write": """
from ledger.store import LedgerStore
from ledger.write import commands
from schemas import NoteAdded
store = LedgerStore(LEDGER)
store.init()
print([r.seq for r in commands.append(store, NoteAdded(text="written"))])
""",
    "ledger.importers": """
from ledger.importers.ingest import import_files
from ledger.store import LedgerStore
from schemas import Actor
store = LedgerStore(LEDGER)
import_files(store, [LOG], session_id="s", actor=Actor(kind="agent", name="t"))
print(store.query_arrow("SELECT count(*) AS n FROM server_runs")["n"].to_pylist())
""",
    "ledger.engines": """
from ledger.engines.identify import identify
print(identify(open(LOG).read().splitlines()).engine)
""",
    "runners": """
from runners.server.configs import parse_configs
configs = parse_configs({"configs": {"a": {"engine": "sglang", "model": "m", "port": 0}}})
print(sorted(configs))
""",
    "tui": """
from tui.app import TuneLedgerApp
from ledger.store import LedgerStore
LedgerStore(LEDGER).init()
print(type(TuneLedgerApp(LEDGER, watch=False)).__name__)
""",
}

EXPECTED = {
    "ledger.store": "[1]",
    "ledger.read": "0",
    "ledger.write": "[1]",
    "ledger.importers": "[1]",
    "ledger.engines": "sglang",
    "runners": "['a']",
    "tui": "TuneLedgerApp",
}


@pytest.mark.slow  # a fresh interpreter per package
@pytest.mark.parametrize("package", sorted(USES))
def test_a_package_works_from_its_own_import(package: str, tmp_path: Path) -> None:
    script = f"LEDGER = {str(tmp_path / 'l.duckdb')!r}\nLOG = {str(LOG)!r}\n" + USES[package]
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == EXPECTED[package]


def test_no_module_imports_the_derived_tables_for_a_side_effect() -> None:
    """``import ledger.derive`` bound to nothing it uses: the habit the store's own loading ended."""
    offenders = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        parts = path.relative_to(ROOT).parts
        if any(part.startswith(".") for part in parts) or "fixtures" in parts:  # venvs, data
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import) and any(a.name == "ledger.derive" for a in node.names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
