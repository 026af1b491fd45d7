"""The append-only event store: one DuckDB file, many processes, one writer at a time.

DuckDB lets one process hold a database file read-write, and lets others read
it only while nobody writes (REFERENCE section 6). tuneledger therefore never
keeps a connection open: every operation opens the file, does its work in one
transaction and closes it again (about 10 ms for open + close), and an open
that finds the file locked is retried with jittered exponential backoff
(tenacity) until ``lock_timeout_s``. Around every connection tuneledger also
holds a readers-writer lock on a sidecar file (``<ledger>.lock``, flock):
shared for readers, exclusive for writers, released only once DuckDB's close
has returned (see ``_file_lock`` for why). Within a process a
lock per file serialises operations, because DuckDB refuses to open the same
file twice in one process with different settings. The result: a CLI append,
a runner and the TUI's refresh can run side by side; none of them sees a lock
error unless a lock is held longer than the timeout (``LedgerBusy``).

Guarantees (each proven by a test in ``tests/test_store_contract.py``):

- append is idempotent by ``event_id``: a retry returns the original ``seq``;
  the same id with other content is ``EventIdReused``;
- a batch is atomic: all its events are stored, or none;
- ``expected_version`` conflicts raise ``ConcurrencyConflict``;
- ``seq`` is gapless and in commit order (computed as ``max(seq) + 1`` inside
  the single writer's transaction, never from a non-transactional sequence);
- a writer killed mid-append leaves a valid prefix (DuckDB's WAL);
- rows are never updated or deleted; older schema versions are upcast on read.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import duckdb
import pyarrow as pa
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from schemas import Event, EventEnvelope, parse_event
from schemas.secrets import mask_json, mask_text, may_hold_secret

from . import projections, sidecar_lock, views
from .errors import ConcurrencyConflict, EventIdReused, InvalidInput, LedgerBusy, NotFound

#: File suffixes DuckDB treats as data to scan, not as a database to open.
_DATA_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet", ".txt", ".log", ".xlsx"})

_ID_PREFIX = re.compile(r"[0-9a-f]{8}(?:[0-9a-f-]{0,28})")

#: Bump when the table layout changes (a migration is then needed: ``MIGRATIONS``).
LAYOUT_VERSION = 2

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
    payload        JSON NOT NULL,
    occurred_at    TIMESTAMPTZ,
    UNIQUE (stream, stream_version)
);
CREATE TABLE IF NOT EXISTS ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
-- Where synced events sit on a PostgreSQL hub and which ledger they came from (ledger.sync).
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

#: Arrow schema of per-request samples as ``append(samples=...)`` takes them: the columns of
#: ``bench_samples`` but ``benchmark_event_id``. Times in ms, token counts in tokens.
BENCH_SAMPLES_SCHEMA = pa.schema(
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

#: Named layout migrations, in order, each idempotent: (layout version it brings a file to, SQL).
#: A ledger written by older code is migrated the first time it is opened for writing.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    # 2: when the fact happened (an imported log line's time), beside when it was recorded.
    (2, "ALTER TABLE events ADD COLUMN IF NOT EXISTS occurred_at TIMESTAMPTZ"),
)

_COLUMNS = (
    "seq", "event_id", "type", "schema_version", "stream", "stream_version", "recorded_at",
    "actor_kind", "actor_name", "session_id", "causation_id", "correlation_id", "source",
    "host", "payload", "occurred_at",
)

_ARROW_SCHEMA = pa.schema(
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

#: The columns that make two events with one id "the same event" (a retry). Provenance
#: that a retry may legitimately change — recorded_at, actor, source — is left out.
_IDENTITY = ("type", "payload", "session_id", "causation_id", "correlation_id", "host")


def _identity(row: dict[str, Any]) -> tuple[Any, ...]:
    def norm(column: str) -> Any:
        value = row[column]
        if column in ("payload", "host") and isinstance(value, str):
            return json.loads(value)
        return str(value) if value is not None else None

    return tuple(norm(column) for column in _IDENTITY)


_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.RLock:
    key = str(path.resolve())
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


def is_lock_error(exc: BaseException) -> bool:
    """True for DuckDB's "Could not set lock on file" (another process holds the file)."""
    if not isinstance(exc, duckdb.Error):
        return False
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


@dataclass(frozen=True)
class AppendResult:
    """Where one event landed: global ``seq``, ``stream`` and ``stream_version``.

    ``duplicate`` is true when the event was already stored (an idempotent retry):
    the positions are then the original ones.
    """

    event_id: UUID
    seq: int
    stream: str
    stream_version: int
    duplicate: bool = False


class LedgerStore:
    """An append-only ledger in one DuckDB file.

    Args:
        path: the ``.duckdb`` file; created by ``init()``.
        clock: returns the UTC time stamped on events that carry no ``recorded_at``
            (tests pass a fixed clock for deterministic snapshots).
        lock_timeout_s: how long to retry when another process holds the file lock.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], datetime] | None = None,
        lock_timeout_s: float = 30.0,
    ) -> None:
        self.path = Path(path)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.lock_timeout_s = lock_timeout_s
        self._lock = _lock_for(self.path)
        self._checked = False

    # --- connections ------------------------------------------------------------

    def check_path(self) -> None:
        """Refuse a path that is not (or cannot become) a ledger file, before DuckDB sees it.

        DuckDB opens ``:memory:`` and data-file names (``x.jsonl``, ``x.csv``) as an
        in-memory database: appends would "succeed" and vanish. An existing file must
        carry DuckDB's magic bytes.

        Raises:
            InvalidInput: one line naming the path and what to do instead.
        """
        name = str(self.path)
        if name.startswith(":") or self.path.suffix.lower() in _DATA_SUFFIXES:
            raise InvalidInput(
                f"{name}: not a ledger file name (use e.g. ledger.duckdb; to load JSONL events "
                "use `tuneledger append < FILE`, to import tool outputs `tuneledger import FILE`)"
            )
        if self.path.is_dir():
            raise InvalidInput(f"{name}: is a directory, not a ledger file")
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb") as handle:
                header = handle.read(12)
            if header[8:12] != b"DUCK":
                raise InvalidInput(f"{name}: not a DuckDB ledger file")

    @contextmanager
    def connect(self, *, read_only: bool = True, config: dict[str, Any] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open the file for one unit of work, retrying while another process holds it.

        Raises:
            InvalidInput: the path is not a ledger file (``check_path``).
            NotFound: the file does not exist (read-only open).
            LedgerBusy: the lock was not had within ``lock_timeout_s``.
        """
        self.check_path()
        if read_only and not self.path.exists():
            raise NotFound(f"no ledger at {self.path} (create it with `tuneledger init`)")
        if read_only:
            self.ensure_current()
        with self._lock, self._file_lock(read_only):
            con = self._open(read_only, config or {})
            try:
                yield con
            finally:
                con.close()

    @contextmanager
    def _file_lock(self, shared: bool) -> Iterator[None]:
        """Hold ``<ledger>.lock`` (shared for readers, exclusive for writers) around a connection.

        DuckDB's own lock on the database file is not enough: under heavy load the
        racing-writers contract test saw two writers both commit the same ``seq``
        (one commit lost), as if the second opened the file before the first's
        close had finished with the write-ahead log. This lock is taken before
        ``duckdb.connect`` and released only after ``close()`` has returned, so
        tuneledger processes never overlap on the file.

        Raises:
            LedgerBusy: not had within ``lock_timeout_s``.
        """
        try:
            fd = sidecar_lock.acquire(self.lock_path, shared=shared, timeout_s=self.lock_timeout_s)
        except sidecar_lock.LockTimeout:
            raise LedgerBusy(
                f"ledger {self.path} stayed locked by another process for {self.lock_timeout_s:g} s"
            ) from None
        try:
            yield
        finally:
            sidecar_lock.release(fd)

    @property
    def lock_path(self) -> Path:
        """The sidecar lock file next to the ledger (``ledger.duckdb.lock``)."""
        return self.path.with_name(self.path.name + ".lock")

    def _open(self, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        retrying = Retrying(
            retry=retry_if_exception(is_lock_error),
            wait=wait_random_exponential(multiplier=0.002, max=0.05),
            stop=stop_after_delay(self.lock_timeout_s),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return duckdb.connect(str(self.path), read_only=read_only, config=config)
        except duckdb.Error as exc:
            if is_lock_error(exc):
                raise LedgerBusy(
                    f"ledger {self.path} stayed locked by another process for {self.lock_timeout_s:g} s"
                ) from exc
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    # --- set-up -----------------------------------------------------------------------

    def init(self) -> bool:
        """Create the tables and views if needed; refresh views written by older code.

        Returns True when the file was created by this call.
        """
        self.check_path()
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.connect(read_only=False) as con:
            self._ensure_schema(con)
        return created

    @staticmethod
    def _is_current(con: duckdb.DuckDBPyConnection) -> bool:
        try:
            rows = con.execute("SELECT value FROM ledger_meta WHERE key = 'views_version'").fetchall()
        except duckdb.CatalogException:
            return False
        return bool(rows) and rows[0][0] == views.VIEWS_VERSION

    def ensure_current(self) -> None:
        """Bring a ledger written by older code up to date (tables, projections, views).

        Cheap when it is current (one read-only query); called once per store
        before the first read, so reading an old file never sees stale views.
        """
        if self._checked or not self.path.exists():
            return
        with self._lock, self._file_lock(True):
            con = self._open(True, {})
            try:
                current = self._is_current(con)
            finally:
                con.close()
        if not current:
            self.init()  # after letting go of the shared lock: init takes the exclusive one
        self._checked = True

    def _ensure_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute("BEGIN")
        con.execute(EVENTS_DDL)
        for _, migration in MIGRATIONS:
            con.execute(migration)
        projections.create(con)
        rows = con.execute("SELECT value FROM ledger_meta WHERE key = 'views_version'").fetchall()
        if not rows or rows[0][0] != views.VIEWS_VERSION:
            # Written by other code: the projections are a cache of the log, so rebuild them.
            projections.rebuild(con)
            views.create_views(con)
            con.execute(
                "INSERT OR REPLACE INTO ledger_meta VALUES ('views_version', ?), ('layout_version', ?)",
                [views.VIEWS_VERSION, str(LAYOUT_VERSION)],
            )
        con.execute("COMMIT")

    # --- writing --------------------------------------------------------------------

    def append(
        self,
        events: Event | Sequence[Event],
        *,
        expected_version: int | None = None,
        samples: Mapping[UUID, pa.Table] | None = None,
    ) -> list[AppendResult]:
        """Append events atomically, in order; return where each landed.

        ``expected_version`` (optimistic concurrency) requires every event of the
        batch to be in one stream, and that stream to be at exactly this version
        before the append (0: the stream must not exist yet). An event's own
        ``stream_version``, when set, must be the version it gets.

        Events already stored (same ``event_id``, same content) are not stored
        again: their result carries the original positions and ``duplicate=True``.

        ``samples`` maps a benchmark event's ``event_id`` to its per-request
        samples (columns of ``bench_samples`` but ``benchmark_event_id``); they
        are stored in the same transaction, for newly stored events only.

        Raises:
            ConcurrencyConflict: a stream is not at the expected version.
            EventIdReused: an ``event_id`` is stored with different content,
                or appears twice in the batch.
            InvalidInput: a batch mixing streams with ``expected_version``.
            LedgerBusy: the file stayed locked.
        """
        batch = [events] if isinstance(events, Event) else list(events)
        if not batch:
            return []
        rows = [self._row(event) for event in batch]
        ids = [row["event_id"] for row in rows]
        if len(set(ids)) != len(ids):
            raise EventIdReused("the batch holds the same event_id twice")
        if expected_version is not None and len({row["stream"] for row in rows}) != 1:
            raise InvalidInput("expected_version needs every event of the batch in one stream")
        if not self.path.exists():
            self.init()
        with self.connect(read_only=False) as con:
            if not self._is_current(con):
                self._ensure_schema(con)
            con.execute("BEGIN")
            try:
                results = self._append_in_tx(con, rows, expected_version)
                for result in results:
                    if samples and not result.duplicate and result.event_id in samples:
                        self._insert_samples(con, result.event_id, samples[result.event_id])
                con.execute("COMMIT")
            except BaseException:
                # After an interrupt DuckDB may already have aborted the transaction; a failing
                # ROLLBACK must not hide the original error (KeyboardInterrupt included).
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
        return results

    def append_replicated(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        record: Callable[[duckdb.DuckDBPyConnection, list[AppendResult]], None] | None = None,
    ) -> list[AppendResult]:
        """Append events pulled from a sync hub, in the given (hub) order, atomically.

        For ``ledger.sync``. Each row is one stored event's envelope columns: ``event_id``,
        ``type``, ``schema_version``, ``stream``, ``recorded_at`` (aware datetime),
        ``actor_kind``, ``actor_name``, ``session_id``, ``causation_id``, ``correlation_id``,
        ``source`` (str or None), ``host`` and ``payload`` (JSON text), ``occurred_at``
        (aware datetime or None). They are stored as
        they are (secrets masked, as for every event), at their own ``schema_version``
        (upcast on read, like every stored row).
        Each gets the next local ``seq`` and the next version of its stream *in this
        ledger*: two hosts may both have appended at one stream version while offline,
        and both events are kept (the origin's version stays in ``sync_events``).
        Idempotent by ``event_id`` like ``append``. ``record(con, results)`` runs inside
        the same transaction, so the sync bookkeeping commits with the events or not at all.
        The row dicts are used as they are (``seq`` and ``stream_version`` are set in them).

        Raises:
            EventIdReused: an ``event_id`` is stored here with different content.
            NotFound: a retraction of an event this ledger does not hold.
            LedgerBusy: the file stayed locked.
        """
        batch = list(rows)
        for row in batch:  # in place: copying 100k dicts costs more than the rest of the Python side
            row["seq"] = row["stream_version"] = None
        # A hub may hold what an older client or plain SQL wrote: mask as ``_row`` does
        # (idempotent, so a re-pulled event still compares equal to the stored one). One scan
        # of the whole batch first: the usual batch holds no secret and is not looked at again
        # (a hit in the joined text is a hit in some row: the scan looks no further back than
        # one character, and a newline reads as a row's start).
        texts = [text for row in batch for text in (row["payload"], row["host"], row["source"]) if text]
        if may_hold_secret("\n".join(texts)):
            for row in batch:
                row["payload"] = mask_json(row["payload"])
                if row["host"] is not None:
                    row["host"] = mask_json(row["host"])
                if row["source"]:
                    row["source"] = mask_text(row["source"])
        if not batch:
            return []
        if not self.path.exists():
            self.init()
        with self.connect(read_only=False) as con:
            if not self._is_current(con):
                self._ensure_schema(con)
            con.execute("BEGIN")
            try:
                results = self._append_in_tx(con, batch, None)
                if record is not None:
                    record(con, results)
                con.execute("COMMIT")
            except BaseException:
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
        return results

    def _row(self, event: Event) -> dict[str, Any]:
        # model_dump_json runs in pydantic-core: ~3x faster than model_dump + json.dumps.
        # Every writer passes here: secrets are masked once, for every event (schemas.secrets).
        payload = mask_json(event.model_dump_json(exclude=set(EventEnvelope.ENVELOPE_FIELDS)))
        recorded_at = event.recorded_at or self.clock()
        return {
            "seq": None,
            "event_id": str(event.event_id),
            "type": event.type,
            "schema_version": event.schema_version,
            "stream": event.stream or event.default_stream(),
            "stream_version": event.stream_version,
            "recorded_at": recorded_at,
            "actor_kind": event.actor.kind,
            "actor_name": event.actor.name,
            "session_id": event.session_id,
            "causation_id": str(event.causation_id) if event.causation_id else None,
            "correlation_id": str(event.correlation_id) if event.correlation_id else None,
            "source": mask_text(event.source) if event.source else event.source,
            "host": mask_json(event.host.model_dump_json()) if event.host is not None else None,
            "payload": payload,
            "occurred_at": event.occurred_at,
        }

    def _append_in_tx(
        self, con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], expected_version: int | None
    ) -> list[AppendResult]:
        ids_table = pa.table({"event_id": [row["event_id"] for row in rows]})
        con.register("incoming_ids", ids_table)
        stored = {
            str(record[0]): record[1:]
            for record in con.execute(
                f"SELECT e.event_id, e.seq, e.stream, e.stream_version, {', '.join('e.' + c for c in _IDENTITY)} "
                "FROM events e JOIN incoming_ids i ON e.event_id = i.event_id::UUID"
            ).fetchall()
        }
        con.unregister("incoming_ids")
        fresh = []
        for row in rows:
            old = stored.get(row["event_id"])
            if old is None:
                fresh.append(row)
            elif _identity(dict(zip(_IDENTITY, old[3:]))) != _identity(row):
                raise EventIdReused(f"event_id {row['event_id']} is already stored with other content")

        streams = sorted({row["stream"] for row in fresh})
        heads: dict[str, int] = {}
        if streams:
            heads = dict(
                con.execute(
                    "SELECT stream, max(stream_version) FROM events WHERE stream IN "
                    f"(SELECT unnest(?::VARCHAR[])) GROUP BY stream",
                    [streams],
                ).fetchall()
            )
        if expected_version is not None and fresh:
            stream = fresh[0]["stream"]
            actual = heads.get(stream, 0)
            if actual != expected_version:
                raise ConcurrencyConflict(stream, expected_version, actual)

        targets = [json.loads(row["payload"])["retracted_event_id"] for row in fresh if row["type"] == "event_retracted"]
        if targets:
            batch_ids = {row["event_id"] for row in fresh}
            known = {
                str(r[0]) for r in con.execute(
                    "SELECT event_id FROM events WHERE event_id IN (SELECT unnest(?::UUID[]))", [targets]
                ).fetchall()
            }
            missing = [t for t in targets if t not in known and t not in batch_ids]
            if missing:
                raise NotFound(f"event_retracted: no event {missing[0]} to retract")
        head_seq = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
        for row in fresh:
            head_seq += 1
            row["seq"] = head_seq
            version = heads.get(row["stream"], 0) + 1
            if row["stream_version"] is not None and row["stream_version"] != version:
                raise ConcurrencyConflict(row["stream"], row["stream_version"] - 1, version - 1)
            row["stream_version"] = version
            heads[row["stream"]] = version

        if fresh:
            head_before = fresh[0]["seq"] - 1
            table = pa.Table.from_pydict(
                {name: [row[name] for row in fresh] for name in _ARROW_SCHEMA.names}, schema=_ARROW_SCHEMA
            )
            con.register("incoming", table)
            con.execute(
                "INSERT INTO events SELECT seq, event_id::UUID, type, schema_version, stream, "
                "stream_version, recorded_at, actor_kind, actor_name, session_id, "
                "causation_id::UUID, correlation_id::UUID, source, host::JSON, payload::JSON, occurred_at FROM incoming"
            )
            con.unregister("incoming")
            projections.apply(con, head_before, {row["type"] for row in fresh})

        results = []
        for row in rows:
            old = stored.get(row["event_id"])
            if old is None:
                results.append(AppendResult(UUID(row["event_id"]), row["seq"], row["stream"], row["stream_version"]))
            else:
                results.append(AppendResult(UUID(row["event_id"]), old[0], old[1], old[2], duplicate=True))
        return results

    @staticmethod
    def _insert_samples(con: duckdb.DuckDBPyConnection, event_id: UUID, samples: pa.Table) -> None:
        con.register("samples", samples)
        con.execute(
            "INSERT INTO bench_samples SELECT ?::UUID, request_index, ok, ttft_ms, e2e_ms, tpot_ms, "
            "prompt_tokens, output_tokens, itl_ms, error FROM samples",
            [str(event_id)],
        )
        con.unregister("samples")

    # --- reading ------------------------------------------------------------------

    def head(self) -> int:
        """The highest ``seq`` stored (0 for an empty ledger)."""
        with self.connect() as con:
            return con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]

    def stream_version(self, stream: str) -> int:
        """The version of ``stream`` (0 when it has no events)."""
        with self.connect() as con:
            return con.execute(
                "SELECT coalesce(max(stream_version), 0) FROM events WHERE stream = ?", [stream]
            ).fetchall()[0][0]

    def read(
        self,
        *,
        after_seq: int = 0,
        types: Iterable[str] | None = None,
        session_id: str | None = None,
        stream: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Event]:
        """Events in ``seq`` order (oldest first unless ``newest_first``), as current models.

        Filters combine with AND; ``types`` matches any of the given type names.
        """
        where, params = ["seq > ?"], [after_seq]
        type_list = list(types or [])
        if type_list:
            where.append("type IN (SELECT unnest(?::VARCHAR[]))")
            params.append(type_list)
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if stream is not None:
            where.append("stream = ?")
            params.append(stream)
        sql = f"SELECT {', '.join(_COLUMNS)} FROM events WHERE {' AND '.join(where)} ORDER BY seq"
        if newest_first:
            sql += " DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self.connect() as con:
            rows = con.execute(sql, params).fetchall()
        return [row_to_event(dict(zip(_COLUMNS, row))) for row in rows]

    def get(self, event_id: str | UUID) -> Event:
        """The event with this id (a unique prefix of at least 8 hex digits also works).

        Raises:
            NotFound: no such event, or the prefix is ambiguous.
        """
        text = str(event_id).strip().lower()
        if re.fullmatch(r"[0-9a-f]{32}", text):
            text = str(UUID(text))  # the undashed hex spelling of a full id
        if not _ID_PREFIX.fullmatch(text):
            raise NotFound(f"event {event_id} not found (not an event id or an 8+ digit prefix of one)")
        with self.connect() as con:
            if len(text) == 36:
                rows = con.execute(
                    f"SELECT {', '.join(_COLUMNS)} FROM events WHERE event_id = ?::UUID", [text]
                ).fetchall()
            elif len(text) >= 8:
                rows = con.execute(
                    f"SELECT {', '.join(_COLUMNS)} FROM events WHERE starts_with(event_id::VARCHAR, ?) LIMIT 2",
                    [text],
                ).fetchall()
            else:
                rows = []
        if len(rows) != 1:
            if len(rows) > 1:
                raise NotFound(
                    f"event id prefix {event_id} is ambiguous ({rows[0][1]}, {rows[1][1]}, ...): give more digits"
                )
            raise NotFound(f"event {event_id} not found")
        return row_to_event(dict(zip(_COLUMNS, rows[0])))

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run one trusted read query (views included) and return an Arrow table."""
        with self.connect() as con:
            return con.sql(sql, params=list(params) if params else None).to_arrow_table()


def row_to_event(row: dict[str, Any]) -> Event:
    """Turn one stored ``events`` row into its current-version model (upcasting).

    Raises:
        InvalidInput: the stored row does not validate (names seq and event_id).
    """
    payload = row["payload"]
    payload = json.loads(payload) if isinstance(payload, str) else payload
    host = row["host"]
    host = json.loads(host) if isinstance(host, str) else host
    data = {
        **payload,
        "type": row["type"],
        "schema_version": row["schema_version"],
        "event_id": row["event_id"],
        "seq": row["seq"],
        "stream": row["stream"],
        "stream_version": row["stream_version"],
        "recorded_at": row["recorded_at"],
        "actor": {"kind": row["actor_kind"], "name": row["actor_name"]},
        "session_id": row["session_id"],
        "causation_id": row["causation_id"],
        "correlation_id": row["correlation_id"],
        "source": row["source"],
        "host": host,
        "occurred_at": row.get("occurred_at"),
    }
    try:
        return parse_event(data)
    except ValueError as exc:
        raise InvalidInput(f"stored event seq {row['seq']} ({row['event_id']}) does not read: {exc}") from exc
