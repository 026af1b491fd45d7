"""The TUI and a PostgreSQL hub: the header's sync status, ``S`` syncing in a worker, the
timeline marking events from another host, the board showing a conflict (real server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.store import LedgerStore
from ledger.sync import replicate as sync
from ledger.sync.remote import Remote, add_remote
from schemas.envelope import Actor
from schemas.events import CandidateProposed, CandidateTriaged, NoteAdded
from tests.support.pg_cluster import Cluster, make_hub
from tests.tui.pilot import SIZE, wait_for
from tui.app import TuneLedgerApp

#: Process-based on purpose (a real PostgreSQL server): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def remote(pg_server: Cluster, hub_schema: str, writer_env: None) -> Remote:
    return make_hub(pg_server, hub_schema)


def ledger(path: Path, remote: Remote, name: str) -> LedgerStore:
    store = LedgerStore(path)
    sync.ensure_tables(store)
    add_remote(store, remote)
    sync.set_name(store, name)
    return store


async def test_status_then_S_syncs_in_a_worker_and_marks_the_other_hosts_events(
    remote: Remote, tmp_path: Path
) -> None:
    other = ledger(tmp_path / "other.duckdb", remote, "b200-node")
    other.append(CandidateProposed(candidate_id="flag:x", kind="flag", title="try x", flag="x"))
    sync.sync(other, remote)
    here = ledger(tmp_path / "here.duckdb", remote, "workstation")
    sync.sync(here, remote)
    other.append(CandidateTriaged(candidate_id="flag:x", status="accepted", reason="helps on b200"))
    other.append(NoteAdded(text="measured on the B200 node"))
    sync.sync(other, remote)
    here.append(CandidateTriaged(candidate_id="flag:x", status="rejected", reason="no-op here"))

    app = TuneLedgerApp(
        here.path, actor=Actor(kind="person", name="tester"), watch=False, poll_s=0.2
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "↑1 ↓2" in app.sub_title, timeout=15, what="the sync status")
        assert app.sub_title.startswith("all sessions · hub · synced ")
        await pilot.press("S")
        await wait_for(
            pilot, lambda: "↑0 ↓0" in app.sub_title, timeout=20, what="the status after S"
        )
        await wait_for(
            pilot,
            lambda: any(r["summary"].startswith("⇣ b200-node: note") for r in app.timeline.rows),
            timeout=10,
            what="the pulled note, marked",
        )
        mine = [r for r in app.timeline.rows if "no-op here" in r["summary"]]
        assert mine and not mine[0]["summary"].startswith("⇣")
        await wait_for(
            pilot,
            lambda: [r["status"] for r in app.board.rows] == ["conflicting"],
            timeout=10,
            what="the conflict on the board",
        )
        conflict = app.board.rows[0]["conflict"]
        assert "accepted by b200-node" in conflict and "rejected by workstation" in conflict
    assert here.head() == 4 and sync.count_to_push(here) == 0


async def test_a_ledger_without_remote_shows_no_sync_status_and_S_says_why(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "l.duckdb")
    store.append(NoteAdded(text="alone"))
    app = TuneLedgerApp(store.path, watch=False, poll_s=0)
    seen: list[str] = []
    original = app.notify
    app.notify = lambda message, *a, **k: (seen.append(str(message)), original(message, *a, **k))[1]  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("S")
        await wait_for(pilot, lambda: any("sync failed" in m for m in seen), what="the refusal")
        assert app.sub_title == "all sessions"
    assert any("has no remote" in m for m in seen)
