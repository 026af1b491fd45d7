"""A parameter's default, where no call of its function that can run for the model passes it."""

from __future__ import annotations

from typing import Any

from .index import MAX_HOMONYMS, VersionIndex
from .model import CallSite, LocalDef, Scope
from .records import _MISSING, Budget, Frame
from .values import CALLERS, Fact, Unknown
from .world import parse_expression


def calls_of(index: VersionIndex, models: Any, scope: Scope) -> tuple[str, list[CallSite]] | None:
    """The name the scope's function is called by and every call of it that can run for the
    model; None where the calls cannot all be known (a name defined more than a few times, a
    function passed as a value, a class others subclass: ``super().__init__(...)``)."""
    own = scope.function.rpartition(".")[2]
    callee = scope.class_name if own == "__init__" and scope.class_name else own
    if (
        not callee
        or not 0 < index.defined.get(callee, 0) <= MAX_HOMONYMS
        or own in index.named
        or (scope.class_name and any(scope.class_name in b for b in index.bases.values()))
    ):
        return None
    sites = [
        s for s in index.calls.get(callee, []) if models is None or not models.excludes(s.module)
    ]
    return callee, sites


def unpassed_default(
    index: VersionIndex, interp: Any, models: Any, local: LocalDef, name: str, scope: Scope
) -> Any:
    """Qwen3.5 builds ``Qwen2MoeSparseMoeBlock`` without the keyword Qwen3-Next gives it: the
    parameter is its default for Qwen3.5. ``_MISSING`` where a call may pass it, or the calls
    cannot all be known: a name defined more than a few times, a subclass
    (``super().__init__(...)``), a function passed as a value, ``*args`` or ``**kwargs`` at a
    call. ``models``: the target's ``ModelScope`` (other models' calls left out), or None."""
    if local.source is None:
        return _MISSING
    found = calls_of(index, models, scope)
    if found is None:
        return _MISSING
    _, sites = found
    offset = 1 if scope.class_name else 0  # ``self`` is bound by the call's object
    for site in sites:
        if site.passed is None:
            return _MISSING
        keywords, positional = site.passed
        if name in keywords or 0 <= local.position - offset < positional:
            return _MISSING
    if not sites:
        return _MISSING
    try:
        value = interp.eval(parse_expression(local.source), Frame(scope.module))
    except (SyntaxError, Budget, RecursionError):
        return _MISSING
    if isinstance(value, Unknown):
        return _MISSING
    interp._merge_facts({Fact(CALLERS, name, f"{name}={local.source} (no caller passes it)")})
    return value
