"""The write layer's and the runners' look-ups of what is stored, as named queries with typed
answers: the types of events a retraction names, a live event that one being appended repeats,
whether a server run's end is recorded, the previous run's startup facts. The rules that use
the answers stay where they are (``ledger.write``, ``runners.server``); the SQL is here
(``tests/project/test_sql_walls.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import duckdb

if TYPE_CHECKING:
    from ledger.store import LedgerStore


def _empty(store: LedgerStore) -> bool:
    return not store.path.exists() or store.path.stat().st_size == 0


def stored_event_ids(store: LedgerStore) -> list[str]:
    """The id of every stored event, retracted ones included, in no set order."""
    table = store.query_arrow("SELECT event_id::VARCHAR AS event_id FROM events")
    return [str(i) for i in table.column("event_id").to_pylist()]


def stored_types(store: LedgerStore, ids: Sequence[UUID]) -> dict[UUID, str]:
    """The type of each of ``ids`` the ledger holds (an empty or missing file holds none)."""
    if _empty(store):
        return {}
    table = store.query_arrow(
        "SELECT event_id, type FROM events WHERE event_id IN (SELECT unnest(?::UUID[]))",
        [[str(i) for i in ids]],
    )
    return {
        UUID(str(event_id)): kind
        for event_id, kind in zip(
            table.column("event_id").to_pylist(), table.column("type").to_pylist(), strict=True
        )
    }


def stored_types_in(con: duckdb.DuckDBPyConnection, ids: list[str]) -> dict[str, str]:
    """The type of each of ``ids`` stored, read through ``con`` (inside a write transaction:
    its own rows so far included). A few ids: one index lookup each (a join with a list scans
    the whole log: 1.8 s in a 100k-event import); many: one join."""
    if len(ids) > 64:
        return {
            str(event_id): kind
            for event_id, kind in con.execute(
                "SELECT event_id, type FROM events WHERE event_id IN (SELECT unnest(?::UUID[]))",
                [ids],
            ).fetchall()
        }
    found = {}
    for i in ids:
        rows = con.execute("SELECT type FROM events WHERE event_id = ?::UUID", [i]).fetchall()
        if rows:
            found[i] = rows[0][0]
    return found


@dataclass(frozen=True)
class StoredEvent:
    """A live event's ``seq``, id and payload (its JSON text, as stored)."""

    seq: int
    event_id: str
    payload: str


def live_of_type(store: LedgerStore, event_type: str, session_id: str | None) -> list[StoredEvent]:
    """The live events of ``event_type`` in ``session_id``, in log order."""
    rows = store.query_arrow(
        "SELECT seq, event_id::VARCHAR AS event_id, payload FROM live_control "
        "WHERE type = ? AND session_id = ? ORDER BY seq",
        [event_type, session_id],
    ).to_pylist()
    return [StoredEvent(**row) for row in rows]


def server_run_state(store: LedgerStore, run_id: str) -> Literal["unknown", "open", "ended"]:
    """Server run ``run_id``: ``ended`` (its ``server_stopped`` or ``server_failed`` is stored),
    ``open`` (started, not ended) or ``unknown`` (no start stored)."""
    types = {
        row["type"]
        for row in store.query_arrow(
            "SELECT DISTINCT type FROM event_log WHERE stream = ?", [f"server:{run_id}"]
        ).to_pylist()
    }
    if types & {"server_stopped", "server_failed"}:
        return "ended"
    return "open" if "server_started" in types else "unknown"


_LIVE_RUNS = """
SELECT r.run_id, r.session_id, (s.payload->>'pid')::BIGINT AS pid,
       (s.payload->>'port')::BIGINT AS port, s.payload->'argv'->>0 AS argv0
FROM server_runs r
JOIN (SELECT payload, payload->>'run_id' AS run_id, host->>'hostname' AS hostname
      FROM live_control WHERE type = 'server_started') s USING (run_id)
WHERE r.status IN ('starting', 'ready') AND lower(s.hostname) = lower(?)
ORDER BY r.started_seq
"""


def live_server_runs(store: LedgerStore, hostname: str) -> list[dict[str, Any]]:
    """The server runs on ``hostname`` still starting or ready, in the order they started:
    ``run_id``, ``session_id``, ``pid``, ``port``, ``argv0`` (the program it ran)."""
    rows: list[dict[str, Any]] = store.query_arrow(_LIVE_RUNS, [hostname]).to_pylist()
    return rows


#: The startup facts of the run started just before run ``$2`` in session ``$1`` (the latest run
#: of the session when ``$2`` is not stored): the pairing of ``server_runs.previous_run_id``, and
#: that run's facts as the view picks them (its ``server_ready``'s, else its ``server_failed``'s,
#: else its ``server_started``'s).
_PREVIOUS_STARTUP_SQL = """
WITH previous AS (
    SELECT run_id FROM server_runs
    WHERE session_id IS NOT DISTINCT FROM $1
      AND started_seq < coalesce((SELECT min(started_seq) FROM server_runs WHERE run_id = $2),
                                 9223372036854775807)
    ORDER BY started_seq DESC LIMIT 1
)
SELECT CAST(e.payload->'startup' AS VARCHAR) AS startup
FROM previous p LEFT JOIN live_events e
  ON (e.payload->>'run_id') = p.run_id
 AND e.type IN ('server_ready', 'server_failed', 'server_started')
 AND json_type(e.payload->'startup') = 'OBJECT'
ORDER BY e.type = 'server_ready' DESC, e.type = 'server_failed' DESC, e.seq DESC
LIMIT 1
"""


def previous_startup_json(
    store: LedgerStore, session_id: str | None, run_id: str | None
) -> str | None:
    """The JSON of the startup facts of the run of ``session_id`` started just before
    ``run_id`` (see ``_PREVIOUS_STARTUP_SQL``), or None (no ledger, no such run, no facts)."""
    if _empty(store):
        return None
    table = store.query_arrow(_PREVIOUS_STARTUP_SQL, [session_id, run_id])
    text = table.column("startup")[0].as_py() if table.num_rows else None
    return str(text) if text else None
