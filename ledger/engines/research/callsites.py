"""Who calls a function or builds a class of the engine, under which conditions: the part of
the scan (``scan.Scanner``) that records call sites, so that a read takes the conditions of its
callers (``gates.GateEvaluator.path_reach``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .model import CallSite, GateSpec, ModuleSummary, Scope, Site
from .pysource import RawGate, call_name

#: Nesting followed inside one expression when looking for calls (deeper: not looked at).
_CALL_DEPTH = 40
#: Names whose calls say nothing of who runs an engine function (builtins, logging).
_NOT_CALLEES = frozenset(
    """
    len isinstance getattr setattr hasattr print range super str int float bool list dict
    tuple set type min max enumerate zip sorted any all sum abs format append get items
    keys values join split strip startswith endswith update pop extend copy to view size
    item cuda contiguous warning info debug error exception critical warn
    """.split()
)


class CallRecorder:
    """Mixed into the scanner: every call (and class named as a value) of a statement's own
    expressions, with the statement's conditions and those inside the expression."""

    if TYPE_CHECKING:
        summary: ModuleSummary
        _scopes: list[Scope]

        def gate(self, kind: str, expr: ast.expr | None, negate: bool, at: ast.AST) -> RawGate: ...
        def made(self, gates: tuple[RawGate, ...]) -> tuple[GateSpec, ...]: ...
        def site(self, node: ast.AST) -> Site: ...

    def calls_of(self, node: ast.stmt, gates: tuple[RawGate, ...]) -> None:
        """The calls in a statement's own expressions (its blocks are walked as blocks)."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.summary.defined.append(node.name)
            return
        exprs: list[ast.expr]
        if isinstance(node, ast.If | ast.While):
            exprs = [node.test]
        elif isinstance(node, ast.For | ast.AsyncFor):
            exprs = [node.iter]
        elif isinstance(node, ast.With | ast.AsyncWith):
            exprs = [item.context_expr for item in node.items]
        elif isinstance(node, ast.Match):
            exprs = [node.subject]
        elif isinstance(node, ast.Try | ast.TryStar | ast.Import | ast.ImportFrom):
            exprs = []
        elif isinstance(node, ast.AnnAssign):  # an annotation builds nothing
            exprs = [node.value] if node.value is not None else []
        else:
            exprs = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        for expr in exprs:
            self._calls(expr, gates, 0)

    def _calls(self, node: ast.expr, gates: tuple[RawGate, ...], depth: int) -> None:
        if depth > _CALL_DEPTH:
            return
        if isinstance(node, ast.BoolOp):
            is_or = isinstance(node.op, ast.Or)
            for position, value in enumerate(node.values):
                # a call in an operand runs only when the operands before it let it
                others = tuple(
                    self.gate("or" if is_or else "and", other, is_or, other)
                    for other in node.values[:position]
                )
                self._calls(value, (*gates, *others), depth + 1)
            return
        if isinstance(node, ast.IfExp):
            self._calls(node.test, gates, depth + 1)
            self._calls(node.body, (*gates, self.gate("if", node.test, False, node)), depth + 1)
            self._calls(node.orelse, (*gates, self.gate("if", node.test, True, node)), depth + 1)
            return
        if isinstance(node, ast.Call):
            name = call_name(node.func)
            if name is not None and name not in _NOT_CALLEES:
                self._record_call(name, node, gates)
            if name in ("isinstance", "issubclass", "cast"):
                return  # a class named as a type builds nothing
            if isinstance(node.func, ast.Attribute):
                self._calls(node.func.value, gates, depth + 1)
            for arg in node.args:
                self._calls(arg, gates, depth + 1)
            for keyword in node.keywords:
                self._calls(keyword.value, gates, depth + 1)
                if keyword.arg == "target" and isinstance(keyword.value, ast.Name | ast.Attribute):
                    # ``Process(target=run_scheduler_process)``, ``Thread(target=...)``: the
                    # engine's processes start there, so the function runs as if called here
                    started = call_name(keyword.value)
                    if started is not None:
                        self._record_call(started, keyword.value, gates)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id[:1].isupper() and not node.id.isupper():  # a class as a value
                self._record_call(node.id, node, gates)
            elif node.id.lstrip("_")[:1].islower():  # a function as a value, maybe
                self.summary.named.add(node.id)
            return
        if isinstance(node, ast.Attribute):  # ``Cls.attr``: the class itself is not built
            if not isinstance(node.value, ast.Name):
                self._calls(node.value, gates, depth + 1)
            return
        if isinstance(node, ast.Subscript):  # ``Optional[Cls]``: a type, not a value
            self._calls(node.value, gates, depth + 1)
            if not isinstance(node.value, ast.Name | ast.Attribute):
                self._calls(node.slice, gates, depth + 1)
            elif not isinstance(node.slice, ast.Name | ast.Tuple | ast.Subscript):
                self._calls(node.slice, gates, depth + 1)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._calls(child, gates, depth + 1)

    def _record_call(self, name: str, node: ast.AST, gates: tuple[RawGate, ...]) -> None:
        scope = self._scopes[-1]
        made = self.made(gates) if gates else ()
        func = node.func if isinstance(node, ast.Call) else node
        on_self = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
        )
        self.summary.calls.append(
            CallSite(
                name,
                self.site(node),
                made,
                scope.module,
                scope.function,
                scope.class_name,
                scope if made or scope.decorators else None,  # a registry's decorator gates
                on_self,
            )
        )
