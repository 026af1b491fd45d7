"""Sync between ledgers through a real PostgreSQL hub (a throwaway cluster, ``tests/support/pg_cluster.py``).

Every test runs real DuckDB files, a real server and, where the CLI or a crash is the
point, real processes. The writer role logs in over TCP with its password in
``PGPASSWORD``: nothing else tells tuneledger the password.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from ledger.errors import EventIdReused, NotFound, RemoteError
from ledger.store import LedgerStore
from ledger.sync import hub
from ledger.sync import replicate as sync
from ledger.sync.remote import Remote, add_remote, parse_remote
from schemas import Host
from schemas.events import CandidateProposed, CandidateTriaged, FlagResearched, NoteAdded
from tests.support.cli_inprocess import invoke
from tests.support.pg_cluster import WRITER_PASSWORD, Cluster, make_hub

#: Process-based on purpose (a real PostgreSQL server, hosts' processes): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

SM120 = Host(
    gpu_name="RTX PRO 6000 Blackwell",
    compute_capability="sm120",
    engine="sglang",
    engine_version="0.5.6",
)

#: Views whose rows must be equal on every host that synced to the same hub position; local
#: positions (seq, stream_version and what is derived from them) are left out of the comparison.
COMPARED_VIEWS = ("board", "flag_verdicts", "decisions", "timeline", "flag_verdict_history")
LOCAL_COLUMNS = {
    "seq",
    "sync_order",
    "stream_version",
    "updated_seq",
    "proposed_seq",
    "first_seq",
    "last_seq",
    "history",
}


def make_ledger(path: Path, remote: Remote, name: str) -> LedgerStore:
    store = LedgerStore(path)
    sync.ensure_tables(store)
    add_remote(store, remote)
    sync.set_name(store, name)
    return store


def view_rows(store: LedgerStore, view: str) -> list[str]:
    table = store.query_arrow(f"SELECT * FROM {view}")
    keep = [c for c in table.column_names if c not in LOCAL_COLUMNS]
    return sorted(
        json.dumps({c: row[c] for c in keep}, default=str, sort_keys=True)
        for row in table.to_pylist()
    )


def hub_count(cluster: Cluster, schema: str) -> int:
    with psycopg.connect(cluster.superuser_dsn) as con:
        return con.execute(f"SELECT count(*) FROM {schema}.events").fetchone()[0]


# --- union, idempotency, order ---------------------------------------------------------


def test_two_ledgers_answer_the_sm120_question_with_the_union(
    remote: Remote, tmp_path: Path
) -> None:
    a = make_ledger(tmp_path / "a.duckdb", remote, "b200-node")
    b = make_ledger(tmp_path / "b.duckdb", remote, "workstation")
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)  # when the fact happened (a log line's time)
    fusion = FlagResearched(
        flag="enable-flashinfer-allreduce-fusion",
        verdict="not-activated",
        host=SM120,
        occurred_at=when,
    )
    a.append(fusion)
    a.append(
        FlagResearched(flag="enable-fused-moe-sum-all-reduce", verdict="effective", host=SM120)
    )
    b.append(FlagResearched(flag="enable-two-batch-overlap", verdict="no-op", host=SM120))
    b.append(NoteAdded(text="from the workstation"))

    first = sync.sync(a, remote)
    assert (first.pushed, first.stored, first.pulled) == (2, 2, 0)
    second = sync.sync(b, remote)
    assert (second.pushed, second.stored, second.pulled, second.applied, second.position) == (
        2,
        2,
        2,
        2,
        4,
    )
    third = sync.sync(a, remote)
    assert (third.pushed, third.pulled, third.position) == (0, 2, 4)

    question = (
        "SELECT flag, verdict FROM flag_verdicts WHERE arch = 'sm120' AND no_effect ORDER BY flag"
    )
    expected = [
        {"flag": "enable-flashinfer-allreduce-fusion", "verdict": "not-activated"},
        {"flag": "enable-two-batch-overlap", "verdict": "no-op"},
    ]
    assert b.get(fusion.event_id).occurred_at == when
    assert a.query_arrow(question).to_pylist() == expected
    assert b.query_arrow(question).to_pylist() == expected
    for view in COMPARED_VIEWS:
        assert view_rows(a, view) == view_rows(b, view), view
    # Nothing more to do either way: a sync is idempotent.
    again = sync.sync(b, remote)
    assert (again.pushed, again.pulled, again.applied) == (0, 0, 0)
    assert a.head() == b.head() == 4


def test_pulled_events_apply_in_hub_order_and_keep_their_origin(
    remote: Remote, tmp_path: Path
) -> None:
    hosts = [make_ledger(tmp_path / f"h{i}.duckdb", remote, f"host-{i}") for i in range(3)]
    for round_ in range(3):
        for i, store in enumerate(hosts):
            store.append([NoteAdded(text=f"host-{i} round {round_} part {j}") for j in range(2)])
            sync.sync(store, remote)
    fresh = make_ledger(tmp_path / "fresh.duckdb", remote, "fresh")
    report = sync.sync(fresh, remote, batch=4)  # several pull batches
    assert report.pulled == report.applied == 18
    with psycopg.connect(f"{remote.url}") as con:
        hub_order = [
            str(r[0])
            for r in con.execute(f"SELECT event_id FROM {remote.schema}.events ORDER BY position")
        ]
    assert [str(e.event_id) for e in fresh.read()] == hub_order
    origins = fresh.query_arrow(
        "SELECT s.origin_name, count(*) AS n FROM sync_events s GROUP BY ALL ORDER BY 1"
    ).to_pylist()
    assert origins == [{"origin_name": f"host-{i}", "n": 6} for i in range(3)]


def test_old_schema_versions_pushed_by_an_older_client_upcast_on_pull(
    remote: Remote, tmp_path: Path
) -> None:
    """v1 rows on the hub (``note_added`` had ``body``; ``flag_researched`` the dashed flag and one
    free-text ``finding``) are stored here as they are and read as the current models."""
    older = make_ledger(tmp_path / "old.duckdb", remote, "old-client")
    ledger_id, _ = sync.identity(older)
    flag_id, note_id = (
        "01900000-0000-7000-8000-000000000001",
        "01900000-0000-7000-8000-000000000002",
    )
    v1 = {
        "flag": "--enable-x",
        "finding": "does nothing on sm120",
        "evidence": "read the source",
        "verdict": "no-op",
    }
    rows = [
        (
            flag_id,
            "flag_researched",
            1,
            "flag:--enable-x",
            1,
            "2026-01-01T00:00:00+00:00",
            "person",
            "old",
            None,
            None,
            None,
            None,
            json.dumps({"compute_capability": "sm120"}),
            json.dumps(v1),
            1,
            0,
            None,
        ),
        (
            note_id,
            "note_added",
            1,
            "ledger",
            1,
            "2026-01-01T00:00:01+00:00",
            "person",
            "old",
            None,
            None,
            None,
            None,
            None,
            json.dumps({"body": "an old note"}),
            2,
            0,
            None,
        ),
    ]
    with hub.connect(remote) as con:
        hub.push(con, remote, ledger_id, "old-client", rows)
    reader = make_ledger(tmp_path / "new.duckdb", remote, "new-client")
    assert sync.sync(reader, remote).applied == 2
    flag = reader.get(flag_id)
    current = FlagResearched.model_fields["schema_version"].default
    assert (flag.schema_version, flag.flag, flag.what_it_does) == (
        current,
        "enable-x",
        "does nothing on sm120",
    )
    assert flag.evidence[0].text == "read the source"
    assert reader.get(note_id).text == "an old note"
    assert reader.query_arrow("SELECT schema_version FROM events ORDER BY seq")[
        "schema_version"
    ].to_pylist() == [1, 1]
    assert reader.query_arrow(
        "SELECT flag, verdict FROM flag_verdicts WHERE arch = 'sm120'"
    ).to_pylist() == [{"flag": "enable-x", "verdict": "no-op"}]


def two_ledgers_with_one_id_forged(
    remote: Remote, tmp_path: Path
) -> tuple[LedgerStore, LedgerStore, NoteAdded]:
    """a syncs a note; b, never synced, holds its own notes around that id with other text."""
    a = make_ledger(tmp_path / "a.duckdb", remote, "a")
    b = make_ledger(tmp_path / "b.duckdb", remote, "b")
    shared = NoteAdded(text="original")
    a.append(shared)
    sync.sync(a, remote)
    b.append(NoteAdded(text="b's own, first"))
    b.append(shared.model_copy(update={"text": "forged"}))
    b.append(NoteAdded(text="b's own, last"))
    return a, b, shared


def test_same_id_with_other_content_is_refused_and_nothing_is_applied(
    remote: Remote, tmp_path: Path
) -> None:
    a, b, shared = two_ledgers_with_one_id_forged(remote, tmp_path)
    a.append(NoteAdded(text="a's second"))
    with pytest.raises(EventIdReused, match=str(shared.event_id)):
        sync.sync(b, remote)
    with psycopg.connect(remote.url) as con:
        assert con.execute(f"SELECT count(*) FROM {remote.schema}.events").fetchone()[0] == 1
    assert (
        b.head() == 3
        and b.query_arrow("SELECT count(*) AS n FROM sync_events")["n"][0].as_py() == 0
    )
    # The other side is not affected: a still syncs.
    assert sync.sync(a, remote).stored == 1


def test_a_held_back_id_unblocks_sync_and_each_side_keeps_its_version(
    remote: Remote, tmp_path: Path
) -> None:
    """Exit 8 names the way out; after it every other event syncs both ways, nothing is deleted."""
    a, b, shared = two_ledgers_with_one_id_forged(remote, tmp_path)
    with pytest.raises(EventIdReused, match=f"--hold-back {shared.event_id}") as refused:
        sync.sync(b, remote)
    assert refused.value.event_id == str(shared.event_id)
    with pytest.raises(EventIdReused):  # refused again and again until the user chooses
        sync.sync(b, remote)
    # a dry run says so beforehand, and changes nothing
    assert sync.counts(b, remote) == sync.SyncCounts(3, 1, (str(shared.event_id),))
    with pytest.raises(NotFound):  # a typo would hide a good event: refused
        sync.hold_back(b, remote, ["01900000-0000-7000-8000-0000000000ff"])

    assert sync.hold_back(b, remote, [str(shared.event_id)]) == [str(shared.event_id)]
    assert sync.counts(b, remote) == sync.SyncCounts(to_push=2, to_pull=0)
    report = sync.sync(b, remote)
    # The hub's version of the held id is read past, not applied: b keeps its own.
    assert (report.pushed, report.stored, report.pulled, report.applied, report.held) == (
        2,
        2,
        1,
        0,
        (str(shared.event_id),),
    )
    a.append(NoteAdded(text="a's second"))
    assert sync.sync(a, remote).pulled == 2
    assert sync.sync(b, remote).pulled == 1
    texts = "SELECT payload->>'text' AS t FROM events WHERE type = 'note_added' ORDER BY t"
    assert [r["t"] for r in a.query_arrow(texts).to_pylist()] == [
        "a's second",
        "b's own, first",
        "b's own, last",
        "original",
    ]
    assert [r["t"] for r in b.query_arrow(texts).to_pylist()] == [
        "a's second",
        "b's own, first",
        "b's own, last",
        "forged",
    ]
    with psycopg.connect(remote.url) as con:
        assert con.execute(f"SELECT count(*) FROM {remote.schema}.events").fetchone()[0] == 4
    assert sync.status(b, remote).held == 1 and sync.status(a, remote).held == 0


def test_cli_refuses_a_reused_id_with_exit_8_and_masks_nothing_it_never_had(
    remote: Remote, tmp_path: Path, pg_server: Cluster
) -> None:
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    env = {**os.environ, "PGPASSWORD": WRITER_PASSWORD, "TUNELEDGER_HOST_NAME": "cli-host"}
    url = f"postgresql://writer@127.0.0.1:{pg_server.port}/postgres?options=-csearch_path%3D{remote.schema}"

    def tl(ledger: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        # in this process (tests/support/cli_inprocess.py): the exit codes and messages are
        # the test, not the process (12 processes, ~0.3 s of CPU each)
        return invoke(["--ledger", str(ledger), *args], stdin=stdin, env=env)

    for ledger in (a, b):
        assert tl(ledger, "remote", "add", "team", url).returncode == 0
    event = {
        "type": "note_added",
        "event_id": "01900000-0000-7000-8000-0000000000aa",
        "text": "one",
    }
    appended = tl(a, "append", stdin=json.dumps(event))
    assert appended.returncode == 0, appended.stderr
    appended = tl(b, "append", stdin=json.dumps({**event, "text": "two"}))
    assert appended.returncode == 0, appended.stderr
    dry = tl(a, "sync", "--dry-run", "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout) == {
        "remote": "team",
        "to_push": 1,
        "to_pull": 0,
        "refused": [],
    }
    assert tl(a, "sync").returncode == 0
    refused = tl(b, "sync")
    assert refused.returncode == 8, refused.stderr
    assert (
        "01900000-0000-7000-8000-0000000000aa" in refused.stderr
        and "other content" in refused.stderr
        and "--hold-back 01900000-0000-7000-8000-0000000000aa" in refused.stderr
    )
    # The way out the message names: b keeps its version, the rest syncs (exit 0).
    held = tl(b, "sync", "--hold-back", "01900000-0000-7000-8000-0000000000aa", "--json")
    assert held.returncode == 0, held.stderr
    assert json.loads(held.stdout)["held"] == ["01900000-0000-7000-8000-0000000000aa"]
    assert tl(b, "sync").returncode == 0
    listed = tl(a, "remote", "list", "--format", "json")
    assert listed.returncode == 0 and remote.schema in listed.stdout
    for ledger in (a, b):
        assert WRITER_PASSWORD.encode() not in ledger.read_bytes()
    # A URL with a password is refused (exit 3) and never echoed in clear.
    bad = tl(
        a,
        "remote",
        "add",
        "leaky",
        f"postgresql://writer:{WRITER_PASSWORD}@127.0.0.1:{pg_server.port}/postgres",
    )
    assert bad.returncode == 3 and WRITER_PASSWORD not in bad.stderr and "PGPASSWORD" in bad.stderr


def test_unreachable_or_uninitialised_hub_is_exit_9(
    tmp_path: Path, pg_server: Cluster, writer_env: None
) -> None:
    store = LedgerStore(tmp_path / "a.duckdb")
    sync.ensure_tables(store)
    nowhere = parse_remote("nowhere", "postgresql://writer@127.0.0.1:1/postgres")
    with pytest.raises(RemoteError) as info:
        sync.sync(store, nowhere)
    assert info.value.exit_code == 9
    empty = parse_remote("empty", pg_server.url("writer"), "no_such_schema")
    with pytest.raises(RemoteError, match="remote init"):
        sync.sync(store, empty)


# --- conflicts ------------------------------------------------------------------------------


def test_offline_triages_of_one_candidate_conflict_until_a_later_triage(
    remote: Remote, tmp_path: Path
) -> None:
    a = make_ledger(tmp_path / "a.duckdb", remote, "h200-node")
    b = make_ledger(tmp_path / "b.duckdb", remote, "b200-node")
    a.append(
        CandidateProposed(candidate_id="flag:x", kind="flag", title="try x", flag="x", host=SM120)
    )
    sync.sync(a, remote)
    sync.sync(b, remote)
    # Both offline: each triages at the same stream version (2).
    a.append(
        CandidateTriaged(candidate_id="flag:x", status="accepted", reason="helps here"),
        expected_version=1,
    )
    b.append(
        CandidateTriaged(candidate_id="flag:x", status="rejected", reason="no-op there"),
        expected_version=1,
    )
    for store in (a, b, a):
        sync.sync(store, remote)
    for store in (a, b):
        row = store.query_arrow(
            "SELECT status, conflict FROM board WHERE candidate_id = 'flag:x'"
        ).to_pylist()[0]
        assert row["status"] == "conflicting"
        assert (
            "accepted by h200-node" in row["conflict"]
            and "rejected by b200-node" in row["conflict"]
        )
        # Each triage named by its whole id: UUIDv7's first 8 hex digits are its timestamp, the
        # same for two triages made within a minute; the whole id is what `show` takes.
        (named,) = store.query_arrow("SELECT conflict, event_ids FROM sync_conflicts").to_pylist()
        assert len(named["event_ids"]) == 2
        assert all(f"({event_id})" in named["conflict"] for event_id in named["event_ids"])
    assert (
        a.query_arrow("SELECT count(*) AS n FROM events WHERE type = 'candidate_triaged'")["n"][
            0
        ].as_py()
        == 2
    )
    assert view_rows(a, "board") == view_rows(b, "board")

    # A new triage on b (which has seen both) resolves it, here and, after sync, there.
    b.append(
        CandidateTriaged(candidate_id="flag:x", status="deferred", reason="re-measure on both")
    )
    assert b.query_arrow("SELECT status, conflict FROM board").to_pylist() == [
        {"status": "deferred", "conflict": None}
    ]
    sync.sync(b, remote)
    sync.sync(a, remote)
    assert a.query_arrow("SELECT status, conflict FROM board").to_pylist() == [
        {"status": "deferred", "conflict": None}
    ]


def test_a_triage_after_pulling_the_other_is_not_a_conflict(remote: Remote, tmp_path: Path) -> None:
    a = make_ledger(tmp_path / "a.duckdb", remote, "a")
    b = make_ledger(tmp_path / "b.duckdb", remote, "b")
    a.append(CandidateProposed(candidate_id="flag:y", kind="flag", title="try y", flag="y"))
    a.append(CandidateTriaged(candidate_id="flag:y", status="accepted"))
    sync.sync(a, remote)
    sync.sync(b, remote)
    b.append(CandidateTriaged(candidate_id="flag:y", status="done"))
    sync.sync(b, remote)
    sync.sync(a, remote)
    for store in (a, b):
        assert store.query_arrow("SELECT status, conflict FROM board").to_pylist() == [
            {"status": "done", "conflict": None}
        ]


def test_a_decision_against_another_hosts_concurrent_flag_verdict_conflicts(
    remote: Remote, tmp_path: Path
) -> None:
    from schemas.events import DecisionRecorded

    a = make_ledger(tmp_path / "a.duckdb", remote, "a")
    b = make_ledger(tmp_path / "b.duckdb", remote, "b")
    a.append(CandidateProposed(candidate_id="flag:z", kind="flag", title="z", flag="z", host=SM120))
    sync.sync(a, remote)
    sync.sync(b, remote)
    a.append(DecisionRecorded(decision="ship z in production", candidate_id="flag:z"))
    b.append(FlagResearched(flag="z", verdict="dead-code", host=SM120))
    for store in (a, b, a):
        sync.sync(store, remote)
    for store in (a, b):
        conflict = store.query_arrow("SELECT conflict FROM board")["conflict"][0].as_py()
        assert "decision by a" in conflict and "flag verdict dead-code by b" in conflict


# --- interruption -------------------------------------------------------------------------

SYNC_CHILD = """
import sys
from ledger.sync import replicate as sync
from ledger.sync.remote import get_remote
from ledger.store import LedgerStore

store = LedgerStore(sys.argv[1])
sync.sync(store, get_remote(store, None), batch=int(sys.argv[2]),
          progress=lambda phase, n: print(phase, n, flush=True))
"""


def test_a_dropped_connection_mid_pull_is_exit_9_and_the_next_sync_resumes(
    remote: Remote, tmp_path: Path, pg_server: Cluster
) -> None:
    a = make_ledger(tmp_path / "a.duckdb", remote, "a")
    a.append([NoteAdded(text=f"a {i}") for i in range(2000)])
    sync.sync(a, remote)
    b = make_ledger(tmp_path / "b.duckdb", remote, "b")
    child = subprocess.Popen(
        [sys.executable, "-c", SYNC_CHILD, str(b.path), "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PGPASSWORD": WRITER_PASSWORD},
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("pulled"):  # the network "drops": the server ends the session
            with psycopg.connect(pg_server.superuser_dsn, autocommit=True) as con:
                con.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'tuneledger' AND usename = 'writer'"
                )
            break
    _, err = child.communicate(timeout=120)
    if child.returncode == 0:  # it finished before the drop reached it: nothing to resume
        assert b.head() == 2000
        return
    assert "RemoteError" in err and "remote hub" in err
    assert 0 < b.head() < 2000
    sync.sync(b, remote)
    assert b.head() == 2000
    assert b.query_arrow("SELECT count(DISTINCT event_id) AS n FROM events")["n"][0].as_py() == 2000


def test_the_password_can_come_from_a_password_file(
    remote: Remote, tmp_path: Path, pg_server: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_server.port}:*:writer:{WRITER_PASSWORD}\n")
    passfile.chmod(0o600)
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    store = make_ledger(tmp_path / "a.duckdb", remote, "a")
    store.append(NoteAdded(text="via pgpass"))
    assert sync.sync(store, remote).stored == 1
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "missing"))
    with pytest.raises(RemoteError, match="password"):
        sync.sync(store, remote)


@pytest.mark.parametrize("kill_after", ["pushed", "pulled"])
def test_a_killed_sync_resumes_with_nothing_lost_or_doubled(
    remote: Remote, tmp_path: Path, kill_after: str
) -> None:
    a = make_ledger(tmp_path / "a.duckdb", remote, "a")
    b = make_ledger(tmp_path / "b.duckdb", remote, "b")
    a.append([NoteAdded(text=f"a {i}") for i in range(3000)])
    sync.sync(a, remote)
    b.append([NoteAdded(text=f"b {i}") for i in range(500)])
    child = subprocess.Popen(
        [sys.executable, "-c", SYNC_CHILD, str(b.path), "500"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PGPASSWORD": WRITER_PASSWORD},
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith(kill_after):
            child.send_signal(signal.SIGKILL)
            break
    child.wait(timeout=120)
    assert child.returncode == -signal.SIGKILL
    partial = b.head()
    assert 500 <= partial < 3500 or kill_after == "pushed"
    report = sync.sync(b, remote)
    assert b.head() == 3500
    assert b.query_arrow("SELECT count(DISTINCT event_id) AS n FROM events")["n"][0].as_py() == 3500
    assert report.pulled == 3500 - partial
    assert sync.sync(a, remote).pulled == 500
    with psycopg.connect(remote.url) as con:
        assert con.execute(
            f"SELECT count(*), max(position) FROM {remote.schema}.events"
        ).fetchone() == (3500, 3500)
    assert view_rows(a, "timeline") == view_rows(b, "timeline")


def test_a_secret_written_on_the_hub_by_plain_sql_is_masked_on_pull(
    remote: Remote, tmp_path: Path
) -> None:
    """The hub is outside tuneledger's masking (any client may INSERT): the pulling store masks."""
    writer = make_ledger(tmp_path / "w.duckdb", remote, "raw-sql")
    ledger_id, _ = sync.identity(writer)
    secret = "sk-proj-0123456789abcdefghijklmnop"
    note_id = "01900000-0000-7000-8000-0000000000cc"
    with hub.connect(remote) as con:
        hub.push(
            con,
            remote,
            ledger_id,
            "raw-sql",
            [
                (
                    note_id,
                    "note_added",
                    2,
                    "ledger",
                    1,
                    "2026-01-01T00:00:00+00:00",
                    "person",
                    "raw",
                    None,
                    None,
                    None,
                    f"--api-key {secret}",
                    None,
                    json.dumps({"text": f"launched with --api-key {secret}", "refs": []}),
                    1,
                    0,
                    None,
                )
            ],
        )
    reader = make_ledger(tmp_path / "r.duckdb", remote, "reader")
    sync.sync(reader, remote)
    note = reader.get(note_id)
    assert secret not in note.text and "***" in note.text and secret not in (note.source or "")
    assert secret.encode() not in reader.path.read_bytes()
    # Pulled again (as after a crash before the bookkeeping): the masked copy is the same event.
    with psycopg.connect(remote.url) as con:
        row = con.execute(
            f"SELECT position, event_id::text, type, schema_version, stream, stream_version, recorded_at, actor_kind, "
            f"actor_name, session_id, causation_id::text, correlation_id::text, source, host::text, payload::text, "
            f"origin_ledger::text, 'raw-sql', origin_seq, seen_position, occurred_at "
            f"FROM {remote.schema}.events WHERE event_id = %s",
            [note_id],
        ).fetchone()
    assert reader.append_replicated(sync._pull_rows([row]))[0].duplicate


def test_a_ledger_syncs_with_one_hub(
    remote: Remote, tmp_path: Path, pg_server: Cluster, hub_schema: str
) -> None:
    from ledger.errors import InvalidInput
    from ledger.sync.remote import remove_remote

    store = make_ledger(tmp_path / "a.duckdb", remote, "a")
    other = make_hub(pg_server, hub_schema + "_other")
    with pytest.raises(InvalidInput, match="already has remote hub"):
        add_remote(store, Remote("other", other.url, other.schema))
    store.append(NoteAdded(text="synced to hub"))
    sync.sync(store, remote)
    remove_remote(store, "hub")
    with pytest.raises(InvalidInput, match="has synced with hub hub"):
        add_remote(store, Remote("other", other.url, other.schema))
    add_remote(store, remote)  # the same hub again: fine, nothing to do
    report = sync.sync(store, remote)
    assert (report.pushed, report.pulled) == (0, 0)
