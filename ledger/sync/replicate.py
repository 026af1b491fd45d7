"""Sync a local ledger with a PostgreSQL hub: push what the hub lacks, then pull what we lack.

Events are immutable and carry UUIDv7 ids, so sync is a set union, idempotent by
``event_id``; the same id with other content is refused (``EventIdReused``, exit 8)
before anything is applied on either side (the push is one hub transaction and runs
first; pulling stops at the first refused batch, whose transaction is rolled back).

Push: every local event without a ``sync_events`` row goes up in one COPY and one hub
transaction, in ``seq`` order, with its ``origin_seq`` (its ``seq`` here) and its
``seen_position`` (the highest hub position pulled here before it was appended). The
hub's positions of the pushed events are then recorded locally. A push interrupted
after the hub's commit is simply pushed again: the hub returns the stored positions.

Pull: the hub events of other ledgers after this ledger's ``pulled_position``, up to the
hub head read at the start, in hub order and batches of ``batch`` events; each batch is
appended through ``ledger.write.replicated`` (its rules, then the store's column path: one
``INSERT ... SELECT``, seq and stream versions numbered in SQL) together with its
``sync_events`` rows and the new ``pulled_position``, in one local transaction. An interrupted pull (Ctrl-C,
a dropped connection, SIGKILL) leaves a prefix of the hub's order and resumes after it.

Held back: one id with two contents blocks every later sync (exit 8) until the user
holds it back from that remote (``sync --hold-back ID``, recorded in ``sync_held``).
Events are immutable and no command deletes one, so each side keeps its own version:
a held id is neither pushed nor pulled again, everything else syncs, and every sync
report names the held ids.

Concurrent events: event X *saw* event Y when they come from one ledger and X came
later there, or when Y's hub position is at most X's ``seen_position``. Two triages of
one candidate that did not see each other were appended concurrently (offline): the
``sync_conflicts`` view reports the candidate until a later triage that saw both.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import duckdb
import pyarrow as pa
from uuid6 import uuid7

from ledger.errors import EventIdReused, InvalidInput, NotFound
from ledger.store import AppendResults, LedgerStore, columns_table
from ledger.sync import hub
from ledger.sync.pulled_rows import HeldRow, check_rows
from ledger.sync.remote import REMOTES_DDL, Remote
from ledger.write import replicated
from schemas.secrets import holds_secret

#: How many events one pull transaction applies.
PULL_BATCH = 50_000

SYNC_STATE_DDL = """
CREATE TABLE IF NOT EXISTS sync_state (
    remote           VARCHAR PRIMARY KEY,
    pulled_position  BIGINT NOT NULL,
    hub_position     BIGINT NOT NULL,
    last_sync_at     TIMESTAMPTZ,
    last_pushed      BIGINT NOT NULL DEFAULT 0,
    last_pulled      BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sync_held (
    remote     VARCHAR NOT NULL,
    event_id   UUID NOT NULL,
    held_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (remote, event_id)
);
CREATE TABLE IF NOT EXISTS sync_invalid (
    remote     VARCHAR NOT NULL,
    position   BIGINT NOT NULL,
    event_id   VARCHAR NOT NULL,
    reason     VARCHAR NOT NULL,
    held_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (remote, position)
);
"""

_TO_PUSH = """
WITH pulled AS (SELECT seq, position FROM sync_events WHERE origin_ledger <> ?::UUID),
held AS (SELECT unnest(?::UUID[]) AS event_id),  -- the ids held back from this remote
todo AS (SELECT e.* FROM events e ANTI JOIN sync_events s ON s.event_id = e.event_id
         ANTI JOIN held h ON h.event_id = e.event_id)
SELECT t.event_id::VARCHAR AS event_id, t.type, t.schema_version, t.stream, t.stream_version,
       t.recorded_at::VARCHAR AS recorded_at,  -- ISO text: PostgreSQL parses it; no datetime objects
       t.actor_kind, t.actor_name, t.session_id, t.causation_id::VARCHAR AS causation_id,
       t.correlation_id::VARCHAR AS correlation_id, t.source, t.host::VARCHAR AS host,
       t.payload::VARCHAR AS payload, t.seq AS origin_seq, coalesce(p.position, 0) AS seen_position,
       t.occurred_at::VARCHAR AS occurred_at
FROM todo t ASOF LEFT JOIN pulled p ON t.seq > p.seq
ORDER BY t.seq
"""


@dataclass(frozen=True)
class SyncCounts:
    """Events waiting each way: ``to_push`` (local, not on the hub), ``to_pull`` (hub, not here),
    and the ids a push would be ``refused`` for (on the hub with other content: exit 8)."""

    to_push: int
    to_pull: int
    refused: tuple[str, ...] = ()


@dataclass(frozen=True)
class SyncReport:
    """What a sync did: events ``pushed`` (``stored`` of them new to the hub), events
    ``pulled`` (``applied`` of them new here), the hub ``position`` reached, and the ids
    ``held`` back from this remote (``sync --hold-back``), sorted."""

    remote: str
    pushed: int
    stored: int
    pulled: int
    applied: int
    position: int
    held: tuple[str, ...] = ()
    #: Hub rows held back by this sync because they fail an append's checks (``pulled_rows``).
    invalid: tuple[HeldRow, ...] = ()
    #: Hub rows held back as invalid in all (this sync's and earlier ones' still failing).
    invalid_total: int = 0


@dataclass(frozen=True)
class SyncStatus:
    """The last sync with a remote, as the TUI shows it (``last_sync_at`` None: never)."""

    remote: str
    url: str
    last_sync_at: datetime | None
    pulled_position: int
    to_push: int
    held: int = 0
    #: Hub positions held back as invalid and not yet applied (``sync_invalid``): counted and
    #: listed by ``remote list`` until a sync applies them.
    invalid_positions: tuple[int, ...] = ()


def _ensure_in(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(REMOTES_DDL)
    con.execute(SYNC_STATE_DDL)


def _prepare(store: LedgerStore) -> None:
    """Make sure the file exists and is current (its ``sync_events`` table included)."""
    if not store.path.exists():
        store.init()
    store.ensure_current()


def ensure_tables(store: LedgerStore) -> None:
    """Create the ledger (if needed) and its sync tables (``sync_events`` comes with the store)."""
    _prepare(store)
    with store.connect(read_only=False) as con:
        _ensure_in(con)


def _identity_in(con: duckdb.DuckDBPyConnection) -> tuple[UUID, str]:
    values = dict(
        con.execute(
            "SELECT key, value FROM ledger_meta WHERE key IN ('ledger_id', 'ledger_name')"
        ).fetchall()
    )
    if "ledger_id" not in values:
        values["ledger_id"] = str(uuid7())
        if "ledger_name" not in values:
            name = os.environ.get("TUNELEDGER_HOST_NAME") or socket.gethostname()
            check_name(name, "TUNELEDGER_HOST_NAME (or the host name)")
            values["ledger_name"] = name
        con.execute(
            "INSERT OR REPLACE INTO ledger_meta VALUES ('ledger_id', ?), ('ledger_name', ?)",
            [values["ledger_id"], values["ledger_name"]],
        )
    return UUID(values["ledger_id"]), values["ledger_name"]


def identity(store: LedgerStore) -> tuple[UUID, str]:
    """This ledger's id and name on hubs, created on first use.

    The name is ``TUNELEDGER_HOST_NAME``, else the host name; it is what other hosts'
    timelines show for events that came from here.
    """
    _prepare(store)
    with store.connect(read_only=False) as con:
        return _identity_in(con)


def check_name(name: str, what: str = "--as") -> None:
    """Refuse a ledger name that holds a secret: it goes to the hub and every host that pulls
    (``ledgers.name``, ``sync_events.origin_name``), in clear.

    Raises:
        InvalidInput: names the option (exit 3).
    """
    if holds_secret(name):
        raise InvalidInput(
            f"{what}: the name holds a secret (a token or a password) and would be sent to the "
            "hub and every host in clear: name this ledger otherwise"
        )


def set_name(store: LedgerStore, name: str) -> None:
    """Name this ledger on hubs (only events pushed for the first time carry a new name).

    Raises:
        InvalidInput: the name holds a secret (``check_name``).
    """
    check_name(name)
    identity(store)
    with store.connect(read_only=False) as con:
        con.execute("INSERT OR REPLACE INTO ledger_meta VALUES ('ledger_name', ?)", [name])


def _pulled_position(con: duckdb.DuckDBPyConnection, remote: Remote) -> int:
    rows = con.execute(
        "SELECT pulled_position FROM sync_state WHERE remote = ?", [remote.name]
    ).fetchall()
    return rows[0][0] if rows else 0


def _held_in(con: duckdb.DuckDBPyConnection, remote: Remote) -> list[str]:
    """The ids held back from ``remote``, sorted (none before the first sync table exists)."""
    if not con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'sync_held'").fetchall():
        return []
    return [
        row[0]
        for row in con.execute(
            "SELECT event_id::VARCHAR FROM sync_held WHERE remote = ? ORDER BY event_id",
            [remote.name],
        ).fetchall()
    ]


def hold_back(store: LedgerStore, remote: Remote, event_ids: Iterable[str]) -> list[str]:
    """Hold ``event_ids`` back from ``remote`` for good: never pushed there, never pulled from it.

    For an id the hub holds with other content than this ledger (the exit-8 refusal):
    each side keeps its version, nothing is deleted anywhere, and the rest syncs again.
    Returns the ids as stored (canonical UUID text). Idempotent.

    Raises:
        InvalidInput: an id is not a UUID (exit 3).
        NotFound: this ledger holds no event with that id (a typo would hide a good
            event from the hub; exit 5).
    """
    ids = []
    for text in event_ids:
        try:
            ids.append(str(UUID(text.strip())))
        except ValueError:
            raise InvalidInput(f"--hold-back {text!r}: not an event id (a UUID)") from None
    _prepare(store)
    with store.connect(read_only=False) as con:
        _ensure_in(con)
        for event_id in ids:
            if not con.execute(
                "SELECT 1 FROM events WHERE event_id = ?::UUID", [event_id]
            ).fetchall():
                raise NotFound(f"--hold-back {event_id}: no such event in {store.path}")
        con.execute(
            "INSERT OR IGNORE INTO sync_held SELECT ?, unnest(?::UUID[]), ?",
            [remote.name, ids, datetime.now(UTC)],
        )
    return ids


def count_to_push(store: LedgerStore, remote: Remote | None = None) -> int:
    """Local events no hub has yet, less those held back from ``remote`` (0 without a ledger)."""
    if not store.path.exists():
        return 0
    with store.connect() as con:
        held = _held_in(con, remote) if remote is not None else []
        return int(
            con.execute(
                "SELECT count(*) FROM events e ANTI JOIN sync_events s ON s.event_id = e.event_id "
                "WHERE e.event_id NOT IN (SELECT unnest(?::UUID[]))",
                [held],
            ).fetchall()[0][0]
        )


def counts(store: LedgerStore, remote: Remote) -> SyncCounts:
    """How many events a sync would push and pull (``sync --dry-run``); changes nothing anywhere.

    Raises:
        RemoteError: the hub cannot be reached or is not initialised.
    """
    state = status(store, remote)  # read-only: a dry run writes nothing here either
    to_pull = count_to_pull(store, remote, state)
    refused: list[str] = []
    ledger_id = read_identity(store)
    if state.to_push and ledger_id is not None:
        with store.connect() as con:
            held = _held_in(con, remote)
            table = con.sql(_TO_PUSH, params=[str(ledger_id), held]).to_arrow_table()
        columns = [table.column(name).to_pylist() for name in hub.COLUMNS]
        with hub.connect(remote) as pg:
            refused = hub.refused_ids(pg, remote, zip(*columns, strict=True))
    return SyncCounts(state.to_push, to_pull, tuple(refused))


def count_to_pull(
    store: LedgerStore, remote: Remote, state: SyncStatus, connect_timeout_s: int = 10
) -> int:
    """Hub events of other ledgers after ``state.pulled_position``, less those held back.

    Reads this ledger read-only and asks the hub (``connect_timeout_s``: seconds to wait
    for it).

    Raises:
        RemoteError: the hub cannot be reached or is not initialised.
    """
    ledger_id = read_identity(store) or UUID(int=0)
    with store.connect() as con:
        held = _held_in(con, remote)
    with hub.connect(remote, connect_timeout_s=connect_timeout_s) as pg:
        return hub.count_pending_pull(pg, remote, ledger_id, state.pulled_position, held)


def status(store: LedgerStore, remote: Remote) -> SyncStatus:
    """The local side of a remote's sync state (no network, read-only): last sync, position, to push."""
    with store.connect() as con:
        tables = {
            row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
        rows = (
            con.execute(
                "SELECT last_sync_at, pulled_position FROM sync_state WHERE remote = ?",
                [remote.name],
            ).fetchall()
            if "sync_state" in tables
            else []
        )
        held = _held_in(con, remote)
        invalid = (
            con.execute(
                "SELECT position FROM sync_invalid WHERE remote = ? ORDER BY position",
                [remote.name],
            ).fetchall()
            if "sync_invalid" in tables
            else []
        )
    last, position = rows[0] if rows else (None, 0)
    return SyncStatus(
        remote.name,
        remote.display_url,
        last,
        position,
        count_to_push(store, remote),
        len(held),
        tuple(int(row[0]) for row in invalid),
    )


def read_identity(store: LedgerStore) -> UUID | None:
    """This ledger's id on hubs, read-only (None before its first sync or ``remote add``)."""
    with store.connect() as con:
        rows = con.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'").fetchall()
    return UUID(rows[0][0]) if rows else None


@dataclass
class _Pushed:
    """A push whose hub positions are still to be recorded locally."""

    table: pa.Table
    positions: dict[str, int]
    ledger_id: UUID
    ledger_name: str

    def record(self, con: duckdb.DuckDBPyConnection, remote: Remote) -> None:
        if self.table.num_rows == 0:
            return
        ids = self.table.column("event_id").to_pylist()
        record = pa.table(
            {
                "event_id": ids,
                "position": [self.positions[i] for i in ids],
                "origin_seq": self.table.column("origin_seq"),
                "origin_stream_version": self.table.column("stream_version"),
                "seen_position": self.table.column("seen_position"),
            }
        )
        con.register("pushed", record)
        con.execute(
            "INSERT OR IGNORE INTO sync_events SELECT event_id::UUID, origin_seq, ?, position, ?::UUID, ?, "
            "origin_seq, origin_stream_version, seen_position FROM pushed",
            [remote.name, str(self.ledger_id), self.ledger_name],
        )
        con.unregister("pushed")


def _record_invalid(
    con: duckdb.DuckDBPyConnection,
    remote: Remote,
    invalid: list[HeldRow],
    applied: list[int],
    now: datetime,
) -> None:
    """Rows held back as invalid recorded (with this sync's other bookkeeping, in its
    transaction), and rows held back before that now applied, forgotten."""
    if applied:
        con.execute(
            "DELETE FROM sync_invalid WHERE remote = ? AND position IN (SELECT unnest(?::BIGINT[]))",
            [remote.name, applied],
        )
    if invalid:
        con.executemany(
            "INSERT OR REPLACE INTO sync_invalid VALUES (?, ?, ?, ?, ?)",
            [[remote.name, row.position, row.event_id, row.reason, now] for row in invalid],
        )


def _recorder(
    remote: Remote,
    batch: list[tuple[Any, ...]],
    position: int,
    hub_head: int,
    now: datetime,
    pushed: _Pushed | None,
    invalid: list[HeldRow],
    retried: bool,
) -> Callable[[duckdb.DuckDBPyConnection, AppendResults], None]:
    columns = dict(zip(hub.PULL_COLUMNS, zip(*batch, strict=True), strict=True))

    def record(con: duckdb.DuckDBPyConnection, results: AppendResults) -> None:
        if pushed is not None:
            pushed.record(con, remote)
        _record_invalid(con, remote, invalid, list(columns["position"]) if retried else [], now)
        table = pa.table(
            {
                "event_id": columns["event_id"],
                "seq": pa.array(results.seqs, pa.int64()),
                "position": columns["position"],
                "origin_ledger": columns["origin_ledger"],
                "origin_name": columns["origin_name"],
                "origin_seq": columns["origin_seq"],
                "origin_stream_version": columns["stream_version"],
                "seen_position": columns["seen_position"],
            }
        )
        con.register("pulled_rows", table)
        con.execute(
            "INSERT OR IGNORE INTO sync_events SELECT event_id::UUID, seq, ?, position, origin_ledger::UUID, "
            "origin_name, origin_seq, origin_stream_version, seen_position FROM pulled_rows",
            [remote.name],
        )
        con.unregister("pulled_rows")
        _save_state(con, remote, position, hub_head, now, pulled=len(batch))

    return record


def _save_state(
    con: duckdb.DuckDBPyConnection,
    remote: Remote,
    position: int,
    hub_head: int,
    now: datetime,
    *,
    pushed: int | None = None,
    pulled: int | None = None,
) -> None:
    con.execute(
        "INSERT INTO sync_state (remote, pulled_position, hub_position, last_sync_at, last_pushed, last_pulled) "
        "VALUES (?, ?, ?, ?, coalesce(?, 0), coalesce(?, 0)) ON CONFLICT (remote) DO UPDATE SET "
        "pulled_position = greatest(sync_state.pulled_position, excluded.pulled_position), "
        "hub_position = excluded.hub_position, last_sync_at = excluded.last_sync_at, "
        "last_pushed = coalesce(?, sync_state.last_pushed), last_pulled = coalesce(?, sync_state.last_pulled)",
        [remote.name, position, hub_head, now, pushed, pulled, pushed, pulled],
    )


def _pull_table(batch: list[tuple[Any, ...]]) -> pa.Table:
    """Hub rows as ``append_replicated`` takes them: one Arrow column per ``events`` column
    (no dict per event; the hub's ``stream_version`` is dropped: versions are local)."""
    columns = dict(zip(hub.PULL_COLUMNS, zip(*batch, strict=True), strict=True))
    del columns["stream_version"]
    return columns_table(columns, len(batch))


def _pull_rows(batch: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Hub rows as ``append_replicated`` takes them (ids are text already)."""
    return [
        {
            "event_id": event_id,
            "type": type_,
            "schema_version": version,
            "stream": stream,
            "recorded_at": recorded_at,
            "actor_kind": actor_kind,
            "actor_name": actor_name,
            "session_id": session_id,
            "causation_id": causation_id,
            "correlation_id": correlation_id,
            "source": source,
            "host": host,
            "payload": payload,
            "seq": None,
            "stream_version": None,
            "occurred_at": occurred_at,
        }
        for (
            _pos,
            event_id,
            type_,
            version,
            stream,
            _sv,
            recorded_at,
            actor_kind,
            actor_name,
            session_id,
            causation_id,
            correlation_id,
            source,
            host,
            payload,
            _origin,
            _name,
            _oseq,
            _seen,
            occurred_at,
        ) in batch
    ]


def sync(
    store: LedgerStore,
    remote: Remote,
    *,
    batch: int = PULL_BATCH,
    progress: Callable[[str, int], None] | None = None,
) -> SyncReport:
    """Push what the hub lacks, then pull what this ledger lacks (see the module docstring).

    ``progress(phase, n)`` is called after the push (``"pushed"``) and each pulled batch
    (``"pulled"``, the running total).

    Raises:
        EventIdReused: one id with two contents (exit 8); nothing of this sync applied.
        RemoteError: the hub cannot be reached, refused, or is not initialised (exit 9).
        LedgerBusy: the local file stayed locked.
    """
    # The file is kept open for the whole sync (one open and one close; another process that
    # waits for it still gets it within the hand-off time) and let go at the end.
    store = store.kept_open()
    try:
        return _sync(store, remote, batch, progress)
    finally:
        store.close()


def _sync(
    store: LedgerStore,
    remote: Remote,
    batch: int,
    progress: Callable[[str, int], None] | None,
) -> SyncReport:
    _prepare(store)
    now = datetime.now(UTC)
    with store.connect(read_only=False) as con:
        _ensure_in(con)
        ledger_id, ledger_name = _identity_in(con)
        after = _pulled_position(con, remote)
        held = _held_in(con, remote)
        table = con.sql(_TO_PUSH, params=[str(ledger_id), held]).to_arrow_table()
        invalid_before = [
            row[0]
            for row in con.execute(
                "SELECT position FROM sync_invalid WHERE remote = ? ORDER BY position",
                [remote.name],
            ).fetchall()
        ]
    pull = _Pull(store, remote, now, set(held), ledger_id)
    with hub.connect(remote) as pg:
        stored = 0
        if table.num_rows:
            columns = [table.column(name).to_pylist() for name in hub.COLUMNS]
            result = hub.push(pg, remote, ledger_id, ledger_name, zip(*columns, strict=True))
            pull.pending = _Pushed(table, result.positions, ledger_id, ledger_name)
            pull.pushed_positions = set(result.positions.values())
            stored = result.stored
        if progress:
            progress("pushed", table.num_rows)
        pull.hub_head = hub.head(pg, remote)
        pg.commit()
        if invalid_before:  # held back as invalid by an earlier sync: may read now (an upgrade)
            pull.apply(hub.rows_at(pg, remote, invalid_before), after, retried=True)
            pg.commit()
        while True:
            rows = hub.pull(pg, remote, ledger_id, after, pull.hub_head, batch)
            last = len(rows) < batch
            position = pull.hub_head if last else rows[-1][0]
            rows = pull.with_unknown_own(pg, rows, after, position)
            pg.commit()
            if not rows:
                break
            pull.apply(rows, position)
            if progress:
                progress("pulled", pull.pulled)
            after = position
            if last:
                break
    with store.connect(read_only=False) as con:
        if pull.pending is not None:
            pull.pending.record(con, remote)
        _save_state(
            con,
            remote,
            pull.hub_head,
            pull.hub_head,
            now,
            pushed=table.num_rows,
            pulled=pull.pulled,
        )
        invalid_total = con.execute(
            "SELECT count(*) FROM sync_invalid WHERE remote = ?", [remote.name]
        ).fetchall()[0][0]
    return SyncReport(
        remote.name,
        table.num_rows,
        stored,
        pull.pulled,
        pull.applied,
        pull.hub_head,
        tuple(held),
        tuple(pull.invalid),
        int(invalid_total),
    )


@dataclass
class _Pull:
    """One sync's pull: what it applied and held back so far, and what it must record with its
    first batch (``pending``: the push's positions)."""

    store: LedgerStore
    remote: Remote
    now: datetime
    held: set[str]
    ledger_id: UUID
    hub_head: int = 0
    pending: _Pushed | None = None
    pushed_positions: set[int] = field(default_factory=set)
    pulled: int = 0
    applied: int = 0
    invalid: list[HeldRow] = field(default_factory=list)

    def with_unknown_own(
        self, pg: Any, rows: list[tuple[Any, ...]], after: int, position: int
    ) -> list[tuple[Any, ...]]:
        """``rows`` and, in hub order among them, the rows after ``after`` up to ``position``
        that name this ledger as their origin but that it never pushed (another writer's, or
        this ledger's from before a restore): pulled like any other row, never skipped unseen."""
        own = [
            p
            for p in hub.own_positions(pg, self.remote, self.ledger_id, after, position)
            if p not in self.pushed_positions
        ]
        if not own:
            return rows
        with self.store.connect() as con:
            known = {
                row[0]
                for row in con.execute(
                    "SELECT position FROM sync_events WHERE remote = ? "
                    "AND position IN (SELECT unnest(?::BIGINT[]))",
                    [self.remote.name, own],
                ).fetchall()
            }
        unknown = [p for p in own if p not in known]
        if not unknown:
            return rows
        return sorted([*rows, *hub.rows_at(pg, self.remote, unknown)], key=lambda row: row[0])

    def stored_types(self, ids: list[UUID]) -> dict[UUID, str]:
        with self.store.connect() as con:
            return {
                UUID(event_id): kind
                for event_id, kind in con.execute(
                    "SELECT event_id::VARCHAR, type FROM events "
                    "WHERE event_id IN (SELECT unnest(?::UUID[]))",
                    [[str(i) for i in ids]],
                ).fetchall()
            }

    def apply(self, rows: list[tuple[Any, ...]], position: int, *, retried: bool = False) -> None:
        """Store one batch's valid rows and record the rest as held back, in one transaction,
        with the pull's position (``retried``: rows held back before, tried again)."""
        kept = [row for row in rows if row[1] not in self.held] if self.held else rows
        kept, invalid = check_rows(kept, self.stored_types)
        if kept:
            self.applied += _apply_pulled(self, kept, position, invalid, retried).applied
        else:  # nothing of the batch to store: the bookkeeping alone, in one transaction
            with self.store.connect(read_only=False) as con:
                if self.pending is not None:
                    self.pending.record(con, self.remote)
                _record_invalid(con, self.remote, invalid, [], self.now)
                _save_state(con, self.remote, position, self.hub_head, self.now, pulled=len(rows))
        self.pending = None
        if not retried:  # (rows held back before and still failing are not news)
            self.pulled += len(rows)
            self.invalid.extend(invalid)


def _apply_pulled(
    pull: _Pull,
    rows: list[tuple[Any, ...]],
    position: int,
    invalid: list[HeldRow],
    retried: bool,
) -> AppendResults:
    """Append one pulled batch with its bookkeeping; a reused id is named with the way out."""
    remote = pull.remote
    record = _recorder(
        remote, rows, position, pull.hub_head, pull.now, pull.pending, invalid, retried
    )
    try:
        return replicated.append_pulled(
            pull.store, _pull_table(rows), record=record, where=f"rows pulled from {remote.name}"
        )
    except EventIdReused as error:
        if error.event_id is None:
            raise
        raise EventIdReused(
            f"event_id {error.event_id} is on remote {remote.name} with other content than here; "
            f"nothing of this pull was applied. {hub.hold_back_advice(remote, error.event_id)}",
            event_id=error.event_id,
        ) from None
