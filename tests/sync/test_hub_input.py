"""The hub is input like any other (docs/reliability.md): a real PostgreSQL hub, rows inserted
into it directly, as any role with INSERT may (``tests/pg_cluster.py``).

The property (hypothesis, over random mixes of valid rows and rows broken one way each): after
a sync, every hub row is either stored here or held back with a report naming its position;
nothing invalid is stored; every stored event reads back and ``show`` prints it; the pull's
position is the hub's head. Then the CLI's one-line reports, a retry that applies a row once it
reads, and ``show`` on rows stored before the check (one line, never a traceback).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uuid6 import uuid7

from ledger.store import LedgerStore
from ledger.sync import replicate as sync
from ledger.sync.remote import Remote, add_remote
from tests.support.cli_inprocess import invoke
from tests.support.pg_cluster import Cluster, make_hub

#: A real PostgreSQL server: `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

#: Examples of the property (each a few hub rows and a fresh ledger's sync); more with
#: TUNELEDGER_FUZZ_EXAMPLES=N.
EXAMPLES = int(os.environ.get("TUNELEDGER_FUZZ_EXAMPLES", "15"))

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@dataclass
class HubRow:
    """One row to insert into the hub, and whether an append would take it."""

    event_id: str
    type: str
    schema_version: int
    payload: str
    valid: bool
    why: str = ""
    actor_kind: str = "agent"
    actor_name: str = "other-tool"
    session_id: str | None = "s1"
    stream: str = "ledger"
    host: str | None = None
    origin: str = "known"  # known, unknown (no ledgers row) or ours (the pulling ledger's id)


def note(text: str, **changes: Any) -> HubRow:
    row = HubRow(str(uuid7()), "note_added", 2, json.dumps({"text": text, "refs": []}), True)
    for key, value in changes.items():
        setattr(row, key, value)
    return row


#: Each way a row can break, as a function of a valid note's text.
BREAKS: dict[str, Callable[[str], HubRow]] = {
    "payload a list": lambda t: note(t, payload="[1, 2]"),
    "text a number": lambda t: note(t, payload=json.dumps({"text": 5, "refs": []})),
    "actor kind robot": lambda t: note(t, actor_kind="robot"),
    "token as session id": lambda t: note(t, session_id=TOKEN),
    "token as actor name": lambda t: note(t, actor_name=f"bot-{TOKEN}"),
    "password as stream": lambda t: note(t, stream="password=hunter2-stream"),
    "unknown type": lambda t: note(t, type="robot_uprising"),
    "newer schema": lambda t: note(t, schema_version=99),
    "envelope in payload": lambda t: note(
        t, payload=json.dumps({"text": t, "refs": [], "event_id": str(uuid4())})
    ),
    "extra field": lambda t: note(t, payload=json.dumps({"text": t, "refs": [], "x": 1})),
    "integer beyond BIGINT": lambda t: note(
        t, payload=json.dumps({"text": t, "refs": [], "candidate_id": None, "n": 2**70})
    ),
    "host a list": lambda t: note(t, host="[1]"),
    "unknown origin": lambda t: note(t, origin="unknown"),
    "retraction of nothing": lambda t: HubRow(
        str(uuid7()),
        "event_retracted",
        1,
        json.dumps({"retracted_event_id": str(uuid4()), "reason": t}),
        True,
    ),
}


@st.composite
def hub_rows(draw: st.DrawFn) -> list[HubRow]:
    rows: list[HubRow] = []
    for _ in range(draw(st.integers(min_value=1, max_value=7))):
        text = draw(TEXT)
        kind = draw(st.sampled_from(["valid", "valid", "ours", "retract", *BREAKS]))
        if kind == "valid":
            rows.append(note(text, session_id=draw(st.sampled_from(["s1", "s2", None]))))
        elif kind == "ours":  # claims the pulling ledger as origin; it never pushed it
            rows.append(note(text, origin="ours"))
        elif kind == "retract":
            targets = [r for r in rows if r.valid and r.type == "note_added"]
            if targets:
                target = draw(st.sampled_from(targets))
                rows.append(
                    HubRow(
                        str(uuid7()),
                        "event_retracted",
                        1,
                        json.dumps({"retracted_event_id": target.event_id, "reason": text}),
                        True,
                    )
                )
        else:
            row = BREAKS[kind](text)
            row.valid, row.why = False, kind
            rows.append(row)
    return rows


class Hub:
    """Rows written into a hub schema by plain SQL (the writer role: INSERT, and the head)."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.known = str(uuid7())
        with psycopg.connect(remote.url, autocommit=True) as con:
            con.execute(
                f"INSERT INTO {remote.schema}.ledgers (ledger_id, name) VALUES (%s, 'other-tool')",
                [self.known],
            )

    def insert(self, rows: list[HubRow], ours: str) -> dict[str, int]:
        """Insert ``rows`` after the head; their positions by event id."""
        schema = self.remote.schema
        positions = {}
        with psycopg.connect(self.remote.url) as con:
            # the pulling ledger as the hub knows it after a push (it pushed none of these rows)
            con.execute(
                f"INSERT INTO {schema}.ledgers (ledger_id, name) VALUES (%s, 'puller') "
                "ON CONFLICT DO NOTHING",
                [ours],
            )
            (head,) = con.execute(f"SELECT position FROM {schema}.hub_head FOR UPDATE").fetchone()
            for i, row in enumerate(rows, start=1):
                origin = {"known": self.known, "unknown": str(uuid7()), "ours": ours}[row.origin]
                con.execute(
                    f"INSERT INTO {schema}.events (position, event_id, type, schema_version, stream, "
                    "stream_version, recorded_at, actor_kind, actor_name, session_id, host, payload, "
                    "origin_ledger, origin_seq, seen_position) "
                    "VALUES (%s, %s, %s, %s, %s, 1, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, 0)",
                    [
                        head + i,
                        row.event_id,
                        row.type,
                        row.schema_version,
                        row.stream,
                        datetime.now(UTC),
                        row.actor_kind,
                        row.actor_name,
                        row.session_id,
                        row.host,
                        row.payload,
                        origin,
                        head + i,
                    ],
                )
                positions[row.event_id] = head + i
            con.execute(f"UPDATE {schema}.hub_head SET position = %s", [head + len(rows)])
        return positions

    def head(self) -> int:
        with psycopg.connect(self.remote.url) as con:
            return con.execute(f"SELECT position FROM {self.remote.schema}.hub_head").fetchone()[0]


def fresh_ledger(folder: Path, remote: Remote, name: str) -> tuple[LedgerStore, str]:
    store = LedgerStore(folder / f"{name}.duckdb")
    sync.ensure_tables(store)
    add_remote(store, remote)
    sync.set_name(store, name)
    return store, str(sync.identity(store)[0])


@pytest.fixture
def hub(pg_server: Cluster, hub_schema: str, writer_env: None) -> Iterator[Hub]:
    yield Hub(make_hub(pg_server, hub_schema))


def stored_ids(store: LedgerStore) -> set[str]:
    return {str(e) for e in store.query_arrow("SELECT event_id FROM events").column(0).to_pylist()}


def test_nothing_is_skipped_silently_and_nothing_invalid_is_stored(
    hub: Hub, tmp_path_factory: pytest.TempPathFactory
) -> None:
    inserted: dict[str, HubRow] = {}
    positions: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(rows=hub_rows(), batch=st.sampled_from([2, 3, 50]))
    def check(rows: list[HubRow], batch: int) -> None:
        folder = tmp_path_factory.mktemp("ledgers")
        store, ours = fresh_ledger(folder, hub.remote, "puller")
        positions.update(hub.insert(rows, ours))
        inserted.update({row.event_id: row for row in rows})
        report = sync.sync(store, hub.remote, batch=batch)
        held = {row.position: row for row in report.invalid}
        by_position = {p: inserted[e] for e, p in positions.items()}
        # nothing skipped silently: every hub row is stored here or reported held back
        stored = stored_ids(store)
        for position, row in by_position.items():
            assert (row.event_id in stored) != (position in held), (row, report.invalid)
        # nothing invalid stored, nothing valid held back
        for position, item in held.items():
            assert not by_position[position].valid, (by_position[position], item.reason)
            assert "\n" not in item.line("hub")
        for row in inserted.values():
            assert (row.event_id in stored) == row.valid, (row, report.invalid)
        assert report.position == hub.head() and report.invalid_total == len(held)
        events = store.read()  # every stored event reads back as its model
        assert {str(e.event_id) for e in events} == stored
        assert all(TOKEN not in repr(e) for e in events)

    check()


def test_sync_names_each_held_row_in_one_line_and_a_retry_applies_it_once_it_reads(
    hub: Hub, tmp_path: Path
) -> None:
    store, ours = fresh_ledger(tmp_path, hub.remote, "puller")
    good, bad = note("kept"), note("later", origin="unknown")
    schema_99 = note("from the future", schema_version=99)
    hub.insert([good, bad, schema_99], ours)
    # the CLI in this process (tests/support/cli_inprocess.py): its lines are the test
    done = invoke(["--ledger", store.path, "sync", "hub"])
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr
    assert f"hub position 2 (event {bad.event_id}): origin ledger" in lines[0]
    assert f"hub position 3 (event {schema_99.event_id})" in lines[1]
    assert "2 hub row(s) held back as invalid" in done.stdout
    assert stored_ids(store) == {good.event_id}
    # the origin's ledgers row appears (its tool pushes after all): the next sync applies it
    with psycopg.connect(hub.remote.url, autocommit=True) as con:
        (origin,) = con.execute(
            f"SELECT origin_ledger::text FROM {hub.remote.schema}.events WHERE event_id = %s",
            [bad.event_id],
        ).fetchone()
        con.execute(
            f"INSERT INTO {hub.remote.schema}.ledgers (ledger_id, name) VALUES (%s, 'late')",
            [origin],
        )
    report = sync.sync(store, hub.remote)
    assert stored_ids(store) == {good.event_id, bad.event_id}
    assert report.invalid == () and report.invalid_total == 1  # the schema-99 row still held
    # still counted and listed by later syncs and by `remote list`, until it reads
    for _ in range(2):
        assert sync.sync(store, hub.remote).invalid_total == 1
        listed = invoke(["--ledger", store.path, "remote", "list", "--format", "json"])
        (row,) = json.loads(listed.stdout)
        assert row["held_back"] == 1 and row["held_back_hub_positions"] == "3", row


def test_show_on_a_stored_event_that_does_not_read_is_one_line(tmp_path: Path) -> None:
    """Rows a pull stored before the check (or any other writer put in the file): `show`,
    `events --format json` and the export say which event does not read, in one line."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    bad = [
        ("[1, 2]", "note_added", "agent"),
        ('{"text": 5, "refs": []}', "note_added", "agent"),
        ('{"text": "x", "refs": []}', "note_added", "robot"),
    ]
    ids = []
    for payload, kind, actor in bad:
        event_id = str(uuid7())
        ids.append(event_id)
        store.append_replicated(
            [
                {
                    "event_id": event_id,
                    "type": kind,
                    "schema_version": 2,
                    "stream": "ledger",
                    "recorded_at": datetime.now(UTC),
                    "actor_kind": actor,
                    "actor_name": "x",
                    "session_id": "s1",
                    "causation_id": None,
                    "correlation_id": None,
                    "source": None,
                    "host": None,
                    "payload": payload,
                    "occurred_at": None,
                }
            ]
        )
    for event_id in ids:
        done = invoke(["--ledger", store.path, "show", event_id])
        assert done.returncode == 3, done.stderr
        assert len(done.stderr.splitlines()) == 1 and "does not read" in done.stderr
        assert event_id in done.stderr
    done = invoke(["--ledger", store.path, "events", "--format", "json"])
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1
    UUID(ids[0])  # (ids are what the hub would hold)
