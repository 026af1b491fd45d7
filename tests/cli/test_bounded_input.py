"""Memory bounded by design: every file the program reads is a regular file within its kind's
bound (``ledger.input_files``), or it is refused at once in one line, exit 3.

Each entry point runs as a real ``tuneledger`` process under an address-space limit
(``RLIMIT_AS``, as ``ulimit -v`` sets it): before, ``run server start x --configs /dev/zero``
read without bound to 20 GB and the kernel's OOM killer fired. Under the limit an unbounded
read would end in a ``MemoryError`` traceback (exit 1), never in one line with exit 3.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.errors import InvalidInput
from ledger.input_files import LIMITS, MiB, load_json, load_toml, read_regular, read_stream
from tests.support.cli_inprocess import invoke

#: Enough for the interpreter, DuckDB and pyarrow to start; far less than /dev/zero's bound.
ADDRESS_SPACE = 3 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def init(ledger: Path) -> None:
    """``tuneledger init`` in this process (tests/support/cli_inprocess.py): the ledger is the
    set-up, not what runs under the limit (a process of its own cost ~0.35 s of CPU a test)."""
    done = invoke(["--ledger", ledger, "init"])
    assert done.returncode == 0, done.stderr


def run_limited(
    tmp_path: Path, *args: str | Path, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNELEDGER_RESIDENT": "0"}
    ledger = tmp_path / "l.duckdb"
    if not ledger.exists():
        init(ledger)
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli", "--ledger", str(ledger)] + [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=stdin,
        preexec_fn=_limited,
        env=env,
        cwd=tmp_path,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.toml"
    os.mkfifo(path)
    return path


@pytest.fixture
def big_config(tmp_path: Path) -> Path:
    """A sparse file one byte past the config bound: refused by its size, never read."""
    path = tmp_path / "big.toml"
    with path.open("wb") as handle:
        handle.truncate(LIMITS["config"] + 1)
    return path


@pytest.fixture
def big_result(tmp_path: Path) -> Path:
    path = tmp_path / "bench.jsonl"
    with path.open("wb") as handle:
        handle.truncate(LIMITS["result"] + 1)
    return path


ENTRY_POINTS = [
    ("run", "server", "start", "x", "--configs", "{f}"),
    ("run", "server", "show", "--configs", "{f}"),
    ("run", "plan", "{f}"),
    ("run", "spec", "{f}"),
    # research reads its model config and servers TOML before it looks for the wheel
    ("research", "--engine", "sglang==0.0.0", "--arch", "sm120", "--model-config", "{f}"),
    ("research", "--engine", "sglang==0.0.0", "--arch", "sm120", "--config", "{f}"),
]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("args", ENTRY_POINTS, ids=lambda a: " ".join(a[:3]))
def test_a_device_is_one_line_under_a_memory_limit(
    tmp_path: Path, args: tuple[str, ...], device: str
) -> None:
    done = run_limited(tmp_path, *(a.replace("{f}", device) for a in args))
    assert done.returncode == 3, done.stderr
    assert one_line(done) == f"tuneledger: error: {device}: not a regular file (a character device)"


@pytest.mark.parametrize("args", ENTRY_POINTS, ids=lambda a: " ".join(a[:3]))
def test_a_fifo_and_a_file_past_the_bound_are_one_line(
    tmp_path: Path, args: tuple[str, ...], fifo: Path, big_config: Path
) -> None:
    done = run_limited(tmp_path, *(a.replace("{f}", str(fifo)) for a in args))
    assert done.returncode == 3
    assert one_line(done).endswith(f"{fifo}: not a regular file (a FIFO)")
    done = run_limited(tmp_path, *(a.replace("{f}", str(big_config)) for a in args))
    assert done.returncode == 3
    assert one_line(done).endswith(
        f"{big_config}: too large (1.0 MiB): a config file is read up to 1.0 MiB (docs/reliability.md)"
    )


def test_import_of_a_device_or_a_result_past_the_bound_is_one_line(
    tmp_path: Path, big_result: Path
) -> None:
    done = run_limited(tmp_path, "import", "/dev/zero")
    assert done.returncode == 3 and "/dev/zero: not a regular file" in one_line(done)
    done = run_limited(tmp_path, "import", big_result)
    assert done.returncode == 3
    assert f"{big_result}: too large (256.0 MiB): a result file is read up to 256.0 MiB" in (
        one_line(done)
    )


def test_standard_input_past_the_bound_is_one_line(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        done = run_limited(tmp_path, "append", stdin=zero.fileno())
    assert done.returncode == 3
    assert one_line(done).endswith(
        "<stdin>: too large: a result file is read up to 256.0 MiB (docs/reliability.md)"
    )


def test_the_helper_holds_at_most_the_bound(tmp_path: Path) -> None:
    """A file that says 0 bytes (``/proc``) but reads more is cut at the bound plus one byte."""
    text = read_regular("/proc/self/status", "config")
    assert text.startswith(b"Name:")
    grows = tmp_path / "g.json"
    grows.write_bytes(b"[" + b"0," * MiB + b"0]")
    with pytest.raises(InvalidInput, match="too large"):
        load_json(grows)
    with open("/dev/zero", "rb") as zero, pytest.raises(InvalidInput, match="too large"):
        read_stream(zero, "<stdin>", "config")


def test_deep_toml_and_json_are_one_line(tmp_path: Path) -> None:
    """A servers TOML nested 5,000 deep printed a 2,995-line RecursionError."""
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InvalidInput, match="deep.toml: not valid TOML: nested too deep"):
        load_toml(deep)
    inline = tmp_path / "inline.toml"
    inline.write_text("a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n")
    with pytest.raises(InvalidInput, match="nested too deep"):
        load_toml(inline)
    js = tmp_path / "deep.json"
    js.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InvalidInput, match="deep.json: not valid JSON: nested too deep"):
        load_json(js)
    for args in ENTRY_POINTS:
        file, kind = (js, "JSON") if "--model-config" in args else (deep, "TOML")
        done = run_limited(tmp_path, *(a.replace("{f}", str(file)) for a in args))
        assert done.returncode == 3
        assert one_line(done).endswith(f"{file}: not valid {kind}: nested too deep"), args
