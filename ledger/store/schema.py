"""The ledger file's schema: the ``events`` table and its companions, the layout version and its
migrations, the Arrow schemas rows are inserted through, and the check that a file is current.

A file is *current* when its layout is this code's (``LAYOUT_VERSION``, the ``events``
columns) and its derived tables were made by this code's SQL (``ledger_meta.views_version``);
``ensure_schema`` brings a file written by older code (or left behind by a killed writer) up
to date in one transaction, and refuses a file written by newer code before touching it.
"""

from __future__ import annotations

import functools
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ledger.store import ledger_file
from ledger.store.derived import installed

if TYPE_CHECKING:
    import pyarrow as pa

#: The ``ledger_meta`` key holding the highest ``seq`` the projections include.
POSITION_KEY = "projected_seq"

#: Bump when the table layout changes (a migration is then needed: ``MIGRATIONS``). 2: the
#: ``occurred_at`` column; 3: catch-up projections with a stored position
#: (``ledger_meta.projected_seq``) and the ``stream_heads`` projection (``_ensure_schema``).
LAYOUT_VERSION = 3

EVENTS_DDL = """
CREATE TABLE IF NOT EXISTS events (
    seq            BIGINT PRIMARY KEY,
    event_id       UUID NOT NULL UNIQUE,
    type           VARCHAR NOT NULL,
    schema_version INTEGER NOT NULL,
    stream         VARCHAR NOT NULL,
    stream_version BIGINT NOT NULL,
    recorded_at    TIMESTAMPTZ NOT NULL,
    actor_kind     VARCHAR NOT NULL,
    actor_name     VARCHAR NOT NULL,
    session_id     VARCHAR,
    causation_id   UUID,
    correlation_id UUID,
    source         VARCHAR,
    host           JSON,
    -- Zstandard for the payloads (most of a ledger's bytes): less CPU and fewer bytes than
    -- DuckDB's default choice (docs/performance.md). Files made before keep DuckDB's choice.
    payload        JSON NOT NULL USING COMPRESSION ZSTD,
    occurred_at    TIMESTAMPTZ,
    UNIQUE (stream, stream_version)
);
CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
-- Where synced events sit on a PostgreSQL hub and which ledger they came from (ledger.sync.replicate).
CREATE TABLE IF NOT EXISTS sync_events (
    event_id              UUID PRIMARY KEY,
    seq                   BIGINT NOT NULL,
    remote                VARCHAR NOT NULL,
    position              BIGINT NOT NULL,
    origin_ledger         UUID NOT NULL,
    origin_name           VARCHAR NOT NULL,
    origin_seq            BIGINT NOT NULL,
    origin_stream_version BIGINT NOT NULL,
    seen_position         BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS bench_samples (
    benchmark_event_id UUID NOT NULL,
    request_index      INTEGER NOT NULL,
    ok                 BOOLEAN NOT NULL,
    ttft_ms            DOUBLE,
    e2e_ms             DOUBLE,
    tpot_ms            DOUBLE,
    prompt_tokens      INTEGER,
    output_tokens      INTEGER,
    itl_ms             DOUBLE[],
    error              VARCHAR,
    PRIMARY KEY (benchmark_event_id, request_index)
);
"""

#: Named layout migrations, in order, each idempotent: (layout version it brings a file to, SQL).
#: A ledger written by older code is migrated the first time it is opened for writing.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    # 2: when the fact happened (an imported log line's time), beside when it was recorded.
    (2, "ALTER TABLE events ADD COLUMN IF NOT EXISTS occurred_at TIMESTAMPTZ"),
)

#: The ``events`` table's columns, in order (``event_values`` gives one event's values so).
COLUMNS = (
    "seq",
    "event_id",
    "type",
    "schema_version",
    "stream",
    "stream_version",
    "recorded_at",
    "actor_kind",
    "actor_name",
    "session_id",
    "causation_id",
    "correlation_id",
    "source",
    "host",
    "payload",
    "occurred_at",
)

# pyarrow is imported on first use, not at import: CPU that a CLI append (one event, no
# samples) never needs.


@functools.cache
def bench_samples_schema() -> pa.Schema:
    """Arrow schema of per-request samples as ``append(samples=...)`` takes them: the columns
    of ``bench_samples`` but ``benchmark_event_id``. Times in ms, token counts in tokens."""
    import pyarrow as pa

    return pa.schema(
        [
            ("request_index", pa.int32()),
            ("ok", pa.bool_()),
            ("ttft_ms", pa.float64()),
            ("e2e_ms", pa.float64()),
            ("tpot_ms", pa.float64()),
            ("prompt_tokens", pa.int32()),
            ("output_tokens", pa.int32()),
            ("itl_ms", pa.list_(pa.float64())),
            ("error", pa.string()),
        ]
    )


@functools.cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema a batch of events is inserted through (JSON and UUIDs as text)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("seq", pa.int64()),
            ("event_id", pa.string()),
            ("type", pa.string()),
            ("schema_version", pa.int32()),
            ("stream", pa.string()),
            ("stream_version", pa.int64()),
            ("recorded_at", pa.timestamp("us", tz="UTC")),
            ("actor_kind", pa.string()),
            ("actor_name", pa.string()),
            ("session_id", pa.string()),
            ("causation_id", pa.string()),
            ("correlation_id", pa.string()),
            ("source", pa.string()),
            ("host", pa.string()),
            ("payload", pa.string()),
            ("occurred_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def __getattr__(name: str) -> Any:
    """``BENCH_SAMPLES_SCHEMA``, built (and pyarrow imported) on first use."""
    if name == "BENCH_SAMPLES_SCHEMA":
        return bench_samples_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def state(con: duckdb.DuckDBPyConnection) -> tuple[bool, int, int]:
    """(tables and views current, projected position, head ``seq``).

    The head is looked for only at and after the projected position: DuckDB skips the
    row groups before it (zone maps), so the cost does not grow with the ledger.
    """
    # Three plain queries, not one with correlated subqueries: on a fresh connection they
    # plan faster together than the one did (each CLI append runs this: docs/performance.md).
    try:
        meta = dict(
            con.execute(
                "SELECT key, value FROM ledger_meta WHERE key IN (?, ?, ?)",
                ["views_version", "layout_version", POSITION_KEY],
            ).fetchall()
        )
        try:
            projected = int(meta.get(POSITION_KEY) or 0)
        except ValueError:
            projected = 0
        head = con.execute(
            "SELECT coalesce(max(seq), ?) FROM events WHERE seq >= ?", [projected, projected]
        ).fetchall()[0][0]
        # a column this code does not know is a newer (or foreign) layout: check it then
        found = con.execute(
            "SELECT column_count FROM duckdb_tables() WHERE table_name = 'events' "
            "AND schema_name = 'main' AND database_name = current_database()"
        ).fetchall()
    except duckdb.CatalogException:
        return False, 0, 0
    views_version, layout = meta.get("views_version"), meta.get("layout_version")
    columns = found[0][0] if found else 0
    current = (
        views_version == installed().version
        and layout == str(LAYOUT_VERSION)
        and columns == len(COLUMNS)
    )
    return current, projected, head


def check_compatible(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a ledger written by newer code (``ledger_file.check_compatible``), before
    anything could rewrite it; only needed when ``state`` says it is not current."""
    ledger_file.check_compatible(
        con,
        path,
        views_version=installed().version,
        layout_version=LAYOUT_VERSION,
        columns=COLUMNS,
    )


def ready(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether a reader can use the file as it is: current and every event projected."""
    current, projected, head = state(con)
    if not current:
        check_compatible(con, path)
    return current and head <= projected


def ensure_schema(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[int, int] | None:
    """Tables, views and projections up to date (in one transaction); cheap when they are.

    Returns (projected position, head ``seq``) when the file was current already (what an
    append about to run on ``con`` would read again), else None.
    """
    current, projected, head = state(con)
    if current and head <= projected:
        return projected, head
    if not current:
        check_compatible(con, path)  # refuses a newer ledger: never "upgrade" it back to ours
    derived = installed()
    con.execute("BEGIN")
    try:
        con.execute(EVENTS_DDL)
        meta = dict(con.execute("SELECT key, value FROM ledger_meta").fetchall())
        # The stored layout says which migrations the file still needs (none stored: a new
        # file or one from before layout versions: all of them, each is idempotent).
        stored_layout = int(meta.get("layout_version") or 0)
        for version, migration in MIGRATIONS:
            if version > stored_layout:
                con.execute(migration)
        derived.create(con)
        if meta.get("views_version") != derived.version:
            # Written by other code: the projections are a cache of the log, so rebuild them.
            derived.rebuild(con)
        elif meta.get("layout_version") != str(LAYOUT_VERSION) and POSITION_KEY not in meta:
            # Layout 1 projected inside every append (so all is projected) and had no
            # stream_heads: fill that one table and store the position.
            con.execute(
                "INSERT INTO stream_heads SELECT stream, max(stream_version) FROM events GROUP BY stream "
                "ON CONFLICT (stream) DO UPDATE SET version = greatest(version, EXCLUDED.version)"
            )
            set_position(
                con, con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
            )
        else:
            derived.catch_up(con)
        con.execute(
            "INSERT OR REPLACE INTO ledger_meta VALUES ('views_version', ?), ('layout_version', ?)",
            [derived.version, str(LAYOUT_VERSION)],
        )
        con.execute("COMMIT")
    except BaseException:
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    return None


def set_position(con: duckdb.DuckDBPyConnection, seq: int) -> None:
    """Store the projected position (inside the transaction that projected up to ``seq``)."""
    con.execute("INSERT OR REPLACE INTO ledger_meta VALUES (?, ?)", [POSITION_KEY, str(seq)])


def has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether the connection's database holds ``table`` (in its main schema)."""
    return bool(
        con.execute(
            "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main' "
            "AND database_name = current_database()",
            [table],
        ).fetchall()
    )


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether ``table`` of the connection's database has ``column``."""
    return bool(
        con.execute(
            "SELECT 1 FROM duckdb_columns() WHERE table_name = ? AND column_name = ? "
            "AND schema_name = 'main' AND database_name = current_database()",
            [table, column],
        ).fetchall()
    )


def create_empty(con: duckdb.DuckDBPyConnection) -> None:
    """The ledger's tables, empty and temporary, on a read-only connection to a DuckDB file
    that holds none yet: it reads as an empty ledger, and nothing is written to it."""
    con.execute(EVENTS_DDL.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS"))
