"""The facts the research analysis works with: plain, picklable records.

A ``Site`` is a place in the engine's source (``sglang/srt/x.py:12``); a ``GateSpec`` one
condition that encloses a read, as written, with what is needed to evaluate it later against an
arch, a model and the flags given (the analysis of a version is cached; the evaluation is not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Site:
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One condition that must hold for a read to matter.

    ``kind``: ``if`` (an enclosing ``if``/``elif``/ternary/``while``/comprehension test),
    ``and`` / ``or`` (the other operands of a boolean expression), ``guard`` (an earlier
    ``if C: return`` in the same block), ``except`` (the read is in an exception handler),
    ``type-checking`` (only under ``typing.TYPE_CHECKING``: never at run time).
    ``negate``: the read needs the test to be false.
    """

    kind: str
    source: str | None  # the expression exactly as written (parsed again to evaluate it)
    negate: bool
    site: Site
    text: str  # the expression on one line, for people


@dataclass(frozen=True, slots=True)
class LocalDef:
    """What a local name used in a gate stands for: an assignment's value or a parameter."""

    kind: str  # "assign" | "param" | "import" (source "module:attribute") | "local"
    source: str | None  # the value assigned, or the parameter's default, as written
    line: int
    annotation: str | None = None  # a parameter's class, as written (``Scheduler``)
    #: a parameter's place among the ``def``'s positional ones (``self`` 0); -1 keyword-only
    position: int = -1


@dataclass
class Scope:
    """The function (or module) a read is in: for evaluating its gates' names."""

    module: str
    function: str  # qualified name, "<module>" at top level
    class_name: str | None
    locals: dict[str, LocalDef] = field(default_factory=dict)
    decorators: tuple[str, ...] = ()
    self_attrs: dict[str, LocalDef] = field(default_factory=dict)


@dataclass(slots=True)
class ReadSite:
    """A place that reads a flag's value, and the conditions around it."""

    flag: str  # the field (dest) name
    site: Site
    form: str  # the access form, e.g. "server_args.X", "get_global_server_args().X"
    text: str  # the source line, stripped
    gates: tuple[GateSpec, ...]
    scope: Scope
    handling: bool  # in the argument layer (definition, resolution, validation)
    strict: bool  # the object read is the server arguments (not a same-named attribute)
    #: what the value is used for: "value" (anything), "log" (written to the log: an echo, not
    #: a use), "validation" (a raise, an assert, a
    #: log message), "self" (deciding or computing the flag's own new value)
    use: str = "value"
    #: ``use == "global"``: the module global the value is assigned to (``global X; X = ...``),
    #: read where the engine reads that global
    carried: str | None = None
    #: the value is an argument of a call (``f(x, server_args.y)``): the callee as written and
    #: the argument's position or keyword, for where the callee uses it (``handed``)
    handed: tuple[str, int | str] | None = None


@dataclass(slots=True)
class StoreSite:
    """A place that changes a flag's value (an override), with its conditions and warning."""

    flag: str
    site: Site
    value_text: str
    text: str
    gates: tuple[GateSpec, ...]
    scope: Scope
    handling: bool
    warning: str | None


@dataclass(slots=True)
class ImportSite:
    """``importer`` imports ``target`` at ``site`` under ``gates`` (inside ``function`` if lazy)."""

    target: str
    site: Site
    gates: tuple[GateSpec, ...]
    function: str | None
    scope: Scope | None  # kept only when there are gates to evaluate


@dataclass(slots=True)
class CallSite:
    """``callee(...)`` (or a class named as a value: ``return NGRAMWorker``) at ``site``,
    inside ``function`` of ``module``, under ``gates`` (as a read's)."""

    callee: str
    site: Site
    gates: tuple[GateSpec, ...]
    module: str
    function: str  # qualified name, "<module>" at top level
    class_name: str | None
    scope: Scope | None  # kept only when there are gates (or registry decorators) to evaluate
    #: ``self.callee(...)`` (or ``cls.``): a method of the caller's own class, whatever other
    #: classes define a method of that name
    on_self: bool = False
    #: the class the call's object is known to be (``GPUModelRunner`` for ``runner.load_model()``
    #: after ``runner = GPUModelRunner(...)``, or ``self.model_runner.load_model()`` where the
    #: class sets ``self.model_runner = GPUModelRunner(...)``); ``"f()"``: what ``f`` returns
    #: (its return annotation, looked up once every module is read); ``None``: not known
    receiver: str | None = None
    #: the keywords the call passes and how many arguments by position; ``None``: it passes
    #: ``*args`` or ``**kwargs`` (or it is no call: a class named as a value)
    passed: tuple[tuple[str, ...], int] | None = None


@dataclass
class ModuleSummary:
    path: str
    module: str
    reads: list[ReadSite] = field(default_factory=list)
    stores: list[StoreSite] = field(default_factory=list)
    imports: list[ImportSite] = field(default_factory=list)
    mentions: dict[str, list[Site]] = field(default_factory=dict)
    entry_classes: tuple[str, ...] = ()
    registries: dict[str, tuple[str, ...]] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    #: the functions and classes the module defines, by their own name
    defined: list[str] = field(default_factory=list)
    #: a function's return annotation when it names a class, by the function's own name
    returns: dict[str, str] = field(default_factory=dict)
    #: each class's bases, by the class's own name (the last part of a dotted base)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: lower-case names used as values (a function put in a table, passed as a callback) and
    #: functions a decorator registers: what may run with no call by name
    named: set[str] = field(default_factory=set)
    #: the module's top-level names and what they are bound to (``world.BindingSpec``)
    table: dict[str, list[Any]] | None = None
    #: attribute names of a flag's own name that an engine object is given a value derived
    #: from the flag and something else (``self.x = server_args.x and self.pp_size > 1``)
    derived: set[str] = field(default_factory=set)
    #: a global a function of the module sets (``global X``) -> the functions that read it
    #: (qualified name, class)
    global_loads: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    #: model config classes by the ``model_type`` they declare
    model_types: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None
