"""What a test needs that a machine may lack (torch, transformers, the vLLM CPU build, the MCP
SDK, PostgreSQL): a skip on a developer's machine, a failure where everything must run.

``.ci/run`` exports ``TUNELEDGER_REQUIRE_E2E=1``: there every test runs, and one whose needs are
absent fails, naming what is missing, instead of passing by skipping (the README walkthrough,
the MCP session and the transformers end-to-end tests used to skip quietly when torch did not
install). Elsewhere the test skips, saying what to install. The one place that decides:
tests call ``module``, ``program`` or ``absent``, never ``pytest.importorskip`` or
``pytest.skip`` for these (tests/project/test_any_machine.py checks it).
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

#: The environment variable that turns a missing need into a failure (``.ci/run`` sets it).
REQUIRE = "TUNELEDGER_REQUIRE_E2E"

#: The modules whose absence the helpers govern (tests/project/test_any_machine.py: no test
#: skips on them any other way).
GOVERNED = frozenset({"torch", "transformers", "fastapi", "uvicorn", "mcp"})


def required() -> bool:
    """Whether every test must run here (``TUNELEDGER_REQUIRE_E2E=1``)."""
    return os.environ.get(REQUIRE) == "1"


def absent(what: str) -> NoReturn:
    """The test cannot run here because ``what`` is missing: a failure where ``required``, a
    skip otherwise."""
    if required():
        pytest.fail(f"{what} ({REQUIRE}=1: this test must run here, not skip)", pytrace=False)
    pytest.skip(what, allow_module_level=True)


def module(name: str, hint: str = "make installs it") -> ModuleType:
    """``import name``, or ``absent`` when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        absent(f"needs the module {name} ({hint}): {exc}")


def program(name: str, folder: Path) -> str:
    """The path of the program ``name`` in ``folder`` (a venv's bin), or ``absent``."""
    found = shutil.which(name, path=str(folder))
    if found is None:
        absent(f"the `{name}` command is not installed in {folder}")
    return found
