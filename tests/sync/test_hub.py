"""The PostgreSQL hub's contract, against a real server (``tests/support/pg_cluster.py``).

The part of the store contract (``tests/store/test_store_contract.py``) that applies to a hub:
idempotency by ``event_id``, refusal of one id with other content (nothing stored),
gapless positions in commit order under concurrent writers (real processes), and the
append-only guarantee, which here is enforced by the server itself (triggers and
grants), for the writer role and the owner alike. Then the load test: 8 processes,
each a host with its own ledger, appending and syncing at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from uuid6 import uuid7

from ledger.errors import EventIdReused, RemoteError
from ledger.store import LedgerStore
from ledger.sync import hub
from ledger.sync import replicate as sync
from ledger.sync.remote import Remote, parse_remote
from tests.support.pg_cluster import Cluster, admin_url

#: Process-based on purpose (a real PostgreSQL server): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

HOST_PROCESS = Path(__file__).with_name("sync_host_process.py")
PROCESS_TIMEOUT_S = 500


def admin_remote(cluster: Cluster, schema: str) -> Remote:
    return Remote("admin", admin_url(cluster), schema)


def row(text: str, seq: int, event_id: UUID | None = None, **changes: Any) -> tuple[Any, ...]:
    """One push row (``hub.COLUMNS`` order): a note_added."""
    values = {
        "event_id": str(event_id or uuid7()),
        "type": "note_added",
        "schema_version": 2,
        "stream": "ledger",
        "stream_version": seq,
        "recorded_at": "2026-01-02T03:04:05+00:00",
        "actor_kind": "person",
        "actor_name": "test",
        "session_id": None,
        "causation_id": None,
        "correlation_id": None,
        "source": None,
        "host": None,
        "payload": json.dumps({"text": text, "refs": []}),
        "origin_seq": seq,
        "seen_position": 0,
        "occurred_at": None,
    }
    values.update(changes)
    return tuple(values[c] for c in hub.COLUMNS)


def hub_rows(remote: Remote) -> list[tuple[Any, ...]]:
    with psycopg.connect(remote.url) as con:
        return con.execute(
            f"SELECT position, event_id, origin_ledger, origin_seq FROM {remote.schema}.events ORDER BY position"
        ).fetchall()


def push(remote: Remote, rows: list[tuple[Any, ...]], ledger: UUID | None = None) -> hub.PushResult:
    with hub.connect(remote) as con:
        return hub.push(con, remote, ledger or LEDGER, "test-host", rows)


LEDGER = UUID("01900000-0000-7000-8000-00000000f00d")


# --- idempotency and conflicts -------------------------------------------------------------


def test_same_events_twice_are_stored_once_with_the_original_positions(remote: Remote) -> None:
    batch = [row(f"n{i}", i + 1) for i in range(3)]
    first = push(remote, batch)
    again = push(remote, batch)
    assert first.stored == 3 and again.stored == 0
    assert first.positions == again.positions == {r[0]: i + 1 for i, r in enumerate(batch)}


def test_retry_inside_a_bigger_batch_stores_only_the_new_events(remote: Remote) -> None:
    old = [row("old", 1)]
    push(remote, old)
    result = push(remote, [*old, row("new", 2)])
    assert result.stored == 1 and sorted(result.positions.values()) == [1, 2]


def test_same_id_with_other_content_is_refused_and_the_batch_stores_nothing(remote: Remote) -> None:
    event_id = uuid7()
    push(remote, [row("original", 1, event_id)])
    with pytest.raises(EventIdReused, match=str(event_id)):
        push(remote, [row("fresh", 2), row("forged", 3, event_id), row("fresh too", 4)])
    assert len(hub_rows(remote)) == 1
    # Provenance a retry may change (recorded_at, actor, source) is not content.
    assert (
        push(remote, [row("original", 1, event_id, actor_name="someone", source="x:1")]).stored == 0
    )


# --- positions ------------------------------------------------------------------------------

PUSHER = """
import sys, json
from uuid import UUID
from uuid6 import uuid7
from ledger.sync import hub
from ledger.sync.remote import parse_remote

remote = parse_remote("hub", sys.argv[1], sys.argv[2])
ledger = UUID(sys.argv[3])
seq = 0
with hub.connect(remote) as con:
    for batch in range(int(sys.argv[4])):
        rows = []
        for _ in range(int(sys.argv[5])):
            seq += 1
            rows.append((str(uuid7()), "note_added", 2, "ledger", seq, "2026-01-02T03:04:05+00:00", "runner", "p",
                         None, None, None, None, None, json.dumps({"text": str(seq), "refs": []}), seq, 0, None))
        hub.push(con, remote, ledger, sys.argv[3][:8], rows)
print("ok", flush=True)
"""


def test_positions_are_gapless_and_in_commit_order_under_concurrent_pushers(remote: Remote) -> None:
    ledgers = [uuid7() for _ in range(6)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", PUSHER, remote.url, remote.schema, str(ledger), "20", "50"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ledger in ledgers
    ]
    for child in children:
        out, err = child.communicate(timeout=PROCESS_TIMEOUT_S)
        assert child.returncode == 0 and out.strip() == "ok", err
    rows = hub_rows(remote)
    assert [r[0] for r in rows] == list(range(1, 6001))
    by_origin: dict[UUID, list[int]] = defaultdict(list)
    for _position, _event_id, origin, origin_seq in rows:
        by_origin[origin].append(origin_seq)
    assert set(by_origin) == set(ledgers)
    assert all(
        seqs == list(range(1, 1001)) for seqs in by_origin.values()
    )  # each writer's order kept
    with psycopg.connect(remote.url) as con:
        assert con.execute(f"SELECT position FROM {remote.schema}.hub_head").fetchone()[0] == 6000


# --- append-only by construction ----------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE {s}.events SET payload = '{{}}'",
        "DELETE FROM {s}.events",
        "TRUNCATE {s}.events CASCADE",
        "UPDATE {s}.ledgers SET name = 'renamed'",
        "DELETE FROM {s}.ledgers",
        "UPDATE {s}.hub_head SET position = 0",
        "DELETE FROM {s}.hub_head",
        "DROP TABLE {s}.events",
        "ALTER TABLE {s}.events DISABLE TRIGGER append_only",
    ],
)
@pytest.mark.parametrize("who", ["writer", "owner"])
def test_nobody_rewrites_the_hub(
    remote: Remote, pg_server: Cluster, statement: str, who: str
) -> None:
    push(remote, [row("kept", 1)])
    dsn = remote.url if who == "writer" else pg_server.superuser_dsn
    sql = statement.format(s=remote.schema)
    if who == "owner" and sql.startswith(("DROP", "ALTER")):
        pytest.skip(
            "the owner may drop or alter its own schema: backups, not triggers, protect from that"
        )
    with (
        psycopg.connect(dsn) as con,
        pytest.raises(
            psycopg.Error, match="append-only|permission denied|must be owner|move forward"
        ),
    ):
        con.execute(sql)
    assert len(hub_rows(remote)) == 1


def test_a_writer_cannot_create_a_hub(pg_server: Cluster, writer_env: None) -> None:
    with pytest.raises(RemoteError, match="init of schema"):
        hub.init_schema(parse_remote("hub", pg_server.url("writer"), "writer_made"))


def test_one_schema_per_team_and_plain_sql_on_the_hub(
    pg_server: Cluster, writer_env: None, hub_schema: str, tmp_path: Path
) -> None:
    team_a, team_b = f"{hub_schema}_a", f"{hub_schema}_b"
    for schema in (team_a, team_b):
        hub.init_schema(admin_remote(pg_server, schema), grant=["writer"])
    # The schema can come from the URL's search_path option.
    remote_a = parse_remote("a", pg_server.url("writer", options=f"-csearch_path%3D{team_a}"))
    assert remote_a.schema == team_a
    store = LedgerStore(tmp_path / "l.duckdb")
    store.append_replicated([])
    from schemas import Host
    from schemas.events import FlagResearched

    store.append(
        FlagResearched(flag="enable-x", verdict="no-op", host=Host(compute_capability="12.0"))
    )
    sync.sync(store, remote_a)
    with psycopg.connect(pg_server.superuser_dsn) as con:
        plain = con.execute(
            f"SELECT payload->>'flag', payload->>'verdict' FROM {team_a}.events "
            "WHERE host->>'compute_capability' = 'sm120'"
        ).fetchall()
        assert plain == [("enable-x", "no-op")]
        assert con.execute(f"SELECT count(*) FROM {team_b}.events").fetchone()[0] == 0


# --- load -----------------------------------------------------------------------------------------

#: Views compared across hosts; positions local to one ledger are left out.
LOAD_VIEWS = (
    "board",
    "flag_verdicts",
    "flag_verdict_history",
    "timeline",
    "decisions",
    "sync_conflicts",
)
LOCAL_COLUMNS = {"seq", "sync_order", "stream_version", "updated_seq", "proposed_seq"}


def canonical(store: LedgerStore, view: str) -> list[str]:
    table = store.query_arrow(f"SELECT * FROM {view}")
    keep = [c for c in table.column_names if c not in LOCAL_COLUMNS]
    return sorted(
        json.dumps({c: r[c] for c in keep}, default=str, sort_keys=True) for r in table.to_pylist()
    )


def test_eight_hosts_append_and_sync_concurrently_and_converge(
    remote: Remote, tmp_path: Path
) -> None:
    hosts, each = 8, 400  # ~4 batches a host, each followed by a sync: 32 syncs racing
    paths = [tmp_path / f"host{i}.duckdb" for i in range(hosts)]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(HOST_PROCESS),
                str(path),
                f"host-{i}",
                remote.url,
                remote.schema,
                str(each),
                str(i),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, path in enumerate(paths)
    ]
    for child in children:
        out, err = child.communicate(timeout=PROCESS_TIMEOUT_S)
        assert child.returncode == 0 and out.startswith(f"done {each} "), err
    stores = [LedgerStore(path) for path in paths]
    for store in stores:  # each host's last sync may have run before others' last pushes
        sync.sync(store, parse_remote("hub", remote.url, remote.schema))
    rows = hub_rows(remote)
    assert [r[0] for r in rows] == list(range(1, hosts * each + 1))
    assert len({r[1] for r in rows}) == hosts * each
    hub_ids = {str(r[1]) for r in rows}
    for store in stores:
        ids = store.query_arrow("SELECT event_id::VARCHAR AS id FROM events")["id"].to_pylist()
        assert len(ids) == hosts * each and set(ids) == hub_ids
        assert sync.count_to_push(store) == 0
    for view in LOAD_VIEWS:
        first = canonical(stores[0], view)
        assert first or view == "sync_conflicts", (
            view
        )  # rows to compare (conflicts may all be resolved)
        for store in stores[1:]:
            assert canonical(store, view) == first, view
