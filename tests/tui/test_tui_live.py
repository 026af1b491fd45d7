"""Live updates: events appended by ANOTHER PROCESS show up with no key pressed, through the
file watcher and, when it is off, through the fallback poll; and the TUI never makes that
writer fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli.demo import DEMO_SESSION
from ledger.store import LedgerStore
from tests.tui.pilot import SIZE, make_demo, wait_for, wait_loaded
from tui.app import TuneLedgerApp

#: Process-based on purpose (another process appends while the TUI runs): `make test` runs it, `make check` does not.
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _append_note(path: Path, text: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger.cli.main",
            "--ledger",
            str(path),
            "--session",
            DEMO_SESSION,
            "append",
            "note_added",
            "-f",
            f"text={text}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _shown(app: TuneLedgerApp, text: str) -> bool:
    return any(text in row["summary"] for row in app.timeline.rows)


@pytest.mark.parametrize("mode", ["watch", "poll"])
async def test_note_from_another_process_appears_without_a_key(tmp_path: Path, mode: str) -> None:
    store = make_demo(tmp_path)
    app = TuneLedgerApp(
        store.path, DEMO_SESSION, watch=mode == "watch", poll_s=0.5 if mode == "poll" else 60
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        proc = _append_note(store.path, f"written by another process ({mode})")
        # no key is pressed: only the file watcher (or the poll) can bring it in; how fast is
        # bench/bench_tui.py's to measure (here the writer's own start-up dominates, seconds on
        # a loaded machine)
        await wait_for(
            pilot,
            lambda: _shown(app, f"written by another process ({mode})"),
            what="the note in the timeline",
        )
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        await wait_for(
            pilot, lambda: app.last_seq == store.head() == 82, what="the head to advance"
        )


async def test_board_follows_a_triage_from_another_process(tmp_path: Path) -> None:
    store = make_demo(tmp_path)
    # A triage passes the candidate stream's version, as the board shows it (ledger/write/commands.py).
    version = store.query_arrow(
        "SELECT stream_version FROM board WHERE candidate_id = 'flag:cuda-graph-max-bs'"
    )["stream_version"][0].as_py()
    app = TuneLedgerApp(store.path, DEMO_SESSION, poll_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ledger.cli.main",
                "--ledger",
                str(store.path),
                "--session",
                DEMO_SESSION,
                "append",
                "candidate_triaged",
                "-f",
                "candidate_id=flag:cuda-graph-max-bs",
                "-f",
                "status=accepted",
                "--expected-version",
                str(version),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        await wait_for(
            pilot,
            lambda: any(
                r["candidate_id"] == "flag:cuda-graph-max-bs" and r["status"] == "accepted"
                for r in app.board.rows
            ),
            what="the board to follow",
        )


async def test_writers_never_fail_while_the_tui_refreshes(tmp_path: Path) -> None:
    """Ten appends in a row from other processes, each a separate DuckDB writer, while the
    TUI refreshes after every one: all succeed and all show up, in order."""
    store = make_demo(tmp_path)
    app = TuneLedgerApp(store.path, DEMO_SESSION, poll_s=0.3)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        procs = []
        for i in range(10):
            procs.append(_append_note(store.path, f"burst {i}"))
            await pilot.pause(0.05)
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        await wait_for(pilot, lambda: app.timeline.last_seq == 91, what="all ten notes")
        seqs = [row["seq"] for row in app.timeline.rows]
        assert seqs == sorted(set(seqs)) == list(range(1, 92))


async def test_retraction_rereads_the_timeline(tmp_path: Path) -> None:
    from schemas.events import EventRetracted

    store = make_demo(tmp_path)
    app = TuneLedgerApp(store.path, DEMO_SESSION, poll_s=0.3)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        note = store.read(types=["note_added"])[0]
        LedgerStore(store.path).append(
            EventRetracted(
                retracted_event_id=note.event_id, reason="wrong", session_id=DEMO_SESSION
            )
        )
        await wait_for(
            pilot,
            lambda: (
                app.timeline.last_seq == 82
                and note.event_id not in {row["event_id"] for row in app.timeline.rows}
                and str(note.event_id) not in {row["event_id"] for row in app.timeline.rows}
            ),
            what="the retracted note to leave the timeline",
        )
