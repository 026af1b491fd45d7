"""A parameter's value where every call of its function passes the same one.

``KVCacheConfigurator`` works out ``is_dsv4_model = is_deepseek_v4(self.model_config.hf_config)``
and hands it to ``_init_pools(..., is_dsv4_model=is_dsv4_model)``; the callee's
``if is_dsv4_model:`` is then a fact of the model, not a run-time value. Each call's argument
is evaluated in its caller (its parameters, its single assignments, its lazy imports); a
parameter of the caller is followed the same way, a few levels up. Where a call passes
``*args``/``**kwargs``, a call cannot be found in its line, or the calls disagree or are not
known, nothing is decided (``_MISSING``).
"""

from __future__ import annotations

import ast
import weakref
from functools import partial
from typing import TYPE_CHECKING, Any

from .model import CallSite, LocalDef, Scope
from .pysource import _FunctionInfo, call_name
from .records import _MISSING, Budget, Frame
from .unpassed import calls_of
from .values import CALLERS, Fact, Holding, Unknown, show
from .world import parse_expression

if TYPE_CHECKING:
    from .gates import GateEvaluator

#: Calls of one function whose arguments are evaluated (more: not decided).
_MOST_CALLS = 6
#: Callers' parameters followed up, one into another.
_DEPTH = 2
#: Steps one call's argument may take to evaluate.
_ARGUMENT_STEPS = 4_000
_Function = ast.FunctionDef | ast.AsyncFunctionDef

#: Per research (its evaluator): a parameter's value and the facts it rests on, by function.
_RESULTS: weakref.WeakKeyDictionary[GateEvaluator, dict[tuple[Any, ...], Any]] = (
    weakref.WeakKeyDictionary()
)
#: Per parsed module and function: its functions by name, its calls by line, its names.
_FUNCTIONS: weakref.WeakKeyDictionary[ast.Module, dict[str, _Function | None]] = (
    weakref.WeakKeyDictionary()
)
_CALLS: weakref.WeakKeyDictionary[ast.AST, dict[int, list[ast.Call]]] = weakref.WeakKeyDictionary()
_SCOPES: weakref.WeakKeyDictionary[ast.AST, Scope] = weakref.WeakKeyDictionary()


def passed_value(
    evaluator: GateEvaluator,
    local: LocalDef,
    name: str,
    scope: Scope,
    calls: tuple[str, list[CallSite]] | None = None,
) -> Any:
    """What every call of the scope's function passes as parameter ``name``; ``calls``: the
    callee's name and its calls where the index does not keep them (a dataclass built)."""
    known = _RESULTS.setdefault(evaluator, {})
    key = (scope.module, scope.function, name, tuple(sorted(evaluator.absent)))
    if key not in known:
        if evaluator.passing >= _DEPTH:
            return _MISSING
        known[key] = _passed(evaluator, local, name, scope, calls)
    value, facts = known[key]
    if value is not _MISSING:
        evaluator.interp._merge_facts(facts)
    return value


def _passed(
    evaluator: GateEvaluator,
    local: LocalDef,
    name: str,
    scope: Scope,
    calls: tuple[str, list[CallSite]] | None,
) -> tuple[Any, frozenset[Fact]]:
    missing: tuple[Any, frozenset[Fact]] = (_MISSING, frozenset())
    found = calls or calls_of(evaluator.index, evaluator.model_scope(), scope)
    if found is None:
        return missing
    callee, sites = found
    if not sites or len(sites) > _MOST_CALLS or any(s.passed is None for s in sites):
        return missing
    offset = 1 if scope.class_name else 0  # ``self`` is bound by the call's object
    interp = evaluator.interp
    # the callers' arguments are worked out on a budget of their own: the gate being
    # evaluated keeps its steps, and a spent budget here marks no walk incomplete
    kept = (interp._steps, interp._max_steps, interp.exhausted)
    evaluator.passing += 1
    try:
        values: list[Any] = []
        facts: set[Fact] = set()
        for site in sites:
            interp.allow(_ARGUMENT_STEPS)
            parameter = (local, name, scope.module)
            value, noted = interp.with_facts(
                partial(_argument, evaluator, site, callee, parameter, offset)
            )
            values.append(value)
            facts |= noted
    finally:
        evaluator.passing -= 1
        interp._steps, interp._max_steps, interp.exhausted = kept
    if len(set(map(_kind, values))) > 1:
        # the calls disagree: a call that does not run here passes nothing (the draft model's
        # ``is_draft_model=True`` beside the target's default, without speculative decoding)
        running = [i for i, site in enumerate(sites) if _runs(evaluator, site)]
        if not running:
            return missing
        values, sites = [values[i] for i in running], [sites[i] for i in running]
    first = values[0]
    if isinstance(first, Holding) and all(
        isinstance(v, Holding) and v.items == first.items for v in values
    ):
        pass  # every call passes a collection known to hold the same items
    elif any(v is _MISSING or isinstance(v, Unknown) for v in values) or not all(
        type(v) is type(first) and v == first for v in values
    ):
        return missing
    elif not isinstance(first, bool | int | float | str | type(None)):
        return missing  # an object: compared by identity, not known to be the same one
    where = ", ".join(str(s.site) for s in sites[:3])
    facts.add(Fact(CALLERS, name, f"{name}={show(first)} (as every call passes it: {where})"))
    return first, frozenset(facts)


def _kind(value: Any) -> Any:
    """What two calls' values are compared by (an unknown is unlike everything)."""
    if value is _MISSING or isinstance(value, Unknown) and not isinstance(value, Holding):
        return id(value)
    if isinstance(value, Holding):
        return ("holding", value.items)
    return (type(value), value) if isinstance(value, bool | int | float | str) else id(value)


def _runs(evaluator: GateEvaluator, site: CallSite) -> bool:
    """Whether the call may run here: not off by its own conditions or its callers'."""
    evaluator.passing += 1  # the callers' arguments below are not followed again
    try:
        return evaluator.call_reach(site).value is not False
    finally:
        evaluator.passing -= 1


def _argument(
    evaluator: GateEvaluator,
    site: CallSite,
    callee: str,
    parameter: tuple[LocalDef, str, str],
    offset: int,
) -> Any:
    local, name, callee_module = parameter
    function = _function_node(evaluator, site.module, site.function)
    if function is None:
        return _MISSING
    by_line = _CALLS.get(function)
    if by_line is None:
        by_line = {}
        for sub in ast.walk(function):
            if isinstance(sub, ast.Call):
                by_line.setdefault(sub.lineno, []).append(sub)
        _CALLS[function] = by_line
    calls = by_line.get(site.site.line, [])
    named = [c for c in calls if call_name(c.func) == callee]
    call = named[0] if len(named) == 1 else (calls[0] if len(calls) == 1 else None)
    if call is None:
        return _MISSING
    expr: ast.expr | None = next((k.value for k in call.keywords if k.arg == name), None)
    place = local.position - offset
    if expr is None and 0 <= place < len(call.args):
        if any(isinstance(a, ast.Starred) for a in call.args[: place + 1]):
            return _MISSING
        expr = call.args[place]
    interp = evaluator.interp
    try:
        if expr is None:  # not passed: the callee's default
            if local.source is None:
                return _MISSING
            # evaluated where the callee is written
            return interp.eval(parse_expression(local.source), Frame(callee_module))
        scope = caller_scope(evaluator, site, function)
        return interp.eval(expr, evaluator.frame(scope))
    except (SyntaxError, Budget, RecursionError):
        return _MISSING


def caller_scope(evaluator: GateEvaluator, site: CallSite, function: _Function) -> Scope:
    """The caller's names, as a gate's scope holds them."""
    known = _SCOPES.get(function)
    if known is None:
        known = _SCOPES[function] = _caller_scope(evaluator, site, function)
    return known


def _caller_scope(evaluator: GateEvaluator, site: CallSite, function: _Function) -> Scope:
    info = _FunctionInfo(function, {})
    path = evaluator.index.paths.get(site.module, site.module)
    names: dict[str, LocalDef] = {}
    for param, default in info.params.items():
        text = ast.unparse(default) if default is not None else None
        names[param] = LocalDef(
            "param", text, 0, info.annotations.get(param), info.positions.get(param, -1)
        )
    for local, statements in info.assigned.items():
        if local in names:
            continue
        if local in info.rebound or len(statements) > 1 or statements[0].value is None:
            names[local] = LocalDef("local", None, 0)
        else:
            value = statements[0].value
            assert value is not None
            names[local] = LocalDef("assign", ast.unparse(value), statements[0].lineno)
    for local in info.imported:
        source = info.import_source(local, site.module, path)
        if source is not None:
            names.setdefault(local, LocalDef("import", source, 0))
    return Scope(site.module, site.function, site.class_name, names)


def _function_node(evaluator: GateEvaluator, module: str, qualname: str) -> _Function | None:
    tree = evaluator.interp.world.tree(module)
    if tree is None:
        return None
    functions = _FUNCTIONS.setdefault(tree, {})
    if qualname not in functions:
        functions[qualname] = _find_function(tree, qualname)
    return functions[qualname]


def _find_function(tree: ast.Module, qualname: str) -> _Function | None:
    body: list[ast.stmt] = list(tree.body)
    found: ast.AST | None = None
    for part in qualname.split("."):
        found = next(
            (
                s
                for s in body
                if isinstance(s, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and s.name == part
            ),
            None,
        )
        if found is None:
            return None
        body = list(getattr(found, "body", []))
    return found if isinstance(found, _Function) else None
