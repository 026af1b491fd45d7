"""The team hub on PostgreSQL: its schema, and the queries that push to it and pull from it.

Layout (in one schema per team or project; created by ``tuneledger remote init``):

``events``    one row per event: ``position`` (the hub's global position, gapless,
              in commit order), the ledger envelope columns, ``payload`` and ``host``
              as JSONB (a team can query the hub with plain SQL), and where it came
              from: ``origin_ledger`` (``ledgers.ledger_id``), ``origin_seq`` (its ``seq``
              there), ``stream_version`` (its version there) and ``seen_position`` (the
              highest hub position that ledger had pulled when it appended the event;
              with the origin this orders concurrent events, see ``ledger.sync.replicate``).
``ledgers``   every ledger that pushed: ``ledger_id``, ``name`` (the host's name).
``hub_head``  one row: the highest position handed out.

Append-only by construction: triggers refuse UPDATE, DELETE and TRUNCATE of ``events``
and ``ledgers`` for every role, the owner's included, and refuse moving ``hub_head``
backwards or deleting it; writer roles are granted only SELECT and INSERT on those
tables (and UPDATE of the one ``hub_head`` row, which is how positions are handed out).

Positions: a push locks the ``hub_head`` row (``SELECT ... FOR UPDATE``), inserts the
new events at ``head + 1 ...`` and moves the head, all in one transaction. The row lock
serialises pushers until commit, so positions are gapless (a rolled-back push rolls
the head back too) and in commit order: a reader that sees head ``H`` sees every event
at or below ``H``, so pulling by "position > last pulled" never skips one. A plain
sequence would give neither (sequences leave gaps and hand out numbers before commit).

Raises ``RemoteError`` (exit 9) when the hub cannot be reached or is not initialised.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from ledger.errors import EventIdReused, RemoteError
from ledger.sync.remote import Remote, mask_url

#: Bump when the hub's table layout changes.
HUB_LAYOUT_VERSION = 1

#: The envelope columns pushed and pulled, in COPY order (``host``/``payload`` are JSON text).
COLUMNS = (
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
    "origin_seq",
    "seen_position",
    "occurred_at",
)

#: Columns that make two events with one id the same event (as ``ledger.store._IDENTITY``).
IDENTITY = ("type", "payload", "session_id", "causation_id", "correlation_id", "host")

_DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.hub_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {schema}.ledgers (
    ledger_id   uuid PRIMARY KEY,
    name        text NOT NULL,
    first_push  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}.hub_head (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    position  bigint NOT NULL CHECK (position >= 0)
);
INSERT INTO {schema}.hub_head VALUES (true, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS {schema}.events (
    position        bigint PRIMARY KEY,
    event_id        uuid NOT NULL UNIQUE,
    type            text NOT NULL,
    schema_version  integer NOT NULL,
    stream          text NOT NULL,
    stream_version  bigint NOT NULL,
    recorded_at     timestamptz NOT NULL,
    actor_kind      text NOT NULL,
    actor_name      text NOT NULL,
    session_id      text,
    causation_id    uuid,
    correlation_id  uuid,
    source          text,
    host            jsonb,
    payload         jsonb NOT NULL,
    origin_ledger   uuid NOT NULL,  -- a ledgers row, inserted by the same push (no FK: a per-row check)
    origin_seq      bigint NOT NULL,
    seen_position   bigint NOT NULL,
    pushed_at       timestamptz NOT NULL DEFAULT now(),
    occurred_at     timestamptz
);
-- hubs created before events carried occurred_at
ALTER TABLE {schema}.events ADD COLUMN IF NOT EXISTS occurred_at timestamptz;

CREATE OR REPLACE FUNCTION {schema}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'tuneledger hub: % on %.% refused: the hub is append-only',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE OR REPLACE FUNCTION {schema}.head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.position < OLD.position THEN
        RAISE EXCEPTION 'tuneledger hub: hub_head may only move forward' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS append_only ON {schema}.events;
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {schema}.events
    FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_change();
DROP TRIGGER IF EXISTS append_only_truncate ON {schema}.events;
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {schema}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change();
DROP TRIGGER IF EXISTS append_only ON {schema}.ledgers;
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {schema}.ledgers
    FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_change();
DROP TRIGGER IF EXISTS append_only_truncate ON {schema}.ledgers;
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {schema}.ledgers
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change();
DROP TRIGGER IF EXISTS forward_only ON {schema}.hub_head;
CREATE TRIGGER forward_only BEFORE UPDATE ON {schema}.hub_head
    FOR EACH ROW EXECUTE FUNCTION {schema}.head_forward_only();
DROP TRIGGER IF EXISTS keep_head ON {schema}.hub_head;
CREATE TRIGGER keep_head BEFORE DELETE ON {schema}.hub_head
    FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_change();
DROP TRIGGER IF EXISTS keep_head_truncate ON {schema}.hub_head;
CREATE TRIGGER keep_head_truncate BEFORE TRUNCATE ON {schema}.hub_head
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change();
INSERT INTO {schema}.hub_meta VALUES ('layout_version', '{layout}') ON CONFLICT DO NOTHING;
"""

#: The staging table a push COPYs into (per session, emptied at commit).
_INCOMING_DDL = """
CREATE TEMP TABLE IF NOT EXISTS incoming (
    event_id uuid NOT NULL, type text NOT NULL, schema_version integer NOT NULL, stream text NOT NULL,
    stream_version bigint NOT NULL, recorded_at timestamptz NOT NULL, actor_kind text NOT NULL,
    actor_name text NOT NULL, session_id text, causation_id uuid, correlation_id uuid, source text,
    host jsonb, payload jsonb NOT NULL, origin_seq bigint NOT NULL, seen_position bigint NOT NULL,
    occurred_at timestamptz
) ON COMMIT DELETE ROWS
"""

_GRANTS = """
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT ON {schema}.events, {schema}.ledgers TO {role};
GRANT SELECT ON {schema}.hub_meta TO {role};
GRANT SELECT, UPDATE ON {schema}.hub_head TO {role};
"""


@dataclass(frozen=True)
class PushResult:
    """What one push did: ``positions`` maps every pushed event_id (text) to its hub position;
    ``stored`` counts events new to the hub (the rest were there already)."""

    positions: dict[str, int]
    stored: int


def _schema(remote: Remote) -> sql.Identifier:
    return sql.Identifier(remote.schema)


@contextmanager
def connect(
    remote: Remote, *, user: str | None = None, connect_timeout_s: int = 10
) -> Iterator[psycopg.Connection]:
    """A connection to the remote's database (libpq finds the password itself).

    A ``psycopg.Error`` inside the block (a dropped connection, a terminated backend)
    also becomes a ``RemoteError``: the transaction in flight is lost on the server,
    which is what makes an interrupted push or pull safe to run again.

    Raises:
        RemoteError: the server cannot be reached, refuses the login, or fails (URL masked).
    """
    extra: dict[str, Any] = {"connect_timeout": connect_timeout_s, "application_name": "tuneledger"}
    if user is not None:
        extra["user"] = user
    try:
        con = psycopg.connect(remote.url, autocommit=False, **extra)
    except psycopg.Error as exc:
        raise RemoteError(
            f"remote {remote.name} ({mask_url(remote.url)}): {_first_line(exc)}"
        ) from None
    try:
        yield con
    except psycopg.Error as exc:
        raise RemoteError(f"remote {remote.name}: {_first_line(exc)}") from None
    finally:
        con.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return mask_url(text[0]) if text else type(exc).__name__


def init_schema(remote: Remote, *, grant: Sequence[str] = (), user: str | None = None) -> None:
    """Create the hub's schema, tables and triggers (idempotent) and grant writer roles.

    Raises:
        RemoteError: the server refused (e.g. the user may not create the schema).
    """
    schema = _schema(remote)
    statements = sql.SQL(_DDL).format(schema=schema, layout=sql.SQL(str(HUB_LAYOUT_VERSION)))
    with connect(remote, user=user) as con:
        try:
            # Serialise concurrent inits of one database (CREATE ... IF NOT EXISTS races).
            con.execute("SELECT pg_advisory_xact_lock(hashtext('tuneledger-hub-init'))")
            con.execute(statements)
            for role in grant:
                con.execute(sql.SQL(_GRANTS).format(schema=schema, role=sql.Identifier(role)))
            con.commit()
        except psycopg.Error as exc:
            raise RemoteError(
                f"remote {remote.name}: init of schema {remote.schema} failed: {_first_line(exc)}"
            ) from None


@contextmanager
def _failing_as_remote_error(remote: Remote, what: str) -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise RemoteError(f"remote {remote.name}: {what} failed: {_first_line(exc)}") from None


def _check_initialised(con: psycopg.Connection, remote: Remote) -> None:
    with _failing_as_remote_error(remote, "reading the hub"):
        row = con.execute(
            "SELECT to_regclass(%s) IS NOT NULL", [f"{remote.schema}.hub_head"]
        ).fetchone()
    if not row or not row[0]:
        raise RemoteError(
            f"remote {remote.name}: schema {remote.schema} is not a tuneledger hub "
            f"(create it with `tuneledger remote init {remote.name}`)"
        )


def hold_back_advice(remote: Remote, event_id: object) -> str:
    """The sentence every id-reused refusal of a sync ends with: the way out (see ``ledger.sync.replicate``)."""
    return (
        "To keep each side's version and sync the rest: "
        f"tuneledger sync {remote.name} --hold-back {event_id}"
    )


def _copy_incoming(con: psycopg.Connection, rows: Iterable[Sequence[Any]]) -> None:
    """The rows to push into this transaction's temporary ``incoming`` table (one COPY)."""
    con.execute(_INCOMING_DDL)
    with con.cursor().copy(
        sql.SQL("COPY incoming ({}) FROM STDIN").format(
            sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
        )
    ) as copy:
        for row in rows:
            copy.write_row(row)


def _clashes(
    con: psycopg.Connection, remote: Remote, limit: int | None = None
) -> list[tuple[Any, int]]:
    """(event_id, hub position) of the ``incoming`` rows the hub holds with other content,
    in push order (at most ``limit``)."""
    query = sql.SQL(
        "SELECT i.event_id, e.position FROM incoming i JOIN {}.events e USING (event_id) "
        "WHERE ({}) IS DISTINCT FROM ({}) ORDER BY i.origin_seq"
    ).format(
        _schema(remote),
        sql.SQL(", ").join(sql.SQL("i.") + sql.Identifier(c) for c in IDENTITY),
        sql.SQL(", ").join(sql.SQL("e.") + sql.Identifier(c) for c in IDENTITY),
    )
    if limit is not None:
        query = query + sql.SQL(" LIMIT {}").format(sql.Literal(limit))
    return [(row[0], row[1]) for row in con.execute(query).fetchall()]


def refused_ids(
    con: psycopg.Connection, remote: Remote, rows: Iterable[Sequence[Any]]
) -> list[str]:
    """The ids among ``rows`` (as ``push`` takes them) that a push would be refused for: the
    hub holds them with other content (``sync --dry-run``). Writes nothing: the transaction is
    rolled back.

    Raises:
        RemoteError: the hub is not initialised, or the connection failed.
    """
    try:
        _check_initialised(con, remote)
        _copy_incoming(con, rows)
        return [str(event_id) for event_id, _ in _clashes(con, remote)]
    except psycopg.Error as exc:
        raise RemoteError(f"remote {remote.name}: dry run failed: {_first_line(exc)}") from None
    finally:
        con.rollback()


def push(
    con: psycopg.Connection,
    remote: Remote,
    ledger_id: UUID,
    ledger_name: str,
    rows: Iterable[Sequence[Any]],
) -> PushResult:
    """Store ``rows`` (tuples in ``COLUMNS`` order, in local ``seq`` order) on the hub, atomically.

    Events the hub holds already (same ``event_id``, same content) are not stored again.
    The whole push is one transaction: on any error nothing of it is on the hub.

    Raises:
        EventIdReused: an event_id is on the hub with other content (names it; nothing stored).
        RemoteError: the hub is not initialised, or the connection failed.
    """
    schema = _schema(remote)
    try:
        _check_initialised(con, remote)
        # Copying before taking the head lock keeps the serialised part short.
        _copy_incoming(con, rows)
        head = _first(
            con.execute(
                sql.SQL("SELECT position FROM {}.hub_head FOR UPDATE").format(schema)
            ).fetchone()
        )
        clashes = _clashes(con, remote, limit=1)
        if clashes:
            clash = clashes[0]
            con.rollback()
            raise EventIdReused(
                f"event_id {clash[0]} is on remote {remote.name} (position {clash[1]}) with other "
                f"content than here; nothing was pushed or pulled. {hold_back_advice(remote, clash[0])}",
                event_id=str(clash[0]),
            )
        con.execute(
            sql.SQL(
                "INSERT INTO {}.ledgers (ledger_id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
            ).format(schema),
            [ledger_id, ledger_name],
        )
        cols = sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
        inserted = con.execute(
            sql.SQL(
                "INSERT INTO {schema}.events (position, origin_ledger, {cols}) "
                "SELECT %s + row_number() OVER (ORDER BY i.origin_seq), %s, {icols} FROM incoming i "
                "WHERE NOT EXISTS (SELECT 1 FROM {schema}.events e WHERE e.event_id = i.event_id)"
            ).format(
                schema=schema,
                cols=cols,
                icols=sql.SQL(", ").join(sql.SQL("i.") + sql.Identifier(c) for c in COLUMNS),
            ),
            [head, ledger_id],
        ).rowcount
        con.execute(
            sql.SQL("UPDATE {}.hub_head SET position = %s").format(schema), [head + inserted]
        )
        positions = {
            row[0]: row[1]
            for row in con.execute(
                sql.SQL(
                    "SELECT i.event_id::text, e.position FROM incoming i JOIN {}.events e USING (event_id)"
                ).format(schema)
            )
        }
        con.commit()
    except psycopg.Error as exc:
        con.rollback()
        raise RemoteError(f"remote {remote.name}: push failed: {_first_line(exc)}") from None
    return PushResult(positions=positions, stored=inserted)


#: The columns ``pull`` returns, in order.
PULL_COLUMNS = (
    "position",
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
    "origin_ledger",
    "origin_name",
    "origin_seq",
    "seen_position",
    "occurred_at",
)


def head(con: psycopg.Connection, remote: Remote) -> int:
    """The hub's highest position (every event at or below it is committed and visible)."""
    _check_initialised(con, remote)
    with _failing_as_remote_error(remote, "reading the hub head"):
        return int(
            _first(
                con.execute(
                    sql.SQL("SELECT position FROM {}.hub_head").format(_schema(remote))
                ).fetchone()
            )
        )


def pull(
    con: psycopg.Connection, remote: Remote, ledger_id: UUID, after: int, upto: int, limit: int
) -> list[tuple[Any, ...]]:
    """Events at positions ``after < position <= upto`` from other ledgers, in hub order.

    At most ``limit`` rows; ids come back as text, ``host``/``payload`` as JSON text. Rows are
    tuples in ``PULL_COLUMNS`` order.
    """
    query = sql.SQL(
        # ids as text: the local store takes them as strings (no UUID objects to build and format)
        "SELECT e.position, e.event_id::text, e.type, e.schema_version, e.stream, e.stream_version, e.recorded_at, "
        "e.actor_kind, e.actor_name, e.session_id, e.causation_id::text, e.correlation_id::text, e.source, "
        "e.host::text, e.payload::text, e.origin_ledger::text, l.name, e.origin_seq, e.seen_position, "
        "e.occurred_at "
        # LEFT JOIN: a row whose origin has no ledgers row (not written by a push) comes
        # back with a null name, for the pull to hold back and name, never to skip unseen
        "FROM {schema}.events e LEFT JOIN {schema}.ledgers l ON l.ledger_id = e.origin_ledger "
        "WHERE e.position > %s AND e.position <= %s AND e.origin_ledger <> %s ORDER BY e.position LIMIT %s"
    ).format(schema=_schema(remote))
    with _failing_as_remote_error(remote, "pull"), con.cursor(binary=True) as cur:
        cur.execute(query, [after, upto, ledger_id, limit])
        return cur.fetchall()


def own_positions(
    con: psycopg.Connection, remote: Remote, ledger_id: UUID, after: int, upto: int
) -> list[int]:
    """Positions ``after < position <= upto`` of rows that name ``ledger_id`` as their origin
    (the pull compares them with what this ledger pushed: one it never pushed is pulled)."""
    query = sql.SQL(
        "SELECT position FROM {}.events WHERE position > %s AND position <= %s "
        "AND origin_ledger = %s ORDER BY position"
    ).format(_schema(remote))
    with _failing_as_remote_error(remote, "pull"), con.cursor(binary=True) as cur:
        cur.execute(query, [after, upto, ledger_id])
        return [row[0] for row in cur.fetchall()]


def rows_at(
    con: psycopg.Connection, remote: Remote, positions: Sequence[int]
) -> list[tuple[Any, ...]]:
    """The rows at ``positions`` (any origin), as ``pull`` returns them, in hub order."""
    if not positions:
        return []
    query = sql.SQL(
        "SELECT e.position, e.event_id::text, e.type, e.schema_version, e.stream, e.stream_version, e.recorded_at, "
        "e.actor_kind, e.actor_name, e.session_id, e.causation_id::text, e.correlation_id::text, e.source, "
        "e.host::text, e.payload::text, e.origin_ledger::text, l.name, e.origin_seq, e.seen_position, "
        "e.occurred_at "
        "FROM {schema}.events e LEFT JOIN {schema}.ledgers l ON l.ledger_id = e.origin_ledger "
        "WHERE e.position = ANY(%s) ORDER BY e.position"
    ).format(schema=_schema(remote))
    with _failing_as_remote_error(remote, "pull"), con.cursor(binary=True) as cur:
        cur.execute(query, [list(positions)])
        return cur.fetchall()


def _first(row: tuple[Any, ...] | None) -> Any:
    """The first column of a query that always returns one row (``hub_head``, ``count(*)``)."""
    if row is None:  # pragma: no cover - the hub's schema keeps one hub_head row
        raise RuntimeError("a one-row query on the hub returned no row")
    return row[0]


def count_pending_pull(
    con: psycopg.Connection,
    remote: Remote,
    ledger_id: UUID,
    after: int,
    held: Sequence[str] = (),
) -> int:
    """How many hub events after position ``after`` came from other ledgers (``held`` ids not counted)."""
    _check_initialised(con, remote)
    with _failing_as_remote_error(remote, "counting"):
        return int(
            _first(
                con.execute(
                    sql.SQL(
                        "SELECT count(*) FROM {}.events WHERE position > %s AND origin_ledger <> %s "
                        "AND NOT (event_id::text = ANY(%s))"
                    ).format(_schema(remote)),
                    [after, ledger_id, list(held)],
                ).fetchone()
            )
        )
