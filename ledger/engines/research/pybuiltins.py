"""Python's builtins as the evaluator answers them (``getattr``, ``hasattr``, ``isinstance``,
``len``...), for known values only."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .primitives import ABSENT_ATTRIBUTES, PRESENT_ATTRIBUTES, CudaVersion
from .records import ArgsView, Frame, _known
from .values import (
    HARDWARE,
    MODEL,
    BoundMethod,
    ClassRef,
    ConfigObject,
    EnumMember,
    External,
    Fact,
    FunctionRef,
    Instance,
    ModuleRef,
    PartialRef,
    Proxy,
    Unknown,
)

if TYPE_CHECKING:
    from .interpreter import Interpreter


class BuiltinFunction:
    python: Callable[..., Any] | None = None  # the Python function it stands for, if one

    def __init__(
        self, name: str, run: Callable[[Interpreter, list[Any], dict[str, Any], ast.AST], Any]
    ) -> None:
        self.name = name
        self._run = run

    def run(self, interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
        try:
            return self._run(interp, args, keywords, node)
        except Exception:
            return Unknown(f"{self.name}()")


def _b_getattr(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    if len(args) < 2 or not isinstance(args[1], str):
        return Unknown("getattr")
    obj, name = args[0], args[1]
    if isinstance(obj, ConfigObject) and name not in obj.data and len(args) > 2:
        return args[2]
    value = interp.attribute(obj, name)
    if (
        isinstance(value, Unknown)
        and len(args) > 2
        and isinstance(obj, ArgsView)
        and name not in interp.state.values
    ):
        return args[2]
    return value


def _b_hasattr(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    if len(args) < 2 or not isinstance(args[1], str):
        return Unknown("hasattr")
    obj, name = args
    if isinstance(obj, ConfigObject):
        return name in obj.data
    if isinstance(obj, ModuleRef) and obj.external and f"{obj.name}.{name}" in ABSENT_ATTRIBUTES:
        interp.note(Fact(HARDWARE, "vendor", f"{obj.name}.{name}: absent on an NVIDIA machine"))
        return False
    if isinstance(obj, ModuleRef) and obj.external and f"{obj.name}.{name}" in PRESENT_ATTRIBUTES:
        return True
    top = obj.name.split(".")[0] if isinstance(obj, ModuleRef) and obj.external else None
    if top is not None and top in interp.world.installed:
        # a feature probe of a package the wheel requires: the version pip installs with the
        # engine is the one the engine is written for (the probe guards older ones)
        interp.note(Fact(HARDWARE, "package", f"{top}: installed with the engine (it requires it)"))
        return True
    if isinstance(obj, Instance):
        return name in obj.attrs or not isinstance(interp.attribute(obj, name), Unknown)
    if isinstance(obj, ArgsView):
        return name in interp.state.values or not isinstance(interp.args_attribute(name), Unknown)
    return Unknown(f"hasattr(…, {name!r})")


_PLAIN_TYPES = (dict, list, tuple, str, int, float, bool, set, type(None))


def _b_isinstance(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    if len(args) != 2:
        return Unknown("isinstance")
    value, kinds = args
    if not isinstance(kinds, tuple):
        kinds = (kinds,)
    kinds = tuple(_python(k) for k in kinds)  # ``dict`` is the builtin wrapper's type
    if isinstance(value, Instance | EnumMember) and all(isinstance(k, ClassRef) for k in kinds):
        owner = value.cls if isinstance(value, Instance) else interp._enum_class(value)
        if owner is None:
            return Unknown("isinstance")
        names = {f"{c.module}.{c.name}" for c in interp._mro(owner)}
        if any(f"{k.module}.{k.name}" in names for k in kinds):
            return True
        complete = all(
            isinstance(interp.eval(b, Frame(c.module)), ClassRef)
            or ast.unparse(b) in ("Enum", "object", "IntEnum", "str")
            for c in interp._mro(owner)
            for b in c.node.bases
        )
        return False if complete else Unknown("isinstance")
    if isinstance(value, ConfigObject) and kinds and all(isinstance(k, ClassRef) for k in kinds):
        return _config_isinstance(interp, value, kinds)
    if isinstance(value, ConfigObject) and kinds and all(k in _PLAIN_TYPES for k in kinds):
        return False  # a transformers config object is none of Python's own containers
    if not all(isinstance(k, type) for k in kinds) or not _known(value):
        return Unknown("isinstance")
    if isinstance(value, str | int | float | bool | type(None) | list | tuple | dict | set):
        return isinstance(value, tuple(k for k in kinds if isinstance(k, type)))
    return Unknown("isinstance")


def _config_isinstance(interp: Any, value: ConfigObject, kinds: tuple[ClassRef, ...]) -> Any:
    """A model config against the package's config classes: its class is the one declaring its
    ``model_type``; a type the package does not declare is one of transformers' classes,
    which subclass none of the package's."""
    owner = interp.config_class(value)
    if owner is None:
        return Unknown("isinstance")
    interp.note(
        Fact(
            MODEL, "model_type", f"model {value.path}.model_type = {value.data.get('model_type')!r}"
        )
    )
    if owner is False:
        return False
    return _subclass_of(interp, owner, kinds)


def _subclass_of(interp: Any, owner: ClassRef, kinds: tuple[ClassRef, ...]) -> Any:
    """Whether ``owner`` is one of ``kinds`` or derives from one; unknown where a base of its
    lineage does not resolve to a class (it might be one of them)."""
    mro = interp._mro(owner)
    names = {f"{c.module}.{c.name}" for c in mro}
    if any(f"{k.module}.{k.name}" in names for k in kinds):
        return True
    complete = all(
        isinstance(interp.eval(b, Frame(c.module)), ClassRef | External)
        or ast.unparse(b) in ("Enum", "object", "IntEnum", "str")
        for c in mro
        for b in c.node.bases
    )
    return False if complete else Unknown("isinstance")


def _python(value: Any) -> Any:
    """The Python function a builtin stands for (``map(int, ...)``), else the value."""
    return getattr(value, "python", value)


def _plain(name: str, function: Callable[..., Any]) -> BuiltinFunction:
    def run(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
        version = next((a for a in args if isinstance(a, CudaVersion)), None)
        if version is not None and name in ("map", "tuple", "list", "int", "float", "str"):
            return version
        if (
            not _known(args)
            or not _known(keywords)
            or any(isinstance(a, External | CudaVersion | ArgsView) for a in args)
        ):
            return Unknown(f"{name}()")
        return function(*args, **keywords)

    made = BuiltinFunction(name, run)
    made.python = function
    return made


def _identity(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    if args and isinstance(args[0], FunctionRef | BoundMethod | PartialRef):
        return args[0]
    return BUILTINS["__identity_decorator__"]


def _noop(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    return None


def _object_setattr(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    if len(args) == 3 and isinstance(args[0], Instance) and isinstance(args[1], str):
        args[0].attrs[args[1]] = args[2]
    return None


def _object_getattribute(
    interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST
) -> Any:
    if len(args) == 2 and isinstance(args[0], Instance) and isinstance(args[1], str):
        return args[0].attrs.get(args[1], Unknown(args[1]))
    return Unknown("object.__getattribute__")


class _ObjectType(Proxy):
    """``object``: its ``__setattr__``/``__getattribute__`` as engines use them in ``__init__``."""

    def attribute(self, interp: Any, name: str) -> Any:
        if name == "__setattr__":
            return BuiltinFunction(name, _object_setattr)
        if name == "__getattribute__":
            return BuiltinFunction(name, _object_getattribute)
        return Unknown(f"object.{name}")


def _b_callable(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    """``callable(x)`` of a value the walk knows: a plain value, or a function or class of the
    engine (``EnvField._resolve_default``: a default given as a function is called)."""
    if len(args) != 1:
        return Unknown("callable")
    value = args[0]
    if isinstance(value, FunctionRef | ClassRef | BoundMethod | PartialRef | BuiltinFunction):
        return True
    if isinstance(value, str | int | float | bool | tuple | list | dict | set | type(None)):
        return False
    return Unknown("callable")


def _b_setattr(interp: Any, args: list[Any], keywords: dict[str, Any], node: ast.AST) -> Any:
    """``setattr(obj, "name", value)`` with a name the walk knows: an attribute store (vLLM
    fills optimization-level defaults into its configs so); an unknown name changes nothing
    the walk can follow."""
    if len(args) == 3 and isinstance(args[1], str):
        interp.store_attribute(args[0], args[1], args[2], node)
    return None


BUILTINS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "getattr": BuiltinFunction("getattr", _b_getattr),
    "hasattr": BuiltinFunction("hasattr", _b_hasattr),
    "setattr": BuiltinFunction("setattr", _b_setattr),
    "isinstance": BuiltinFunction("isinstance", _b_isinstance),
    "callable": BuiltinFunction("callable", _b_callable),
    "print": BuiltinFunction("print", _noop),
    "len": _plain("len", len),
    "bool": _plain("bool", bool),
    "int": _plain("int", int),
    "float": _plain("float", float),
    "str": _plain("str", str),
    "min": _plain("min", min),
    "max": _plain("max", max),
    "abs": _plain("abs", abs),
    "any": _plain("any", any),
    "all": _plain("all", all),
    "sum": _plain("sum", sum),
    "tuple": _plain("tuple", tuple),
    "list": _plain("list", list),
    "set": _plain("set", set),
    "frozenset": _plain("frozenset", frozenset),
    "sorted": _plain("sorted", sorted),
    "dict": _plain("dict", dict),
    "round": _plain("round", round),
    "map": _plain("map", lambda f, xs: list(map(_python(f), xs))),
    "staticmethod": BuiltinFunction("staticmethod", _identity),
    "classmethod": BuiltinFunction("classmethod", _identity),
    "property": BuiltinFunction("property", _identity),
    "__identity_decorator__": BuiltinFunction("decorator", _identity),
    "object": _ObjectType(),
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "NotImplementedError": NotImplementedError,
    "AssertionError": AssertionError,
    "TypeError": TypeError,
    "KeyError": KeyError,
    "ImportError": ImportError,
    "Exception": Exception,
}
