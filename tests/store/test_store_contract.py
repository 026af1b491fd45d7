"""The event store's contract: one abstract suite run against every store configuration and
every write path of the write layer.

In the style of the ``eventsourcing`` library's tests: ``StoreContract`` states each
guarantee of ``ledger.store.LedgerStore`` (module docstring there; docs/architecture.md) as a
test method, and each ``Test...`` subclass runs all of them against one configuration
(``make_store``/``ledger_file`` hooks). Everything runs on real DuckDB files; the
multi-process guarantees run real processes (``tests/store/writer_process.py``), killed with
SIGKILL where a crash is the point. No mocks, no timing assertions.
"""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import duckdb
import pyarrow as pa
import pytest

from ledger.errors import (
    ConcurrencyConflict,
    EventIdReused,
    InvalidInput,
    LedgerBusy,
    NotFound,
)
from ledger.store import COLUMNS, AppendResult, LedgerStore, columns_table, event_values
from ledger.write import bulk, commands, replicated
from schemas import Event
from schemas.events import (
    DecisionRecorded,
    EventRetracted,
    NoteAdded,
    SessionEnded,
    SessionStarted,
)

WRITER = Path(__file__).with_name("writer_process.py")

#: Lock errors that must never reach a user of the store (DuckDB's words, and ours).
LOCK_ERROR_WORDS = ("Could not set lock", "Conflicting lock", "LedgerBusy")

#: How long a child process may take before the test gives up on it (a hang is a failure).
PROCESS_TIMEOUT_S = 400


# --- helpers ---------------------------------------------------------------------------


def writer_command(*args: object) -> list[str]:
    """The argv of one ``tests/store/writer_process.py`` run."""
    return [sys.executable, str(WRITER), *(str(a) for a in args)]


def note(text: str, **fields: Any) -> NoteAdded:
    return NoteAdded(text=text, **fields)


def rows(store: LedgerStore, where: str = "true") -> list[dict[str, Any]]:
    """Every stored ``events`` row (all columns, as stored), in seq order."""
    return store.query_arrow(f"SELECT * FROM events WHERE {where} ORDER BY seq").to_pylist()


def count(store: LedgerStore, table: str = "events") -> int:
    return store.query_arrow(f"SELECT count(*) AS n FROM {table}")["n"][0].as_py()


def seqs(store: LedgerStore) -> list[int]:
    return store.query_arrow("SELECT seq FROM events ORDER BY seq")["seq"].to_pylist()


def stream_versions(store: LedgerStore) -> dict[str, list[int]]:
    """stream -> its stream_versions in seq order."""
    table = store.query_arrow("SELECT stream, stream_version FROM events ORDER BY seq")
    out: dict[str, list[int]] = defaultdict(list)
    for stream, version in zip(
        table["stream"].to_pylist(), table["stream_version"].to_pylist(), strict=True
    ):
        out[stream].append(version)
    return dict(out)


def assert_gapless(store: LedgerStore) -> int:
    """seq is exactly 1..N and every stream's versions are 1..k in seq order; returns N."""
    stored = seqs(store)
    assert stored == list(range(1, len(stored) + 1))
    for stream, versions in stream_versions(store).items():
        assert versions == list(range(1, len(versions) + 1)), stream
    return len(stored)


def parse_note(text: str) -> dict[str, str]:
    """The fields of a note written by ``writer_process.py append``."""
    return dict(part.split("=", 1) for part in text.split())


def writer_notes(store: LedgerStore) -> list[dict[str, Any]]:
    """Every note written by ``writer_process.py append``, with its seq and stream."""
    table = store.query_arrow(
        "SELECT seq, stream, stream_version, payload->>'text' AS text FROM events "
        "WHERE type = 'note_added' AND starts_with(payload->>'text', 'writer=') ORDER BY seq"
    )
    return [{**row, **parse_note(row["text"])} for row in table.to_pylist()]


def parse_acks(stdout: str) -> dict[str, list[int]]:
    """batch marker -> the seqs the writer was told its batch got."""
    acks = {}
    for line in stdout.splitlines():
        if line.startswith("ack "):
            _, _, marker, seq_list = line.split()
            acks[marker] = [int(s) for s in seq_list.split(",")]
    return acks


def wait_ready(proc: subprocess.Popen[str]) -> None:
    """Wait for a child's ``ready`` line (it then waits for the go file)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", (line, proc.poll())


def ticking_clock(start: datetime) -> Callable[[], datetime]:
    """A clock that moves one second on every call (tests that a retry's new time does not matter)."""
    ticks = itertools.count()
    return lambda: start + timedelta(seconds=next(ticks))


# --- the contract ----------------------------------------------------------------------


class StoreContract:
    """Guarantees every store configuration keeps. Subclasses set the configuration."""

    #: Events per writer process in the concurrency test (racing writers: both append for the
    #: whole run; 100 each took 38-40 s of a test worker per configuration, docs/performance.md).
    events_per_writer = 60

    def ledger_file(self, tmp_path: Path) -> Path:
        """Where this configuration keeps the ledger."""
        return tmp_path / "ledger.duckdb"

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        """A store of this configuration on ``path``; ``overrides`` replace its keyword arguments."""
        raise NotImplementedError

    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        return self.ledger_file(tmp_path)

    @pytest.fixture
    def ledger(self, path: Path) -> LedgerStore:
        store = self.make_store(path)
        assert store.init() is True
        return store

    # --- set-up ------------------------------------------------------------------------

    def test_append_to_a_missing_file_creates_the_ledger(self, path: Path) -> None:
        store = self.make_store(path)
        assert not path.exists()
        (result,) = store.append(note("first"))
        assert (result.seq, result.stream, result.stream_version, result.duplicate) == (
            1,
            "ledger",
            1,
            False,
        )
        assert path.exists()
        assert store.init() is False  # already there: init is idempotent
        assert [e.text for e in store.read()] == ["first"]

    def test_empty_batch_stores_nothing(self, ledger: LedgerStore) -> None:
        assert ledger.append([]) == []
        assert count(ledger) == 0 and ledger.head() == 0

    def test_recorded_at_is_kept_or_comes_from_the_clock(self, ledger: LedgerStore) -> None:
        given = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
        before = ledger.clock()
        ledger.append([note("given", recorded_at=given), note("stamped")])
        after = ledger.clock()
        first, second = ledger.read()
        assert first.recorded_at == given
        assert before <= second.recorded_at <= after

    # --- 1. idempotent append by event_id ------------------------------------------

    def test_same_event_twice_is_stored_once(self, ledger: LedgerStore) -> None:
        event = note("once", session_id="s1")
        (first,) = ledger.append(event)
        (again,) = ledger.append(event)
        assert first == AppendResult(event.event_id, 1, "session:s1", 1, duplicate=False)
        assert again == AppendResult(event.event_id, 1, "session:s1", 1, duplicate=True)
        assert count(ledger) == 1 and ledger.head() == 1

    def test_same_batch_twice_returns_the_original_positions(self, ledger: LedgerStore) -> None:
        ledger.append(note("before"))
        batch = [note(f"b{i}", stream="s") for i in range(3)]
        first = ledger.append(batch)
        before = rows(ledger)
        again = ledger.append(batch)
        assert [(r.seq, r.stream_version, r.duplicate) for r in first] == [
            (2, 1, False),
            (3, 2, False),
            (4, 3, False),
        ]
        assert [(r.event_id, r.seq, r.stream, r.stream_version) for r in again] == [
            (r.event_id, r.seq, r.stream, r.stream_version) for r in first
        ]
        assert all(r.duplicate for r in again)
        assert rows(ledger) == before
        # a retry with expected_version still answers with the original positions
        retried = ledger.append(batch, expected_version=0)
        assert [(r.seq, r.duplicate) for r in retried] == [(2, True), (3, True), (4, True)]

    def test_retry_inside_a_bigger_batch_stores_only_the_new_events(
        self, ledger: LedgerStore
    ) -> None:
        stored = note("stored")
        ledger.append(stored)
        fresh = note("fresh")
        old, new = ledger.append([stored, fresh])
        assert (old.seq, old.duplicate) == (1, True)
        assert (new.seq, new.stream_version, new.duplicate) == (2, 2, False)
        assert [e.event_id for e in ledger.read()] == [stored.event_id, fresh.event_id]

    def test_same_id_with_other_content_is_refused(self, ledger: LedgerStore) -> None:
        event = note("original")
        ledger.append(event)
        before = rows(ledger)
        with pytest.raises(EventIdReused, match=str(event.event_id)):
            ledger.append(event.model_copy(update={"text": "changed"}))
        with pytest.raises(EventIdReused):
            ledger.append(SessionEnded(event_id=event.event_id, summary="original"))
        assert rows(ledger) == before

    def test_same_id_with_other_envelope_is_refused(self, ledger: LedgerStore) -> None:
        event = note("original", session_id="s1")
        ledger.append(event)
        with pytest.raises(EventIdReused):
            ledger.append(event.model_copy(update={"session_id": "s2"}))

    def test_batch_holding_one_id_twice_is_refused_and_stores_nothing(
        self, ledger: LedgerStore
    ) -> None:
        ledger.append(note("before"))
        before = rows(ledger)
        twice = note("twice")
        with pytest.raises(EventIdReused):
            ledger.append([note("a"), twice, note("b"), twice])
        with pytest.raises(EventIdReused):
            ledger.append([note("c"), twice, twice.model_copy(update={"text": "other"})])
        assert rows(ledger) == before
        assert ledger.head() == 1

    # --- 2. atomic batch ---------------------------------------------------------------

    def _assert_batch_left_no_trace(
        self, ledger: LedgerStore, before: list[dict[str, Any]]
    ) -> None:
        assert rows(ledger) == before
        assert ledger.head() == len(before)
        # and no seq was burnt: the next append continues right after the old head
        (result,) = ledger.append(note("after the failed batch", stream="s"))
        assert result.seq == len(before) + 1
        assert_gapless(ledger)

    def test_batch_with_a_wrong_stream_version_third_stores_nothing(
        self, ledger: LedgerStore
    ) -> None:
        ledger.append([note("s1", stream="s"), note("s2", stream="s")])
        before = rows(ledger)
        batch = [
            note("a", stream="s"),
            note("b", stream="t"),
            note("c", stream="s", stream_version=7),
            note("d"),
        ]
        with pytest.raises(ConcurrencyConflict) as caught:
            ledger.append(batch)
        assert caught.value.stream == "s"
        self._assert_batch_left_no_trace(ledger, before)

    def test_batch_with_a_correct_stream_version_is_stored(self, ledger: LedgerStore) -> None:
        results = ledger.append(
            [note("a", stream="s", stream_version=1), note("b", stream="s", stream_version=2)]
        )
        assert [r.stream_version for r in results] == [1, 2]

    def test_batch_with_an_expected_version_conflict_stores_nothing(
        self, ledger: LedgerStore
    ) -> None:
        ledger.append([note("s1", stream="s"), note("s2", stream="s")])
        before = rows(ledger)
        with pytest.raises(ConcurrencyConflict):
            ledger.append([note(f"x{i}", stream="s") for i in range(5)], expected_version=1)
        self._assert_batch_left_no_trace(ledger, before)

    def test_batch_with_a_reused_id_third_stores_nothing(self, ledger: LedgerStore) -> None:
        stored = note("stored", stream="s")
        ledger.append(stored)
        before = rows(ledger)
        batch = [
            note("a"),
            note("b", stream="s"),
            stored.model_copy(update={"text": "rewritten"}),
            note("d"),
        ]
        with pytest.raises(EventIdReused):
            ledger.append(batch)
        self._assert_batch_left_no_trace(ledger, before)

    def test_expected_version_over_several_streams_is_refused(self, ledger: LedgerStore) -> None:
        with pytest.raises(InvalidInput):
            ledger.append([note("a", stream="s"), note("b", stream="t")], expected_version=0)
        assert count(ledger) == 0

    # --- 3. expected-version conflicts ----------------------------------------------

    def test_expected_version_matches_or_conflicts(self, ledger: LedgerStore) -> None:
        first = ledger.append(
            [note("a", stream="run:1"), note("b", stream="run:1")], expected_version=0
        )
        assert [r.stream_version for r in first] == [1, 2]
        with pytest.raises(ConcurrencyConflict) as caught:
            ledger.append(note("late", stream="run:1"), expected_version=1)
        conflict = caught.value
        assert (conflict.stream, conflict.expected, conflict.actual) == ("run:1", 1, 2)
        assert (
            str(conflict) == "concurrency conflict on stream 'run:1': expected version 1, found 2"
        )
        assert conflict.exit_code == 4
        with pytest.raises(ConcurrencyConflict, match="expected version 0, found 2"):
            ledger.append(note("new?", stream="run:1"), expected_version=0)
        (third,) = ledger.append(note("c", stream="run:1"), expected_version=2)
        assert (third.seq, third.stream_version) == (3, 3)
        assert ledger.stream_version("run:1") == 3
        assert ledger.stream_version("never") == 0
        assert [e.text for e in ledger.read(stream="run:1")] == ["a", "b", "c"]

    @pytest.mark.slow  # real processes: racing, SIGKILL, a held lock
    def test_racing_processes_with_the_same_expected_version_one_wins(
        self, ledger: LedgerStore, path: Path, tmp_path: Path
    ) -> None:
        for round_ in range(3):
            stream = f"race:{round_}"
            ledger.append([note("r1", stream=stream), note("r2", stream=stream)])
            go = tmp_path / f"go-race-{round_}"
            procs = [
                subprocess.Popen(
                    writer_command(
                        "race",
                        path,
                        "--writer",
                        name,
                        "--stream",
                        stream,
                        "--expected",
                        2,
                        "--go",
                        go,
                    ),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for name in ("A", "B")
            ]
            for proc in procs:
                wait_ready(proc)
            go.touch()
            outs = [proc.communicate(timeout=PROCESS_TIMEOUT_S) for proc in procs]
            by_code = {
                proc.returncode: (name, *out)
                for name, proc, out in zip(("A", "B"), procs, outs, strict=True)
            }
            stored = [(e.seq, e.stream_version, e.text) for e in ledger.read(stream=stream)]
            assert sorted(p.returncode for p in procs) == [0, 4], (
                outs,
                stored,
                assert_gapless(ledger),
            )
            winner, won_out, _ = by_code[0]
            _, lost_out, lost_err = by_code[4]
            assert won_out.splitlines()[-1].startswith("won ")
            assert lost_out.splitlines()[-1] == (
                f"conflict concurrency conflict on stream '{stream}': expected version 2, found 3"
            )
            assert not any(word in lost_err for word in LOCK_ERROR_WORDS), lost_err
            assert ledger.stream_version(stream) == 3
            assert [e.text for e in ledger.read(stream=stream)] == [
                "r1",
                "r2",
                f"race writer={winner}",
            ]
        assert_gapless(ledger)

    # --- 4. seq gapless, in commit order --------------------------------------------

    def test_seq_is_gapless_and_in_append_order(self, ledger: LedgerStore) -> None:
        expected_texts = []
        rng = random.Random(7)
        for batch_no in range(12):
            batch = [
                note(f"{batch_no}.{i}", stream=f"s{rng.randrange(3)}")
                for i in range(rng.randrange(1, 6))
            ]
            if batch_no % 4 == 3:  # some failed batches in between must leave no gap
                with pytest.raises(ConcurrencyConflict):
                    ledger.append([*batch, note("bad", stream="s0", stream_version=999)])
            results = ledger.append(batch)
            assert [r.seq for r in results] == list(
                range(len(expected_texts) + 1, len(expected_texts) + len(batch) + 1)
            )
            expected_texts += [e.text for e in batch]
        assert assert_gapless(ledger) == len(expected_texts)
        assert [e.text for e in ledger.read()] == expected_texts

    # --- 5. crash -------------------------------------------------------------------

    @pytest.mark.slow  # real processes: racing, SIGKILL, a held lock
    def test_killed_writer_leaves_only_complete_batches(
        self, ledger: LedgerStore, path: Path
    ) -> None:
        batch_size = 5
        rng = random.Random(20260102)
        acked: dict[str, list[int]] = {}
        for round_ in range(5):
            proc = subprocess.Popen(
                writer_command(
                    "append",
                    path,
                    "--writer",
                    f"crash{round_}",
                    "--count",
                    0,
                    "--batch",
                    batch_size,
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            first = proc.stdout.readline()  # it is in its append loop now
            assert first.startswith("ack "), (first, proc.poll())
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.4))
            except subprocess.TimeoutExpired:
                pass
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
            assert proc.returncode == -signal.SIGKILL, err
            acked.update(parse_acks(first + out))

            # the ledger reopens and reads, views included
            store = self.make_store(path)
            total = assert_gapless(store)
            assert len(store.read()) == total
            for view in (
                "live_events",
                "timeline",
                "board",
                "flag_verdicts",
                "server_runs",
                "decisions",
            ):
                store.query_arrow(f"SELECT * FROM {view}")
            assert count(store, "timeline") == total
            # every batch is all or nothing, and every acknowledged batch is there where it was told
            notes = writer_notes(store)
            by_marker: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for row in notes:
                by_marker[row["batch"]].append(row)
            for marker, members in by_marker.items():
                assert sorted(m["part"] for m in members) == [
                    f"{j}/{batch_size}" for j in range(batch_size)
                ], marker
                assert [m["seq"] for m in members] == list(
                    range(members[0]["seq"], members[0]["seq"] + batch_size)
                )
            for marker, acked_seqs in acked.items():
                assert [m["seq"] for m in by_marker[marker]] == acked_seqs, marker
            # a new append continues right after the last stored event
            (result,) = store.append(note(f"after crash {round_}"))
            assert result.seq == total + 1
        assert len(acked) >= 5

    # --- 6. concurrency across processes ------------------------------------------

    @pytest.mark.slow  # real processes: racing, SIGKILL, a held lock
    def test_two_writers_and_a_reader_across_processes(
        self, ledger: LedgerStore, path: Path, tmp_path: Path
    ) -> None:
        n = self.events_per_writer
        go = tmp_path / "go"
        logs = {}

        def start(name: str, *args: object) -> subprocess.Popen[str]:
            # stderr to a file: a chatty child must never block on a full pipe
            logs[name] = err = open(tmp_path / f"{name}.err", "w+")  # noqa: SIM115 (closed below)
            return subprocess.Popen(
                writer_command(*args), stdout=subprocess.PIPE, stderr=err, text=True
            )

        procs = {
            "reader": start(
                "reader",
                "read",
                path,
                "--until",
                2 * n,
                "--interval",
                0.1,
                "--deadline",
                PROCESS_TIMEOUT_S,
                "--go",
                go,
            ),
            "A": start(
                "A",
                "append",
                path,
                "--writer",
                "A",
                "--count",
                n,
                "--shared-stream",
                "shared",
                "--go",
                go,
            ),
            "B": start(
                "B",
                "append",
                path,
                "--writer",
                "B",
                "--count",
                n,
                "--shared-stream",
                "shared",
                "--go",
                go,
            ),
        }
        for proc in procs.values():
            wait_ready(proc)
        go.touch()
        # the writers first: when one fails, its stderr says why (the reader would wait for 2n events)
        stdout = {
            name: procs[name].communicate(timeout=PROCESS_TIMEOUT_S)[0]
            for name in ("A", "B", "reader")
        }
        stderr = {}
        for name, err in logs.items():
            err.seek(0)
            stderr[name] = err.read()
            err.close()

        for name in ("A", "B", "reader"):
            proc = procs[name]
            assert proc.returncode == 0, (
                name,
                proc.returncode,
                stderr[name][-2000:],
                count(ledger),
            )
            assert not any(word in stderr[name] for word in LOCK_ERROR_WORDS), (
                name,
                stderr[name][-2000:],
            )
        assert stdout["reader"].splitlines()[-1].endswith(f"last={2 * n}")

        assert count(ledger) == 2 * n
        assert seqs(ledger) == list(range(1, 2 * n + 1))
        notes = writer_notes(ledger)
        for name in ("A", "B"):
            mine = [row for row in notes if row["writer"] == name]
            # all present exactly once, stored in the order the writer appended them
            assert [int(row["n"]) for row in mine] == list(range(n))
            assert [row["seq"] for row in mine] == sorted(row["seq"] for row in mine)
            acks = parse_acks(stdout[name])
            assert sorted(s for seq_list in acks.values() for s in seq_list) == [
                row["seq"] for row in mine
            ]
        versions = stream_versions(ledger)
        assert versions == {
            "shared": list(range(1, n + 1)),
            "writer:A": list(range(1, n // 2 + 1)),
            "writer:B": list(range(1, n // 2 + 1)),
        }

    # --- 7. rows never rewritten ----------------------------------------------------

    def test_retraction_hides_an_event_but_never_rewrites_it(self, ledger: LedgerStore) -> None:
        keep = note("keep", session_id="s1")
        wrong = note("wrong number", session_id="s1")
        ledger.append([keep, wrong])
        before = rows(ledger, f"event_id = '{wrong.event_id}'")
        (retraction,) = ledger.append(
            EventRetracted(retracted_event_id=wrong.event_id, reason="typo", session_id="s1")
        )
        assert retraction.seq == 3

        live = ledger.query_arrow("SELECT event_id::VARCHAR AS id FROM live_events ORDER BY seq")[
            "id"
        ].to_pylist()
        assert str(wrong.event_id) not in live
        assert live == [str(keep.event_id), str(retraction.event_id)]
        timeline = ledger.query_arrow("SELECT seq, summary FROM timeline ORDER BY seq").to_pylist()
        assert [row["seq"] for row in timeline] == [1, 3]
        assert timeline[1]["summary"] == f"retracted {wrong.event_id}: typo"

        assert rows(ledger, f"event_id = '{wrong.event_id}'") == before
        assert count(ledger) == 3
        assert ledger.get(wrong.event_id).text == "wrong number"  # the log still has it
        assert [e.type for e in ledger.read()] == ["note_added", "note_added", "event_retracted"]

    # --- 8. reads ---------------------------------------------------------------------

    @pytest.fixture
    def filled(self, ledger: LedgerStore) -> LedgerStore:
        ledger.append(
            [
                SessionStarted(title="one", session_id="s1"),  # 1
                note("s1 note 1", session_id="s1"),  # 2
                SessionStarted(title="two", session_id="s2"),  # 3
                note("s2 note", session_id="s2"),  # 4
                DecisionRecorded(
                    decision="keep baseline",
                    session_id="s1",
                    event_id=UUID("dec15e00-5555-7000-8000-000000000005"),
                ),  # 5
                note("s1 note 2", session_id="s1"),  # 6
                note("loose", stream="misc"),  # 7
                note(
                    "by id", event_id=UUID("0c0ffee0-1111-7000-8000-000000000001"), stream="ids"
                ),  # 8
                note(
                    "twin", event_id=UUID("0c0ffee0-2222-7000-8000-000000000002"), stream="ids"
                ),  # 9
            ]
        )
        return ledger

    def test_read_filters(self, filled: LedgerStore) -> None:
        def read_seqs(**kwargs: Any) -> list[int]:
            return [e.seq for e in filled.read(**kwargs)]

        assert read_seqs() == list(range(1, 10))
        assert read_seqs(after_seq=6) == [7, 8, 9]
        assert read_seqs(after_seq=9) == []
        assert read_seqs(types=["note_added"]) == [2, 4, 6, 7, 8, 9]
        assert read_seqs(types=["session_started", "decision_recorded"]) == [1, 3, 5]
        assert read_seqs(types=["no_such_type"]) == []
        assert read_seqs(session_id="s1") == [1, 2, 5, 6]
        assert read_seqs(session_id="s1", types=["note_added"]) == [2, 6]
        assert read_seqs(stream="session:s2") == [3, 4]
        assert read_seqs(stream="ids", after_seq=8) == [9]
        assert read_seqs(limit=2) == [1, 2]
        assert read_seqs(newest_first=True) == list(range(9, 0, -1))
        assert read_seqs(newest_first=True, limit=3) == [9, 8, 7]
        assert read_seqs(session_id="s1", newest_first=True, limit=1, after_seq=1) == [6]
        (decision,) = filled.read(types=["decision_recorded"])
        assert isinstance(decision, DecisionRecorded)
        assert (
            decision.decision,
            decision.session_id,
            decision.stream,
            decision.stream_version,
        ) == ("keep baseline", "s1", "session:s1", 3)

    def test_get_by_id_and_prefix(self, filled: LedgerStore) -> None:
        full = UUID("0c0ffee0-1111-7000-8000-000000000001")
        assert filled.get(full).text == "by id"
        assert filled.get(str(full)).text == "by id"
        assert filled.get(str(full).upper()).text == "by id"
        assert filled.get("0c0ffee0-1111").text == "by id"
        assert filled.get("0c0ffee0-2").text == "twin"
        assert filled.get("dec15e00").seq == 5  # 8 hex digits suffice when unique
        latest = filled.read(newest_first=True, limit=1)[0]
        assert filled.get(str(latest.event_id)[:30]).seq == 9

    @pytest.mark.parametrize(
        "unknown",
        [
            "0c0ffee0-3333-7000-8000-000000000003",  # well-formed, not stored
            "deadbeef",  # prefix of none
            "0c0ffee",  # too short a prefix
        ],
    )
    def test_get_unknown_raises_not_found(self, filled: LedgerStore, unknown: str) -> None:
        with pytest.raises(NotFound):
            filled.get(unknown)

    def test_an_ambiguous_prefix_is_invalid_input_not_not_found(self, filled: LedgerStore) -> None:
        """Exit 3, not 5: "give more digits" is not "no such event"."""
        with pytest.raises(InvalidInput, match="ambiguous.*give more digits"):
            filled.get("0c0ffee0")

    @pytest.mark.parametrize(
        "bad",
        [
            "z" * 36,  # 36 characters but no UUID: DuckDB's ConversionException leaks out
            "________",  # LIKE wildcards: matches any one-event prefix
            "%%%%%%%%",
        ],
    )
    def test_get_of_a_non_id_raises_not_found(self, ledger: LedgerStore, bad: str) -> None:
        ledger.append(note("only event"))
        with pytest.raises(NotFound):
            ledger.get(bad)

    def test_get_by_undashed_hex_id(self, filled: LedgerStore) -> None:
        assert filled.get(UUID("0c0ffee0-1111-7000-8000-000000000001").hex).text == "by id"

    def test_reading_a_missing_ledger_raises_not_found(self, path: Path) -> None:
        store = self.make_store(path)
        with pytest.raises(NotFound, match="no ledger at"):
            store.read()
        with pytest.raises(NotFound):
            store.get("0c0ffee0-1111-7000-8000-000000000001")
        with pytest.raises(NotFound):
            store.head()
        with pytest.raises(NotFound):
            store.query_arrow("SELECT 1")
        assert not path.exists()  # reading does not create the file
        assert NotFound.exit_code == 5

    # --- 9. lock timeout -------------------------------------------------------------

    @pytest.mark.slow  # real processes: racing, SIGKILL, a held lock
    def test_a_held_lock_is_ledger_busy_then_clears(self, ledger: LedgerStore, path: Path) -> None:
        ledger.append(note("before the holder"))
        ledger.close()  # a kept-open store lets go now (the holder below is plain DuckDB)
        holder = subprocess.Popen(
            writer_command("hold", path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
            busy = self.make_store(path, lock_timeout_s=0.5)
            blocked = note("while held")
            with pytest.raises(LedgerBusy) as caught:
                busy.append(blocked)
            assert not isinstance(caught.value, duckdb.Error)
            assert isinstance(caught.value.__cause__, duckdb.Error)
            assert str(path) in str(caught.value)
            assert caught.value.exit_code == 7
            with pytest.raises(LedgerBusy):
                busy.read()
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=PROCESS_TIMEOUT_S)
        assert holder.returncode == 0
        (result,) = busy.append(blocked)
        assert (result.seq, result.duplicate) == (2, False)
        assert [e.text for e in busy.read()] == ["before the holder", "while held"]


# --- configurations -----------------------------------------------------------------


class TestDefaultStore(StoreContract):
    """``LedgerStore(path)``: the defaults (30 s lock timeout, the wall clock)."""

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        return LedgerStore(path, **overrides)


class TestTinyLockTimeoutTickingClock(StoreContract):
    """A 50 ms lock timeout and a clock that ticks a second on every call."""

    # The writers, racers and killed writers are child processes that open the file with the
    # default store (``writer_process.py`` is given no lock timeout and no clock), the kill
    # times from the same seed: TestDefaultStore runs those very processes and checks. The
    # parent's own settings meet no other process in them (it appends before the children
    # start and reads after they end), so here they would repeat the default's run for ~15 s
    # of CPU (docs/performance.md, *The test suite*). The held lock stays: there this
    # configuration's own store waits on a child's lock and appends after it.
    test_racing_processes_with_the_same_expected_version_one_wins = None  # type: ignore[assignment]
    test_killed_writer_leaves_only_complete_batches = None  # type: ignore[assignment]
    test_two_writers_and_a_reader_across_processes = None  # type: ignore[assignment]

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        options: dict[str, Any] = {
            "lock_timeout_s": 0.05,
            "clock": ticking_clock(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        }
        return LedgerStore(path, **{**options, **overrides})


class TestNestedNewDirectory(StoreContract):
    """The file sits in folders that do not exist yet (``init``/``append`` create them)."""

    # The ledger fixture has made the folders before any child starts, so the children's
    # processes and checks are TestDefaultStore's on another path (same seed, same store):
    # not run twice (~18 s of CPU). The folders' creation is the tests above.
    test_racing_processes_with_the_same_expected_version_one_wins = None  # type: ignore[assignment]
    test_killed_writer_leaves_only_complete_batches = None  # type: ignore[assignment]
    test_two_writers_and_a_reader_across_processes = None  # type: ignore[assignment]

    def ledger_file(self, tmp_path: Path) -> Path:
        return tmp_path / "not" / "yet" / "there" / "ledger.duckdb"

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        return LedgerStore(path, **overrides)


class TestKeptOpenStore(StoreContract):
    """``LedgerStore(path, hold_s=0.2)`` in the tests and in every child process: long-lived
    writers that keep the file open, hand it over to a waiting process, catch the projections
    up in batches (a killed one leaves them behind for the next opener to catch up)."""

    hold_s = 0.2

    @pytest.fixture(autouse=True)
    def _children_keep_it_open(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TUNELEDGER_TEST_HOLD_S", str(self.hold_s))

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        return LedgerStore(path, **{"hold_s": self.hold_s, **overrides})


# --- write paths --------------------------------------------------------------------------
# The same guarantees through each path of the write layer (``ledger.write``): the careful
# path (``commands.append``, events), the column path (``commands.append_table``: one Arrow
# table of store rows), the chunked path (``bulk.append_chunks``: the bulk import's parts) and
# the replicated path (``replicated.append_pulled``: rows pulled from a sync hub). Each class
# below runs every test of the contract with ``append`` routed through its path.


def _table(events: list[Event]) -> pa.Table:
    """Events as the column paths take them (``columns_table`` of ``event_values``)."""
    rows = [event_values(e) for e in events]
    return columns_table(
        dict(zip(COLUMNS, map(list, zip(*rows, strict=True)), strict=True)), len(rows)
    )


class WrittenThrough(LedgerStore):
    """A store whose ``append`` goes through one write path of ``ledger.write`` (the path
    gets a plain store on the same file and settings)."""

    #: events per part on the chunked path (a batch of a few events spans parts)
    part_events = 2

    def __init__(self, path: Path, route: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.route = route
        self.plain = LedgerStore(path, **options)

    def append(  # type: ignore[override]
        self,
        events: Event | list[Event],
        *,
        expected_version: int | None = None,
        samples: Any = None,
    ) -> list[AppendResult]:
        batch = [events] if isinstance(events, Event) else list(events)
        if self.route == "careful":
            return commands.append(
                self.plain, batch, expected_version=expected_version, samples=samples
            )
        if expected_version is not None or samples:
            pytest.skip(f"the {self.route} path takes no expected version and no samples")
        if not batch:
            return []
        if self.route == "column":
            return list(commands.append_table(self.plain, _table(batch)))
        if self.route == "chunked":
            parts = [
                _table(batch[i : i + self.part_events])
                for i in range(0, len(batch), self.part_events)
            ]
            results, _ = bulk.append_chunks(self.plain, parts, total=len(batch))
            return list(results)
        if any(e.stream_version is not None for e in batch):
            pytest.skip("the replicated path numbers stream versions itself (offline appends)")
        return list(replicated.append_pulled(self.plain, _table(batch)))


class WritePath(StoreContract):
    """The contract through one write path (``route``), on the default configuration."""

    route = "careful"

    @pytest.fixture(autouse=True)
    def _processes_run_on_the_store_classes(self, request: pytest.FixtureRequest) -> None:
        if request.node.get_closest_marker("slow"):
            pytest.skip("process-based: the configuration classes above run it")

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        return WrittenThrough(path, self.route, **overrides)


class TestCarefulPath(WritePath):
    route = "careful"


class TestColumnPath(WritePath):
    route = "column"


class TestChunkedPath(WritePath):
    route = "chunked"


class TestReplicatedPath(WritePath):
    route = "replicated"


class TestKeptOpenChunkedPath(WritePath):
    """The chunked path into a kept-open writer (a runner's, the TUI's)."""

    route = "chunked"

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        return WrittenThrough(path, self.route, **{"hold_s": 0.2, **overrides})


class TestKeptOpenReplicatedPath(WritePath):
    """The replicated path into a kept-open writer (a sync's)."""

    route = "replicated"

    def make_store(self, path: Path, **overrides: Any) -> LedgerStore:
        return WrittenThrough(path, self.route, **{"hold_s": 0.2, **overrides})


def test_store_fixture_stamps_the_fixed_clock(store: LedgerStore) -> None:
    """The ``store`` fixture: initialised, and its clock is fixed (deterministic snapshots)."""
    store.append([note("a"), note("b")])
    assert [e.recorded_at for e in store.read()] == [datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)] * 2
