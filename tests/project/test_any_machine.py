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


def _is_mark(node: ast.expr, name: str) -> bool:
    """``pytest.mark.<name>`` or ``pytest.mark.<name>(...)``."""
    target = node.func if isinstance(node, ast.Call) else node
    return (
        isinstance(target, ast.Attribute)
        and target.attr == name
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "mark"
    )


def _marked(tree: ast.Module, name: str) -> set[int]:
    """The ids of the nodes inside a test, class or file marked ``name`` (a decorator, or the
    module's ``pytestmark``)."""
    inside: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            marks = node.value.elts if isinstance(node.value, ast.List) else [node.value]
            if any(_is_mark(m, name) for m in marks):
                return {id(n) for n in ast.walk(tree)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and any(
            _is_mark(d, name) for d in node.decorator_list
        ):
            inside |= {id(n) for n in ast.walk(node)}
    return inside


def _engine_uses(tree: ast.Module) -> list[ast.AST]:
    """What only the engine tier may do: need or import torch, transformers or fastapi, the
    vLLM CPU build, or a released wheel from the package index (``fetch_wheel``, ``pip
    download``)."""
    found: list[ast.AST] = []
    optional = {  # `try: import torch ... except ImportError:` runs with or without it
        id(n)
        for t in ast.walk(tree)
        if isinstance(t, ast.Try)
        and any("ImportError" in ast.unparse(h.type) for h in t.handlers if h.type is not None)
        for stmt in t.body
        for n in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in optional:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(str(n).split(".")[0] in needs.ENGINE_MODULES for n in names):
                found.append(node)
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        texts = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if isinstance(func, ast.Attribute) and getattr(func.value, "id", "") == "needs":
            if any(t in needs.ENGINE_MODULES or "vllm" in t.lower() for t in texts):
                found.append(node)
        elif name == "fetch_wheel":  # from the package index (a planted or recorded one is local)
            found.append(node)
        elif any(
            isinstance(e, ast.Constant) and e.value == "download"
            for a in node.args
            for e in ast.walk(a)
        ):
            found.append(node)
    return found


def test_what_needs_an_engine_is_in_the_engine_tier() -> None:
    """``make test`` leaves out the tests marked ``engine`` and installs none of their needs
    (tests/support/needs.py): a test that needs torch, transformers, the vLLM CPU build or a
    released wheel without the mark would fail there (CI) or skip (a developer). No need of the
    tier is checked when a file is imported, and every ``alone`` measurement is in the tier
    (`make test-engines` is the one that runs them)."""
    offenders = []
    for path, tree in _test_sources():
        if not path.name.startswith("test_") or path == Path(__file__):
            continue  # the helpers (support/, conftest) and the engines' source trees (fixtures/)
        if "fixtures" in path.relative_to(TESTS).parts:
            continue
        engine = _marked(tree, "engine")
        top_level = {id(n) for stmt in tree.body for n in ast.walk(stmt)} - {
            id(n)
            for stmt in tree.body
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            for n in ast.walk(stmt)
        }
        for node in _engine_uses(tree):
            if id(node) not in engine or id(node) in top_level:
                offenders.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
        alone = _marked(tree, "alone")
        if alone - engine:
            offenders.append(f"{path.relative_to(ROOT)}: `alone` outside the engine tier")
    assert offenders == []


def test_the_readme_test_command_leaves_the_engine_tier_to_ci() -> None:
    """`make test` (the README's) runs every test but the tier; CI runs it, then the tier."""
    make = (ROOT / "Makefile").read_text()
    test_recipe = make.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    engines_recipe = make.split("\ntest-engines:", 1)[1].split("\n\n", 1)[0]
    assert '-m "not engine"' in test_recipe and ".e2e" not in test_recipe.splitlines()[0]
    assert (
        '-m "engine and not alone"' in engines_recipe and '-m "engine and alone"' in engines_recipe
    )
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci.index("make test") < ci.index("make test-engines")
