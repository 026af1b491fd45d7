"""A flag's value handed to a function of the engine as an argument, and what the function
does with it: ``validate_input_length(req, n, get_serving().allow_auto_truncate)`` truncates
only a prompt longer than ``n``; ``XGrammarGrammarBackend(max_whitespace_cnt=...)`` keeps the
value on the object, and one method uses it, for a JSON-schema request only. The read at the
call site holds whenever the call runs; the flag changes something only where the callee uses
the parameter, so the read takes the conditions of those uses (``verdicts.Judge.reader``).

One call deep, and one attribute deep (``self.x = param``, then ``self.x`` in the class's own
methods). A parameter the callee assigns again, or a callee this cannot see, says nothing."""

from __future__ import annotations

import ast
import dataclasses
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .gates import _GATE_STEPS, GateEval, GateEvaluator, Reach, conjunction
from .model import GateSpec, LocalDef, ReadSite, Scope, Site
from .pysource import squeeze
from .values import BoundMethod, ClassRef, FunctionRef
from .world import absolute_module, parse_expression

#: The ``from ... import`` bindings of a parsed module, anywhere in it (kept while its tree is).
_LOCAL_IMPORTS: weakref.WeakKeyDictionary[ast.Module, dict[str, tuple[str | None, int, str]]] = (
    weakref.WeakKeyDictionary()
)
#: Uses of one value looked at (more: this says nothing).
_USES = 12
_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class _Use:
    """One use of the value, under the conditions (test, negated) around it in its function."""

    line: int
    gates: tuple[tuple[ast.expr, bool], ...]
    stored_as: str | None = None  # ``self.<attr> = param``: kept on the object


def handed_reach(evaluator: GateEvaluator, read: ReadSite) -> Reach | None:
    """The conditions under which the callee uses the value handed to it; None where it uses
    it whatever happens, or this cannot tell."""
    if read.handed is None:
        return None
    callee_text, key = read.handed
    callee = _callee(evaluator, callee_text, read.scope)
    if callee is None:
        return None
    function, class_ref, skip = callee
    param = _parameter(function.node, key, skip)
    if param is None:
        return None
    if not isinstance(function.node, _Function):
        return None
    uses = _uses(function.node.body, _is_name(param))
    if uses is None:
        return None
    module = function.module
    scope = _scope(module, function, class_ref)
    attr_uses: list[tuple[_Use, FunctionRef | None]] = []
    for use in uses:
        if use.stored_as is None or use.gates:
            attr_uses.append((use, None))
            continue
        if class_ref is None:
            return None
        kept = _attribute_uses(class_ref, use.stored_as, function.node)
        if kept is None:
            return None
        attr_uses.extend(kept)
    if not attr_uses or len(attr_uses) > _USES or any(not use.gates for use, _ in attr_uses):
        return None
    reaches = []
    for use, method in attr_uses:
        where = scope if method is None else _scope(module, method, class_ref)
        gates = [_evaluate(evaluator, test, negate, where, module) for test, negate in use.gates]
        reaches.append(Reach(conjunction(gates), gates))
    if any(r.value is True for r in reaches):
        return None
    value = False if all(r.value is False for r in reaches) else None
    deciding = [g for r in reaches for g in r.gates if g.value is not True][:6]
    what = squeeze(callee_text)
    return Reach(
        value,
        [
            dataclasses.replace(g, text=f"{g.text} (where {what}() uses it, {g.site})")
            for g in deciding
        ],
    )


def _callee(
    evaluator: GateEvaluator, text: str, scope: Scope
) -> tuple[FunctionRef, ClassRef | None, int] | None:
    """The function the call runs, the class whose object it belongs to, and how many leading
    parameters the call does not pass (``self``)."""
    try:
        expr = parse_expression(text)
    except SyntaxError:
        return None
    evaluator.interp.allow(_GATE_STEPS)
    try:
        found: Any = evaluator.interp.eval(expr, evaluator.frame(scope))
    except Exception:  # the callee stays unseen: the read is judged as before
        return None
    if not isinstance(found, BoundMethod | ClassRef | FunctionRef) and isinstance(expr, ast.Name):
        found = _imported_in_module(evaluator, scope.module, expr.id)
    if isinstance(found, BoundMethod) and isinstance(found.function, FunctionRef):
        function = found.function
        return function, function.owner, 1
    if isinstance(found, ClassRef) and found.node is not None:
        for stmt in found.node.body:
            if isinstance(stmt, _Function) and stmt.name == "__init__":
                init = FunctionRef(found.module, f"{found.name}.__init__", stmt, found)
                return init, found, 1
        return None
    if isinstance(found, FunctionRef) and isinstance(found.node, _Function):
        return found, found.owner, 0
    return None


def _imported_in_module(evaluator: GateEvaluator, module: str, name: str) -> Any:
    """A name a function of the module imports for itself (``from .x import Backend`` inside
    the branch that builds it): the frame of a read sees the module's own names only."""
    world = evaluator.interp.world
    tree = world.tree(module)
    if tree is None:
        return None
    bound = _LOCAL_IMPORTS.get(tree)
    if bound is None:  # once a module: its imports, by the name each binds (the first)
        bound = _LOCAL_IMPORTS[tree] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    bound.setdefault(
                        alias.asname or alias.name, (node.module, node.level, alias.name)
                    )
    if name not in bound:
        return None
    target, level, attribute = bound[name]
    base = absolute_module(module, world.path(module), target, level)
    return evaluator.interp.import_value(base, attribute) if base else None


def _parameter(node: ast.AST, key: int | str, skip: int) -> str | None:
    if not isinstance(node, _Function):
        return None
    args = node.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    if isinstance(key, int):
        index = key + skip
        return positional[index] if index < len(positional) else None
    names = positional[skip:] + [a.arg for a in args.kwonlyargs]
    return key if key in names else None


def _is_name(name: str) -> Any:
    def matches(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == name

    return matches


def _is_self_attr(attr: str) -> Any:
    def matches(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == attr
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        )

    return matches


def _mentions(node: ast.AST, matches: Any) -> bool:
    return any(matches(sub) for sub in ast.walk(node))


def _uses(body: list[ast.stmt], matches: Any) -> list[_Use] | None:
    """Every use of the value in a function's body with the conditions around it; a test that
    reads the value is a use of it (its branches are what the value decides), not a condition
    on it. None where the value is assigned again or too much is nested to tell."""
    out: list[_Use] = []
    try:
        for stmt, gates in _statements(body, ()):
            if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if any(_mentions(t, matches) and not isinstance(t, ast.Attribute) for t in targets):
                    return None  # given a new value: the uses after it are not of the flag
                kept = _kept_as(stmt, matches)
                if kept is not None:
                    out.append(_Use(stmt.lineno, gates, kept))
                    continue
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                if _mentions(stmt, matches):
                    out.append(_Use(stmt.lineno, gates))
                continue
            for expr in _own_exprs(stmt):
                out.extend(
                    _Use(line, (*gates, *inner)) for line, inner in _in_expr(expr, (), matches)
                )
    except RecursionError:
        return None
    return out


def _kept_as(stmt: ast.stmt, matches: Any) -> str | None:
    """``self.<attr> = value``: the attribute the value is kept in."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not matches(stmt.value):
        return None
    target = stmt.targets[0]
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return target.attr
    return None


def _statements(
    body: list[ast.stmt], gates: tuple[tuple[ast.expr, bool], ...]
) -> Iterator[tuple[ast.stmt, tuple[tuple[ast.expr, bool], ...]]]:
    """Each simple statement (and each ``if``/``while`` test, as the statement) with the tests
    of the blocks around it and of the earlier ``if C: return`` guards of its blocks."""
    for stmt in body:
        if isinstance(stmt, ast.If | ast.While):
            yield stmt, gates
            yield from _statements(stmt.body, (*gates, (stmt.test, False)))
            yield from _statements(stmt.orelse, (*gates, (stmt.test, True)))
            if (
                isinstance(stmt, ast.If)
                and stmt.body
                and _leaves(stmt.body[-1])
                and not stmt.orelse
            ):
                gates = (*gates, (stmt.test, True))
        elif isinstance(stmt, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            yield stmt, gates
            yield from _statements(stmt.body, gates)
            if isinstance(stmt, ast.For | ast.AsyncFor):
                yield from _statements(stmt.orelse, gates)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            yield from _statements(stmt.body, gates)
            for handler in stmt.handlers:
                yield from _statements(handler.body, gates)
            yield from _statements(stmt.orelse, gates)
            yield from _statements(stmt.finalbody, gates)
        elif isinstance(stmt, ast.Match):
            yield stmt, gates
            for case in stmt.cases:
                yield from _statements(case.body, gates)
        else:
            yield stmt, gates


def _leaves(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break)


def _own_exprs(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return [stmt.iter]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [item.context_expr for item in stmt.items]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    return [c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.expr)]


def _in_expr(
    node: ast.expr, gates: tuple[tuple[ast.expr, bool], ...], matches: Any
) -> Iterator[tuple[int, tuple[tuple[ast.expr, bool], ...]]]:
    """The uses inside one expression: ``a and x`` needs ``a``; ``x if c else y`` needs ``c``."""
    if matches(node):
        yield getattr(node, "lineno", 0), gates
        return
    if isinstance(node, ast.BoolOp):
        is_or = isinstance(node.op, ast.Or)
        for position, value in enumerate(node.values):
            earlier = tuple((v, is_or) for v in node.values[:position] if not _mentions(v, matches))
            yield from _in_expr(value, (*gates, *earlier), matches)
        return
    if isinstance(node, ast.IfExp) and not _mentions(node.test, matches):
        yield from _in_expr(node.body, (*gates, (node.test, False)), matches)
        yield from _in_expr(node.orelse, (*gates, (node.test, True)), matches)
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            yield from _in_expr(child, gates, matches)
        elif isinstance(child, ast.keyword | ast.comprehension):
            for sub in ast.iter_child_nodes(child):
                if isinstance(sub, ast.expr):
                    yield from _in_expr(sub, gates, matches)


def _attribute_uses(
    class_ref: ClassRef, attr: str, init: ast.AST
) -> list[tuple[_Use, FunctionRef | None]] | None:
    """The uses of ``self.<attr>`` in the class's own methods (the one that stored it left
    out), each with its method; None where one assigns it again."""
    out: list[tuple[_Use, FunctionRef | None]] = []
    matches = _is_self_attr(attr)
    for stmt in class_ref.node.body:
        if not isinstance(stmt, _Function) or stmt is init or not _mentions(stmt, matches):
            continue
        uses = _uses(stmt.body, matches)
        if uses is None or any(u.stored_as is not None for u in uses):
            return None
        method = FunctionRef(class_ref.module, f"{class_ref.name}.{stmt.name}", stmt, class_ref)
        out.extend((use, method) for use in uses)
    for sub in ast.walk(class_ref.node):
        if isinstance(sub, ast.Assign | ast.AugAssign):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(matches(t) for t in targets) and not _in(init, sub):
                return None  # set again elsewhere: not only the flag's value
    return out


def _in(function: ast.AST, node: ast.AST) -> bool:
    return any(sub is node for sub in ast.walk(function))


def _scope(module: str, function: FunctionRef, class_ref: ClassRef | None) -> Scope:
    node = function.node
    params: dict[str, LocalDef] = {}
    if isinstance(node, _Function):
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        for position, arg in enumerate(positional):
            params[arg.arg] = LocalDef("param", None, arg.lineno, None, position)
        for arg in args.kwonlyargs:
            params[arg.arg] = LocalDef("param", None, arg.lineno, None, -1)
    return Scope(module, function.qualname, class_ref.name if class_ref else None, params)


def _evaluate(
    evaluator: GateEvaluator, test: ast.expr, negate: bool, scope: Scope, module: str
) -> GateEval:
    source = ast.unparse(test)
    site = Site(evaluator.index.paths.get(module, module), test.lineno)
    return evaluator.gate(GateSpec("if", source, negate, site, squeeze(source)), scope)
