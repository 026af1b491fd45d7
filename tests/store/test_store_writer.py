"""How a writer opens the ledger: an attached database with small row groups (``ROW_GROUP_ROWS``).

DuckDB sets the row group size only at ``ATTACH``, so a writer attaches the file to an
in-memory database and makes it the default catalog. What that must not change: where
DuckDB spills (next to the ledger, as for a plainly opened file), what the SQL of the store
and of a plain reader sees. What it is for: a large append's full row groups are
compressed while the transaction goes on, payloads in Zstandard (real files throughout).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ledger.store import ROW_GROUP_ROWS, LedgerStore, columns_table


def notes(n: int) -> dict[str, list[object]]:
    """``n`` note events as store columns (``append_columns``'s input)."""
    return {
        "event_id": [f"01972a81-0000-7000-8000-{i:012d}" for i in range(n)],
        "type": ["note_added"] * n,
        "schema_version": [2] * n,
        "stream": ["session:s1"] * n,
        "actor_kind": ["person"] * n,
        "actor_name": ["ana"] * n,
        "session_id": ["s1"] * n,
        "payload": [f'{{"text": "note {i} of a long campaign", "refs": []}}' for i in range(n)],
    }


def test_a_writer_spills_next_to_the_ledger_and_reads_as_a_plain_connection(
    tmp_path: Path,
) -> None:
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    with store.connect(read_only=False) as con:
        setting = con.execute("SELECT current_setting('temp_directory')").fetchall()
        tables = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
            "AND table_name = 'events'"
        ).fetchall()
    assert setting == [(f"{tmp_path / 'l.duckdb'}.tmp",)]
    assert tables == [(1,)]


def test_a_large_append_is_stored_in_small_zstd_row_groups(tmp_path: Path) -> None:
    n = 2 * ROW_GROUP_ROWS + 1000
    store = LedgerStore(tmp_path / "l.duckdb")
    results = store.append_columns(columns_table(notes(n), n))
    assert results.applied == n and list(results.seqs) == list(range(1, n + 1))
    plain = duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True)  # DuckDB's own view
    try:
        groups = plain.execute(
            "SELECT max(row_group_id) + 1, any_value(compression) FROM pragma_storage_info('events') "
            "WHERE column_name = 'payload' AND segment_type = 'JSON'"
        ).fetchall()
        summaries = plain.execute("SELECT count(*) FROM event_summaries").fetchall()
    finally:
        plain.close()
    assert groups == [(3, "ZSTD")]
    assert summaries == [(n,)]
