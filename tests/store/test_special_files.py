"""Special files are never replaced, never hang and never read without bound (docs/reliability.md).

Real files, FIFOs and device nodes: the nodes are made in the test's own folder with ``mknod``
(the same major/minor as /dev/null, /dev/full, /dev/zero) so that a fault can only damage
the test's copy, never the system's; those tests need root and skip otherwise.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from schemas import NoteAdded
from tests.support.cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ledger.cli.main"]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device node needs root")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in this process: files that end without blocking (links, devices that do not
    block, folders)."""
    return invoke(args, cwd=ROOT)


def run_process(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI as a process with a timeout: FIFOs and /dev/zero would hang or read without
    bound if a fault came back, and a hung process is killed where this one would not be."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    LedgerStore(path).append(NoteAdded(text="hello from the ledger", session_id="s1"))
    return path


def device(path: Path, minor: int) -> Path:
    """A character device node like /dev/null (1, 3), /dev/zero (1, 5), /dev/full (1, 7)."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def test_export_through_a_symlink_writes_the_target_and_keeps_the_link(
    ledger: Path, tmp_path: Path
) -> None:
    target = tmp_path / "real" / "decisions.md"
    target.parent.mkdir()
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.md"
    link.symlink_to(target)
    done = run("--ledger", str(ledger), "export", "markdown", "-o", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "| note_added | 1 | 1 | 1 |" in target.read_text()  # the ledger's decision log
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file's permissions are kept
    assert sorted(p.name for p in target.parent.iterdir()) == ["decisions.md"]  # no temp file left


@pytest.mark.slow
def test_export_to_a_fifo_writes_in_place_or_refuses_without_a_reader(
    ledger: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = run_process("--ledger", str(ledger), "export", "markdown", "-o", str(fifo), timeout=30)
    assert (
        done.returncode == 3 and "no reader" in done.stderr and len(done.stderr.splitlines()) == 1
    )
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    done = run_process("--ledger", str(ledger), "export", "markdown", "-o", str(fifo), timeout=30)
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and b"| note_added | 1 | 1 | 1 |" in got[0]


@root_only
def test_export_to_a_device_writes_in_place_and_a_full_device_fails_in_one_line(
    ledger: Path, tmp_path: Path
) -> None:
    null = device(tmp_path / "null", 3)
    done = run("--ledger", str(ledger), "export", "markdown", "-o", str(null))
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(null.lstat().st_mode)  # still the device, not a regular file
    full = device(tmp_path / "full", 7)
    done = run("--ledger", str(ledger), "export", "markdown", "-o", str(full))
    assert done.returncode == 15 and len(done.stderr.splitlines()) == 1
    assert "No space left on device" in done.stderr and str(full) in done.stderr
    assert stat.S_ISCHR(full.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
def test_import_of_a_fifo_is_refused_at_once(ledger: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "bench.jsonl"
    os.mkfifo(fifo)
    done = run_process("--ledger", str(ledger), "import", str(fifo), timeout=30)
    assert (
        done.returncode == 3
        and "not a regular file" in done.stderr
        and len(done.stderr.splitlines()) == 1
    )
    assert LedgerStore(ledger).head() == 1


@root_only
@pytest.mark.slow
def test_import_of_a_zero_device_is_refused_not_read(ledger: Path, tmp_path: Path) -> None:
    zero = device(tmp_path / "zero", 5)
    done = run_process("--ledger", str(ledger), "import", str(zero), timeout=30)
    assert (
        done.returncode == 3
        and "not a regular file" in done.stderr
        and len(done.stderr.splitlines()) == 1
    )


def test_import_through_a_symlink_loop_is_one_line(ledger: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    done = run("--ledger", str(ledger), "import", str(loop))
    assert (
        done.returncode == 3
        and "symlink loop" in done.stderr
        and len(done.stderr.splitlines()) == 1
    )


def test_import_of_a_directory_is_one_line(ledger: Path, tmp_path: Path) -> None:
    """A folder named where a file belongs (a tuned-config folder, say): exit 3, not a traceback."""
    folder = tmp_path / "triton_3_6_0"
    folder.mkdir()
    done = run("--ledger", str(ledger), "import", str(folder))
    assert (
        done.returncode == 3
        and "is a directory" in done.stderr
        and len(done.stderr.splitlines()) == 1
    )
