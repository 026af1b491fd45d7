"""Who calls a function or builds a class of the engine, under which conditions: the part of
the scan (``scan.Scanner``) that records call sites, so that a read takes the conditions of its
callers (``gates.GateEvaluator.path_reach``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .model import CallSite, GateSpec, ModuleSummary, Scope, Site
from .pysource import RawGate, _FunctionInfo, call_name

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


#: Keyword arguments whose function runs when the object they are handed to starts: a
#: process's or thread's ``target``, an ASGI application's ``lifespan`` (FastAPI, Starlette).
_STARTED_BY = frozenset({"target", "lifespan"})


class CallRecorder:
    """Mixed into the scanner: every call (and class named as a value) of a statement's own
    expressions, with the statement's conditions and those inside the expression."""

    if TYPE_CHECKING:
        summary: ModuleSummary
        _scopes: list[Scope]

        def gate(self, kind: str, expr: ast.expr | None, negate: bool, at: ast.AST) -> RawGate: ...
        def made(self, gates: tuple[RawGate, ...]) -> tuple[GateSpec, ...]: ...
        def site(self, node: ast.AST) -> Site: ...
        def class_attrs(self, node: ast.ClassDef) -> dict[str, list[ast.expr]]: ...

        _functions: list[_FunctionInfo]
        _classes: list[tuple[str, ast.ClassDef]]
        _handed: dict[int, tuple[str, int | str]]
        arg_layer: bool
        #: ``from m import f as g``: calls of ``g`` in this module are calls of ``f``
        imported_as: dict[str, str]

        def segment(self, node: ast.AST) -> str: ...

    def _hand_arguments(self, node: ast.Call) -> None:
        """``f(x, server_args.y)``: where ``f`` uses its parameter decides (``handed``)."""
        if self.arg_layer or not isinstance(node.func, ast.Name | ast.Attribute):
            return
        if any(isinstance(sub, ast.Call) for sub in ast.walk(node.func)):
            return
        callee = self.segment(node.func)
        for position, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            self._handed[id(arg)] = (callee, position)
        for keyword in node.keywords:
            if keyword.arg is not None:
                self._handed[id(keyword.value)] = (callee, keyword.arg)

    def calls_of(self, node: ast.stmt, gates: tuple[RawGate, ...]) -> None:
        """The calls in a statement's own expressions (its blocks are walked as blocks)."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.summary.defined.append(node.name)
            if isinstance(node, ast.ClassDef):
                bases = (class_named(base) for base in node.bases)
                self.summary.bases[node.name] = tuple(b for b in bases if b is not None)
            elif node.returns is not None:
                returned = class_named(node.returns)
                if returned is not None:
                    self.summary.returns[node.name] = returned
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
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Dict)
            and node.args
        ):
            for arg in (*node.args, *(k.value for k in node.keywords)):
                self._calls(arg, gates, depth + 1)
            self._table(node.func.value, node.args[0], gates, depth)  # ``{...}.get(key)``
            return
        if isinstance(node, ast.Call):
            name = call_name(node.func)
            if name is not None and name not in _NOT_CALLEES:
                self._record_call(name, node, gates)
            if name in ("isinstance", "issubclass", "cast"):
                return  # a class named as a type builds nothing
            if isinstance(node.func, ast.Attribute):
                self._calls(node.func.value, gates, depth + 1)
            elif not isinstance(node.func, ast.Name):
                # ``{...}[mode](server_args)``, ``make()(x)``: what the callee expression builds
                self._calls(node.func, gates, depth + 1)
            for arg in node.args:
                self._calls(arg, gates, depth + 1)
            for keyword in node.keywords:
                self._calls(keyword.value, gates, depth + 1)
                if keyword.arg in _STARTED_BY and isinstance(
                    keyword.value, ast.Name | ast.Attribute
                ):
                    # ``Process(target=run_scheduler_process)``, ``Thread(target=...)``: the
                    # engine's processes start there, so the function runs as if called here;
                    # ``FastAPI(lifespan=lifespan)``: the HTTP server runs it as it starts
                    started = call_name(keyword.value)
                    if started is not None:
                        self._record_call(started, keyword.value, gates)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if _is_class_name(node.id.lstrip("_")):  # a class as a value (``_StatAccumulator``)
                self._record_call(node.id, node, gates)
            elif node.id.lstrip("_")[:1].islower():  # a function as a value, maybe
                self.summary.named.add(node.id)
            return
        if isinstance(node, ast.Attribute):  # ``Cls.attr``: the class itself is not built
            if not isinstance(node.value, ast.Name):
                self._calls(node.value, gates, depth + 1)
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                # ``{SWAKVPool: attach_swa}``: a class as a key is a type looked up, not built
                if key is not None and not isinstance(key, ast.Name | ast.Attribute):
                    self._calls(key, gates, depth + 1)
                self._calls(value, gates, depth + 1)
            return
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
            # ``{"stat": _StatAccumulator, ...}[server_args.mode]``: a dispatch table builds
            # (or calls) the entry its key selects, so each entry is under ``key == "stat"``
            self._calls(node.slice, gates, depth + 1)
            self._table(node.value, node.slice, gates, depth)
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

    def _table(
        self, table: ast.Dict, key: ast.expr, gates: tuple[RawGate, ...], depth: int
    ) -> None:
        """The entries of a dispatch table indexed by ``key``: each under ``key == its key``
        where that key is a constant (``**other`` and computed keys: no condition known)."""
        for entry_key, value in zip(table.keys, table.values, strict=True):
            if isinstance(entry_key, ast.Constant):
                test = ast.Compare(left=key, ops=[ast.Eq()], comparators=[entry_key])
                self._calls(value, (*gates, self.gate("if", test, False, key)), depth + 1)
            else:
                if entry_key is not None:
                    self._calls(entry_key, gates, depth + 1)
                self._calls(value, gates, depth + 1)

    def _record_call(self, name: str, node: ast.AST, gates: tuple[RawGate, ...]) -> None:
        original = self.imported_as.get(name)
        if original is not None:  # the name may be bound otherwise too: a call of both
            self._record_call(original, node, gates)
        scope = self._scopes[-1]
        made = self.made(gates) if gates else ()
        func = node.func if isinstance(node, ast.Call) else node
        on_self = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
        )
        receiver = (
            self.receiver_of(func.value)
            if isinstance(func, ast.Attribute) and not on_self
            else None
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
                receiver,
                _passed(node),
            )
        )

    def receiver_of(self, value: ast.expr) -> str | None:
        """The class ``value`` is an instance of (or is), when this function says: a class
        named directly, a parameter's annotation, a name or ``self.x`` assigned one value."""
        if isinstance(value, ast.Name):
            if _is_class_name(value.id):
                return value.id  # ``Cls.method()``
            info = self._functions[-1] if self._functions else None
            if info is None or value.id in info.rebound:
                return None
            if value.id in info.params:
                note = info.annotations.get(value.id)
                return class_named_text(note) if note else None
            assigned = info.assigned.get(value.id, [])
            if len(assigned) == 1 and assigned[0].value is not None:
                return type_of(assigned[0].value)
            return None
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "self"
            and self._classes
        ):
            node = self._classes[-1][1]
            noted = self._attr_notes(node).get(value.attr)
            if noted is not None:
                return noted or None
            values = self.class_attrs(node).get(value.attr, [])
            kinds = {type_of(v) for v in values if not _is_none(v)}
            return kinds.pop() if len(kinds) == 1 else None
        if isinstance(value, ast.Call):
            return type_of(value)
        return None

    def _attr_notes(self, node: ast.ClassDef) -> dict[str, str]:
        """``self.x: Cls = ...`` in the class's methods: x -> Cls ("" where they disagree)."""
        cache: dict[int, dict[str, str]] = self.__dict__.setdefault("_attr_notes_cache", {})
        notes = cache.get(id(node))
        if notes is None:
            notes = {}
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.AnnAssign)
                    and isinstance(sub.target, ast.Attribute)
                    and isinstance(sub.target.value, ast.Name)
                    and sub.target.value.id == "self"
                ):
                    named = class_named(sub.annotation) or ""
                    attr = sub.target.attr
                    notes[attr] = named if notes.get(attr, named) == named else ""
            cache[id(node)] = notes
        return notes


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """``from m import f as g`` anywhere in the module (a lazy import too): ``g`` -> ``f``."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.asname and alias.asname != alias.name and alias.name != "*":
                    found.setdefault(alias.asname, alias.name)
    return found


def _is_class_name(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def type_of(value: ast.expr) -> str | None:
    """``Cls(...)``: ``Cls``; ``make(...)``: ``"make()"`` (its return annotation, later)."""
    if not isinstance(value, ast.Call):
        return None
    name = call_name(value.func)
    if name is None:
        return None
    if _is_class_name(name):
        return name
    return f"{name}()" if name.lstrip("_")[:1].islower() else None


def class_named(node: ast.expr) -> str | None:
    """The class an annotation or a base names: its last dotted part (``Optional[X]``,
    ``X | None`` and a quoted name read through)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return class_named_text(node.value)
    if isinstance(node, ast.Name | ast.Attribute):
        text = ast.unparse(node).rsplit(".", 1)[-1]
        return text if _is_class_name(text) else None
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Optional"):
        return class_named(node.slice)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [n for n in (node.left, node.right) if not _is_none(n)]
        return class_named(sides[0]) if len(sides) == 1 else None
    return None


def class_named_text(text: str) -> str | None:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    return class_named(node)


def _passed(node: ast.AST) -> tuple[tuple[str, ...], int] | None:
    if not isinstance(node, ast.Call):
        return None
    if any(k.arg is None for k in node.keywords) or any(
        isinstance(a, ast.Starred) for a in node.args
    ):
        return None
    return tuple(k.arg for k in node.keywords if k.arg is not None), len(node.args)
