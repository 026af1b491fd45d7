"""The values the evaluator works with: Python constants where the answer is known, and a few
stand-ins for what is not (``Unknown``) or is the engine's own object (a function, a class, the
server arguments, the model's ``config.json``).

A ``Fact`` is what an answer rested on ("sm120: compute capability 12.0", "flag
speculative_algorithm='EAGLE'", "model num_experts_per_tok=8"): verdicts cite them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

#: The kinds of facts: what a condition was decided by.
HARDWARE, MODEL, FLAG, PARALLEL, RUNTIME, ENV, CALLERS = (
    "hardware",
    "model",
    "flag",
    "parallel",
    "runtime",
    "env",
    "callers",  # a parameter's default that no call of its function passes
)


@dataclass(frozen=True, slots=True)
class Fact:
    kind: str
    name: str
    text: str


class Unknown:
    """A value that cannot be known from the source alone; ``why`` says what it depends on.

    ``why`` may be given as the expression itself: it is written out only when a report asks
    (most unknowns are combined away before anyone reads them).
    """

    __slots__ = ("_why", "alternatives", "waits_on")

    def __init__(self, why: str | ast.AST, alternatives: tuple[Any, ...] = ()) -> None:
        self._why = why
        self.alternatives = alternatives
        #: of ``a or b`` unknown: the facts of its unknown operands only (None: not told apart)
        self.waits_on: frozenset[Fact] | None = None

    @property
    def why(self) -> str:
        if not isinstance(self._why, str):
            try:
                text = " ".join(ast.unparse(self._why).split())
            except Exception:
                text = type(self._why).__name__
            self._why = text if len(text) <= 120 else text[:119] + "…"
        return self._why

    def __repr__(self) -> str:
        return f"Unknown({self.why!r})"


class Holding(Unknown):
    """A collection not known whole, known to hold ``items`` (vLLM's supported tasks of a
    text-generation model hold "generate"): ``x in it`` is decided for those items only."""

    __slots__ = ("items",)

    def __init__(self, why: str, items: frozenset[Any]) -> None:
        super().__init__(why)
        self.items = items


@dataclass(eq=False)
class FunctionRef:
    module: str
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    owner: ClassRef | None = None  # for methods: the class they were found on
    #: a nested function's or lambda's enclosing locals (vLLM's ``env_with_choices`` returns
    #: a function reading its ``env_name`` and ``default``)
    closure: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<function {self.module}.{self.qualname}>"


@dataclass(eq=False)
class BoundMethod:
    function: FunctionRef
    receiver: Any


@dataclass(eq=False)
class PartialRef:
    function: Any
    args: tuple[Any, ...]
    keywords: dict[str, Any]


@dataclass(eq=False)
class ClassRef:
    module: str
    name: str
    node: ast.ClassDef
    bases: tuple[str, ...] = ()

    @property
    def is_enum(self) -> bool:
        return any(base.split(".")[-1] in _ENUM_BASES for base in self.bases)

    def __repr__(self) -> str:
        return f"<class {self.module}.{self.name}>"


_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}


@dataclass(frozen=True)
class EnumMember:
    owner: str  # module.Class
    name: str
    value: Any = field(compare=False)  # ``auto()`` values are not known: members compare by name

    def __repr__(self) -> str:
        return f"{self.owner.rsplit('.', 1)[-1]}.{self.name}"


@dataclass(eq=False)
class Instance:
    """An object of an engine class whose attributes are not followed."""

    cls: ClassRef
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class ModuleRef:
    name: str  # dotted name; an engine module or an outside one (torch)
    external: bool


@dataclass(eq=False)
class External:
    """Something from outside the engine (``torch.cuda.get_device_capability``) by dotted name."""

    dotted: str


@dataclass(eq=False)
class ConfigObject:
    """The model's ``config.json`` (or a nested part of it), read as attributes."""

    data: dict[str, Any]
    path: str = "config"


@dataclass(eq=False)
class ModelConfigObject:
    """The engine's model-config wrapper: what it holds beyond ``hf_config`` is not known."""

    hf: ConfigObject | None


@dataclass(eq=False)
class DeviceCapability:
    major: int
    minor: int


class Proxy:
    """An object whose attributes the evaluator asks it for (``self`` in a method, say)."""

    def attribute(self, interp: Any, name: str) -> Any:
        raise NotImplementedError


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


def truth(value: Any) -> bool | None:
    """Python truthiness where it is known; None where the value is unknown."""
    if isinstance(value, Unknown):
        return None
    if isinstance(
        value,
        FunctionRef
        | BoundMethod
        | PartialRef
        | ClassRef
        | EnumMember
        | Instance
        | ModuleRef
        | ConfigObject
        | ModelConfigObject
        | DeviceCapability,
    ):
        return True
    if isinstance(value, External):
        return None
    try:
        return bool(value)
    except Exception:
        return None


def show(value: Any) -> str:
    if isinstance(value, Unknown):
        options = possible(value)
        if options is not None:  # one of a few, by something the walk does not know
            return " or ".join(show(o) for o in options) + f" (by {value.why})"
        return f"unknown ({value.why})"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, FunctionRef | ClassRef | EnumMember):
        return repr(value)
    if isinstance(value, list | tuple | set | frozenset) and len(value) > 6:
        return type(value).__name__ + f" of {len(value)}"
    return repr(value)


def possible(value: Any) -> tuple[Any, ...] | None:
    """The values ``value`` may have: itself where known; an unknown's alternatives where it
    has them, every one known and none unset (``"fa3"`` or ``"flashinfer"``, by a CUDA version
    the walk does not know); None where it could be anything."""
    if not isinstance(value, Unknown):
        return (value,)
    options = value.alternatives
    if options and not any(o is None or isinstance(o, Unknown | External) for o in options):
        return tuple(options)
    return None


def chosen_by(values: list[Any], key: str) -> bool | None:
    """Whether flags choosing from one table (``--attention-backend``, its per-phase overrides)
    choose ``key``: a per-phase override unset (None) beside a set flag takes its choice (blind
    set U: ``--prefill-attention-backend``); unset alone, or unresolved: picked at run time
    (None); a value the walk knows only as one of a few (``"fa3"`` or ``"flashinfer"``, on sm90
    by a CUDA version the walk does not know) is each of them."""
    options = [possible(v) for v in values]
    chosen = {x for o in options if o is not None for x in o if x is not None}
    if any(o is not None and all(x == key for x in o) for o in options):
        return True
    return False if chosen and None not in options and key not in chosen else None
