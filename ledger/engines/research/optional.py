"""Config objects the engine builds only under a condition (vLLM's ``lora_config``: ``LoRAConfig(...)
if self.enable_lora else None``): where the condition fails on the target, the object is ``None``
and no read of its fields can run, whatever the rest of their path says.

Found in the resolution's own entry methods (``resolve.ENTRY_POINTS``), in the two shapes the
engines write: ``name = Config(...) if COND else None`` and ``name = None`` then
``if COND: name = Config(...)``, where ``name`` holds a kind of flag object (``AccessModel.names``).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING

from .model import GateSpec, Scope, Site
from .values import ENV, FLAG, HARDWARE, MODEL, PARALLEL

if TYPE_CHECKING:
    from .gates import GateEval, GateEvaluator

#: What the condition must rest on to decide that the object is absent (not a run-time value).
_DECIDING = frozenset({ENV, FLAG, HARDWARE, MODEL, PARALLEL})


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _conditional_builds(body: list[ast.stmt]) -> list[tuple[str, ast.expr, int]]:
    """(name, condition, line) of each object the method builds only under a condition."""
    found: list[tuple[str, ast.expr, int]] = []
    none_first: set[str] = set()
    built: dict[str, int] = {}  # unconditional non-None assignments per name
    for stmt in body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = stmt.value
            for name in names:
                if _is_none(value):
                    none_first.add(name)
                elif (
                    isinstance(value, ast.IfExp)
                    and _is_none(value.orelse)
                    and isinstance(value.body, ast.Call)
                ):
                    found.append((name, value.test, stmt.lineno))
                else:
                    built[name] = built.get(name, 0) + 1
        elif isinstance(stmt, ast.If) and not stmt.orelse:
            for inner in stmt.body:
                if (
                    isinstance(inner, ast.Assign)
                    and len(inner.targets) == 1
                    and isinstance(inner.targets[0], ast.Name)
                    and inner.targets[0].id in none_first
                    and isinstance(inner.value, ast.Call)
                ):
                    found.append((inner.targets[0].id, stmt.test, stmt.lineno))
    # a name also built unconditionally elsewhere in the method is not optional
    return [(name, test, line) for name, test, line in found if name not in built]


def absent_kinds(
    evaluator: GateEvaluator, entries: list[tuple[str, str, str]]
) -> dict[str, GateEval]:
    """Kind -> the failing condition, for each flag object the entry methods (module, class,
    method) build only under a condition that fails on this target for a flag, the model or the
    hardware. A condition that cannot be decided leaves the object present (as before)."""
    interp, access = evaluator.interp, evaluator.index.access
    absent: dict[str, GateEval] = {}
    for module, class_name, method in entries:
        node = interp.world.find_class(module, class_name)
        if node is None:
            continue
        function = next(
            (
                f
                for f in node.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name == method
            ),
            None,
        )
        if function is None:
            continue
        path = interp.world.path(module)
        scope = Scope(module, f"{class_name}.{method}", class_name)
        for name, test, line in _conditional_builds(function.body):
            kind = access.names.get(name)
            if kind is None or kind in absent:
                continue
            text = ast.unparse(test)
            spec = GateSpec("if", text, False, Site(path, line), text)
            evaluated = evaluator.gate(spec, scope)
            if evaluated.value is False and any(f.kind in _DECIDING for f in evaluated.facts):
                absent[kind] = replace(
                    evaluated, kind="object", text=f"{name} is built only when {text}"
                )
    return absent
