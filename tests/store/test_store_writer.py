"""How a writer opens the ledger: an attached database with small row groups (``ROW_GROUP_ROWS``).

DuckDB sets the row group size only at ``ATTACH``, so a writer attaches the file to an
in-memory database and makes it the default catalog. What that must not change: where
DuckDB spills (next to the ledger, as for a plainly opened file), what the SQL of the store
and of a plain reader sees. What it is for: a large append's full row groups are
compressed while the transaction goes on, payloads in Zstandard (real files throughout).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import duckdb
import pytest

from ledger.errors import ConcurrencyConflict
from ledger.store import ROW_GROUP_ROWS, LedgerStore, careful, columns_table, schema
from schemas import Event, Host, NoteAdded


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


def _batch(n: int) -> list[Event]:
    """``n`` events whose envelopes differ in every nullable field (null in some rows only)."""
    start = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    return [
        NoteAdded(
            event_id=UUID(f"01972a81-0000-7000-8000-{i:012d}"),
            text=f"note {i} ünïcode ✓",
            session_id="s1" if i % 2 else None,
            occurred_at=start + timedelta(seconds=i) if i % 3 else None,
            host=Host(gpu_name="NVIDIA H100", compute_capability="9.0") if i % 2 == 0 else None,
            causation_id=UUID(int=i + 1) if i % 4 == 1 else None,
            source=f"server.log:{i}" if i % 2 else None,
            stream="session:s1" if i < 2 else None,
        )
        for i in range(n)
    ]


def _stored(path: Path) -> tuple[list[tuple[object, ...]], ...]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (
            con.execute("SELECT * FROM events ORDER BY seq").fetchall(),
            con.execute("SELECT * FROM event_summaries ORDER BY seq").fetchall(),
            con.execute("SELECT * FROM stream_heads ORDER BY stream").fetchall(),
            con.execute("SELECT key, value FROM ledger_meta ORDER BY key").fetchall(),
            con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                "ORDER BY 1"
            ).fetchall(),
            con.execute(
                "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1"
            ).fetchall(),
        )
    finally:
        con.close()


@pytest.mark.parametrize("n", [2, careful.VALUES_ROWS, careful.VALUES_ROWS + 1])
def test_a_small_batch_stored_as_values_rows_reads_as_one_stored_from_arrow(
    tmp_path: Path, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def clock() -> datetime:
        return datetime(2026, 12, 5, 13, 0, tzinfo=UTC)

    LedgerStore(tmp_path / "values.duckdb", clock=clock).append(_batch(n))
    monkeypatch.setattr(careful, "VALUES_ROWS", 0)  # every batch through an Arrow table
    LedgerStore(tmp_path / "arrow.duckdb", clock=clock).append(_batch(n))
    values, arrow = _stored(tmp_path / "values.duckdb"), _stored(tmp_path / "arrow.duckdb")
    assert values == arrow and len(values[0]) == n


def test_an_append_that_creates_the_file_leaves_what_init_then_append_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def clock() -> datetime:
        return datetime(2026, 12, 5, 13, 0, tzinfo=UTC)

    created = tmp_path / "created.duckdb"
    LedgerStore(created, clock=clock).append(_batch(3))  # one connection makes it and writes
    initialised = LedgerStore(tmp_path / "init.duckdb", clock=clock)
    initialised.init()
    initialised.append(_batch(3))
    assert _stored(created) == _stored(initialised.path)
    assert not Path(f"{created}.wal").exists()
    # a failure before the write removes the file it made; one of the write leaves the ledger
    failing = tmp_path / "failing.duckdb"

    def broken(con: object, path: Path) -> None:
        raise duckdb.IOException("IO Error: No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(schema, "ensure_schema", broken)
        with pytest.raises(duckdb.IOException):
            LedgerStore(failing).append(_batch(1))
    assert not failing.exists() and not Path(f"{failing}.wal").exists()
    with pytest.raises(ConcurrencyConflict):
        LedgerStore(failing).append(_batch(1), expected_version=3)
    empty, made = _stored(failing), _stored(created)
    assert empty[0] == [] and empty[4:] == made[4:]  # no event; the tables and views made
