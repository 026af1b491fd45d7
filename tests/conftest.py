"""Fixtures shared by every layer's tests: a ledger path in a temporary folder, an initialised
store with a fixed clock, no resident process, and the throwaway PostgreSQL server of the sync
tests (``tests/support/pg_cluster.py``; one per test session, for tests/sync/ and tests/tui/).

Helpers that are functions rather than fixtures live in ``tests/support/`` (imported as
``tests.support.<module>``); test modules never import each other."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.store import LedgerStore
from tests.support import needs, pg_cluster, readme_walkthrough, threads_left

#: The time stamped on events without ``recorded_at`` by the ``store`` fixture.
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_in_a_terminal() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in the test process, and its children start with
    SIGINT's default, as in a terminal's foreground job, whatever the suite was started from:
    a shell starts a background job (``make test &``) with SIGINT ignored, CI runners may do the
    same, and an ignored signal stays ignored across ``exec`` (a caught one is reset to its
    default), so the Ctrl-C tests' SIGINT reached processes that ignored it."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)


#: The test files that take longest (a fresh clone's `make test` and `make test-engines`,
#: docs/performance.md, *The test suite*: each over 50 s in all), started first: pytest-xdist hands out whole files
#: (``--dist loadgroup``, a file a group: below) in collection order, and one of these left for the end kept one worker
#: busy for minutes after the other had finished. Only the order changes, never what runs. The
#: README walkthrough comes first and the MCP session last: both read one run of the README's
#: first session (``readme_walkthrough_run``), made by whichever asks first, and the other worker
#: would wait for it if they started together. tests/runners/test_e2e_transformers.py reads that
#: run too (its plan): it is short now, and keeps its place in the collection order, late.
LONG_FILES = (
    "tests/project/test_readme_walkthrough.py",
    "tests/engines/test_research_wheels.py",
    "tests/engines/test_engine_coverage.py",
    "tests/store/test_store_contract.py",
    "tests/runners/test_e2e_vllm_cpu.py",
    "tests/sync/test_hub.py",
    "tests/mcp/test_mcp_session.py",
    "tests/engines/test_bulk_lines.py",
    "tests/tui/test_tui_actions.py",
    "tests/read/test_read_parity.py",
)


_RUN_RESEARCH_CACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands out files (groups) in collection order, not largest first: by default
    (``--loadscope-reorder``) it queues the groups with the most *tests* first, which put the
    research wheels' 20 long tests behind hundreds of quick ones (they started 12.5 min into a
    28-min run, docs/performance.md, *The test suite*), and ``LONG_FILES`` had no effect."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    # One research cache for the whole run, its workers and the processes they start (the
    # README walkthrough's and the MCP session's `research`, the wheels' tests): sglang 0.5.23's
    # index is built from its wheel once a run (~100 s of CPU), not once per asker, and never
    # read from or left in the user's own cache. The workers inherit it (they start later).
    if not hasattr(config, "workerinput") and "TUNELEDGER_RESEARCH_CACHE" not in os.environ:
        folder = tempfile.mkdtemp(prefix="tuneledger-research-")
        os.environ["TUNELEDGER_RESEARCH_CACHE"] = folder
        config.stash[_RUN_RESEARCH_CACHE] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_RUN_RESEARCH_CACHE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("TUNELEDGER_RESEARCH_CACHE", None)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which names each test's group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first, in ``LONG_FILES``' order, the rest as collected (a stable sort).

    Every test without an ``xdist_group`` mark is put in its file's group: `make test`'s
    ``--dist loadgroup`` then hands out whole files as ``--dist loadfile`` did (a module-scoped
    fixture made once, tests sharing it never at once), and a long file may send part of its
    tests to the other worker by marking them with a group of their own
    (tests/engines/test_research_wheels.py: the blind sets' half)."""
    rank = {path: i for i, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up: a module fixture may need torch
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test of the engine tier (``@pytest.mark.engine("torch", ...)``) needs the modules it
    names: skipped without them on a developer's machine, failed where every test must run
    (``tests/support/needs.py``). Checked here, when the test starts, not when its file is
    imported: ``make test`` imports every file and leaves the tier out."""
    marker = item.get_closest_marker("engine")
    for name in marker.args if marker is not None else ():
        needs.module(name, "the e2e extra: make test-engines installs it")


#: Threads of ours left running at the session's end, per process (this one's, then each
#: pytest-xdist worker's, as ``tests.support.threads_left`` names them).
_THREADS_LEFT: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the session when a thread of ours outlives it (``tests/support/threads_left.py``:
    the exit abort, ``FATAL: exception not rethrown``, came from one inside DuckDB)."""
    left = threads_left.left_at_exit()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: the controller reports it
        workeroutput["threads_left"] = left
    _THREADS_LEFT.extend(left)
    if _THREADS_LEFT and workeroutput is None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent without it
def pytest_testnodedown(node: Any, error: Any) -> None:
    """A pytest-xdist worker ended: keep the threads of ours it reported."""
    worker = getattr(node, "gateway", None)
    name = getattr(worker, "id", "worker")
    _THREADS_LEFT.extend(
        f"{name}: {t}" for t in getattr(node, "workeroutput", {}).get("threads_left", ())
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name each thread of ours left running (the session fails for them: see above)."""
    for thread in _THREADS_LEFT:
        terminalreporter.write_line(f"thread of ours left running at the end: {thread}", red=True)


@pytest.fixture(autouse=True)
def _no_resident_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test starts or uses a resident process (``ledger.frontdoor.resident``) unless it says so: the
    ``tuneledger`` processes the tests start inherit ``TUNELEDGER_RESIDENT=0``, so no server
    outlives the suite; tests/cli/test_resident.py sets its own runtime folder and stops its servers."""
    monkeypatch.setenv("TUNELEDGER_RESIDENT", "0")


@pytest.fixture(scope="session")
def readme_walkthrough_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> readme_walkthrough.Walkthrough:
    """README.md's first session, run once for the whole test run (``tests/support/readme_walkthrough.py``):
    the README's test and the MCP session's comparison read the same run."""
    return readme_walkthrough.shared(tmp_path_factory)


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """Where a test's ledger file lives (not created)."""
    return tmp_path / "ledger.duckdb"


@pytest.fixture
def store(ledger_path: Path) -> LedgerStore:
    """An initialised ledger whose clock always says ``FIXED_NOW``."""
    ledger = LedgerStore(ledger_path, clock=lambda: FIXED_NOW)
    ledger.init()
    return ledger


# --- the PostgreSQL hub (tests/sync/, tests/tui/test_tui_sync.py) ---------------------------

_schemas = itertools.count(1)


#: The size of the tmpfs the storage tests fill; anything larger is not the mount they asked for.
TMPFS_BYTES = 8 << 20


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 8 MiB tmpfs mounted for the test (root only), unmounted after it.

    The storage tests fill it to the last block (``fallocate`` of what ``statvfs`` says is
    free): where ``mount`` answers 0 but the folder is not that tmpfs (a sandbox that fakes
    mounts, another mount namespace), the fill would take the whole disk under the folder, and
    every test after it, and every other user of that disk, would find no room. So the mount is
    checked by its size before it is handed out, and the test skips where it is not the tmpfs."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8M", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("mounting a tmpfs needs root")
    try:
        fs = os.statvfs(mnt)
        if fs.f_blocks * fs.f_frsize > TMPFS_BYTES or not os.path.ismount(mnt):
            pytest.skip(f"{mnt} is not the 8 MiB tmpfs mounted for the test: not filled")
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg_cluster.Cluster]:
    """One throwaway PostgreSQL server for the session, with a ``writer`` login role.

    Skips when PostgreSQL is not installed, fails where every test must run (``tests/support/needs.py``).
    """
    if not pg_cluster.available():
        needs.absent("PostgreSQL (initdb, pg_ctl) is not installed (.ci/run installs it)")
    import psycopg

    cluster = pg_cluster.start()
    try:
        with psycopg.connect(cluster.superuser_dsn, autocommit=True) as con:
            con.execute(f"CREATE ROLE writer LOGIN PASSWORD '{pg_cluster.WRITER_PASSWORD}'")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def hub_schema(pg_server: pg_cluster.Cluster) -> str:
    """A schema name no other test uses (one hub per test)."""
    return f"hub_{os.getpid()}_{next(_schemas)}"


@pytest.fixture
def writer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq finds the writer's password in the environment (as a user's shell would give it)."""
    monkeypatch.setenv("PGPASSWORD", pg_cluster.WRITER_PASSWORD)
