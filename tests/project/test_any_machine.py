"""The suite holds on any machine: the Ctrl-C tests' SIGINT is theirs whatever the suite was
started from (tests/conftest.py), a test whose needs are absent skips on a developer's machine
and fails in CI (tests/support/needs.py, ``.ci/run``), and no test reads a folder outside the
repository."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import needs

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _sigint_ignored(pid: int | str) -> bool:
    """Whether SIGINT is in the process's ignored set (``SigIgn`` of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    raise AssertionError("no SigIgn line")


def test_sigint_interrupts_the_tests_and_their_children() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    child = subprocess.run(
        [sys.executable, "-c", "print(open('/proc/self/status').read())"],
        capture_output=True,
        text=True,
        check=True,
    )
    (mask,) = (line.split()[1] for line in child.stdout.splitlines() if line.startswith("SigIgn:"))
    assert not int(mask, 16) & (1 << (signal.SIGINT - 1)), mask


@pytest.mark.slow  # a fresh pytest process
def test_the_suite_started_with_sigint_ignored_still_gets_ctrl_c() -> None:
    """As a background job (``make test &``) or a CI runner starts it: SIGINT ignored."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    test = (
        f"{Path(__file__).relative_to(ROOT)}::test_sigint_interrupts_the_tests_and_their_children"
    )
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=ignore_sigint,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_a_missing_need_skips_here_and_fails_where_every_test_must_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(needs.REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_here"):
        needs.module("no_such_module_here")
    monkeypatch.setenv(needs.REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_here.*must run here"):
        needs.module("no_such_module_here")
    with pytest.raises(pytest.fail.Exception, match="`no-such-program` command"):
        needs.program("no-such-program", ROOT)
    assert needs.module("json").dumps([1]) == "[1]"


def test_ci_makes_a_missing_need_a_failure() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert f"export {needs.REQUIRE}=1" in lines


def _test_sources() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted(TESTS.rglob("*.py"))]


def test_a_governed_need_is_skipped_through_needs_only() -> None:
    """One place decides skip or fail: no ``pytest.importorskip`` of torch, transformers, ..."""
    offenders = []
    for path, tree in _test_sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).split(".")[0] in needs.GOVERNED
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def test_no_test_reads_a_folder_outside_the_repository() -> None:
    """The cases of ../shared are copied to tests/fixtures/ (tests/fixtures/MANIFEST.md): a
    fresh clone has no ../shared, and a test that reads it skips there or fails."""
    offenders = []
    for path, tree in _test_sources():
        if path == Path(__file__):
            continue  # this test's own patterns
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            outside = (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and (node.value.startswith(("/work/", "../")) or "/../" in node.value)
            ) or (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Div)
                and isinstance(node.left, ast.Attribute)
                and node.left.attr == "parent"
                and isinstance(node.right, ast.Constant)
                and node.right.value == "shared"
            )
            if outside:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_this_process_does_not_ignore_sigint() -> None:
    assert not _sigint_ignored(os.getpid())
