"""Where a registry's functions are looked up: ``@register_lora_backend("csgmv")`` puts its
function in ``LORA_SUPPORTED_BACKENDS``, and ``get_backend_from_name`` takes it out, inside the
LoRA manager that only ``--enable-lora`` builds. A registered function runs where its table is
looked up; a flag choosing its key says which entry, not that the table is used at all."""

from __future__ import annotations

import ast
import weakref
from typing import TYPE_CHECKING

from .model import CallSite, Scope, Site
from .pysource import call_name, module_name
from .records import Budget, Frame
from .values import FunctionRef
from .world import parse_expression

if TYPE_CHECKING:
    from .gates import GateEvaluator

#: Per decorator's parsed function: the module-level functions of its module that read the
#: table it writes (empty: none found there, the lookup is elsewhere).
_LOOKUPS: weakref.WeakKeyDictionary[ast.AST, tuple[str, ...]] = weakref.WeakKeyDictionary()
#: Modules importing one module whose calls are looked for (more: none are).
_MOST_IMPORTERS = 40
#: Per parsed module: its calls by the callee's name (``calls_in``).
_CALLS: weakref.WeakKeyDictionary[ast.Module, dict[str, list[CallSite]]] = (
    weakref.WeakKeyDictionary()
)


def table_lookups(decorator: FunctionRef, tree: ast.Module) -> tuple[str, ...]:
    """The functions of the decorator's own module (``tree``) that read the table the
    decorator writes (``TABLE[name] = fn`` in its body), by name."""
    known = _LOOKUPS.get(decorator.node)
    if known is not None:
        return known
    tables = {
        target.value.id
        for sub in ast.walk(decorator.node)
        if isinstance(sub, ast.Assign)
        for target in sub.targets
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
    }
    found: list[str] = []
    if tables:
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                and stmt.name != decorator.qualname
                and any(
                    isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in tables
                    for sub in ast.walk(stmt)
                )
            ):
                found.append(stmt.name)
    _LOOKUPS[decorator.node] = tuple(found)
    return _LOOKUPS[decorator.node]


def calls_in(tree: ast.Module, name: str, module: str, path: str) -> list[CallSite]:
    """The calls ``name(...)`` of a module, as the index records them but without their own
    conditions (``gates`` empty): the index keeps only calls on a read's path, and a table's
    lookup or a context object's construction is on none. The module is walked once, and its
    calls kept while its tree is."""
    known = _CALLS.get(tree)
    if known is None:
        known = _CALLS[tree] = _all_calls(tree, module, path)
    return known.get(name, [])


def _all_calls(tree: ast.Module, module: str, path: str) -> dict[str, list[CallSite]]:
    found: dict[str, list[CallSite]] = {}

    def visit(body: list[ast.stmt], prefix: str, cls: str | None, inside: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{prefix}{stmt.name}.", stmt.name, inside)
                continue
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(stmt.body, f"{prefix}{stmt.name}.", cls, f"{prefix}{stmt.name}")
                continue
            for sub in ast.walk(stmt):
                name = call_name(sub.func) if isinstance(sub, ast.Call) else None
                if name is None:
                    continue
                assert isinstance(sub, ast.Call)
                starred = any(isinstance(a, ast.Starred) for a in sub.args) or any(
                    k.arg is None for k in sub.keywords
                )
                keywords = tuple(k.arg for k in sub.keywords if k.arg is not None)
                passed = None if starred else (keywords, len(sub.args))
                owner = cls if inside != "<module>" else None
                call = CallSite(name, Site(path, sub.lineno), (), module, inside, owner, None)
                call.passed = passed
                found.setdefault(name, []).append(call)

    visit(tree.body, "", None, "<module>")
    return found


def calls_near(evaluator: GateEvaluator, home: str, name: str) -> list[CallSite]:
    """The calls of ``name`` in module ``home`` and in the modules importing it."""
    world, index = evaluator.interp.world, evaluator.index
    importers = index.importers.get(home, [])
    if len(importers) > _MOST_IMPORTERS:
        return []  # a module half the package imports: its calls are not looked for
    out: list[CallSite] = []
    for module in dict.fromkeys([home, *(module_name(s.site.path) for s in importers)]):
        if f"{name}(" not in world.text(module):
            continue  # not parsed for nothing
        tree = world.tree(module)
        if tree is not None:
            out.extend(calls_in(tree, name, module, index.paths.get(module, module)))
    return out


def lookup_callers(evaluator: GateEvaluator, scope: Scope) -> list[tuple[str, str, str | None]]:
    """Where the tables that the scope's registry decorators fill are looked up: the
    functions (module, qualified name, class) calling a lookup function of the decorator's
    module, found in that module and the modules importing it."""
    interp = evaluator.interp
    out: list[tuple[str, str, str | None]] = []
    for decorator in scope.decorators:
        try:
            found = interp.eval(parse_expression(decorator.split("(")[0]), Frame(scope.module))
        except (SyntaxError, Budget, RecursionError):
            continue
        if not isinstance(found, FunctionRef) or isinstance(found.node, ast.Lambda):
            continue
        tree = interp.world.tree(found.module)
        for lookup in table_lookups(found, tree) if tree is not None else ():
            out.extend(
                (c.module, c.function, c.class_name)
                for c in calls_near(evaluator, found.module, lookup)
            )
    return out
