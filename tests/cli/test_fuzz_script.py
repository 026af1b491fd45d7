"""``scripts/fuzz_inputs.py`` (the fuzz run docs/reliability.md reports) still runs every target:
once it stopped at start with hypothesis's ``InvalidArgument`` because the MCP server's toolbox
had become lazy and no argument model was found, and nothing noticed. One round, 250 cases."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_round_of_the_fuzz_script_runs_every_target_without_a_failure() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fuzz_inputs.py"), "--minutes", "0.001"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "TUNELEDGER_RESIDENT": "0"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"^(\d+) cases in [\d.]+ min \(1 rounds\): 0 failures$", done.stdout, re.M)
    # five targets (importers twice, config readers, MCP arguments, JSON-RPC lines), at most 50
    # cases each: more than 200 means every one of them ran
    assert found is not None and 200 < int(found.group(1)) <= 250, done.stdout
