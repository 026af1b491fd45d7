"""The installed product, not the source tree: a wheel built from the sources, installed into a
fresh virtual environment, runs ``tuneledger demo`` from another directory (the demo campaigns
are package data, read through ``importlib.resources``). Also ``python -m ledger.cli.main``.

Process-based on purpose (a build, an install, the console script): ``slow``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ledger.cli.demo import CAMPAIGNS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

#: What the wheel is built from (a copy, so the build leaves nothing in the working tree).
_SOURCES = ("pyproject.toml", "README.md", "data", "ledger", "schemas", "runners", "tui")


def _sh(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin/`` of a venv holding only the wheel; the dependencies come from this
    interpreter's site-packages (a ``.pth`` line: its ``.pth`` files, among them the editable
    install's finder, are not read, so ``ledger`` can only come from the wheel)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in _SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name,
                src / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        else:
            shutil.copy2(ROOT / name, src / name)
    out = _sh(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist", src, cwd=work
    )
    assert out.returncode == 0, out.stderr
    [wheel] = (work / "dist").glob("tuneledger-*.whl")
    venv = work / "venv"
    out = _sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    assert out.returncode == 0, out.stderr
    python = venv / "bin" / "python"
    purelib = _sh(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=work
    )
    site = Path(purelib.stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out = _sh(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-deps",
        "-q",
        wheel,
        cwd=work,
    )
    assert out.returncode == 0, out.stderr
    return venv / "bin"


def test_demo_runs_from_an_installed_wheel(installed: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import ledger.cli.demo as d; print(d.__file__); print(d.DEMO_FILE)",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    module, demo_file = where.stdout.split()
    assert not Path(module).is_relative_to(ROOT), module  # the wheel's copy, not the sources
    assert Path(demo_file).is_file() and not Path(demo_file).is_symlink()
    for campaign, (files, _) in CAMPAIGNS.items():
        for name in files:
            assert (Path(demo_file).parent / name).read_bytes() == (
                ROOT / "data" / name
            ).read_bytes()
        out = subprocess.run(
            [
                str(installed / "tuneledger"),
                "--ledger",
                f"{campaign}.duckdb",
                "demo",
                "--no-tui",
                "--campaign",
                campaign,
            ],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        assert (elsewhere / f"{campaign}.duckdb").exists()


def test_python_dash_m_ledger_cli_runs_plugin_commands(tmp_path: Path) -> None:
    """``python -m ledger.cli.main run plan ...``: the runners' commands find the context object
    (under ``-m`` the module is loaded twice, as ``__main__`` and as ``ledger.cli.main``; the
    ``__main__`` copy's ``Context`` is not the one the runners import)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledger.cli.main",
            "--ledger",
            str(tmp_path / "l.duckdb"),
            "run",
            "plan",
            "nothing.toml",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "context object" not in out.stderr, out.stderr
    assert (
        out.returncode == 5 and out.stderr.strip() == "tuneledger: error: no plan file nothing.toml"
    )
