"""A new ledger is this process's empty ledger linked into place whole (ledger/store/template.py):
the same tables, views and layout as one built in place, built once a process, never over a
file that appeared meanwhile, and no scratch file left beside it."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ledger.store import LedgerStore, template
from ledger.store.ledger_store import _build_in_place
from ledger.store.schema import LAYOUT_VERSION
from schemas.events import NoteAdded


def _shape(path: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        objects = con.execute(
            "SELECT table_name, table_type FROM information_schema.tables ORDER BY 1"
        ).fetchall()
        meta = con.execute("SELECT key, value FROM ledger_meta ORDER BY 1").fetchall()
    finally:
        con.close()
    return objects, meta


def test_a_new_ledger_is_the_empty_ledger_linked_whole(tmp_path: Path) -> None:
    in_place = tmp_path / "in-place.duckdb"
    _build_in_place(in_place)
    LedgerStore(tmp_path / "first.duckdb").init()  # a process's first init builds in place
    builds: list[Path] = []

    def build(path: Path) -> None:
        builds.append(path)
        _build_in_place(path)

    for name in ("a", "b"):
        assert template.place(tmp_path / f"{name}.duckdb", LAYOUT_VERSION, build)
    assert len(builds) <= 1  # once a process (none here if an earlier init built it)
    for name in ("a", "b"):
        path = tmp_path / f"{name}.duckdb"
        assert _shape(path) == _shape(in_place)
        store = LedgerStore(path)
        assert store.init() is False  # a ledger already: nothing to create
        store.append(NoteAdded(text=f"note in {name}"))
        assert [e.text for e in store.read()] == [f"note in {name}"]
        assert store.query_arrow("SELECT count(*) AS n FROM timeline")["n"].to_pylist() == [1]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")]


def test_init_places_it_and_says_it_created_the_ledger(tmp_path: Path) -> None:
    for i in range(3):  # the second and later of the process are placed, not built
        store = LedgerStore(tmp_path / f"l{i}.duckdb")
        assert store.init() is True
        store.append(NoteAdded(text="x"))
        assert len(store.read()) == 1
        assert _shape(store.path) == _shape(tmp_path / "l0.duckdb")


def test_a_file_that_appeared_meanwhile_is_never_replaced(tmp_path: Path) -> None:
    LedgerStore(tmp_path / "first.duckdb").init()
    there = tmp_path / "there.duckdb"
    there.write_bytes(b"written by someone else")
    assert template.place(there, LAYOUT_VERSION, _build_in_place) is False
    assert there.read_bytes() == b"written by someone else"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "first.duckdb",
        "first.duckdb.lock",
        "there.duckdb",
    ]
