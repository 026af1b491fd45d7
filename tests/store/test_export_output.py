"""``export -o`` never does what ``> FILE`` could not (docs/reliability.md).

Real files, pipes, hard links and owners: ``-`` is standard output; ``/dev/stdout`` (and any
name of an open descriptor) is written at the descriptor, so ``-o /dev/stdout >> log`` appends
to ``log`` and a pipe works; a file the user may not write is refused (exit 15) even in a
folder where a rename would replace it; a hard-linked file is written so both names see the
new text. The owner cases change the effective user of this process (``as_user``), which
needs root; run without root, the 0444 case runs as the user and the other-owner case skips.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledger.errors import StorageError
from ledger.store import LedgerStore
from ledger.store.safe_files import descriptor_of, write_file
from schemas import SessionStarted
from tests.support.cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ledger.cli.main"]
NOBODY = 65534


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    # the session's title is what the decision log shows of it (a note is only counted)
    LedgerStore(path).append(SessionStarted(title="hello from the ledger", session_id="s1"))
    return path


def export(ledger: Path, output: str | Path) -> subprocess.CompletedProcess[str]:
    return invoke(["--ledger", ledger, "export", "markdown", "-o", output], cwd=ROOT)


def test_dash_is_standard_output(ledger: Path, tmp_path: Path) -> None:
    done = invoke(["--ledger", ledger, "export", "markdown", "-o", "-"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "hello from the ledger" in done.stdout
    assert not (tmp_path / "-").exists()


def test_a_descriptor_name_is_written_at_the_descriptor_not_replaced(
    ledger: Path, tmp_path: Path
) -> None:
    """What `-o /dev/stdout >> log.txt` does to log.txt, with a descriptor of this process:
    the text is appended where the descriptor points, the file is the same inode."""
    log = tmp_path / "log.txt"
    log.write_text("kept line\n")
    inode = log.stat().st_ino
    with open(log, "ab") as handle:
        for name in (f"/dev/fd/{handle.fileno()}", f"/proc/self/fd/{handle.fileno()}"):
            done = export(ledger, name)
            assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("kept line\n# ")
    assert text.count("hello from the ledger") == 2
    assert log.stat().st_ino == inode


def test_descriptor_names() -> None:
    assert descriptor_of("/dev/stdout") == 1
    assert descriptor_of("/dev/stderr") == 2
    assert descriptor_of("/proc/self/fd/7") == 7
    assert descriptor_of(f"/proc/{os.getpid()}/fd/3") == 3
    assert descriptor_of("/proc/1/fd/1") is None or os.getpid() == 1  # another process's
    assert descriptor_of("/tmp/report.md") is None
    assert descriptor_of("/dev/null") is None


@pytest.mark.slow
def test_dev_stdout_appended_to_a_file_or_a_pipe_in_a_real_process(
    ledger: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    log.write_text("kept line\n")
    args = [*CLI, "--ledger", str(ledger), "export", "markdown", "-o", "/dev/stdout"]
    with open(log, "ab") as out:
        done = subprocess.run(args, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert log.read_text().startswith("kept line\n# ")
    piped = subprocess.run(args, capture_output=True, text=True, timeout=120)  # stdout a pipe
    assert piped.returncode == 0, piped.stderr
    assert "hello from the ledger" in piped.stdout


def test_a_hard_linked_file_is_written_so_both_names_see_the_new_text(
    ledger: Path, tmp_path: Path
) -> None:
    first = tmp_path / "report.md"
    first.write_text("old text, longer than nothing " * 100)
    twin = tmp_path / "twin.md"
    os.link(first, twin)
    done = export(ledger, first)
    assert done.returncode == 0, done.stderr
    assert "hello from the ledger" in twin.read_text()
    assert first.read_text() == twin.read_text()
    assert first.stat().st_ino == twin.stat().st_ino and first.stat().st_nlink == 2
    assert "old text" not in first.read_text()  # cut to the new length


def test_a_file_of_ours_keeps_its_permissions_and_is_replaced_whole(
    ledger: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.md"
    out.write_text("old")
    os.chmod(out, 0o640)
    done = export(ledger, out)
    assert done.returncode == 0, done.stderr
    assert "hello from the ledger" in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@contextmanager
def as_user(uid: int) -> Iterator[None]:
    """This process's effective user and group set to ``uid`` for the block (root only)."""
    os.setegid(uid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder outside pytest's private tmp (0700 for root) that another user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="tuneledger-owner-", dir="/tmp"))
    os.chmod(folder, 0o777)
    try:
        yield folder
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def test_a_read_only_file_is_not_written(shared_folder: Path) -> None:
    """0444 in a folder the user may write: `> FILE` says "Permission denied", so does -o,
    though a rename would have replaced it."""
    out = shared_folder / "report.md"
    out.write_text("old")
    os.chmod(out, 0o444)
    if os.geteuid() == 0:
        os.chown(out, NOBODY, NOBODY)
        with as_user(NOBODY), pytest.raises(StorageError, match="report.md: cannot write"):
            write_file(out, "new")
    else:
        with pytest.raises(StorageError, match="report.md: cannot write"):
            write_file(out, "new")
    assert out.read_text() == "old" and stat.S_IMODE(out.stat().st_mode) == 0o444
    assert [p.name for p in shared_folder.iterdir()] == ["report.md"]  # no temporary file left


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another owner needs root to make")
def test_another_owners_file_in_a_writable_folder_is_not_written_nor_taken_over(
    shared_folder: Path, ledger: Path
) -> None:
    out = shared_folder / "report.md"
    out.write_text("theirs")
    os.chmod(out, 0o644)
    os.chown(out, 4321, 4321)
    with as_user(NOBODY), pytest.raises(StorageError, match="Permission denied"):
        write_file(out, "mine")
    assert out.read_text() == "theirs" and out.stat().st_uid == 4321
    # as the CLI says it (exit 15, one line), for a user who may read the ledger
    os.chmod(ledger.parent, 0o755)
    os.chmod(ledger, 0o644)
    done = invoke(["--ledger", ledger, "export", "markdown", "-o", out], cwd=ROOT)
    assert done.returncode == 0  # root may write it, as with `>`: in place, owner kept
    assert out.stat().st_uid == 4321 and "hello from the ledger" in out.read_text()


def test_a_writable_file_of_another_owner_is_written_in_place_and_keeps_its_owner(
    shared_folder: Path,
) -> None:
    out = shared_folder / "report.md"
    out.write_text("theirs")
    os.chmod(out, 0o666)
    owner = 4321 if os.geteuid() == 0 else os.geteuid()
    if os.geteuid() == 0:
        os.chown(out, owner, owner)
    write_file(out, "the export")
    assert out.read_text() == "the export" and out.stat().st_uid == owner
