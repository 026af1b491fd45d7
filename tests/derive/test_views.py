"""The views, one at a time: each view's SQL binds on a ledger's tables with only the views it
reads created before it, so a view can be read, changed and tested alone (``ledger/derive/views/``)."""

from __future__ import annotations

import re

import duckdb
import pytest

from ledger.derive import projections, views
from ledger.store.schema import EVENTS_DDL


def _reads(sql: str) -> set[str]:
    """The views a view's SQL names (a word equal to a view's name)."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql))
    return words & set(views.VIEW_NAMES)


def _needs(name: str, sql: dict[str, str]) -> list[str]:
    """The views ``name`` reads, directly or not, in creation order."""
    found: set[str] = set()
    todo = [name]
    while todo:
        for other in _reads(sql[todo.pop()]) - found - {name}:
            found.add(other)
            todo.append(other)
    return [view for view in views.VIEW_NAMES if view in found]


@pytest.fixture(scope="module")
def tables() -> duckdb.DuckDBPyConnection:
    """An in-memory database with a ledger's tables and projections, and no view."""
    con = duckdb.connect(":memory:")
    con.execute(EVENTS_DDL)
    projections.create(con)
    yield con
    con.close()


@pytest.mark.parametrize("name", views.VIEW_NAMES)
def test_each_view_binds_with_only_the_views_it_reads(
    tables: duckdb.DuckDBPyConnection, name: str
) -> None:
    sql = views.view_sql()
    con = tables.cursor()
    con.execute("BEGIN")
    try:
        for needed in _needs(name, sql):
            con.execute(f"CREATE VIEW {needed} AS {sql[needed]}")
        con.execute(f"CREATE VIEW {name} AS {sql[name]}")
        assert con.execute(f"SELECT count(*) FROM {name}").fetchall() == [(0,)]
    finally:
        con.execute("ROLLBACK")


def test_every_view_comes_after_the_views_it_reads() -> None:
    sql = views.view_sql()
    order = {name: i for i, name in enumerate(views.VIEW_NAMES)}
    for name, text in sql.items():
        assert all(order[read] < order[name] for read in _reads(text) - {name}), name


def test_each_view_is_a_function_named_as_the_view() -> None:
    assert [view.__name__ for view in views.VIEWS] == list(views.VIEW_NAMES)
    assert len(set(views.VIEW_NAMES)) == len(views.VIEW_NAMES)
