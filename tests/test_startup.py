"""CLI start-up: `tuneledger append` imports only what appending needs (README, Performance).

Timing is measured by bench/bench_ledger.py, not here; this checks the cause of the cost -
which heavy modules a real `append` process loads - so a stray top-level import shows up.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: Process-based on purpose (start-up of fresh interpreters): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

#: Imported only by commands that need them (tables, samples, the runners, the TUI).
LAZY = ("pyarrow", "numpy", "rich", "httpx", "tenacity", "textual", "runners", "tui")

PROBE = """
import sys
from ledger import cli

try:
    cli.main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(m for m in {lazy!r} if m in sys.modules))
"""


def test_append_loads_no_heavy_module(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    code = PROBE.format(lazy=LAZY)
    for args in (["init"], ["append", "note_added", "-f", "text=hi"], ["append", "--json"]):
        out = subprocess.run(
            [sys.executable, "-c", code, "--ledger", str(ledger), *args],
            capture_output=True,
            text=True,
            timeout=120,
            input='{"type": "note_added", "text": "piped"}',
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[-1] == "", (args, out.stdout)


def test_plugin_commands_still_run_and_are_listed(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "  run " in out.stdout and "  tui " in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "Usage: " in out.stdout, out.stderr
