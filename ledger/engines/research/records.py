"""The records of an evaluation (conditions met, flag changes, refusals), the flag state,
the stand-ins for the engine's objects that hold flags, and small helpers of the evaluator."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .access import ARGS
from .model import Site
from .target import TOPK_KEYS
from .values import (
    FLAG,
    ClassRef,
    ConfigObject,
    DeviceCapability,
    EnumMember,
    External,
    Fact,
    FunctionRef,
    ModuleRef,
    Proxy,
    Unknown,
)

#: Calls that hand out the model's config wrapper (its ``hf_config`` is the config.json given).
MODEL_CONFIG_CALLS = frozenset({"get_model_config", "model_config_of", "from_server_args"})
#: The engine's model-config class, by the engine's package: the attributes it derives from
#: ``hf_config`` in a method of its own (the attention arch) are walked on the target's config.
MODEL_CONFIG_CLASSES: dict[str, tuple[str, str]] = {
    "sglang": ("sglang.srt.configs.model_config", "ModelConfig"),
}
#: Calls that hand out the tensor-parallel size.
TP_CALLS = frozenset({"get_tensor_model_parallel_world_size", "get_tp_world_size"})
_TOPK_NAMES = frozenset({"topk", "top_k", *TOPK_KEYS})
_LOG = frozenset(
    {"warning", "warn", "info", "error", "debug", "critical", "warning_once", "info_once"}
)
_MAX_DEPTH = 24
_MAX_LOOP = 64
#: ``__init__`` methods up to this many AST nodes are run on construction (``EnvBool(False)``
#: keeps its default); bigger ones (a model runner's) are not: their objects stay opaque.
_SMALL_INIT = 400


class Budget(Exception):
    """The walk took too many steps: what it found so far stands, the rest is unknown."""


@dataclass(frozen=True)
class Cond:
    """One condition on the way to a statement: its text, where, and its value here."""

    text: str
    site: Site
    value: bool | None  # True: holds; None: unknown (both ways were walked)
    facts: frozenset[Fact]
    #: unknown only because a ``raise`` before may have ended the walk: what follows runs
    #: unless the engine refused already, so a refusal after it refuses either way
    unless_refused: bool = False


@dataclass
class Change:
    """The engine assigning a flag during resolution."""

    flag: str
    value: Any
    site: Site
    function: str
    conditions: tuple[Cond, ...]
    warning: str | None
    value_facts: frozenset[Fact]
    _read: frozenset[str] | None = None

    @property
    def certain(self) -> bool:
        return all(c.value is True for c in self.conditions)

    def flags_read(self) -> frozenset[str]:
        if self._read is None:
            names = {f.name for f in self.value_facts if f.kind == FLAG}
            for cond in self.conditions:
                names.update(f.name for f in cond.facts if f.kind == FLAG)
            self._read = frozenset(names)
        return self._read


@dataclass
class Refusal:
    """A ``raise`` (or failing ``assert``) the walk reached: the engine refusing a setting."""

    message: str
    site: Site
    conditions: tuple[Cond, ...]

    @property
    def certain(self) -> bool:
        return all(c.value is True or c.unless_refused for c in self.conditions)

    def flags_read(self) -> set[str]:
        return {f.name for c in self.conditions for f in c.facts if f.kind == FLAG}


class FlagState:
    """The flags' values during (and after) resolution: given, else the default, else unknown."""

    def __init__(self, values: dict[str, Any], given: set[str]) -> None:
        self.values = values
        self.given = given
        self.changed: set[str] = set()  # assigned by the engine's resolution

    def copy(self) -> dict[str, Any]:
        return dict(self.values)


class ArgsView:
    """The server arguments as the engine's code sees them (``self``, ``server_args``, ``cfg``)."""

    __slots__ = ("state",)

    def __init__(self, state: FlagState) -> None:
        self.state = state


@dataclass
class Frame:
    module: str
    locals: dict[str, Any] = field(default_factory=dict)
    function: str = "<module>"
    lazy: Callable[[str], Any] | None = None  # resolves a local on first use (gate evaluation)


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Raise(Exception):
    pass


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


def _identical(a: Any, b: Any) -> bool:
    """``a is b`` of the engine's objects, not of the values standing for them here: an enum
    member, a class or a function looked up twice is two values here but one object there
    (``mode is not RaggedVerifyMode.STATIC`` held for the STATIC member itself)."""
    if a is b:
        return True
    if isinstance(a, EnumMember) and isinstance(b, EnumMember):
        return a == b
    if isinstance(a, ClassRef) and isinstance(b, ClassRef):
        return (a.module, a.name) == (b.module, b.name)
    if isinstance(a, FunctionRef) and isinstance(b, FunctionRef):
        return (a.module, a.qualname) == (b.module, b.qualname)
    return False


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: _identical,
    ast.IsNot: lambda a, b: not _identical(a, b),
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
}

_SAFE_METHODS: dict[type, frozenset[str]] = {
    str: frozenset(
        {
            "lower",
            "upper",
            "startswith",
            "endswith",
            "split",
            "strip",
            "lstrip",
            "rstrip",
            "replace",
            "format",
            "join",
            "rsplit",
            "partition",
            "count",
            "find",
            "isdigit",
        }
    ),
    list: frozenset({"index", "count", "copy"}),
    tuple: frozenset({"index", "count"}),
    dict: frozenset({"get", "keys", "values", "items", "copy"}),
    set: frozenset({"copy"}),
    frozenset: frozenset({"copy"}),
}


def _known(value: Any) -> bool:
    if isinstance(value, Unknown):
        return False
    if isinstance(value, list | tuple | set | frozenset):
        return all(_known(v) for v in value)
    if isinstance(value, dict):
        return all(_known(k) and _known(v) for k, v in value.items())
    return True


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, str | int | float | bool | type(None) | tuple | frozenset | EnumMember):
        try:
            return bool(a == b)
        except Exception:
            return False
    return a is b


def join(a: Any, b: Any, why: str) -> Any:
    """The value of a variable after an ``if`` whose test is unknown assigned it on one side."""
    if _same(a, b):
        return a
    options: list[Any] = []
    for value in (a, b):
        for option in (
            value.alternatives if isinstance(value, Unknown) and value.alternatives else (value,)
        ):
            if not any(_same(option, seen) for seen in options):
                options.append(option)
    if any(isinstance(o, Unknown) for o in options):
        return Unknown(why)
    return Unknown(why, tuple(options))


class KindView(Proxy):
    """An object that holds flags under its own attribute names (vLLM's ``cache_config``:
    ``cache_dtype`` is ``--kv-cache-dtype``), read from the same resolved state."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def attribute(self, interp: Any, name: str) -> Any:
        flag = interp.access.objects.get(self.kind, {}).get(name)
        if flag is not None:
            return interp.flag_value(flag)
        sub = interp.access.subobjects.get((self.kind, name))
        if sub is not None:
            return interp.args if sub == ARGS else interp.kind_view(sub)
        default = interp.fixed_field(self.kind, name)
        if default is not _MISSING:
            return default
        return Unknown(f"{self.kind}.{name}")


class _ModelConfigGetter:
    """``self.get_model_config`` on the server arguments: calling it gives the model's config."""


@dataclass
class _TextConfigGetter:
    config: ConfigObject


_ABSENT = False  # hasattr-style probes of modules an NVIDIA machine does not have
_MISSING: Any = object()


def _bases(node: ast.ClassDef) -> tuple[str, ...]:
    return tuple(ast.unparse(base) for base in node.bases)


_SIZES: dict[int, tuple[ast.AST, int]] = {}


def _size(node: ast.AST) -> int:
    known = _SIZES.get(id(node))
    if known is None or known[0] is not node:
        known = (node, sum(1 for _ in ast.walk(node)))
        _SIZES[id(node)] = known
    return known[1]


_NO_NAMES: frozenset[str] = frozenset()


def _assigned_names(stmt: ast.stmt) -> frozenset[str]:
    if isinstance(stmt, ast.Assign):
        return frozenset(t.id for t in stmt.targets if isinstance(t, ast.Name))
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return frozenset({stmt.target.id})
    return _NO_NAMES


def _as_load(target: ast.expr) -> ast.expr:
    copy = ast.parse(ast.unparse(target), mode="eval").body
    return copy


_MIRROR: dict[type, ast.cmpop] = {
    ast.Lt: ast.Gt(),
    ast.Gt: ast.Lt(),
    ast.LtE: ast.GtE(),
    ast.GtE: ast.LtE(),
}


def _version_tuple(value: Any) -> tuple[int, int] | None:
    """``(12, 8)``, ``"12.8"``, ``12.8`` and ``12`` as a (major, minor) tuple."""
    try:
        if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
            return (value[0], value[1] if len(value) > 1 else 0)
        if isinstance(value, str | float | int) and not isinstance(value, bool):
            parts = str(value).split(".")
            return (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
    except ValueError:
        return None
    return None


def _cap_tuple(value: Any) -> Any:
    return (value.major, value.minor) if isinstance(value, DeviceCapability) else value


def _memo_key(value: Any) -> Any:
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    if isinstance(value, tuple):
        return tuple(_memo_key(v) for v in value)
    if isinstance(value, EnumMember):
        return ("enum", value.owner, value.name)
    if isinstance(value, FunctionRef | ClassRef | ModuleRef | External):
        return ("obj", id(value))
    raise TypeError("not memoisable")


def _is_identity_decorator(function: FunctionRef) -> bool:
    return False


# -- builtins ----------------------------------------------------------------------------------
