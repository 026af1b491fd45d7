"""Calls: into the engine's functions (walked with their parameters bound), outside ones answered by the primitives, classes constructed, the declarations of flag values."""

from __future__ import annotations

import ast
from typing import Any

from .definitions import help_text
from .model import Site
from .objects import Objects
from .primitives import CALLS
from .pybuiltins import BUILTINS, BuiltinFunction
from .pysource import squeeze
from .records import (
    _LOG,
    _MAX_DEPTH,
    _SAFE_METHODS,
    _SMALL_INIT,
    MODEL_CONFIG_CALLS,
    TP_CALLS,
    ArgsView,
    Frame,
    _assigned_names,
    _Break,
    _Continue,
    _is_identity_decorator,
    _known,
    _memo_key,
    _ModelConfigGetter,
    _Raise,
    _Return,
    _same,
    _size,
    _TextConfigGetter,
    join,
)
from .values import (
    PARALLEL,
    BoundMethod,
    ClassRef,
    ConfigObject,
    EnumMember,
    External,
    Fact,
    FunctionRef,
    Instance,
    ModelConfigObject,
    PartialRef,
    Unknown,
    show,
)

#: How many calls of one function may be on the walk's stack at once.
_RECURSION = 3


class Calls(Objects):
    def call(
        self,
        function: Any,
        args: list[Any],
        keywords: dict[str, Any],
        node: ast.AST,
        frame: Frame | None,
    ) -> Any:
        if isinstance(function, Unknown):
            return Unknown(self.src(node) if isinstance(node, ast.Call) else function.why)
        if isinstance(function, _ModelConfigGetter):
            return self.model_config()
        if isinstance(function, _TextConfigGetter):
            if "text_config" not in function.config.data:
                return function.config  # no sub-config: the config is its own text config
            return self.config_attr(function.config, "text_config")
        if isinstance(function, BuiltinFunction):
            return function.run(self, args, keywords, node)
        if isinstance(function, External):
            return self.external_call(function, args, keywords, node)
        if isinstance(function, PartialRef):
            return self.call(
                function.function,
                [*function.args, *args],
                {**function.keywords, **keywords},
                node,
                frame,
            )
        if isinstance(function, ClassRef):
            return self.construct(function, args, keywords, node)
        if isinstance(function, BoundMethod):
            return self.call_function(function.function, [function.receiver, *args], keywords, node)
        if isinstance(function, FunctionRef):
            return self.call_function(function, args, keywords, node)
        if callable(function) and getattr(function, "__self__", None) is not None:
            owner = type(function.__self__)
            if (
                function.__name__ in _SAFE_METHODS.get(owner, frozenset())
                and _known(args)
                and _known(keywords)
            ):
                try:
                    return function(*args, **keywords)
                except Exception:
                    return Unknown(node)
        return Unknown(node)

    def external_call(
        self, function: External, args: list[Any], keywords: dict[str, Any], node: ast.AST
    ) -> Any:
        dotted = function.dotted
        primitive = CALLS.get(dotted)
        if primitive is not None:
            return primitive(self, *args, **keywords)
        last = dotted.rsplit(".", 1)[-1]
        if dotted.startswith("logging.") and last == "getLogger":
            return External("logger")
        if last in _LOG and (dotted.startswith("logger") or "log" in dotted.split(".")[0]):
            self.log(args, node)
            return None
        if dotted in ("functools.lru_cache", "functools.cache", "functools.wraps") or last in (
            "lru_cache",
            "cache",
        ):
            if args and isinstance(args[0], FunctionRef | BoundMethod | PartialRef):
                return args[0]
            return BUILTINS["__identity_decorator__"]
        if dotted == "functools.partial" or last == "partial":
            if args:
                return PartialRef(args[0], tuple(args[1:]), dict(keywords))
        if ".get" in dotted and "environ" in dotted or last == "getenv":
            return CALLS["os.getenv"](self, *args)
        if last == "get" and "envs." in dotted:
            name = dotted.split("envs.")[-1].rsplit(".", 1)[0]
            return CALLS["os.getenv"](self, name)
        return Unknown(dotted + "()")

    def log(self, args: list[Any], node: ast.AST) -> None:
        message = args[0] if args and isinstance(args[0], str) else None
        site = Site(self.world.path(self._current_module()), getattr(node, "lineno", 0))
        if message is None and isinstance(node, ast.Call) and node.args:
            message = help_text(node.args[0], self.world.text(self._current_module())) or ""
        self.logged.append((squeeze(message or "", 300), site))

    def _current_module(self) -> str:
        return self._blocks[-1][0] if self._blocks else ""

    def model_config(self) -> Any:
        model = self.target.model
        if model is None:
            return ModelConfigObject(None)
        return ModelConfigObject(ConfigObject(model.config, "config"))

    def construct(
        self, cls: ClassRef, args: list[Any], keywords: dict[str, Any], node: ast.AST
    ) -> Any:
        if cls.name in self.access.getters:
            return self.args
        if cls.is_enum and args:
            for stmt in cls.node.body:
                for name in _assigned_names(stmt):
                    member = self.enum_member(cls, name)
                    if isinstance(member, EnumMember) and _same(member.value, args[0]):
                        return member
            return Unknown(f"{cls.name}({show(args[0])})")
        instance = Instance(cls)
        init = self.class_attribute(cls, "__init__", receiver=instance)
        if (
            isinstance(init, BoundMethod)
            and len(self._stack) < _MAX_DEPTH // 2
            and _size(init.function.node) < _SMALL_INIT
        ):
            self.call(init, args, keywords, node, None)
        elif self._makes_dataclass(cls) and len(self._stack) < _MAX_DEPTH // 2:
            # a config dataclass: its fields from the arguments, then its ``__post_init__``
            # and pydantic's after-validators (where vLLM's configs refuse a combination);
            # these run whatever their size, unlike an ``__init__``: a refusal is what they are for
            fields = [
                stmt.target.id
                for stmt in cls.node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            ]
            for name, value in zip(fields, args, strict=False):
                instance.attrs[name] = value
            for name, value in keywords.items():
                instance.attrs[name] = value
            for name in ("__post_init__", *_after_validators(cls.node)):
                post = self.class_attribute(cls, name, receiver=instance)
                if isinstance(post, BoundMethod):
                    self.call(post, [], {}, node, None)
        return instance

    def _makes_dataclass(self, cls: ClassRef) -> bool:
        """A class under ``@dataclass``, or under a decorator that is itself declared with
        ``@dataclass_transform`` (PEP 681: vLLM's ``@config`` makes pydantic dataclasses)."""
        if _is_dataclass(cls.node):
            return True
        for decorator in cls.node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if not isinstance(target, ast.Name | ast.Attribute):
                continue
            made = self.eval(target, Frame(cls.module))
            if (
                isinstance(made, FunctionRef)
                and not isinstance(made.node, ast.Lambda)
                and any(
                    _decorator_name(d) == "dataclass_transform" for d in made.node.decorator_list
                )
            ):
                return True
        return False

    def call_function(
        self, function: FunctionRef, args: list[Any], keywords: dict[str, Any], node: ast.AST
    ) -> Any:
        name = function.qualname.split(".")[-1]
        if name in self.access.getters:
            home = self.access.getter_modules.get(name)
            if home is None or home == function.module:
                return self.args
        if name in MODEL_CONFIG_CALLS:
            return self.model_config()
        if name in TP_CALLS:
            return self.tp_size()
        if name in self.access.declare_calls and any(isinstance(a, ArgsView) for a in args):
            self.declare(keywords, node, name)
            return None
        if _is_identity_decorator(function):
            return args[0] if args else Unknown(name)
        # a function may call itself a few levels deep (vLLM fills nested config defaults
        # so, over a literal table); deeper, its result is not followed
        if self._stack.count(function.node) >= _RECURSION or len(self._stack) >= _MAX_DEPTH:
            return Unknown(f"{function.qualname}()")
        pure = function.closure is None and not any(
            isinstance(a, ArgsView | Instance) for a in [*args, *keywords.values()]
        )
        key: tuple[Any, ...] | None = None
        if pure:
            try:
                key = (
                    id(function.node),
                    tuple(_memo_key(a) for a in args),
                    tuple(sorted((k, _memo_key(v)) for k, v in keywords.items())),
                )
                hash(key)
            except TypeError:
                key = None
        if key is not None and key in self._memo:
            value, facts = self._memo[key]
            self._merge_facts(facts)
            return value
        value, facts = self.with_facts(lambda: self._run(function, args, keywords))
        self._merge_facts(facts)
        if key is not None and not isinstance(value, ArgsView):
            self._memo[key] = (value, facts)
        return value

    def tp_size(self) -> Any:
        value = self.state.values.get("tp_size")
        if value is None or isinstance(value, Unknown):
            if self.target.tp is None:
                return Unknown("the tensor-parallel size (give --tp)")
            value = self.target.tp
        self.note(Fact(PARALLEL, "tp_size", f"tensor parallel size {value}"))
        return value

    def declare(self, keywords: dict[str, Any], node: ast.AST, source: str) -> None:
        for name, value in keywords.items():
            if name in self.state.values:
                self.assign_flag(name, value, node, self._argument_facts)

    def _run(self, function: FunctionRef, args: list[Any], keywords: dict[str, Any]) -> Any:
        frame = Frame(function.module, dict(function.closure or {}), function.qualname)
        self.bind(function, frame, args, keywords)
        self._stack.append(function.node)
        try:
            if isinstance(function.node, ast.Lambda):
                return self.eval(function.node.body, frame)
            returned: list[Any] = []
            try:
                self.exec_block(function.node.body, frame, returned)
            except _Return as done:
                returned.append(done.value)
            except (_Break, _Continue):
                pass
            except _Raise:
                if not returned:  # every way through raised
                    return Unknown(f"{function.qualname}() raised")
            if not returned:
                return None
            value = returned[0]
            for other in returned[1:]:
                value = join(value, other, f"{function.qualname}()")
            return value
        except _Raise:
            return Unknown(f"{function.qualname}() raised")
        finally:
            self._stack.pop()

    def bind(
        self, function: FunctionRef, frame: Frame, args: list[Any], keywords: dict[str, Any]
    ) -> None:
        spec = function.node.args
        positional = [*spec.posonlyargs, *spec.args]
        defaults = [None] * (len(positional) - len(spec.defaults)) + list(spec.defaults)
        for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
            if index < len(args):
                frame.locals[arg.arg] = args[index]
            elif arg.arg in keywords:
                frame.locals[arg.arg] = keywords.pop(arg.arg)
            elif default is not None:
                frame.locals[arg.arg] = self.eval(default, Frame(function.module))
            else:
                frame.locals[arg.arg] = Unknown(f"parameter {arg.arg}")
        if spec.vararg:
            frame.locals[spec.vararg.arg] = tuple(args[len(positional) :])
        for arg, kw_default in zip(spec.kwonlyargs, spec.kw_defaults, strict=True):
            if arg.arg in keywords:
                frame.locals[arg.arg] = keywords.pop(arg.arg)
            elif kw_default is not None:
                frame.locals[arg.arg] = self.eval(kw_default, Frame(function.module))
            else:
                frame.locals[arg.arg] = Unknown(f"parameter {arg.arg}")
        if spec.kwarg:
            frame.locals[spec.kwarg.arg] = dict(keywords)


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(_decorator_name(d) == "dataclass" for d in node.decorator_list)


def _after_validators(node: ast.ClassDef) -> list[str]:
    """Methods pydantic runs once the fields are set: ``@model_validator(mode="after")``."""
    return [
        stmt.name
        for stmt in node.body
        if isinstance(stmt, ast.FunctionDef)
        and any(
            isinstance(d, ast.Call)
            and _decorator_name(d) == "model_validator"
            and any(
                k.arg == "mode" and isinstance(k.value, ast.Constant) and k.value.value == "after"
                for k in d.keywords
            )
            for d in stmt.decorator_list
        )
    ]
