"""A flag's value handed outside the engine, to its HTTP server's libraries: ``uvicorn.Config``
given ``ssl_ciphers=args.ssl_ciphers`` (directly, or through the engine's own function that
forwards its ``**uvicorn_kwargs``), Starlette's ``CORSMiddleware`` given ``allow_headers``.

The engine's source ends at the call, so the read holding says nothing of what the value
changes: taken as a use that holds whatever happens, such reads were called ``effective``
where the library uses the value only with another setting (TLS settings without a
certificate) or only on some requests (CORS settings, cross-origin requests only). Here the
read takes the library's condition where it is known (below), else "what the library does
with it" as an unknown condition: never a use that holds whatever happens.

Only the HTTP stack (uvicorn, Starlette, FastAPI): a value handed to torch or a kernel library
is that library's setting, and the read holding stays the use it was."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from .gates import _GATE_STEPS, GateEval, Reach
from .handed import _callee
from .model import GateSpec, ReadSite, Scope
from .pysource import squeeze
from .values import External

if TYPE_CHECKING:
    from .gates import GateEvaluator

#: The libraries of the engines' HTTP servers.
_HTTP_STACK = ("uvicorn", "starlette", "fastapi", "h11")
#: uvicorn builds a TLS context only when given a key or a certificate (``Config.is_ssl``:
#: ``bool(self.ssl_keyfile or self.ssl_certfile)``); the other TLS settings configure that
#: context and do nothing without it.
_TLS_SETTINGS = frozenset(
    {"ssl_ciphers", "ssl_cert_reqs", "ssl_ca_certs", "ssl_keyfile_password", "ssl_version"}
)
_TLS_NEEDS = ("ssl_keyfile", "ssl_certfile")
#: Middleware that acts on some requests only, and which.
_PER_REQUEST = {
    "CORSMiddleware": "a cross-origin request (one with an Origin header): Starlette's "
    "CORSMiddleware passes every other request through unchanged",
}


def outside_reach(evaluator: GateEvaluator, read: ReadSite) -> Reach | None:
    """The condition under which the HTTP library a read's value is handed to uses it; None
    where the value does not go there (or this cannot tell)."""
    if read.handed is None:
        return None
    callee_text, key = read.handed
    call = _call_at(evaluator, read, callee_text)
    if call is None:
        return None
    target = _library_callable(evaluator, call, read.scope, key)
    if target is None:
        return None
    dotted, name = target
    site = read.site
    last = dotted.split(".")[-1]
    if last in _PER_REQUEST:
        text = f"{_PER_REQUEST[last]} ({name} of {last})"
        return Reach(None, [GateEval("request", text, site, None, frozenset(), text, True)])
    if dotted.startswith("uvicorn") and name in _TLS_SETTINGS:
        given = [kw.value for kw in call.keywords if kw.arg in _TLS_NEEDS]
        what = f"uvicorn uses {name} only with a TLS key or certificate"
        if not given:
            return Reach(None, [GateEval("library", what, site, None, frozenset(), what)])
        source = " or ".join(ast.unparse(value) for value in given)
        spec = GateSpec("library", source, False, site, squeeze(source))
        gate = evaluator.gate(spec, read.scope)
        return Reach(
            gate.value,
            [GateEval("library", f"{gate.text} ({what})", site, gate.value, gate.facts, gate.why)],
        )
    text = f"what {dotted} does with {name} (outside the engine: not followed)"
    return Reach(None, [GateEval("library", text, site, None, frozenset(), text)])


def _call_at(evaluator: GateEvaluator, read: ReadSite, callee_text: str) -> ast.Call | None:
    """The call a read's value is handed to, found again in its module's tree."""
    tree = evaluator.interp.world.tree(read.scope.module)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.lineno <= read.site.line <= (node.end_lineno or node.lineno)
            and ast.unparse(node.func) == callee_text
        ):
            return node
    return None


def _library_callable(
    evaluator: GateEvaluator, call: ast.Call, scope: Scope, key: int | str
) -> tuple[str, str] | None:
    """The HTTP library's callable the value reaches (its dotted name) and the parameter it
    fills there: the call's own callee, the middleware ``add_middleware`` is given, or the
    library call an engine function forwards its ``**kwargs`` to."""
    found = _evaluate(evaluator, call.func, scope)
    if isinstance(found, External) and isinstance(key, str):
        return (found.dotted, key) if _http(found.dotted) else None
    if isinstance(call.func, ast.Attribute) and call.func.attr == "add_middleware" and call.args:
        middleware = _evaluate(evaluator, call.args[0], scope)
        dotted = middleware.dotted if isinstance(middleware, External) else None
        if dotted is not None and _http(dotted) and isinstance(key, str):
            return dotted, key
        return None
    if not isinstance(key, str):
        return None
    callee = _callee(evaluator, squeeze(ast.unparse(call.func)), scope)
    if callee is None:
        return None
    function, _class_ref, _skip = callee
    node = function.node
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.args.kwarg is None:
        return None
    named = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    if key in named or _names_key(node, key):
        return None  # a parameter of its own, or the key taken out of the dict: used here
    kwargs = node.args.kwarg.arg
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and any(
            kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == kwargs
            for kw in inner.keywords
        ):
            own = Scope(function.module, function.qualname, None, {})
            forwarded = _evaluate(evaluator, inner.func, own)
            if isinstance(forwarded, External) and _http(forwarded.dotted):
                return forwarded.dotted, key
    return None


def _names_key(function: ast.AST, key: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == key for n in ast.walk(function))


def _http(dotted: str) -> bool:
    return dotted.split(".")[0] in _HTTP_STACK


def _evaluate(evaluator: GateEvaluator, expr: ast.expr, scope: Scope) -> Any:
    evaluator.interp.allow(_GATE_STEPS)
    try:
        return evaluator.interp.eval(expr, evaluator.frame(scope))
    except Exception:  # the callee stays unseen: the read is judged as before
        return None
