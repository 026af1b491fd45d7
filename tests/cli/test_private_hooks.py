"""The private hooks of the interpreter and of pydantic that the CLI uses for start-up and exit
time (``ledger/cli/main.py``), each pinned here: a test fails when the interpreter or pydantic
changes what the hook does, instead of the CLI silently losing the speed-up or its output.

- ``threading._shutdown()``: what the interpreter's own exit does first (tell a thread pool's
  workers to stop, wait for every non-daemon thread); ``run`` calls it before ``os._exit``;
- ``atexit._run_exitfuncs()``: run the registered exit handlers (a kept-open ledger is caught
  up and closed there), once: they are cleared after;
- ``pydantic.plugin._loader._plugins``: pydantic's plugin cache, None until the first
  validator looks for plugins among every installed distribution's entry points; the CLI
  sets it to "none" first (``_skip_pydantic_plugin_scan``).

Each runs in a fresh interpreter: the hooks act on a whole process.
"""

from __future__ import annotations

import subprocess
import sys

SHUTDOWN = """
import threading, time
from concurrent.futures import ThreadPoolExecutor
done = []
def late():
    time.sleep(0.3)
    done.append("thread")
threading.Thread(target=late).start()
pool = ThreadPoolExecutor(1)
pool.submit(done.append, "pool job")
threading._shutdown()
print(sorted(done), threading.active_count())
"""

EXITFUNCS = """
import atexit, os
atexit.register(print, "handler ran", flush=True)
atexit._run_exitfuncs()
atexit._run_exitfuncs()
print("after", flush=True)
os._exit(0)
"""

PLUGINS = """
import pydantic.plugin._loader as loader
assert loader._plugins is None, loader._plugins
def refuse(**kwargs):
    raise AssertionError(f"pydantic scanned entry points: {kwargs}")
loader.entry_points = refuse
from ledger.cli.main import _skip_pydantic_plugin_scan
_skip_pydantic_plugin_scan()
from schemas import NoteAdded
NoteAdded.model_validate({"text": "hi"})
print("plugins", loader._plugins)
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env_free = {"PYTHONPATH": "", "PATH": ""}  # no PYDANTIC_* / PYTHON* settings inherited
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env_free
    )


def test_threading_shutdown_waits_for_threads_and_stops_a_pool() -> None:
    out = _run(SHUTDOWN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['pool", "job',", "'thread']", "1"]


def test_atexit_run_exitfuncs_runs_each_handler_once() -> None:
    out = _run(EXITFUNCS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["handler ran", "after"]


def test_pydantic_looks_for_plugins_through_a_cache_the_cli_can_fill_first() -> None:
    out = _run(PLUGINS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "plugins {}"
