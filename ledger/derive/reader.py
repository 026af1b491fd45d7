"""What a reader's connection gets: the running code's views over the file's data, never SQL
stored in the file, and nothing written to it.

A ledger file holds views and projection tables made by whichever tuneledger last wrote it.
A reader uses neither blindly:

- the views it reads are temporary views made from this code's SQL on its own connection
  (they shadow the file's views of the same names); the search path puts DuckDB's built-in
  functions before the file's catalog, so a macro stored in the file cannot stand in for a
  function the views call, and the store opens readers with external access off;
- projections made by other code (the views digest differs) are derived again from the log
  into temporary tables of this connection; projections a killed writer left behind the log
  get the missing tail in temporary tables, read together with the file's;
- a file of an older layout (no ``occurred_at`` column) is read through a temporary view
  that adds the column.

The next writer brings the file itself up to date (``ledger.store.schema.ensure_schema``).
The cost at open is in docs/performance.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

import duckdb

from ledger.derive import projections, views


@cache
def _reads() -> dict[str, frozenset[str]]:
    """view -> the views its SQL names."""
    sql = views.view_sql()
    names = set(sql)
    return {
        name: frozenset(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) & names - {name})
        for name, text in sql.items()
    }


def needed(wanted: Iterable[str] | None) -> list[str]:
    """The views to create for a reader that reads ``wanted`` (view names, or any SQL text
    naming them; None: every view): those and the views they read, in creation order."""
    if wanted is None:
        return list(views.VIEW_NAMES)
    if isinstance(wanted, str):
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", wanted))
    else:
        words = set(wanted)
    reads = _reads()
    found = words & set(reads)
    todo = list(found)
    while todo:
        for other in reads[todo.pop()] - found:
            found.add(other)
            todo.append(other)
    return [name for name in views.VIEW_NAMES if name in found]


#: The mark, in ``made``, of a connection whose tables ``prepare`` has seen to.
_PREPARED = ""
#: The prefix, in ``made``, of the (quoted) name of the file's catalog on the connection.
_CATALOG = "\0catalog="


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def prepare(
    con: duckdb.DuckDBPyConnection,
    *,
    current: bool,
    projected: int,
    head: int,
    has_occurred_at: bool,
    wanted: Iterable[str] | str | None,
    made: set[str],
) -> None:
    """Make ``con`` (a reader's connection) read the file through this code's views.

    ``current``: the file's derived tables are this code's (``ledger.store.schema.state``);
    ``projected``/``head``: the projected position and the head ``seq``; ``wanted``: as
    ``needed``'s; ``made``: the views already made on ``con`` (a kept-open connection's;
    updated). Writes nothing to the file: every object made here is temporary.
    """
    # The file's catalog, read before the search path below changes what current_database()
    # says (the first schema of the path: temp); kept in ``made`` for the calls after.
    named = [m for m in made if m.startswith(_CATALOG)]
    if named:
        db = named[0][len(_CATALOG) :]
    else:
        db = _quoted(con.execute("SELECT current_database()").fetchall()[0][0])
        made.add(_CATALOG + db)
    # DuckDB's functions before the file's catalog (a macro stored in it would win over a
    # function of the same name); a writer's connection puts the path back after its read
    # (``LedgerStore.connect``): tables are created in the first schema of the path.
    path = f"temp.main,system.main,{db}.main".replace("'", "''")
    con.execute(f"SET search_path = '{path}'")
    if _PREPARED not in made:  # the connection's first call: the tables it reads
        if not has_occurred_at:  # layout 1: the column came with layout 2
            con.execute(
                "CREATE TEMP VIEW events AS SELECT *, NULL::TIMESTAMPTZ AS occurred_at "
                f"FROM {db}.main.events"
            )
        if not current:
            _project(con, db, after=0, tail=False)
        elif head > projected:
            _project(con, db, after=projected, tail=True)
        made.add(_PREPARED)
    sql = views.view_sql()
    for name in needed(wanted):
        if name not in made:
            con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql[name]}")
            made.add(name)


def _project(con: duckdb.DuckDBPyConnection, db: str, *, after: int, tail: bool) -> None:
    """The projections of the events after ``after`` in temporary tables of ``con``; with
    ``tail``, read together with the file's own tables (which hold the events up to
    ``after``) through temporary views of the same names."""
    con.execute(projections.DDL.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE"))
    projections.apply(con, after)
    if not tail:
        return
    for table in projections.PROJECTION_TABLES:
        con.execute(f"ALTER TABLE temp.main.{table} RENAME TO {table}_tail")
        con.execute(
            f"CREATE TEMP VIEW {table} AS SELECT * FROM {db}.main.{table} "
            f"UNION ALL BY NAME SELECT * FROM temp.main.{table}_tail"
        )
