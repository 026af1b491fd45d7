"""One file of an engine, read once: where it reads and changes flags, under which conditions,
and what it imports under which conditions.

Runs in worker processes (``index``): takes the file's bytes and the ``AccessModel``, returns a
``ModuleSummary`` of picklable records. Nothing here evaluates a condition; that needs the
arch, the model and the flags given, and happens later (``evaluate``).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Sequence
from functools import partial

from .access import ARGS, AccessModel
from .callsites import CallRecorder, import_aliases
from .model import GateSpec, ImportSite, LocalDef, ModuleSummary, ReadSite, Scope, Site, StoreSite
from .pysource import (
    _IDENT,
    _LOG_METHODS,
    ORDERING,
    RawGate,
    _FunctionInfo,
    _is_type_checking,
    call_name,
    entry_classes,
    global_loads,
    model_types_of,
    module_name,
    runtime_operand,
    squeeze,
    terminal,
)
from .pysource import scan_imports as scan_imports
from .world import absolute_module, binding_table

#: An object path that is a model's configuration (``config.text_config``, ``hf_config``): an
#: attribute there that shares a flag's name is the model's, not the flag (``mamba_ssm_dtype``).
_MODEL_CONFIG = re.compile(r"(^|\.)(\w*_)?(config|text_config|hf_config|hf_text_config)(\.|$)")


class Scanner(CallRecorder):
    def __init__(self, path: str, source: str, model: AccessModel) -> None:
        self.path = path
        self.source = source
        self.lines = source.splitlines()
        self._raw_lines = source.splitlines(keepends=True)
        self._made: dict[int, tuple[RawGate, GateSpec]] = {}
        self.model = model
        self.arg_layer = model.in_arg_layer(path)
        self.mixed = path in model.mixed_files
        self._uses: list[tuple[str, frozenset[str]]] = []
        self.summary = ModuleSummary(path=path, module=module_name(path))
        self._scopes: list[Scope] = []
        self._functions: list[_FunctionInfo] = []
        self._classes: list[tuple[str, ast.ClassDef]] = []
        self._class_attrs: dict[int, dict[str, list[ast.expr]]] = {}
        self._qualname: list[str] = []
        self._block: Sequence[ast.stmt] = ()
        self._fields = model.all_fields()
        self._watched = (
            frozenset(self._fields)
            | frozenset(model.distinctive)
            | frozenset(attr for mapping in model.objects.values() for attr in mapping)
        )
        self._line_hits: dict[int, bool] = {}
        self._carried: str | None = None  # the global an assignment being walked sets
        self._handed: dict[int, tuple[str, int | str]] = {}  # f(x, a.y): id(a.y) -> ("f", 1)

    # -- entry ---------------------------------------------------------------------------------

    def run(self, tree: ast.Module) -> ModuleSummary:
        info = _FunctionInfo(tree, {})
        self._alias_pass(info)
        self._functions.append(info)
        self._scopes.append(Scope(self.summary.module, "<module>", None))
        self.summary.entry_classes = entry_classes(tree)
        self.imported_as = import_aliases(tree)
        self.block(tree.body, ())
        self.summary.table = binding_table(tree, self.summary.module, self.path)
        if any("global " in line for line in self.lines):
            self.summary.global_loads = global_loads(tree)
        return self.summary

    @property
    def handling(self) -> bool:
        """Whether the code here is argument resolution (not the server using a value)."""
        if not self.arg_layer:
            return False
        if not self.mixed:
            return True
        return any(name in self.model.self_classes for name, _ in self._classes)

    def use_of(self, flag: str) -> str:
        if not self._uses:
            return "value"
        kind, flags = self._uses[-1]
        if kind == "self":
            return "self" if flag in flags else "value"
        return kind

    def _plain_use(self) -> bool:
        """No more specific use holds here (a log line, a validation, the flag's own value)."""
        return not self._uses or self._uses[-1][0] == "value"

    def with_use(self, kind: str, flags: frozenset[str], run: Callable[[], None]) -> None:
        self._uses.append((kind, flags))
        try:
            run()
        finally:
            self._uses.pop()

    def body_use(self, body: Sequence[ast.stmt]) -> tuple[str, frozenset[str]]:
        """What an ``if`` decides: only an error or a message, only some flags' values, or more."""
        stored: set[str] = set()
        for stmt in body:
            if isinstance(stmt, ast.Raise | ast.Assert | ast.Pass):
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                name = call_name(stmt.value.func)
                if name in _LOG_METHODS or name in ("warn", "print"):
                    continue
                if name in self.model.declare_calls:
                    stored |= {k.arg for k in stmt.value.keywords if k.arg in self._fields}
                    continue
                return "value", frozenset()
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                flag = self._stored_flag(stmt.targets[0])
                if flag is None:
                    return "value", frozenset()
                stored.add(flag)
                continue
            return "value", frozenset()
        return ("self", frozenset(stored)) if stored else ("validation", frozenset())

    def _stored_flag(self, target: ast.expr) -> str | None:
        if isinstance(target, ast.Attribute):
            return self.flag_of(self.kind_of(target.value), target.attr)
        return None

    # -- helpers -------------------------------------------------------------------------------

    def site(self, node: ast.AST) -> Site:
        return Site(self.path, getattr(node, "lineno", 0))

    def text(self, node: ast.AST) -> str:
        return squeeze(self.segment(node))

    def segment(self, node: ast.AST) -> str:
        """The source text of a node (``ast.get_source_segment`` re-splits the file per call)."""
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if start is None or end is None or col is None or end_col is None:
            return ast.unparse(node)
        lines = [line.encode() for line in self._raw_lines[start - 1 : end]]
        if not lines:
            return ast.unparse(node)
        if len(lines) == 1:
            return lines[0][col:end_col].decode("utf-8", "replace")
        lines[0], lines[-1] = lines[0][col:], lines[-1][:end_col]
        return b"".join(lines).decode("utf-8", "replace")

    def line_text(self, node: ast.AST) -> str:
        line = getattr(node, "lineno", 0)
        return squeeze(self.lines[line - 1] if 0 < line <= len(self.lines) else "")

    def gate(self, kind: str, expr: ast.expr | None, negate: bool, at: ast.AST) -> RawGate:
        return RawGate(kind, expr, negate, getattr(at, "lineno", 0))

    def made(self, gates: tuple[RawGate, ...]) -> tuple[GateSpec, ...]:
        """The gates of a recorded read or store, with their text and the names they use."""
        out = []
        for raw in gates:
            known = self._made.get(id(raw))
            if known is not None and known[0] is raw:
                spec = known[1]
            else:
                if raw.expr is not None:
                    self._note_names(raw.expr)
                source = self.segment(raw.expr) if raw.expr is not None else None
                text = squeeze(source) if source is not None else raw.kind
                spec = GateSpec(raw.kind, source, raw.negate, Site(self.path, raw.line), text)
                self._made[id(raw)] = (raw, spec)  # holding raw keeps its id unique
            out.append(spec)
        return tuple(out)

    def _note_names(self, expr: ast.AST, depth: int = 0) -> None:
        """Keep, in the scope, what the local names and ``self.x`` of a gate stand for."""
        scope, info = self._scopes[-1], self._functions[-1]
        for sub in ast.walk(expr):
            if isinstance(sub, ast.Name) and sub.id not in scope.locals:
                if sub.id in info.params:
                    default = info.params[sub.id]
                    text = self.segment(default) if default is not None else None
                    scope.locals[sub.id] = LocalDef(
                        "param",
                        text,
                        sub.lineno,
                        info.annotations.get(sub.id),
                        info.positions.get(sub.id, -1),
                    )
                elif source := info.import_source(sub.id, self.summary.module, self.path):
                    scope.locals[sub.id] = LocalDef("import", source, sub.lineno)
                elif sub.id in info.rebound or len(info.assigned.get(sub.id, [])) > 1:
                    scope.locals[sub.id] = LocalDef("local", None, sub.lineno)
                elif len(info.assigned.get(sub.id, [])) == 1:
                    stmt = info.assigned[sub.id][0]
                    value = stmt.value
                    text = self.segment(value) if value is not None else None
                    scope.locals[sub.id] = LocalDef("assign", text, stmt.lineno)
                    if value is not None and depth < 3:
                        self._note_names(value, depth + 1)
            elif (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
                and self._classes
                and sub.attr not in scope.self_attrs
            ):
                assigned = self.class_attrs(self._classes[-1][1]).get(sub.attr, [])
                if len(assigned) == 1:
                    value = assigned[0]
                    scope.self_attrs[sub.attr] = LocalDef(
                        "assign", self.segment(value), getattr(value, "lineno", 0)
                    )
                    # a copy of a copy (``self.try_preemption = self.enable_priority_scheduling``)
                    if depth < 3:
                        self._note_names(value, depth + 1)

    def class_attrs(self, node: ast.ClassDef) -> dict[str, list[ast.expr]]:
        """``self.x = value`` assignments of a class's methods, found when a gate needs them."""
        attrs = self._class_attrs.get(id(node))
        if attrs is None:
            attrs = {}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        if (
                            isinstance(target, ast.Attribute)
                            and isinstance(target.value, ast.Name)
                            and target.value.id == "self"
                        ):
                            attrs.setdefault(target.attr, []).append(sub.value)
            self._class_attrs[id(node)] = attrs
        return attrs

    def interesting(self, node: ast.AST) -> bool:
        """Whether a node's lines name a flag field at all: most code never does."""
        start = getattr(node, "lineno", 0)
        end = getattr(node, "end_lineno", None) or start
        for line in range(start, end + 1):
            known = self._line_hits.get(line)
            if known is None:
                text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
                known = not self._watched.isdisjoint(_IDENT.findall(text))
                self._line_hits[line] = known
            if known:
                return True
        return False

    # -- what holds the arguments --------------------------------------------------------------

    def kind_of(self, node: ast.expr) -> str | None:
        model = self.model
        if isinstance(node, ast.Name):
            for info in reversed(self._functions):
                if node.id in info.aliases:
                    return info.aliases[node.id]
            if node.id == "self" and self._classes:
                return model.self_classes.get(self._classes[-1][0])
            if self.arg_layer and node.id in model.layer_names:
                return model.layer_names[node.id]
            return self._by_name(node.id)
        if isinstance(node, ast.Attribute):
            base = self.kind_of(node.value)
            if base is not None and (base, node.attr) in model.subobjects:
                return model.subobjects[(base, node.attr)]
            return self._by_name(node.attr)
        if isinstance(node, ast.Call):
            name = call_name(node.func)
            if name is not None and name in model.getters:
                return model.getters[name]
        return None

    def _by_name(self, name: str) -> str | None:
        return self.model.kind_by_name(name, self.path)

    def _alias_pass(self, info: _FunctionInfo) -> None:
        candidates = [
            (stmt.targets[0].id, stmt.value)
            for stmt in info.statements
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Name | ast.Attribute | ast.Call)
        ]
        if not candidates:
            return
        self._functions.append(info)
        try:
            for _ in range(2):  # a chain: a = get_exec(); comm = a.comm
                for name, value in candidates:
                    kind = self.kind_of(value)
                    if kind is not None:
                        info.aliases[name] = kind
        finally:
            self._functions.pop()

    def flag_of(self, kind: str | None, attr: str) -> str | None:
        if kind is None:
            return None
        return self.model.objects.get(kind, {}).get(attr)

    # -- statements ----------------------------------------------------------------------------

    def block(self, stmts: Sequence[ast.stmt], gates: tuple[RawGate, ...]) -> None:
        current: list[RawGate] = list(gates)
        previous = self._block
        self._block = stmts
        try:
            for stmt in stmts:
                self.calls_of(stmt, tuple(current))
                self.stmt(stmt, tuple(current))
                guard = self._guard(stmt)
                if guard is not None:
                    current.append(guard)
        finally:
            self._block = previous

    def _guard(self, stmt: ast.stmt) -> RawGate | None:
        if not isinstance(stmt, ast.If):
            return None
        if terminal(stmt.body) and not stmt.orelse:
            return self.gate("guard", stmt.test, True, stmt)
        if stmt.orelse and terminal(stmt.orelse) and not terminal(stmt.body):
            return self.gate("guard", stmt.test, False, stmt)
        return None

    def stmt(self, node: ast.stmt, gates: tuple[RawGate, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.function(node, gates)
        elif isinstance(node, ast.ClassDef):
            self.class_def(node, gates)
        elif isinstance(node, ast.If):
            kind, flags = self.body_use(node.body)
            if node.orelse:
                kind, flags = "value", frozenset()
            self.with_use(kind, flags, lambda: self.expr(node.test, gates))
            if _is_type_checking(node.test):
                self.block(node.body, (*gates, self.gate("type-checking", node.test, False, node)))
                self.block(node.orelse, gates)
                return
            self.block(node.body, (*gates, self.gate("if", node.test, False, node)))
            self.block(node.orelse, (*gates, self.gate("if", node.test, True, node)))
        elif isinstance(node, ast.While):
            self.expr(node.test, gates)
            self.block(node.body, (*gates, self.gate("if", node.test, False, node)))
            self.block(node.orelse, gates)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.expr(node.iter, gates)
            self.block(node.body, gates)
            self.block(node.orelse, gates)
        elif isinstance(node, ast.Try | ast.TryStar):
            self.block(node.body, gates)
            for handler in node.handlers:
                self.block(handler.body, (*gates, self.gate("except", None, False, handler)))
            self.block(node.orelse, gates)
            self.block(node.finalbody, gates)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self.expr(item.context_expr, gates)
            self.block(node.body, gates)
        elif isinstance(node, ast.Match):
            self.expr(node.subject, gates)
            for case in node.cases:
                self.block(case.body, (*gates, self.gate("case", None, False, case)))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self.import_stmt(node, gates)
        else:
            self.simple(node, gates)

    def function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, gates: tuple[RawGate, ...]
    ) -> None:
        for decorator in node.decorator_list:
            self.expr(decorator, gates)
        qualname = ".".join([*self._qualname, node.name])
        info = _FunctionInfo(node, self._functions[-1].aliases)
        self._alias_pass(info)
        class_name = self._classes[-1][0] if self._classes else None
        decorators = tuple(self.segment(d) for d in node.decorator_list)
        scope = Scope(self.summary.module, qualname, class_name, decorators=decorators)
        if decorators:
            self.summary.registries[qualname] = decorators
            if any(isinstance(d, ast.Call) for d in node.decorator_list):
                self.summary.named.add(node.name)  # ``@register("triton")``: run from a table
        self._functions.append(info)
        self._scopes.append(scope)
        self._qualname.append(node.name)
        try:
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    self.expr(default, gates)
            self.block(node.body, gates)
        finally:
            self._qualname.pop()
            self._scopes.pop()
            self._functions.pop()

    def class_def(self, node: ast.ClassDef, gates: tuple[RawGate, ...]) -> None:
        for decorator in node.decorator_list:
            self.expr(decorator, gates)
        self._classes.append((node.name, node))
        self._qualname.append(node.name)
        try:
            self.block(node.body, gates)
        finally:
            self._qualname.pop()
            self._classes.pop()

    def import_stmt(self, node: ast.Import | ast.ImportFrom, gates: tuple[RawGate, ...]) -> None:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = absolute_module(self.summary.module, self.path, node.module, node.level)
            if base is None:
                return
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
        scope = self._scopes[-1]
        function = scope.function if scope.function != "<module>" else None
        package = self.summary.module.split(".")[0]
        made = self.made(gates) if gates else ()
        for target in targets:
            if target.split(".")[0] == package:
                self.summary.imports.append(
                    ImportSite(target, self.site(node), made, function, scope if made else None)
                )

    def simple(self, node: ast.stmt, gates: tuple[RawGate, ...]) -> None:
        if not self.interesting(node):
            return
        if isinstance(node, ast.Raise | ast.Assert):
            self.with_use("validation", frozenset(), lambda: self._simple(node, gates))
            return
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and call_name(node.value.func) in _LOG_METHODS | {"print"}
        ):
            # a value written to the log (the arguments echoed) is not a use of it
            self.with_use("log", frozenset(), lambda: self._simple(node, gates))
            return
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            flag = self._stored_flag(node.targets[0])
            if flag is not None:
                self.with_use("self", frozenset({flag}), lambda: self._simple(node, gates))
                return
            target = node.targets[0]
            name = target.id if isinstance(target, ast.Name) else None
            if name in self._functions[-1].globals and self._plain_use() and not self.arg_layer:
                # ``global X; X = f(server_args.x)``: used where the module reads ``X``
                self._carried = name
                self.with_use("global", frozenset(), lambda: self._simple(node, gates))
                self._carried = None
                return
            if (
                self._plain_use()
                and not self.arg_layer  # there, a value forwarded to a config is its use
                and isinstance(node.value, ast.Attribute | ast.Subscript)
            ):
                # ``self.max_queued_requests = server_args.max_queued_requests``: the value
                # carried on to where it is used, not a use of its own
                self.with_use("copy", frozenset(), lambda: self._simple(node, gates))
                return
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Tuple)
            and self._plain_use()
            and not self.arg_layer
        ):
            # ``return (..., get_schedule().max_queued_requests, ...)``: handed to the caller
            for element in node.value.elts:
                if isinstance(element, ast.Attribute | ast.Subscript):
                    self.with_use("copy", frozenset(), partial(self.expr, element, gates))
                else:
                    self.expr(element, gates)
            return
        self._simple(node, gates)

    def _simple(self, node: ast.stmt, gates: tuple[RawGate, ...]) -> None:
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                self.store_target(target, value, gates, node)
            if value is not None:
                self.expr(value, gates)
            for target in targets:
                self.expr_targets(target, gates)
            return
        if isinstance(node, ast.Return) and node.value is not None and self.arg_layer:
            self.returned_declarations(node.value, gates)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, gates)

    def _compare(self, node: ast.Compare, gates: tuple[RawGate, ...]) -> bool:
        """``len(self.waiting_queue) + 1 > self.max_queued_requests``: a limit on a count made
        while serving, whose effect depends on the load; ``x is None``: a check that it is
        set, no use of its own. Other comparisons: False, walked as any expression."""
        operands = [node.left, *node.comparators]
        chosen: list[ast.expr]
        if all(isinstance(op, ORDERING) for op in node.ops):
            use = "limit"
            chosen = [
                o
                for o in operands
                if isinstance(o, ast.Attribute | ast.Subscript)
                and any(runtime_operand(other) for other in operands if other is not o)
            ]
        elif (
            len(node.ops) == 1
            and isinstance(node.ops[0], ast.Is | ast.IsNot)
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None
        ):
            use, chosen = "check", [node.left]
        else:
            return False
        for operand in operands:
            if any(operand is c for c in chosen):
                self.with_use(use, frozenset(), partial(self.expr, operand, gates))
            else:
                self.expr(operand, gates)
        return True

    def expr_targets(self, target: ast.expr, gates: tuple[RawGate, ...]) -> None:
        """The loads inside a store target: ``x[server_args.k] = ...``."""
        if isinstance(target, ast.Attribute):
            self.expr(target.value, gates)
        elif isinstance(target, ast.Subscript):
            self.expr(target.value, gates)
            self.expr(target.slice, gates)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self.expr_targets(element, gates)

    # -- stores (overrides) --------------------------------------------------------------------

    def store_target(
        self, target: ast.expr, value: ast.expr | None, gates: tuple[RawGate, ...], node: ast.stmt
    ) -> None:
        flag: str | None = None
        if isinstance(target, ast.Attribute):
            flag = self.flag_of(self.kind_of(target.value), target.attr)
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            key = target.slice.value
            if isinstance(key, str) and self._is_args_dict(target.value):
                flag = key if key in self._fields else None
        if flag is not None:
            self.record_store(flag, value, gates, node)
        elif isinstance(target, ast.Attribute) and value is not None:
            loose = self.model.distinctive.get(target.attr)
            if loose is not None and self._derives(loose, value):
                self.summary.derived.add(target.attr)

    def _derives(self, flag: str, value: ast.expr) -> bool:
        """``value`` reads ``flag`` through the arguments and combines it with something else:
        an object's attribute of the flag's name then holds a value of its own."""
        if isinstance(value, ast.Attribute | ast.Subscript | ast.Name | ast.Constant):
            return False  # a copy of the flag's value (or none of it)
        return any(
            isinstance(sub, ast.Attribute)
            and sub.attr == flag
            and self.flag_of(self.kind_of(sub.value), sub.attr) == flag
            for sub in ast.walk(value)
        )

    def record_store(
        self, flag: str, value: ast.expr | None, gates: tuple[RawGate, ...], node: ast.AST
    ) -> None:
        scope = self._scopes[-1]
        self.summary.stores.append(
            StoreSite(
                flag=flag,
                site=self.site(node),
                value_text=self.text(value) if value is not None else "?",
                text=self.line_text(node),
                gates=self.made(gates),
                scope=scope,
                handling=self.handling,
                warning=self.warning_near(node),
            )
        )

    def warning_near(self, node: ast.AST) -> str | None:
        """The message a log call in the same block writes (the override's warning)."""
        for stmt in self._block:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if call_name(call.func) in _LOG_METHODS and call.args:
                    return self.message_text(call.args[0])
        return None

    def message_text(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return squeeze(node.value, 400)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue):
                    parts.append("{" + self.text(value.value) + "}")
            return squeeze("".join(parts), 400)
        if isinstance(node, ast.BinOp):
            return squeeze(self.message_text(node.left) + self.message_text(node.right), 400)
        return self.text(node)

    def returned_declarations(self, value: ast.expr, gates: tuple[RawGate, ...]) -> None:
        """A resolution pass that returns ``{"flag": value}`` declares those values."""
        if isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in self._fields:
                    self.record_store(str(key.value), item, gates, key)

    def _is_args_dict(self, node: ast.expr) -> bool:
        name = call_name(node) if not isinstance(node, ast.Call) else None
        if (
            name is not None
            and name.endswith(self.model.dict_suffixes)
            and self.model.dict_suffixes
        ):
            return True
        return self.kind_of(node) == ARGS and not isinstance(node, ast.Call)

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, node: ast.expr, gates: tuple[RawGate, ...]) -> None:
        if not self.interesting(node):
            return
        if isinstance(node, ast.BoolOp):
            # ``a and x and c``: x matters only if a and c may hold. ``a or x or c``: x is read
            # only when a is false; c says nothing of x (``x or "default"``).
            is_or = isinstance(node.op, ast.Or)
            for position, value in enumerate(node.values):
                siblings = (
                    node.values[:position] if is_or else [v for v in node.values if v is not value]
                )
                others = tuple(
                    self.gate("or" if is_or else "and", other, is_or, other) for other in siblings
                )
                self.expr(value, (*gates, *others))
            return
        if isinstance(node, ast.Compare) and self._plain_use() and self._compare(node, gates):
            return
        if isinstance(node, ast.IfExp):
            self.expr(node.test, gates)
            self.expr(node.body, (*gates, self.gate("if", node.test, False, node)))
            self.expr(node.orelse, (*gates, self.gate("if", node.test, True, node)))
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            inner = list(gates)
            for generator in node.generators:
                self.expr(generator.iter, tuple(inner))
                for condition in generator.ifs:
                    self.expr(condition, tuple(inner))
                    inner.append(self.gate("if", condition, False, condition))
            if isinstance(node, ast.DictComp):
                self.expr(node.key, tuple(inner))
                self.expr(node.value, tuple(inner))
            else:
                self.expr(node.elt, tuple(inner))
            return
        if isinstance(node, ast.Lambda):
            self.expr(node.body, gates)
            return
        if isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                self.attribute_read(node, gates)
            self.expr(node.value, gates)
            return
        if isinstance(node, ast.Subscript):
            self.subscript_read(node, gates)
        elif isinstance(node, ast.Call):
            self.call(node, gates)
            self._hand_arguments(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in self._fields:
                self.summary.mentions.setdefault(node.value, []).append(self.site(node))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, gates)
            elif isinstance(child, ast.keyword):
                self.expr(child.value, gates)

    def attribute_read(self, node: ast.Attribute, gates: tuple[RawGate, ...]) -> None:
        kind = self.kind_of(node.value)
        flag = self.flag_of(kind, node.attr)
        if flag is not None:
            self.record_read(flag, node, gates, self.form_of(node.value) + "." + node.attr, True)
            return
        loose = self.model.distinctive.get(node.attr)
        if (
            loose is not None
            # ``ServerArgs.x`` (a class's default, in the argument layer) is not a read
            and not (isinstance(node.value, ast.Name) and node.value.id in self.model.self_classes)
            and not _MODEL_CONFIG.search(self.form_of(node.value))
        ):
            self.record_read(loose, node, gates, "<object>." + node.attr, False)

    def form_of(self, node: ast.expr) -> str:
        if isinstance(node, ast.Call):
            return (call_name(node.func) or "?") + "()"
        if isinstance(node, ast.Attribute):
            return self.form_of(node.value) + "." + node.attr
        if isinstance(node, ast.Name):
            return node.id
        return "?"

    def subscript_read(self, node: ast.Subscript, gates: tuple[RawGate, ...]) -> None:
        if isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            if isinstance(key, str) and key in self._fields and self._is_args_dict(node.value):
                self.record_read(key, node, gates, self.form_of(node.value) + f"[{key!r}]", True)

    def call(self, node: ast.Call, gates: tuple[RawGate, ...]) -> None:
        name = call_name(node.func)
        if name in ("getattr", "hasattr") and len(node.args) >= 2:
            obj, key = node.args[0], node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                flag = self.flag_of(self.kind_of(obj), key.value)
                if flag is not None:
                    self.record_read(
                        flag, node, gates, f"{name}({self.form_of(obj)}, {key.value!r})", True
                    )
        elif name == "setattr" and len(node.args) >= 3:
            obj, key = node.args[0], node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                flag = self.flag_of(self.kind_of(obj), key.value)
                if flag is not None:
                    self.record_store(flag, node.args[2], gates, node)
        elif name == "get" and isinstance(node.func, ast.Attribute) and node.args:
            key = node.args[0]
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and key.value in self._fields
                and self._is_args_dict(node.func.value)
            ):
                self.record_read(
                    key.value,
                    node,
                    gates,
                    f"{self.form_of(node.func.value)}.get({key.value!r})",
                    True,
                )
        if name is not None and self.arg_layer and name in self.model.declare_calls:
            for keyword in node.keywords:
                if keyword.arg is not None and keyword.arg in self._fields:
                    self.record_store(keyword.arg, keyword.value, gates, keyword.value)

    def record_read(
        self, flag: str, node: ast.AST, gates: tuple[RawGate, ...], form: str, strict: bool
    ) -> None:
        self.summary.reads.append(
            ReadSite(
                flag=flag,
                site=self.site(node),
                form=form,
                text=self.line_text(node),
                gates=self.made(gates),
                scope=self._scopes[-1],
                handling=self.handling,
                strict=strict,
                use=(use := self.use_of(flag)),
                carried=self._carried if use == "global" else None,
                handed=self._handed.get(id(node)) if use == "value" else None,
            )
        )


def scan_source(path: str, data: bytes, model: AccessModel) -> ModuleSummary:
    """The summary of one file; a file that does not parse is reported, not fatal."""
    try:
        source = data.decode("utf-8")
        with warnings.catch_warnings():  # the engine's invalid escapes are not ours to report
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path)
        summary = Scanner(path, source, model).run(tree)
        summary.model_types = model_types_of(data)  # as the import-only scan reads them
        return summary
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        # RecursionError, MemoryError: code nested deeper than the parser or the walk goes
        summary = ModuleSummary(path=path, module=module_name(path))
        summary.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        return summary
