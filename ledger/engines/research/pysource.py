"""Small readings of Python source shared by the scanner: names, text, a function's own
statements and local bindings, and the imports of a file read without parsing it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from .model import (
    ImportSite,
    ModuleSummary,
    Site,
)
from .world import absolute_module

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)


_LOG_METHODS = frozenset({"warning", "warn", "info", "error", "debug", "critical"})


_MAX_TEXT = 240


def module_name(path: str) -> str:
    stem = path[:-3] if path.endswith(".py") else path
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def squeeze(text: str | None, limit: int = _MAX_TEXT) -> str:
    one_line = " ".join((text or "").split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def terminal(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _TERMINAL)


def call_name(node: ast.expr) -> str | None:
    """The name a call's function is known by: ``f`` for ``f()`` and ``a.b.f()``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def names_in(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id


class RawGate(NamedTuple):
    """A condition as met while walking: made a ``GateSpec`` only when a read is recorded."""

    kind: str
    expr: ast.expr | None
    negate: bool
    line: int


class _FunctionInfo:
    """Per function: its parameters, single assignments and the names that hold the args."""

    def __init__(self, node: ast.AST, outer_aliases: dict[str, str]) -> None:
        self.params: dict[str, ast.expr | None] = {}
        #: a positional parameter's place in the ``def`` (``self`` is 0 in a method)
        self.positions: dict[str, int] = {}
        #: a parameter's annotation when it names a class (``scheduler: Scheduler``)
        self.annotations: dict[str, str] = {}
        self.assigned: dict[str, list[ast.Assign | ast.AnnAssign]] = {}
        self.rebound: set[str] = set()  # bound some other way too: a loop, ``with``, ``+=``...
        #: names bound by an import inside the function (SGLang imports lazily, in the branch
        #: that needs it): (module as written, its dots, the attribute or None) per binding
        self.imported: dict[str, list[tuple[str | None, int, str | None]]] = {}
        self.aliases: dict[str, str] = dict(outer_aliases)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            self._params(node.args)
        body = (
            node.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module)
            else []
        )
        self.statements = list(_own_statements(body))
        not_imports: set[str] = set()
        #: names the function declares ``global`` (its assignments set the module's)
        self.globals: set[str] = set()
        for stmt in self.statements:
            if isinstance(stmt, ast.Global):
                self.globals.update(stmt.names)
            bound = set(_other_bindings(stmt))
            self.rebound |= bound
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                self._imports(stmt)
                continue
            not_imports |= bound
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    self.assigned.setdefault(target.id, []).append(stmt)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.value is not None:
                    self.assigned.setdefault(stmt.target.id, []).append(stmt)
        for name in not_imports:
            self.imported.pop(name, None)

    def _imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        for alias in stmt.names:
            bound: tuple[str | None, int, str | None]
            if isinstance(stmt, ast.ImportFrom):
                bound = (stmt.module, stmt.level, alias.name)
            elif alias.asname:
                bound = (alias.name, 0, None)
            else:  # ``import a.b`` binds ``a``
                bound = (alias.name.split(".")[0], 0, None)
            self.imported.setdefault(alias.asname or alias.name.split(".")[0], []).append(bound)

    def import_source(self, name: str, module: str, path: str) -> str | None:
        """``module:attribute`` (or ``module``) when only imports inside the function bind
        ``name``, all the same one: what the imported module binds to it."""
        bound = self.imported.get(name)
        if not bound or len(set(bound)) != 1 or name in self.assigned or name in self.params:
            return None
        written, level, attribute = bound[0]
        target = absolute_module(module, path, written, level)
        if target is None:
            return None
        return f"{target}:{attribute}" if attribute else target

    def _params(self, args: ast.arguments) -> None:
        positional = [*args.posonlyargs, *args.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
        defaults += list(args.defaults)
        for place, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
            self.params[arg.arg] = default
            self.positions[arg.arg] = place
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            self.params[arg.arg] = kw_default
        for arg in [*positional, *args.kwonlyargs]:
            note = arg.annotation
            if isinstance(note, ast.Constant) and isinstance(note.value, str):
                self.annotations[arg.arg] = note.value
            elif isinstance(note, ast.Name | ast.Attribute):
                self.annotations[arg.arg] = ast.unparse(note)
        if args.vararg:
            self.params[args.vararg.arg] = None
        if args.kwarg:
            self.params[args.kwarg.arg] = None


def _other_bindings(stmt: ast.stmt) -> Iterator[str]:
    """Names a statement binds other than by a plain ``x = value``."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.For | ast.AsyncFor):
        targets.append(stmt.target)
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        targets.extend(item.optional_vars for item in stmt.items if item.optional_vars is not None)
    elif isinstance(stmt, ast.AugAssign):
        targets.append(stmt.target)
    elif isinstance(stmt, ast.Assign):
        targets.extend(t for t in stmt.targets if not isinstance(t, ast.Name))
    elif isinstance(stmt, ast.Global | ast.Nonlocal):
        yield from stmt.names
    elif isinstance(stmt, ast.Import | ast.ImportFrom):
        for alias in stmt.names:
            yield (alias.asname or alias.name).split(".")[0]
    elif isinstance(stmt, ast.Try | ast.TryStar):
        yield from (h.name for h in stmt.handlers if h.name)
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                yield node.id
    for node in (
        ast.walk(stmt)
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        else ()
    ):
        if isinstance(node, ast.NamedExpr):
            yield node.target.id
        elif isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store):
            base = node.value
            if isinstance(base, ast.Name):  # ``d[k] = v`` / ``d.x = v`` changes what d holds
                yield base.id


def _own_statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested blocks included, nested functions and classes not."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _own_statements(getattr(stmt, name, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _own_statements(handler.body)
        for case in getattr(stmt, "cases", []) or []:
            yield from _own_statements(case.body)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


_IMPORT_LINE = re.compile(
    rb"^([ \t]*)(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)|import[ \t]+([^\n#]+))",
    re.MULTILINE,
)


#: ``EntryClass = X`` / ``EntryClass = [X, Y]`` at the start of a line (SGLang's model files).
_ENTRY_CLASS = re.compile(rb"^EntryClass[ \t]*=[ \t]*(\[[^\]]*\]|\([^)]*\)|[^\n#]*)", re.MULTILINE)


def entry_classes_of(data: bytes) -> tuple[str, ...]:
    """The model classes a file serves, read off its text (a model file may name no flag)."""
    match = _ENTRY_CLASS.search(data)
    if match is None:
        return ()
    text = match.group(1).decode("utf-8", "replace")
    return tuple(re.findall(r"[A-Za-z_]\w*", text))


def scan_imports(path: str, data: bytes) -> ModuleSummary:
    """The imports of a file that names no flag, without parsing it (most files).

    Only the import graph needs such a file. An indented import is taken as lazy but
    unconditional: the conditions around it are not read, which can only make a module look
    reachable where it is not, never the reverse.
    """
    summary = ModuleSummary(path=path, module=module_name(path))
    summary.entry_classes = entry_classes_of(data)
    summary.model_types = model_types_of(data)
    package = summary.module.split(".")[0]
    for match in _IMPORT_LINE.finditer(data):
        indent, source_module, names, plain = match.groups()
        line = data.count(b"\n", 0, match.start()) + 1
        function = "?" if indent else None
        targets: list[str] = []
        if plain is not None:
            for part in plain.decode("utf-8", "replace").split(","):
                name = part.strip().split(" as ")[0].strip()
                if name and re.fullmatch(r"[\w.]+", name):
                    targets.append(name)
        else:
            text = source_module.decode()
            level = len(text) - len(text.lstrip("."))
            base = absolute_module(summary.module, path, text.lstrip(".") or None, level)
            if base is None:
                continue
            targets.append(base)
            for part in names.decode("utf-8", "replace").strip("() \t\r\n").split(","):
                name = part.strip().split(" as ")[0].strip()
                if name and name != "*" and re.fullmatch(r"\w+", name):
                    targets.append(f"{base}.{name}")
        for target in targets:
            if target.split(".")[0] == package:
                summary.imports.append(ImportSite(target, Site(path, line), (), function, None))
    return summary


ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def runtime_operand(node: ast.expr) -> bool:
    """An operand that counts something built while serving: a ``len(...)`` in it
    (``len(self.waiting_queue) + 1``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "len":
            return True
    return False


def global_loads(tree: ast.Module) -> dict[str, list[tuple[str, str | None]]]:
    """The globals functions of the module set (``global X``), each with the functions that
    read it (qualified name, class): where a value carried in such a global is used."""
    declared = {
        name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names
    }
    out: dict[str, list[tuple[str, str | None]]] = {}
    if not declared:
        return out

    def visit(body: list[ast.stmt], prefix: str, class_name: str | None) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{prefix}{stmt.name}.", stmt.name)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                loads: set[str] = set()
                stored: set[str] = set()
                own: set[str] = set()
                for n in ast.walk(stmt):  # one walk: what it reads, binds, declares global
                    if isinstance(n, ast.Name):
                        (loads if isinstance(n.ctx, ast.Load) else stored).add(n.id)
                    elif isinstance(n, ast.Global):
                        own.update(n.names)
                    elif isinstance(n, ast.arg):
                        stored.add(n.arg)
                for name in sorted(loads & (declared - (stored - own))):
                    out.setdefault(name, []).append((f"{prefix}{stmt.name}", class_name))

    visit(tree.body, "", None)
    return out


def entry_classes(tree: ast.Module) -> tuple[str, ...]:
    """The classes a model file registers (SGLang's ``EntryClass = [A, B]``)."""
    found: tuple[str, ...] = ()
    for stmt in tree.body:  # the last assignment is the one that stands
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EntryClass" for t in stmt.targets
        ):
            value = stmt.value
            items = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            found = tuple(item.id for item in items if isinstance(item, ast.Name))
    return found


_CLASS_OR_MODEL_TYPE = re.compile(
    rb"""^class[ \t]+(\w+)|^(?:    |\t)model_type[ \t]*(?::[ \t]*str[ \t]*)?=[ \t]*["']([\w.-]+)["']""",
    re.M,
)


def model_types_of(data: bytes) -> dict[str, list[str]]:
    """``model_type`` -> the file's config classes declaring it (``model_type = "x"`` indented
    under a top-level class, as each transformers config class names its own), read without
    parsing the file: the same for parsed files and import-only ones. The class body is the
    first indentation level (four spaces or a tab: a method's local of that name is deeper)."""
    out: dict[str, list[str]] = {}
    if b"model_type" not in data:
        return out
    current: str | None = None
    for match in _CLASS_OR_MODEL_TYPE.finditer(data):
        if match.group(1) is not None:
            current = match.group(1).decode()
        elif current is not None:
            out.setdefault(match.group(2).decode(), []).append(current)
    return out
