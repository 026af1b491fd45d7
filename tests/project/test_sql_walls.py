"""One read model, as a wall that only moves one way: SQL text (a string that starts with
SELECT, WITH, INSERT, ...) lives in ``ledger/read`` (the named queries the front ends ask),
``ledger/derive`` (the views and projections) and ``ledger/store`` (the tables), and nowhere
else; the modules that still hold some are listed below with how many strings, and the list
only shrinks.

The aim: every read of the ledger's views and tables goes through a named, typed query of
``ledger/read``, so a view's columns change in one place, not in the runners', the TUI's and
the MCP tools' copies. When a module's SQL moves into ``ledger/read``, lower its count here
(or drop its line): the test fails until the list says what the tree holds, so it can only
shrink. A new SQL string outside the walls fails it too: write a query in ``ledger/read``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Where SQL belongs.
WALLS = ("ledger/read/", "ledger/derive/", "ledger/store/")

#: SQL text: a string that starts with one of these statements (upper case, as the code writes SQL).
SQL = re.compile(r"\s*(SELECT|WITH|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|ATTACH|COPY|PRAGMA)\s")

#: Today's SQL strings outside the walls, per module: (how many, what they are).
ALLOWED: dict[str, tuple[int, str]] = {
    # SQL of another database, or SQL as text a person reads: stays
    "ledger/sync/hub.py": (16, "the PostgreSQL hub's own tables"),
    "ledger/sync/remote.py": (7, "the PostgreSQL hub's own tables"),
    "ledger/sync/replicate.py": (
        24,
        "replication between the file and the hub (and the held-back rows)",
    ),
    "tui/sql_console.py": (2, "the SQL console's example and placeholder, shown to the user"),
}


def _sql_strings(path: Path) -> int:
    tree = ast.parse(path.read_text(), str(path))
    inside_fstrings = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    count = 0
    for node in ast.walk(tree):
        if id(node) in inside_fstrings:
            continue
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            text = first.value if isinstance(first, ast.Constant) else None
        else:
            text = node.value if isinstance(node, ast.Constant) else None
        count += isinstance(text, str) and SQL.match(text) is not None
    return count


def _outside_the_walls() -> dict[str, int]:
    found = {}
    for package in ("ledger", "runners", "tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if not name.startswith(WALLS) and (count := _sql_strings(path)):
                found[name] = count
    return found


def test_sql_text_outside_the_read_model_only_shrinks() -> None:
    found = _outside_the_walls()
    new = {name: n for name, n in found.items() if n > ALLOWED.get(name, (0, ""))[0]}
    assert new == {}, "SQL outside ledger/read, ledger/derive, ledger/store: write a query there"
    shrunk = {
        name: found.get(name, 0) for name, (n, _) in ALLOWED.items() if found.get(name, 0) < n
    }
    assert shrunk == {}, (
        "fewer SQL strings than ALLOWED says: lower the counts (the list only shrinks)"
    )


def test_the_scan_sees_sql_in_its_shapes(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'A = "SELECT 1"\nB = f"WITH x AS ({A}) SELECT * FROM x"\n'
        'C = ("INSERT INTO t "\n     "VALUES (1)")\n"""With a docstring, not SQL."""\nD = "select lower"\n'
    )
    assert _sql_strings(module) == 3
