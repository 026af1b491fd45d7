"""Reads leave the file byte for byte, and run this code's views, never SQL stored in the file
(``ledger/derive/reader.py``, ``LedgerStore.connect``).

A ledger file holds views and projections made by whichever tuneledger last wrote it. A read
of a file made by another version (its views digest differs), or left behind by a killed
writer, answers with this code's views over the log and writes nothing; a file whose stored
view (or macro) was crafted to read another file gives that file to nobody.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from uuid import UUID

import duckdb
import pytest

from ledger.store import LedgerStore
from ledger.write import commands
from schemas import Actor, DecisionRecorded, EventRetracted, NoteAdded
from tests.support.cli_inprocess import invoke

ME = Actor(kind="agent", name="test")
WRONG = UUID("0c0ffee0-3333-7000-8000-000000000003")


def _filled(path: Path) -> LedgerStore:
    store = LedgerStore(path)
    commands.append(
        store,
        [
            NoteAdded(text="first", session_id="s"),
            NoteAdded(text="wrong number", session_id="s", event_id=WRONG),
            DecisionRecorded(decision="keep the baseline", rationale="no gain", session_id="s"),
            EventRetracted(retracted_event_id=WRONG, reason="typo", session_id="s"),
        ],
    )
    return store


def _files(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (the ledger, its lock, any WAL) with its bytes' digest."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _cli(path: Path, *args: str) -> tuple[int, str, str]:
    out = invoke(["--ledger", path, *args])
    return out.returncode, out.stdout, out.stderr


def _tamper(path: Path, *statements: str) -> None:
    con = duckdb.connect(str(path))
    try:
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()


READS = [
    ("events", "--limit", "1"),
    ("events",),
    ("sql", "SELECT decision FROM decisions"),
    ("export", "markdown"),
    ("views",),
]


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_a_read_leaves_a_ledger_of_another_version_byte_for_byte(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    path = tmp_path / "l.duckdb"
    _filled(path)
    expected = _cli(path, *args)
    assert expected[0] == 0, expected
    # Another tuneledger's file: its views digest (and so its projections) are not this code's.
    _tamper(
        path,
        "UPDATE ledger_meta SET value = 'sql-0000000000000000' WHERE key = 'views_version'",
        "DELETE FROM event_summaries",
        "DELETE FROM control_events",
    )
    before = _files(tmp_path)
    code, out, err = _cli(path, *args)
    assert code == 0, err
    assert _files(tmp_path) == before  # byte for byte, and no write-ahead log left
    assert out == expected[1]  # this code's answers, derived from the log
    assert "keep the baseline" in out or args[0] == "views" or "--limit" in args


def test_a_read_of_a_ledger_a_killed_writer_left_behind_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l.duckdb"
    _filled(path)
    expected = _cli(path, "events")
    # What a writer killed before its catch-up leaves: the last events not projected yet.
    _tamper(
        path,
        "UPDATE ledger_meta SET value = '2' WHERE key = 'projected_seq'",
        "DELETE FROM event_summaries WHERE seq > 2",
        "DELETE FROM control_events WHERE seq > 2",
        "DELETE FROM retractions",
    )
    before = _files(tmp_path)
    code, out, err = _cli(path, "events")
    assert code == 0, err
    assert out == expected[1] and "retracted" in out
    code, out, _ = _cli(path, "sql", "SELECT count(*) AS n FROM timeline", "--format", "csv")
    assert code == 0 and out.split() == ["n", "3"]  # the retracted one left out
    assert _files(tmp_path) == before
    # The next writer brings the file itself up to date.
    commands.append(LedgerStore(path), NoteAdded(text="later"))
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM event_summaries").fetchall() == [(5,)]
    finally:
        con.close()


SECRET = "the-secret-of-this-machine"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


def test_a_view_stored_in_the_file_is_never_run(tmp_path: Path, secret: Path) -> None:
    path = tmp_path / "l.duckdb"
    _filled(path)
    quoted = str(secret).replace("'", "''")
    _tamper(
        path,
        "CREATE OR REPLACE VIEW decisions AS SELECT seq, event_id, session_id, recorded_at, "
        "actor_kind, actor_name, content AS decision, content AS rationale, "
        "['x'] AS alternatives, ['x'] AS evidence_event_ids, NULL AS candidate_id, "
        f"NULL AS source FROM live_control, read_text('{quoted}') "
        "WHERE type = 'decision_recorded'",
    )
    for args in (("export", "markdown"), ("sql", "SELECT decision FROM decisions")):
        code, out, err = _cli(path, *args)
        assert code == 0, err
        assert SECRET not in out and "keep the baseline" in out


def test_a_macro_in_the_file_never_stands_in_for_a_function(tmp_path: Path, secret: Path) -> None:
    """A macro stored in the file named like a function the views call (a table function
    here, which DuckDB would otherwise look up in the file's catalog first) is not run."""
    path = tmp_path / "l.duckdb"
    _filled(path)
    quoted = str(secret).replace("'", "''")
    _tamper(
        path,
        f"CREATE MACRO json_each(x) AS TABLE SELECT content AS key, content AS value "
        f"FROM read_text('{quoted}')",
        "CREATE MACRO list_filter(a, b) AS ['crafted']",
    )
    for args in (("export", "markdown"), ("sql", "SELECT * FROM kernel_tune_results")):
        code, out, err = _cli(path, *args)
        assert code == 0, err
        assert SECRET not in out and "crafted" not in out
