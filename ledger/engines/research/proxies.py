"""The engine's objects a gate asks about without building them: ``self`` in a method, and a
parameter annotated with one of the engine's classes; their attributes as the class assigns them
(once), or as a ``@property`` computes them."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from .model import LocalDef, Scope
from .passed import passed_value
from .records import _MISSING, MODEL_CONFIG_CLASSES, Frame
from .registries import calls_near
from .values import ClassRef, Proxy, Unknown

if TYPE_CHECKING:
    from .gates import GateEvaluator


class SelfProxy(Proxy):
    """``self`` in a method of the engine: its attributes as assigned in the class, if once."""

    def __init__(self, scope: Scope, evaluator: GateEvaluator) -> None:
        self.scope = scope
        self.evaluator = evaluator

    def attribute(self, interp: Any, name: str) -> Any:
        holder = interp.holder(name)
        if holder is not None:
            return holder
        local = self.scope.self_attrs.get(name)
        if name == "model_config" and local is not None and (local.source or "").isidentifier():
            # ``self.model_config = model_config``: the model's config handed in, as below
            return interp.model_config()
        if local is None:
            owner = interp.global_value(self.scope.module, self.scope.class_name or "")
            declared = _declared(interp, owner, name) if isinstance(owner, ClassRef) else None
            cls = declared_class(self.evaluator, *declared) if declared else None
            if cls is not None:  # a dataclass field: ``model_config: ModelConfig``
                return instance_of(self.evaluator, cls)
            return self.evaluator.mixed_in_attribute(interp, self.scope, name)
        return self.evaluator.local_value(local, f"self.{name}", self.scope)


class InstanceProxy(Proxy):
    """A parameter annotated with one of the engine's classes (``scheduler: Scheduler``): an
    attribute its class (or a base) assigns once, ``self.x = value``, is that value."""

    def __init__(self, cls: ClassRef, evaluator: GateEvaluator) -> None:
        self.cls = cls
        self.evaluator = evaluator

    def attribute(self, interp: Any, name: str) -> Any:
        holder = interp.holder(name)
        if holder is not None:
            return holder
        assigned = [
            (klass, value)
            for klass in interp._mro(self.cls)
            if klass.node is not None
            for value in self_assignments(klass.node).get(name, [])
        ]
        if not assigned and _is_property(interp, self.cls, name):
            return interp.class_attribute(self.cls, name, receiver=self)  # its body, on self
        if not assigned:
            declared = _declared(interp, self.cls, name)
            if declared is not None:  # a dataclass field: ``model_config: ModelConfig``
                cls = declared_class(self.evaluator, *declared)
                if cls is not None:
                    return instance_of(self.evaluator, cls)
                passed = _constructed_with(self.evaluator, interp, self.cls, name)
                if passed is not _MISSING:
                    return passed
        if name == "model_config" and any(isinstance(v, ast.Name) for _, v in assigned):
            # the model's config handed in (a device's adjusted copy of it aside): the target's
            return interp.model_config()
        if len(assigned) != 1:  # several times: a run-time value
            return Unknown(f"{self.cls.name}.{name}")
        klass, value = assigned[0]
        proxy = self

        def resolve(local: str) -> Any:
            if local == "self":
                return proxy
            found = interp.holder(local)
            return _MISSING if found is None else found

        return interp.eval(value, Frame(klass.module, {}, f"{klass.name}.<attributes>", resolve))


def instance_of(evaluator: GateEvaluator, cls: ClassRef) -> Any:
    """An object of one of the engine's classes, as a gate may ask of it: the engine's
    model-config class is the target's model config (``kvc.model_config.hf_config``)."""
    if MODEL_CONFIG_CLASSES.get(cls.module.split(".")[0]) == (cls.module, cls.name):
        return evaluator.interp.model_config()
    return InstanceProxy(cls, evaluator)


def declared_class(evaluator: GateEvaluator, module: str, annotation: str) -> ClassRef | None:
    """The engine class an annotation written in ``module`` names (a dataclass field's)."""
    local = LocalDef("param", None, 0, annotation)
    return evaluator._annotated_class(local, Scope(module, "<module>", None))


def _declared(interp: Any, cls: ClassRef, name: str) -> tuple[str, str] | None:
    """The class (or a base) body's ``name: Type`` without a value (a dataclass field set by
    the constructor): the module it is written in and the type, as written."""
    for klass in interp._mro(cls):
        if klass.node is None:
            continue
        for stmt in klass.node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == name
            ):
                note = stmt.annotation
                text = note.value if isinstance(note, ast.Constant) else ast.unparse(note)
                return (klass.module, text) if isinstance(text, str) else None
    return None


def _constructed_with(evaluator: GateEvaluator, interp: Any, cls: ClassRef, name: str) -> Any:
    """A field of a class the engine builds with its generated ``__init__`` (a dataclass, a
    struct): the value every construction passes for it, as a parameter's
    (``passed.passed_value``): ``TreeCacheBuildContext(enable_hierarchical_cache=...)``.
    ``_MISSING`` where the class writes its own ``__init__`` or the calls disagree."""
    fields: list[tuple[str, str | None]] = []
    for klass in reversed(list(interp._mro(cls))):
        if klass.node is None:
            continue
        for stmt in klass.node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "__init__":
                return _MISSING
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and "ClassVar" not in ast.unparse(stmt.annotation)
            ):
                field = stmt.target.id
                default = ast.unparse(stmt.value) if stmt.value is not None else None
                fields = [f for f in fields if f[0] != field] + [(field, default)]
    names = [f[0] for f in fields]
    if name not in names:
        return _MISSING
    position = names.index(name) + 1  # ``self`` is 0
    local = LocalDef("param", fields[position - 1][1], 0, None, position)
    scope = Scope(cls.module, f"{cls.name}.__init__", cls.name)
    built = calls_near(evaluator, cls.module, cls.name)
    return passed_value(evaluator, local, name, scope, (cls.name, built))


def _is_property(interp: Any, cls: ClassRef, name: str) -> bool:
    """Whether the class (or a base) defines ``name`` as a ``@property`` (a method or a class
    attribute is not asked of an object whose state is not known)."""
    for klass in interp._mro(cls):
        for stmt in klass.node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return any(
                    ast.unparse(d) in ("property", "cached_property", "functools.cached_property")
                    for d in stmt.decorator_list
                )
    return False


_ASSIGNMENTS: dict[int, tuple[ast.ClassDef, dict[str, list[ast.expr]]]] = {}


def self_assignments(node: ast.ClassDef) -> dict[str, list[ast.expr]]:
    """``self.x = value`` in the class's own methods (not nested classes), by attribute."""
    known = _ASSIGNMENTS.get(id(node))
    if known is not None and known[0] is node:
        return known[1]
    found: dict[str, list[ast.expr]] = {}
    for method in node.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for sub in ast.walk(method):
            if isinstance(sub, ast.Assign):
                targets, value = sub.targets, sub.value
            elif isinstance(sub, ast.AnnAssign) and sub.value is not None:
                targets, value = [sub.target], sub.value
            else:
                continue
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    found.setdefault(target.attr, []).append(value)
    _ASSIGNMENTS[id(node)] = (node, found)
    return found
