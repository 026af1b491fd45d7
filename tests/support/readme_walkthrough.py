"""README.md's "Your first session" run by bash once per test session, for the two tests that
read it: tests/project/test_readme_walkthrough.py (it runs as written, and what it leaves) and
tests/mcp/test_mcp_session.py (the agent's decision log has the CLI's shape).

The walkthrough starts seven ``transformers serve`` processes and benchmarks them: ~135 s of
CPU alone (docs/performance.md, *The test suite*), run twice before it was shared. Under
pytest-xdist the two files may land on different workers, so the first worker to ask runs it
in the run's shared temporary folder under a lock and writes what it got; the other reads that.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from tests.support import needs

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Your first session"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Walkthrough:
    """Where the walkthrough ran (its ledger, its decision log) and what bash gave back."""

    folder: Path
    returncode: int
    stdout: str
    stderr: str


def walkthrough_blocks(readme: str) -> list[str]:
    """The ``sh`` code blocks of the README's first-session section, in order."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else None]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def user_environment() -> dict[str, str]:
    """The environment a user's shell has: none of the test process's ``TUNELEDGER_`` settings
    (the user's own actor and ledger), offline, but the run's research cache (tests/conftest.py:
    sglang's index built once a run, as the user's own cache holds it after their first run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    if "TUNELEDGER_RESEARCH_CACHE" in os.environ:
        env["TUNELEDGER_RESEARCH_CACHE"] = os.environ["TUNELEDGER_RESEARCH_CACHE"]
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200"})
    return env


def run(folder: Path) -> Walkthrough:
    """The section's blocks but the ``make`` lines (the one-time set-up), run by bash in
    ``folder``, which holds what a fresh clone has at its root (links to ``.venv``, ``examples``
    and ``tests``): the commands run exactly as a new user types them from the repository root,
    in the environment of a user's shell (``user_environment``)."""
    needs.program("transformers", BIN)
    blocks = walkthrough_blocks((ROOT / "README.md").read_text())
    script = "\n".join(block for block in blocks if not block.lstrip().startswith("make "))
    folder.mkdir(parents=True, exist_ok=True)
    for name in (".venv", "examples", "tests"):
        (folder / name).symlink_to(ROOT / name)
    out = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=folder,
        env=user_environment(),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    return Walkthrough(folder, out.returncode, out.stdout, out.stderr)


def shared(tmp_path_factory: pytest.TempPathFactory) -> Walkthrough:
    """The walkthrough of this test run: run here, or read from the worker that ran it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process: the session fixture is enough
        return run(tmp_path_factory.mktemp("readme-walkthrough"))
    # each worker's base folder is inside the run's own (pytest-N/popen-gwK): that one is shared
    root = tmp_path_factory.getbasetemp().parent
    result = root / "readme-walkthrough.json"
    with (root / "readme-walkthrough.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits here while one runs it
        if result.exists():
            done = json.loads(result.read_text())
            return Walkthrough(**{**done, "folder": Path(done["folder"])})
        walked = run(root / "readme-walkthrough")
        result.write_text(json.dumps({**asdict(walked), "folder": str(walked.folder)}))
        return walked
