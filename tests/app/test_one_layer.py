"""Neither front end orchestrates: the CLI's command and the MCP tool of each use case call the
same use-case functions (``ledger.app``, ``runners.usecases``) and none of what those functions
put in order (the plan loop, the server runner, the sweep, the report and its renderer, the
command layer's append). Read from the source with ``ast``: what each front-end function
calls, by name. The behaviour tests (``tests/app/test_use_cases.py``, ``tests/mcp/``) show the
two give the same events and answers; this one keeps a third orchestration from growing back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: use case -> (its functions, the CLI's (file, function), the MCP's (file, function)).
PAIRS = {
    "bench": (
        {"resolve", "run_bench"},
        [("runners/cli/measure.py", "bench_command"), ("runners/cli/measure.py", "_bench_builtin")],
        [("runners/mcp_tools/measure.py", "_bench")],
    ),
    "plan": (
        {"load_plan", "measure_plan"},
        [("runners/cli/measure.py", "plan_command")],
        [("runners/mcp_tools/measure.py", "_plan")],
    ),
    "spec": (
        {"load_spec", "measure_spec"},
        [("runners/cli/gpu.py", "spec_command")],
        [("runners/mcp_tools/measure.py", "_spec")],
    ),
    "server start": (
        {"start_server"},
        [("runners/cli/group.py", "start_command")],
        [("runners/mcp_tools/servers.py", "ServerPool.start")],
    ),
    "tune": (
        {"measure_tune"},
        [("runners/cli/gpu.py", "tune_command")],
        [("runners/mcp_tools/tune.py", "_tune")],
    ),
    "export": (
        {"export_markdown"},
        [("ledger/cli/commands/export.py", "export_markdown")],
        [("ledger/mcp/export_tool.py", "_export")],
    ),
    "research": (
        {"research"},
        [("ledger/cli/commands/research.py", "research_command")],
        [("ledger/mcp/research.py", "_research")],
    ),
    "propose": (
        {"propose"},
        [("ledger/cli/commands/board_verbs.py", "propose")],
        [("ledger/mcp/verbs.py", "_propose")],
    ),
    "triage": (
        {"triage_asked"},
        [("ledger/cli/commands/board_verbs.py", "triage")],
        [("ledger/mcp/verbs.py", "_triage")],
    ),
    "decide": (
        {"decide_asked"},
        [("ledger/cli/commands/board_verbs.py", "decide")],
        [("ledger/mcp/verbs.py", "_decide")],
    ),
}

#: What the use cases put in order: a front-end function that calls one orchestrates (a
#: list's ``append`` is no append to the ledger: ``commands.append`` is).
ORCHESTRATION = {
    "run_plan",
    "run_spec",
    "ServerRunner",
    "sweep",
    "build_workload",
    "resolve_config_name",
    "read_report",
    "render_report",
    "session_plot",
    "write_file",
    "commands.append",
    "given_flags",
    "prepare",
    "load_config",
    "run_tune",
    "StoreSink",
    "research_spec",
    "record_research_result",
    "kept_open",
    "triage_by_verdict",
    "follow_triage",
}


def _function(path: str, name: str) -> ast.FunctionDef:
    """``name`` in ``path``: a function, or ``Class.method``."""
    tree: ast.AST = ast.parse((ROOT / path).read_text())
    if "." in name:
        owner, name = name.split(".")
        (tree,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == owner]
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"{path}: {name} defined {len(found)} times"
    return found[0]


def _called(function: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
                if isinstance(func.value, ast.Name):
                    names.add(f"{func.value.id}.{func.attr}")
    return names


@pytest.mark.parametrize("use_case", sorted(PAIRS))
def test_both_front_ends_call_the_same_use_case_and_orchestrate_nothing(use_case: str) -> None:
    functions, cli, mcp = PAIRS[use_case]
    cli_calls = set().union(*(_called(_function(*where)) for where in cli))
    mcp_calls = set().union(*(_called(_function(*where)) for where in mcp))
    assert functions <= cli_calls, f"the CLI's {use_case} does not call {functions - cli_calls}"
    assert functions <= mcp_calls, f"the MCP's {use_case} does not call {functions - mcp_calls}"
    assert cli_calls & ORCHESTRATION == set(), f"the CLI's {use_case} orchestrates"
    assert mcp_calls & ORCHESTRATION == set(), f"the MCP's {use_case} orchestrates"


#: The server runner's methods for what follows a start: the use cases call them
#: (``runners/usecases.py``: ``watch_server``, ``stop_server``, ``server_ended``), the front ends
#: do not.
RUNNER_METHODS = {"start", "watch", "stop", "exited", "close"}


def _touches_the_runner(path: str) -> list[str]:
    """Where ``path`` calls a server runner's method itself (``runner.stop(...)``,
    ``served.runner.watch(...)``) or names a runner."""
    found = []
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if name == "runner" and node.func.attr in RUNNER_METHODS:
                found.append(f"{path}:{node.lineno} runner.{node.func.attr}")
        if isinstance(node, ast.Name) and node.id == "ServerRunner":
            found.append(f"{path}:{node.lineno} ServerRunner")
    return found


def test_what_follows_a_server_start_is_the_use_cases() -> None:
    """The CLI's ``run server start`` watches its server in the foreground and the MCP server
    keeps its servers in a pool between calls; what happens to a server after its start (the
    foreground watch and the stop on an interrupt, a stop and its record, a server that exited
    by itself recorded, the stop of a start the caller gave up) is the use cases', once."""
    cli = _called(_function("runners/cli/group.py", "start_command"))
    assert {"start_server", "watch_server"} <= cli
    pool = set().union(
        *(
            _called(_function("runners/mcp_tools/servers.py", f"ServerPool.{method}"))
            for method in ("start", "stop", "_reap", "close")
        )
    )
    assert {"start_server", "stop_server", "server_ended"} <= pool
    touched = _touches_the_runner("runners/cli/group.py")
    touched += _touches_the_runner("runners/mcp_tools/servers.py")
    assert touched == []
