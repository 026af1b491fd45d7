"""What a test needs that a machine may lack (torch, transformers, the vLLM CPU build, the MCP
SDK, PostgreSQL): a skip on a developer's machine, a failure where everything must run.

``.ci/run`` exports ``TUNELEDGER_REQUIRE_E2E=1``: there every test runs, and one whose needs are
absent fails, naming what is missing, instead of passing by skipping (the README walkthrough,
the MCP session and the transformers end-to-end tests used to skip quietly when torch did not
install). Elsewhere the test skips, saying what to install. The one place that decides:
tests call ``module``, ``program`` or ``absent``, never ``pytest.importorskip`` or
``pytest.skip`` for these (tests/project/test_any_machine.py checks it).

The engine tier: a test that runs a real inference engine or reads a released engine's wheel
(torch + ``transformers serve``, vLLM's CPU build, SGLang and vLLM wheels from the package index)
is marked ``engine``, naming the modules it needs (``@pytest.mark.engine("torch", ...)``).
``make test`` leaves that tier out, and installs none of it; ``make test-engines`` installs and
runs it; CI runs both. The modules are checked when such a test starts
(``tests/conftest.py``, ``pytest_runtest_setup``), never when its file is imported: ``make test``
imports every file, on a machine where torch may never have been installed.
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

#: The modules of the engine tier (the ``e2e`` extra): only a test marked ``engine`` needs them.
ENGINE_MODULES = frozenset({"torch", "transformers", "fastapi"})


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


def cuda_gpu() -> ModuleType:
    """torch, on a machine with a CUDA GPU and triton; a skip everywhere else, CI included.

    The one need that is never a failure: no machine of CI or of the project's tests has a GPU
    (the lent device machine runs these tests: bench/h200_moe_tune.py), so its absence is the
    normal case there, not a missed install."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
        pytest.skip(
            "needs torch and triton with a CUDA GPU: run on the device machine",
            allow_module_level=True,
        )
    torch = importlib.import_module("torch")
    if not torch.cuda.is_available():
        pytest.skip(
            "needs a CUDA GPU: the kernels are Triton GPU code (run on the device machine)",
            allow_module_level=True,
        )
    return torch
