"""The bulk import (``ledger.write.bulk``) stores the same rows and views as the event-by-event path."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.derive import projections
from ledger.errors import InvalidInput
from ledger.store import LedgerStore
from ledger.write import bulk
from schemas import Actor
from tests.support.cli_inprocess import invoke

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from bench_ledger import Campaign  # noqa: E402  (the bench's deterministic synthetic campaign)

ROWS = "SELECT * EXCLUDE (recorded_at) FROM events ORDER BY seq"


def campaign_lines(n: int) -> list[str]:
    return [json.dumps(obj) for obj in Campaign(n)]


def _chunks(monkeypatch: pytest.MonkeyPatch, *, first: int, size: int, parallel_min: int) -> None:
    """Small validation tasks, so a small test file is split (and validated by workers)."""
    monkeypatch.setattr(bulk, "FIRST_CHUNK_LINES", first)
    monkeypatch.setattr(bulk, "CHUNK_LINES", size)
    monkeypatch.setattr(bulk, "PARALLEL_MIN_LINES", parallel_min)


def table_rows(store: LedgerStore, sql: str) -> list[dict]:
    # Sums kept by catch-up batches differ from one batch's only by float rounding (summation order).
    return [
        {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}
        for row in store.query_arrow(sql).to_pylist()
    ]


def snapshot(store: LedgerStore) -> dict[str, list[dict]]:
    out = {"events": table_rows(store, "SELECT * FROM events ORDER BY seq")}
    for table in projections.PROJECTION_TABLES:
        order = {"retractions": "event_id", "stream_heads": "stream"}.get(table, "seq")
        out[table] = table_rows(store, f"SELECT * FROM {table} ORDER BY {order}")
    for view in ("board", "benchmark_deltas", "flag_verdicts", "decisions"):
        out[view] = table_rows(store, f"SELECT * FROM {view} ORDER BY ALL")
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_bulk_import_equals_event_by_event(
    tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = campaign_lines(800)
    # several chunks (a shorter first one), and workers even for a small file
    _chunks(monkeypatch, first=60, size=150, parallel_min=300)
    # every event of the campaign carries its own recorded_at and actor, so both paths agree
    one_by_one = LedgerStore(
        tmp_path / "a.duckdb", hold_s=60
    )  # kept open: fast, and a path of its own
    from ledger.write.jsonl import iter_jsonl

    for event in iter_jsonl(lines, "x"):
        one_by_one.append(event)
    one_by_one.close()
    bulk_store = LedgerStore(tmp_path / "b.duckdb")
    results, types = bulk.import_lines(bulk_store, lines, "x", workers=workers)
    assert [r.seq for r in results] == list(range(1, 801))
    assert types == [json.loads(line)["type"] for line in lines]
    assert snapshot(bulk_store) == snapshot(one_by_one)
    # idempotent: the same file again stores nothing
    again, _ = bulk.import_lines(bulk_store, lines, "x", workers=workers)
    assert all(r.duplicate for r in again) and [r.seq for r in again] == [r.seq for r in results]


def test_parts_projected_from_their_own_rows_equal_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each part of a bulk import is projected from the rows just inserted (not read back
    from ``events``): every projection table and view must be what a full replay of the log
    gives, ``recorded_at`` stamped by the store included, and the position at the head."""
    _chunks(monkeypatch, first=40, size=110, parallel_min=100)
    lines = []
    for i, line in enumerate(campaign_lines(500)):
        obj = json.loads(line)
        if i % 3 == 0:  # the store stamps these inside its transaction
            del obj["recorded_at"]
        lines.append(json.dumps(obj))
    store = LedgerStore(tmp_path / "l.duckdb")
    results, _ = bulk.import_lines(store, lines, "x", workers=2)
    assert results.applied == 500
    projected = snapshot(store)
    stamped = table_rows(
        store,
        "SELECT count(*) AS n FROM events e JOIN event_summaries s USING (seq) "
        "WHERE e.recorded_at = s.recorded_at AND e.recorded_at > TIMESTAMPTZ '2026-01-01'",
    )
    assert stamped == [{"n": 167}]
    with store.connect(read_only=False) as con:
        assert projections.position(con) == 500
        con.execute("BEGIN")
        projections.rebuild(con)
        con.execute("COMMIT")
    assert snapshot(store) == projected


def test_a_bad_line_names_its_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _chunks(monkeypatch, first=100, size=100, parallel_min=10)
    lines = campaign_lines(500)
    lines[333] = '{"type": "note_added"}'
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    with pytest.raises(InvalidInput, match=r"^in.jsonl:334: note_added: field 'text' is required"):
        bulk.import_lines(store, lines, "in.jsonl", workers=2)
    assert store.head() == 0


def test_defaults_apply_to_events_that_lack_them(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "l.duckdb")
    lines = [
        '{"type": "note_added", "text": "a"}',
        '{"type": "note_added", "text": "b", "session_id": "mine",'
        ' "actor": {"kind": "agent", "name": "x"}}',
    ]
    bulk.import_lines(store, lines, "x", actor=Actor.parse("runner:r"), session_id="s1", workers=1)
    got = table_rows(store, "SELECT actor_kind, actor_name, session_id FROM events ORDER BY seq")
    assert got == [
        {"actor_kind": "runner", "actor_name": "r", "session_id": "s1"},
        {"actor_kind": "agent", "actor_name": "x", "session_id": "mine"},
    ]


def test_cli_append_of_many_lines_takes_the_bulk_path(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    text = (
        "\n".join(json.dumps({"type": "note_added", "text": f"n{i}"}) for i in range(1500)) + "\n"
    )
    out = invoke(["--ledger", str(ledger), "--session", "s", "append", "--json"], stdin=text)
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert [r["seq"] for r in results] == list(range(1, 1501))
    store = LedgerStore(ledger)
    assert table_rows(
        store, "SELECT count(*) AS n, count(DISTINCT session_id) AS s FROM timeline"
    ) == [{"n": 1500, "s": 1}]


@pytest.mark.parametrize("count", [3, 1500])  # the general path and the bulk path
def test_unicode_line_separators_inside_a_json_string_are_text(tmp_path: Path, count: int) -> None:
    """JSON allows U+2028, U+2029 and U+0085 raw inside a string; JSON Lines end at a
    newline only (``str.splitlines`` split such a line in two and refused it)."""
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    text = "\u2028 \u2029 \x85"
    lines = [
        json.dumps({"type": "note_added", "text": f"n{i} {text}"}, ensure_ascii=False)
        for i in range(count)
    ]
    out = invoke(["--ledger", str(ledger), "append"], stdin="\r\n".join(lines) + "\r\n")
    assert out.returncode == 0, out.stderr
    stored = table_rows(
        LedgerStore(ledger), "SELECT payload->>'text' AS t FROM events ORDER BY seq"
    )
    assert stored == [{"t": f"n{i} {text}"} for i in range(count)]


@pytest.mark.parametrize("count", [3, 1500])  # the general path and the bulk path
def test_a_token_as_a_key_is_masked_and_never_echoed(tmp_path: Path, count: int) -> None:
    """A flag or an environment variable named by a token is masked like a token in a value
    (two such keys stay two entries); an error quoting a token as a field name or an event
    type masks it too."""
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    token, other = "sk-proj-AbCdEf0123456789XyZabcdef", "sk-proj-QqQqEf0123456789XyZabcdef"
    lines = [
        json.dumps(
            {
                "type": "server_started",
                "run_id": f"r{i}",
                "engine": "sglang",
                "flags": {"tp": 2, token: True, other: 1},
                "env": {token: "1"},
            }
        )
        for i in range(count)
    ]
    out = invoke(  # server_started: a runner's event type, a runner's to append
        ["--ledger", str(ledger), "--actor", "runner:test", "append"], stdin="\n".join(lines) + "\n"
    )
    assert out.returncode == 0, out.stderr
    store = LedgerStore(ledger)
    rows = table_rows(store, "SELECT payload->'flags' AS flags, payload->'env' AS env FROM events")
    assert len(rows) == count
    assert {json.dumps(json.loads(r["flags"])) for r in rows} == {
        json.dumps({"tp": 2, "***": True, "*** (2)": 1})
    }
    assert all(token not in str(r) for r in rows)
    for bad in ({"type": "note_added", "text": "x", token: 1}, {"type": token}):
        refused = invoke(["--ledger", str(ledger), "append"], stdin=json.dumps(bad) + "\n")
        assert refused.returncode == 3 and token not in refused.stderr and "***" in refused.stderr


@pytest.mark.parametrize("filler", [0, 1500])  # the general path and the bulk path
def test_a_retraction_of_a_retraction_in_the_same_input_is_refused(
    tmp_path: Path, filler: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retraction is final whether the retraction it names is stored or earlier in the
    same input (in the bulk path: in the same chunk or an earlier one): exit 3, nothing
    stored."""
    _chunks(monkeypatch, first=500, size=500, parallel_min=1000)
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    note = "01972a81-0000-7000-8000-000000000001"
    first = "01972a81-0000-7000-8000-000000000002"
    lines = [
        _line(1, type="note_added", text="a fact"),
        _line(2, type="event_retracted", retracted_event_id=note, reason="wrong"),
        *(_line(10 + i, type="note_added", text=f"filler {i}") for i in range(filler)),
        _line(3, type="event_retracted", retracted_event_id=first, reason="undo the undo"),
    ]
    # through `append`: less what the ledger sets (the appender's actor, the store's clock)
    lines = [
        json.dumps({k: v for k, v in json.loads(ln).items() if k not in ("actor", "recorded_at")})
        for ln in lines
    ]
    out = invoke(["--ledger", str(ledger), "append"], stdin="\n".join(lines) + "\n")
    assert out.returncode == 3, out.stderr
    assert "is itself a retraction" in out.stderr
    assert LedgerStore(ledger).head() == 0


def test_the_bench_campaign_keeps_the_write_rules() -> None:
    """The bench's synthetic campaign never retracts a retraction (the import refuses one:
    `make bench` stopped at its event 99,334 before the generator knew)."""
    events = list(Campaign(30_000))
    retractions = {e["event_id"] for e in events if e["type"] == "event_retracted"}
    assert retractions
    assert not {e["retracted_event_id"] for e in events if e["type"] == "event_retracted"} & (
        retractions
    )


def _line(i: int, **fields: object) -> str:
    base = {
        "event_id": f"01972a81-0000-7000-8000-{i:012d}",
        "recorded_at": f"2025-06-01T08:{i // 60:02d}:{i % 60:02d}+00:00",
        "actor": {"kind": "person", "name": "ana"},
        "session_id": "s1",
    }
    return json.dumps({**base, **fields})


def _existing_and_batch() -> tuple[list[str], list[str]]:
    """Lines already in the ledger, then a batch that continues their streams and retracts
    one event stored before it and one inside it."""
    before = [
        _line(1, type="note_added", text="first"),
        _line(2, type="candidate_proposed", candidate_id="flag:x", kind="flag", title="try x"),
        _line(3, type="note_added", text="to retract"),
    ]
    batch = [
        _line(
            4, type="candidate_triaged", candidate_id="flag:x", status="accepted", stream_version=2
        ),
        _line(5, type="note_added", text="second"),
        _line(6, type="note_added", text="retracted in its own batch", session_id="s2"),
        _line(
            7,
            type="event_retracted",
            retracted_event_id="01972a81-0000-7000-8000-000000000003",
            reason="typo",
        ),
        _line(
            8,
            type="event_retracted",
            retracted_event_id="01972a81-0000-7000-8000-000000000006",
            reason="wrong session",
        ),
        _line(9, type="candidate_triaged", candidate_id="flag:x", status="done", stream_version=3),
    ]
    return before, batch


@pytest.mark.parametrize("hold_s", [0, 60])
def test_bulk_batch_continues_stored_streams_like_appends(tmp_path: Path, hold_s: float) -> None:
    """The column path numbers seq and stream versions from what is stored (a one-shot and a
    kept-open store), checks retraction targets in the ledger and in the batch, and stores
    the rows and views that appending one event at a time does."""
    from ledger.write.jsonl import iter_jsonl

    before, batch = _existing_and_batch()
    one_by_one = LedgerStore(tmp_path / "a.duckdb", hold_s=60)
    for event in iter_jsonl(before + batch, "x"):
        one_by_one.append(event)
    one_by_one.close()
    bulk_store = LedgerStore(tmp_path / "b.duckdb", hold_s=hold_s)
    for event in iter_jsonl(before, "x"):
        bulk_store.append(event)
    results, _ = bulk.import_lines(bulk_store, batch, "x", workers=1)
    bulk_store.close()
    assert [(r.seq, r.stream, r.stream_version) for r in results] == [
        (4, "candidate:flag:x", 2),
        (5, "session:s1", 3),
        (6, "session:s2", 1),
        (7, "session:s1", 4),
        (8, "session:s1", 5),
        (9, "candidate:flag:x", 3),
    ]
    assert snapshot(bulk_store) == snapshot(one_by_one)


def test_bulk_batch_with_a_conflict_or_unknown_target_stores_nothing(tmp_path: Path) -> None:
    from ledger.errors import ConcurrencyConflict, NotFound

    store = LedgerStore(tmp_path / "l.duckdb")
    before, batch = _existing_and_batch()
    bulk.import_lines(store, before, "x", workers=1)
    wrong_version = [*batch[:2], json.dumps({**json.loads(batch[2]), "stream_version": 7})]
    with pytest.raises(ConcurrencyConflict):
        bulk.import_lines(store, wrong_version, "x", workers=1)
    unknown = [
        *batch[:2],
        _line(
            20,
            type="event_retracted",
            retracted_event_id="01972a81-0000-7000-8000-000000000099",
            reason="?",
        ),
    ]
    with pytest.raises(NotFound, match="000000000099"):
        bulk.import_lines(store, unknown, "x", workers=1)
    assert store.head() == 3
    # a retry of a batch whose first part is stored: the rest is stored, the first is a duplicate
    bulk.import_lines(store, batch[:2], "x", workers=1)
    results, _ = bulk.import_lines(store, batch, "x", workers=1)
    assert [r.duplicate for r in results] == [True, True, False, False, False, False]
    assert [r.seq for r in results] == [4, 5, 6, 7, 8, 9]
    assert results.applied == 4


def test_bulk_masks_secrets_and_refuses_big_integers_as_event_by_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk's payloads and sources are checked and masked at once (one gate over their
    joined text): the rows are those of the event-by-event path, secrets anywhere in the
    chunk (first line, last line, a source, a camelCase key) masked, and an integer beyond
    BIGINT is refused naming its file:line and field, before a later bad line."""
    from ledger.write.jsonl import iter_jsonl

    _chunks(monkeypatch, first=4, size=4, parallel_min=6)
    lines = [
        _line(1, type="note_added", text="--api-key sk-abcdefghijklmnopqrstuv first"),
        _line(2, type="note_added", text="output_tokens 3, throughput high"),
        _line(
            3, type="note_added", text="plain", source="curl -H 'Authorization: Bearer abc12345678'"
        ),
        _line(4, type="note_added", text='{"authToken": "xyz"}'),
        _line(5, type="note_added", text="nothing here"),
        _line(6, type="note_added", text="é HF_TOKEN=hf_abcdefghijklmnopqrstu"),
        _line(7, type="note_added", text="last password=hunter2"),
    ]
    one_by_one = LedgerStore(tmp_path / "a.duckdb", hold_s=60)
    for event in iter_jsonl(lines, "x"):
        one_by_one.append(event)
    one_by_one.close()
    for workers in (1, 2):
        store = LedgerStore(tmp_path / f"b{workers}.duckdb")
        bulk.import_lines(store, lines, "x", workers=workers)
        assert snapshot(store) == snapshot(one_by_one)
        stored = "\n".join(
            str(row) for row in table_rows(store, "SELECT payload, source FROM events")
        )
        for secret in ("sk-abc", "Bearer abc", "xyz", "hf_abc", "hunter2"):
            assert secret not in stored
        assert "output_tokens 3, throughput high" in stored

    big = [
        *lines[:5],
        _line(6, type="server_started", run_id="r", engine="sglang", config_name="c", port=2**64),
        '{"type": "note_added"}',
    ]
    store = LedgerStore(tmp_path / "c.duckdb")
    store.init()
    with pytest.raises(
        InvalidInput, match=r"^in.jsonl:6: server_started: field 'port': integer 1844"
    ):
        bulk.import_lines(store, big, "in.jsonl", workers=2)
    assert store.head() == 0


@pytest.mark.parametrize("hold_s", [0, 60])
def test_chunks_inserted_as_they_come_continue_like_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold_s: float
) -> None:
    """Validated chunks go into the one transaction as they arrive (``append_column_chunks``):
    streams continue across chunks and after the import (kept open or not), and the rows and
    views are the event-by-event path's."""
    from ledger.write.jsonl import iter_jsonl

    _chunks(monkeypatch, first=70, size=70, parallel_min=100)
    lines = campaign_lines(400)
    after = _line(59, type="note_added", text="after the import", session_id="s000-tp8")
    one_by_one = LedgerStore(tmp_path / "a.duckdb", hold_s=60)
    for event in iter_jsonl([*lines, after], "x"):
        one_by_one.append(event)
    one_by_one.close()
    store = LedgerStore(tmp_path / "b.duckdb", hold_s=hold_s)
    store.init()
    threads = "SELECT current_setting('threads') AS n"
    configured = store.query_arrow(threads).to_pylist()
    results, _ = bulk.import_lines(store, lines, "x", workers=2)
    assert [r.seq for r in results] == list(range(1, 401)) and results.applied == 400
    # DuckDB ran on the cores the workers left while chunks came; a kept-open store goes on
    # with its own setting
    assert store.query_arrow(threads).to_pylist() == configured
    (event,) = iter_jsonl([after], "x")
    assert [r.seq for r in store.append(event)] == [401]
    store.close()
    assert snapshot(store) == snapshot(one_by_one)


def test_a_doubt_in_a_later_chunk_takes_the_whole_batch_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retraction of an event of a later chunk, or an event_id twice in two chunks, is a
    doubt for the chunk-by-chunk insert: it rolls back, and the whole batch takes the
    careful path (the retraction is stored as before; the repeated id is refused, nothing
    stored)."""
    _chunks(monkeypatch, first=2, size=2, parallel_min=4)
    later_target = [
        _line(1, type="note_added", text="a"),
        _line(
            2,
            type="event_retracted",
            retracted_event_id="01972a81-0000-7000-8000-000000000005",
            reason="later in the file",
        ),
        _line(3, type="note_added", text="b"),
        _line(4, type="note_added", text="c"),
        _line(5, type="note_added", text="retracted by line 2"),
    ]
    store = LedgerStore(tmp_path / "l.duckdb")
    results, _ = bulk.import_lines(store, later_target, "x", workers=2)
    assert [r.seq for r in results] == [1, 2, 3, 4, 5] and results.applied == 5
    assert table_rows(store, "SELECT count(*) AS n FROM retractions") == [{"n": 1}]

    from ledger.errors import EventIdReused

    twice = [
        *(_line(i, type="note_added", text=f"t{i}") for i in range(10, 14)),
        _line(10, type="note_added", text="t10"),
    ]
    with pytest.raises(EventIdReused):
        bulk.import_lines(store, twice, "x", workers=2)
    assert store.head() == 5


def test_a_bad_first_chunk_never_touches_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store is taken once the first chunk is valid: a bad line in it creates no file
    (and a reader is not kept waiting on that validation)."""
    _chunks(monkeypatch, first=100, size=100, parallel_min=10)
    lines = campaign_lines(300)
    lines[5] = "{not json"
    for workers in (1, 2):
        store = LedgerStore(tmp_path / f"new{workers}.duckdb")
        with pytest.raises(InvalidInput, match=r"^in.jsonl:6: not valid JSON"):
            bulk.import_lines(store, lines, "in.jsonl", workers=workers)
        assert not store.path.exists()


# --- the process around a bulk append: killed, interrupted -----------------------------------

#: The installed command, as a user runs it (in-process: the resident's tests are elsewhere).
TUNELEDGER = str(Path(sys.executable).with_name("tuneledger"))


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose (it only waits for its parent to read its status)
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _bulk_append(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, list[int]]:
    """A bulk append (80,000 notes) started in-process, returned once its validation workers run."""
    lines = tmp_path / "big.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"type": "note_added", "text": f"bulk {i}"}) + "\n" for i in range(80_000)
        )
    )
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    process = subprocess.Popen(
        [TUNELEDGER, "--ledger", str(ledger), "append", "--json"],
        stdin=lines.open("rb"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TUNELEDGER_RESIDENT": "0"},
    )
    deadline = time.monotonic() + 60
    while not (workers := _children(process.pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert workers, "the bulk append started no validation workers"
    return process, ledger, workers


@pytest.mark.slow
def test_a_killed_bulk_append_leaves_no_worker_behind(tmp_path: Path) -> None:
    """SIGKILL of the parent mid-import: its workers die too (they were left blocked on a
    pipe for good, and in the resident process they held the client's socket)."""
    process, ledger, workers = _bulk_append(tmp_path)
    process.kill()
    process.wait(timeout=30)
    deadline = time.monotonic() + 20
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers)
    assert LedgerStore(ledger).head() == 0


@pytest.mark.slow
def test_ctrl_c_during_a_bulk_append_is_exit_130_in_one_line(tmp_path: Path) -> None:
    """SIGINT while the workers validate: exit 130, one line (DuckDB's "Query interrupted"
    came out as a traceback and exit 1), nothing stored."""
    process, ledger, _ = _bulk_append(tmp_path)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    # `append --json`: the JSON error object, or the plain line when the interrupt lands inside
    # a lazy import (ledger/cli/main.py ends those with os._exit before click is reached)
    json_error = '{"error": {"exit_code": 130, "meaning": "interrupted", "message": "aborted"}}'
    assert err.decode().strip() in ("tuneledger: aborted", json_error)
    assert LedgerStore(ledger).head() == 0


def test_a_worker_whose_parent_died_before_it_asked_to_die_with_it_exits() -> None:
    """A worker checks the parent pid it was given before the fork, not ``os.getppid()`` read
    after it: a parent SIGKILLed between the fork and the worker's start was already replaced by
    init, and the worker, watching init, lived on for good. Here the pid given is not the
    worker's parent (as when that parent has died): it exits; given its own parent, it goes on."""
    context = multiprocessing.get_context("fork")
    orphan = context.Process(target=bulk._die_with_parent, args=(os.getpid() + 1_000_000,))
    child = context.Process(target=bulk._die_with_parent, args=(os.getpid(),))
    for process in (orphan, child):
        process.start()
        process.join(timeout=60)
    assert (orphan.exitcode, child.exitcode) == (1, 0)
