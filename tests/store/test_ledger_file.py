"""The store's open path under hostile files and storage (docs/reliability.md).

A newer ledger is refused and never rewritten; reads leave the file's bytes as they were;
an empty, truncated or corrupted file, a symlink loop, a directory at the lock file's place
and names DuckDB would treat as URLs are one line and exit 3; a full disk and read-only
storage are one line and exit 15 (reads on read-only storage work). Real files throughout;
the full and read-only file systems are real tmpfs mounts (root only, skipped otherwise).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import duckdb
import pytest

from ledger.cli.main import main
from ledger.store import LAYOUT_VERSION, LedgerStore
from schemas import NoteAdded


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr)."""
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    else:  # pragma: no cover - main always exits
        code = 0
    out, err = capsys.readouterr()
    return code, out, err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    store = LedgerStore(path)
    store.append([NoteAdded(text="one", session_id="s1"), NoteAdded(text="two", session_id="s1")])
    return path


def set_meta(path: Path, key: str, value: str) -> None:
    con = duckdb.connect(str(path))
    con.execute("INSERT OR REPLACE INTO ledger_meta VALUES (?, ?)", [key, value])
    con.close()


READS = (
    ("events",),
    ("sql", "SELECT count(*) AS n FROM events"),
    ("views",),
    ("export", "markdown"),
)


# --- point 3: newer ledgers ------------------------------------------------------------------


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_reads_leave_the_file_byte_for_byte(
    ledger: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    before = digest(ledger)
    code, _, err = cli(capsys, "--ledger", str(ledger), *args)
    assert code == 0, err
    assert digest(ledger) == before


@pytest.mark.parametrize(
    "args", [*READS, ("append", "note_added", "-f", "text=x")], ids=lambda a: a[0]
)
def test_a_newer_ledger_is_refused_naming_both_versions_and_never_rewritten(
    ledger: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    newer = str(LAYOUT_VERSION + 1)
    set_meta(ledger, "layout_version", newer)
    before = digest(ledger)
    code, out, err = cli(capsys, "--ledger", str(ledger), *args)
    assert code == 3 and out == "" and len(err.splitlines()) == 1
    assert "newer tuneledger" in err and newer in err and str(LAYOUT_VERSION) in err
    assert digest(ledger) == before


def test_a_newer_layout_version_is_refused(
    ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_meta(ledger, "layout_version", str(LAYOUT_VERSION + 1))
    code, _, err = cli(capsys, "--ledger", str(ledger), "append", "note_added", "-f", "text=x")
    assert code == 3 and len(err.splitlines()) == 1
    assert f"layout version {LAYOUT_VERSION + 1}" in err and f"up to {LAYOUT_VERSION}" in err


def test_an_unknown_layout_is_a_clean_error_not_a_binder_exception(
    ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    con = duckdb.connect(str(ledger))
    con.execute("ALTER TABLE events ADD COLUMN tenant VARCHAR")
    con.close()
    for args in (("append", "note_added", "-f", "text=x"), ("events",)):
        code, _, err = cli(capsys, "--ledger", str(ledger), *args)
        assert (
            code == 3
            and "unknown ledger layout" in err
            and "tenant" in err
            and len(err.splitlines()) == 1
        )
    set_meta(ledger, "layout_version", "one")
    code, _, err = cli(capsys, "--ledger", str(ledger), "events")
    assert code == 3 and "unknown ledger layout" in err and "'one'" in err


# --- point 5: damaged files, odd names -------------------------------------------------------


@pytest.mark.parametrize("damage", ["empty", "truncated", "corrupted"])
@pytest.mark.parametrize(
    "args", [("events",), ("append", "note_added", "-f", "text=x")], ids=lambda a: a[0]
)
def test_a_damaged_ledger_is_one_line(
    ledger: Path, capsys: pytest.CaptureFixture[str], damage: str, args: tuple[str, ...]
) -> None:
    data = ledger.read_bytes()
    ledger.write_bytes(
        {
            "empty": b"",
            "truncated": data[:20000],
            "corrupted": data[:12] + b"\xff" * 5000 + data[5012:],
        }[damage]
    )
    before = digest(ledger)
    code, out, err = cli(capsys, "--ledger", str(ledger), *args)
    assert (
        code == 3 and len(err.splitlines()) == 1 and str(ledger) in err and "Traceback" not in err
    )
    assert digest(ledger) == before


def test_a_symlink_loop_and_a_directory_at_the_lock_file_are_one_line(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = tmp_path / "loop.duckdb"
    loop.symlink_to(loop)
    for args in (("events",), ("init",), ("append", "note_added", "-f", "text=x")):
        code, _, err = cli(capsys, "--ledger", str(loop), *args)
        assert code == 3 and "symlink loop" in err and len(err.splitlines()) == 1
    (tmp_path / "l.duckdb.lock").unlink()
    (tmp_path / "l.duckdb.lock").mkdir()
    for args in (("events",), ("append", "note_added", "-f", "text=x")):
        code, _, err = cli(capsys, "--ledger", str(ledger), *args)
        assert code == 3 and "is a directory" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "name", ["md:x", "motherduck:x.duckdb", "http://127.0.0.1:9/x.duckdb", "s3://bucket/x.duckdb"]
)
def test_url_like_ledger_names_are_refused_before_duckdb_sees_them(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for args in (("init",), ("events",), ("append", "note_added", "-f", "text=x")):
        code, _, err = cli(capsys, "--ledger", name, *args)
        assert code == 3 and "not a local ledger file name" in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no stray files, no extension downloads under HOME


# --- point 5: storage ---------------------------------------------------------------------------


def test_a_full_disk_is_one_line_exit_15_and_keeps_what_was_acknowledged(
    tmpfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmpfs / "l.duckdb"
    assert cli(capsys, "--ledger", str(ledger), "init")[0] == 0
    assert cli(capsys, "--ledger", str(ledger), "append", "note_added", "-f", "text=kept")[0] == 0
    free = os.statvfs(tmpfs).f_bavail * os.statvfs(tmpfs).f_frsize
    subprocess.run(["fallocate", "-l", str(free - 4096), str(tmpfs / "filler")], check=True)
    codes = []
    for i in range(
        4
    ):  # DuckDB's WAL has some room left in its last block: the disk fills within a few
        code, _, err = cli(
            capsys, "--ledger", str(ledger), "append", "note_added", "-f", f"text=more {i}"
        )
        codes.append(code)
        if code:
            break
    assert codes[-1] == 15 and len(err.splitlines()) == 1 and "No space left on device" in err
    (tmpfs / "filler").unlink()
    stored = [e.text for e in LedgerStore(ledger).read()]
    assert stored[0] == "kept" and len(stored) == len(
        codes
    )  # every acknowledged append, nothing else


@pytest.mark.parametrize("lock_file", [True, False], ids=["with-lock-file", "without-lock-file"])
def test_read_only_storage_reads_work_append_is_one_line(
    tmpfs: Path, capsys: pytest.CaptureFixture[str], lock_file: bool
) -> None:
    ledger = tmpfs / "l.duckdb"
    LedgerStore(ledger).append(NoteAdded(text="on read-only storage"))
    if not lock_file:
        (tmpfs / "l.duckdb.lock").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    before = digest(ledger)
    code, out, err = cli(
        capsys,
        "--ledger",
        str(ledger),
        "sql",
        "SELECT text FROM live_events, LATERAL (SELECT payload->>'text' AS text)",
        "--format",
        "csv",
    )
    assert code == 0 and "on read-only storage" in out, err
    code, _, err = cli(capsys, "--ledger", str(ledger), "append", "note_added", "-f", "text=x")
    assert code == 15 and len(err.splitlines()) == 1 and "Read-only file system" in err
    assert digest(ledger) == before
