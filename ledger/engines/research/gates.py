"""Whether a read of a flag happens on the target: its own conditions, the backend registry
that selects its function, the model architecture its file serves, and whether its module is
imported at all (an import inside ``if server_args.enable_double_sparsity:`` gates every read
of the module it imports).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from .index import CALL_DEPTH, MAX_HOMONYMS, VersionIndex
from .interpreter import Interpreter
from .model import CallSite, GateSpec, ImportSite, LocalDef, ReadSite, Scope, Site
from .modelscope import ModelScope, _module_of, architecture_gates, model_scope
from .passed import passed_value
from .programs import START_ROOTS, FunctionStores, other_program
from .proxies import InstanceProxy, SelfProxy, instance_of
from .records import _MISSING, ArgsView, Budget, Frame, Refusal
from .registries import lookup_callers
from .unpassed import unpassed_default
from .values import (
    CALLERS,
    ENV,
    FLAG,
    HARDWARE,
    MODEL,
    PARALLEL,
    ClassRef,
    Fact,
    FunctionRef,
    Unknown,
    chosen_by,
    show,
    truth,
)
from .world import parse_expression

#: Steps one condition may take to evaluate (its predicates followed into the engine).
_GATE_STEPS = 20_000
#: Steps a walk of a function that reads a flag may take.
_PROBE_STEPS = 30_000
#: Call sites of one function followed (ungated first), per function on a path.
_PATH_SITES = 12
#: What a caller's condition may depend on for it to decide a verdict (else: a run-time value).
_DECIDING = frozenset({CALLERS, ENV, FLAG, HARDWARE, MODEL, PARALLEL})
#: Classes mixing one mixin in whose assignments are compared (more: a run-time value).
_MIXERS = 4
#: Methods that run when their object is built: their callers are the builders.
_CONSTRUCTION = frozenset({"__init__", "__post_init__", "__new__"})
_STRING_ARG = re.compile(r"""^[\w.]+\(\s*["']([\w\-.]+)["']""")


@dataclass(frozen=True)
class GateEval:
    """One condition, as written, and what it comes to on the target."""

    kind: str
    text: str
    site: Site
    value: bool | None
    facts: frozenset[Fact]
    why: str | None = None  # what an unknown condition depends on
    #: unknown only through operands that no flag, model or hardware fact decides (``x or
    #: flag_off``: the flag's operand decides nothing): a run-time value, whatever ``facts`` cite
    runtime: bool = False

    def describe(self) -> str:
        state = {True: "holds", False: "does not hold", None: "unknown"}[self.value]
        basis = "; ".join(sorted(f.text for f in self.facts))
        extra = f" ({basis})" if basis else ""
        if self.value is None and self.why:
            extra += f" [depends on {self.why}]"
        return f"{self.text}: {state}{extra}"


@dataclass
class Reach:
    """All the conditions for one read (or one module) and their conjunction.

    ``unresolved``: the paths to it this analysis could not follow (a function called only
    through a table, by a name defined many times, or further up than ``CALL_DEPTH``): the
    value holds for the paths followed; the verdict is then not ``proven``."""

    value: bool | None
    gates: list[GateEval] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    def deciding(self) -> list[GateEval]:
        """The conditions that decide it: the false ones, else the unknown ones."""
        if self.value is False:
            return [g for g in self.gates if g.value is False]
        if self.value is None:
            return [g for g in self.gates if g.value is None]
        return []


#: How an unresolved note ends where the path was assumed rather than walked: no caller
#: found for a function a table or a decorator names, a callee name defined many times, or
#: callers deeper than the walk goes (a read there was called "effective" where a gate further
#: up turns it off: docs/research.md, the third round).
_ASSUMED_ENDINGS = (
    "(called through a table or by name)",
    "definitions of the name",
    f"callers beyond {CALL_DEPTH} levels",
)


def is_assumed_note(note: str) -> bool:
    return note.endswith(_ASSUMED_ENDINGS)


def conjunction_of(reaches: list[Reach]) -> bool | None:
    if any(r.value is False for r in reaches):
        return False
    if any(r.value is None for r in reaches):
        return None
    return True


def conjunction(gates: list[GateEval]) -> bool | None:
    if any(g.value is False for g in gates):
        return False
    if any(g.value is None for g in gates):
        return None
    return True


class GateEvaluator:
    def __init__(self, interp: Interpreter, index: VersionIndex) -> None:
        self.interp = interp
        self.index = index
        self._reach: dict[str, Reach] = {}
        self._in_progress: set[str] = set()
        self._choice_flags: dict[str, list[str]] = {}
        self._scope: ModelScope | None | bool = False  # False: not computed yet
        self._subclasses: dict[str, list[str]] | None = None
        # by depth too: a path cut at CALL_DEPTH from deep down is not the one walked from the read
        self._paths: dict[tuple[str, str, int], Reach] = {}
        self._forward: dict[str, set[str]] | None = None
        self._paths_in_progress: set[tuple[str, str, int]] = set()
        self.stores = FunctionStores(index)
        self._cycled = False  # a cycle was taken as holding in the question being worked out
        self._provisional: list[tuple[dict[Any, Reach], Any]] = []
        self._roots = START_ROOTS.get(index.engine, frozenset())
        #: flag objects not built on this target (``optional.absent_kinds``): kind -> why
        self.absent: dict[str, GateEval] = {}
        self._choices: dict[str, frozenset[str]] = {}
        self._tables: dict[tuple[str, str], frozenset[str]] = {}
        self.passing = 0  # callers' arguments being evaluated (``passed.passed_value``), nested
        for definition in index.definitions.values():
            self._choices[definition.field] = frozenset(definition.choices)
            for choice in definition.choices:
                self._choice_flags.setdefault(choice, []).append(definition.field)

    # -- one read ------------------------------------------------------------------------------

    def read_reach(self, read: ReadSite) -> Reach:
        absent = self._absent_holder(read)
        if absent is not None:
            return Reach(False, [absent])
        # The read's own conditions, innermost last; the first that fails decides: the rest
        # are not evaluated (they would not change the answer, only cost time).
        gates: list[GateEval] = []
        for spec in read.gates:
            gates.append(self.gate(spec, read.scope))
            if gates[-1].value is False:
                return Reach(False, gates)
        gates.extend(self.registry_gates(read.scope))
        module_reach = self.module_reach(
            read.scope.module, inside=read.scope.function != "<module>"
        )
        if module_reach.value is not True:
            gates.extend(module_reach.deciding() or module_reach.gates)
        value = conjunction(gates)
        if module_reach.value is False:
            return Reach(False, gates)
        if module_reach.value is None and value is True:
            value = None
        if value is False:
            return Reach(False, gates)
        path = self.path_reach(read.scope.module, read.scope.function, read.scope.class_name)
        if path.value is not True:
            gates.extend(path.deciding())
            value = False if path.value is False else (None if value is True else value)
        if read.carried is not None and value is not False:
            carried = self.carried_reach(read)
            if carried is not None and carried.value is not True:
                gates.extend(carried.gates)
                value = False if carried.value is False else (None if value is True else value)
        return Reach(value, gates, path.unresolved)

    def carried_reach(self, read: ReadSite) -> Reach | None:
        """Whether the module global a read's value is stored in (``global X; X = ...``) is
        read here: one of the functions reading ``X`` called; None where no function of the
        module reads it (another module may, through an import: not followed)."""
        module, name = read.scope.module, read.carried
        readers = [
            (function, class_name)
            for function, class_name in self.index.global_readers.get(f"{module}:{name}", [])
            if function != read.scope.function
        ]
        if not readers:
            return None
        reaches = [self.path_reach(module, f, c) for f, c in readers[:_PATH_SITES]]
        if any(r.value is True for r in reaches):
            return Reach(True)
        value = False if all(r.value is False for r in reaches) else None
        deciding = [g for r in reaches for g in r.deciding()[:1]]
        where = ", ".join(f"{f}()" for f, _ in readers[:3])
        text = f"the global {name} it sets is read by {where} only when " + "; ".join(
            g.describe() for g in deciding[:3]
        )
        facts = frozenset(f for g in deciding for f in g.facts)
        site = Site(self.index.paths.get(module, module), read.site.line)
        return Reach(value, [GateEval("caller", text, site, value, facts, text)])

    def _absent_holder(self, read: ReadSite) -> GateEval | None:
        """The condition that keeps the object a read goes through from being built, if any
        (``self.lora_config.max_loras`` where ``lora_config`` is None here)."""
        if read.handling or not self.absent:
            return None
        for part in read.form.split(".")[:-1]:
            kind = self.index.access.names.get(part.removesuffix("()"))
            if kind in self.absent:
                return self.absent[kind]
        return None

    def gate(self, spec: GateSpec, scope: Scope) -> GateEval:
        if spec.kind == "type-checking":
            return GateEval(spec.kind, "typing.TYPE_CHECKING", spec.site, False, frozenset())
        if spec.source is None:
            why = {"except": "an exception being raised", "case": "a match case"}.get(
                spec.kind, spec.kind
            )
            return GateEval(spec.kind, why, spec.site, None, frozenset(), why)
        try:
            expr = parse_expression(spec.source)
        except (SyntaxError, RecursionError, MemoryError):
            return GateEval(spec.kind, spec.text, spec.site, None, frozenset(), spec.text)
        frame = self.frame(scope)
        self.interp.allow(_GATE_STEPS)
        try:
            value, facts = self.interp.with_facts(lambda: self.interp.eval(expr, frame))
        except (Budget, RecursionError):
            value, facts = Unknown(f"{spec.text} (too deep to follow)"), frozenset()
        t = truth(value)
        if t is not None and spec.negate:
            t = not t
        text = f"not ({spec.text})" if spec.negate else spec.text
        read = {f.name for f in facts if f.kind == FLAG}
        rewritten = self.stores.rewritten_before(
            spec.site.path, scope.function, spec.site.line, read
        )
        if rewritten:
            # the function set the flag itself before testing it (``vllm serve`` fills in
            # ``args.api_server_count`` when it is None): the value parsed is not the one
            # tested, and the resolution never walked that function
            why = f"{rewritten} as {scope.function}() sets it"
            return GateEval(spec.kind, text, spec.site, None, facts, why, True)
        depends = value.why if isinstance(value, Unknown) else None
        waits = value.waits_on if isinstance(value, Unknown) else None
        runtime = waits is not None and not any(f.kind in _DECIDING for f in waits)
        return GateEval(spec.kind, text, spec.site, t, facts, depends, runtime)

    def frame(self, scope: Scope) -> Frame:
        access = self.index.access
        interp = self.interp

        def resolve(name: str) -> Any:
            if name == "self":
                if scope.class_name in access.self_classes:
                    return interp.args
                return SelfProxy(scope, self)
            holder = interp.holder(name)
            if holder is not None:
                return holder
            local = scope.locals.get(name)
            if local is None:
                return _MISSING
            return self.local_value(local, name, scope)

        return Frame(scope.module, {}, scope.function, resolve)

    def local_value(self, local: LocalDef, name: str, scope: Scope) -> Any:
        if local.kind == "param":
            cls = self._annotated_class(local, scope)
            if cls is not None:
                return instance_of(self, cls)
            given = unpassed_default(
                self.index, self.interp, self.model_scope(), local, name, scope
            )
            given = passed_value(self, local, name, scope) if given is _MISSING else given
            if given is not _MISSING:
                return given
            default = f", default {local.source}" if local.source else ""
            return Unknown(f"parameter {name}{default}")
        if local.source is None:
            return Unknown(name)
        if local.kind == "import":  # ``module:attribute`` or ``module``
            module, _, attribute = local.source.partition(":")
            return self.interp.import_value(module, attribute or None)
        try:
            expr = parse_expression(local.source)
        except SyntaxError:
            return Unknown(name)
        value = self.interp.eval(expr, self.frame(scope))
        if isinstance(value, list | dict | set):  # filled in later, most likely
            return Unknown(name)
        return value

    def mixed_in_attribute(self, interp: Any, scope: Scope, name: str) -> Any:
        """``self.x`` that the method's own class never assigns: what a base assigns (a mixin's
        ``init_*`` method), else what the classes that mix this one in assign, where they agree
        (SGLang's scheduler and its mixins); else a run-time value."""
        unknown = Unknown(f"self.{name}")
        if scope.class_name is None:
            return unknown
        node = self.interp.world.find_class(scope.module, scope.class_name.rpartition(".")[2])
        if node is not None:
            inherited = InstanceProxy(ClassRef(scope.module, node.name, node), self)
            value = inherited.attribute(interp, name)
            if not isinstance(value, Unknown):
                return value
        values = []
        for cls in self.subclasses(scope.class_name)[:_MIXERS]:
            value = InstanceProxy(cls, self).attribute(interp, name)
            if isinstance(value, Unknown):
                return unknown
            values.append(value)
        if not values or any(v != values[0] or type(v) is not type(values[0]) for v in values):
            return unknown
        return values[0]

    def subclasses(self, class_name: str) -> list[ClassRef]:
        """The package's classes that name ``class_name`` among their direct bases."""
        if self._subclasses is None:
            self._subclasses = {}
            for child, bases in self.index.bases.items():
                for base in bases:
                    self._subclasses.setdefault(base, []).append(child)
        out = []
        for child in self._subclasses.get(class_name, []):
            for module in self.index.class_modules.get(child, ()):
                node = self.interp.world.find_class(module, child)
                if node is not None:
                    out.append(ClassRef(module, child, node))
        return out

    def _annotated_class(self, local: LocalDef, scope: Scope) -> ClassRef | None:
        if not local.annotation:
            return None
        try:
            expr = parse_expression(local.annotation)
        except SyntaxError:
            return None
        found = self.interp.eval(expr, Frame(scope.module, {}, scope.function, lambda _: _MISSING))
        if isinstance(found, ClassRef) and found.node is not None:
            return found
        # a class imported only for type checkers (``if TYPE_CHECKING:``, the annotation a
        # string): the package's one class of that name
        name = local.annotation.strip("'\"").rpartition(".")[2]
        modules = self.index.class_modules.get(name, [])
        if len(modules) != 1:
            return None
        node = self.interp.world.find_class(modules[0], name)
        return ClassRef(modules[0], name, node) if node is not None else None

    def registry_gates(self, scope: Scope) -> list[GateEval]:
        """``@register_attention_backend("triton")``: the read runs when a flag chooses it."""
        path = self.index.paths.get(scope.module, scope.module)
        out = architecture_gates(self.model_scope(), tuple(scope.decorators), path)
        for decorator in scope.decorators:
            match = _STRING_ARG.match(decorator)
            if not match:
                continue
            key, name = match.group(1), decorator.split("(")[0]
            keys = self._registry_keys(scope.module, name)
            # the flags choosing from this table (``lora_backend`` has "triton", not the rest)
            flags = [
                flag
                for flag in self._choice_flags.get(key, [])
                if len(keys & self._choices[flag]) * 2 >= len(keys)
            ]
            if not flags:
                continue
            values = [self.interp.flag_value(flag) for flag in flags]
            facts = frozenset(
                Fact("flag", flag, f"{flag}={show(value)}")
                for flag, value in zip(flags, values, strict=True)
            )
            value = chosen_by(values, key)
            text = f"{' or '.join(flags)} == {key!r} (registered by @{name})"
            unresolved = None if value is not None else text
            out.append(GateEval("registry", text, Site(path, 0), value, facts, unresolved))
        return out

    def _registry_keys(self, module: str, decorator: str) -> frozenset[str]:
        """Every key the module registers with ``@decorator("key")``: the table's keys."""
        key = (module, decorator)
        if key not in self._tables:
            pattern = rf"""@{re.escape(decorator)}\(\s*["']([\w\-.]+)["']"""
            self._tables[key] = frozenset(re.findall(pattern, self.interp.world.text(module)))
        return self._tables[key]

    # -- who calls the reading function -------------------------------------------------------

    def path_reach(
        self, module: str, function: str, class_name: str | None, depth: int = 0
    ) -> Reach:
        """Whether the function is called here: the conditions of its callers (and theirs, up
        to ``CALL_DEPTH``), one of the call paths enough; a method also needs its object built."""
        if function == "<module>" or (module, function) in self._roots:
            return Reach(True)
        key = (module, function, depth)
        known = self._paths.get(key)
        if known is not None:
            return known
        if key in self._paths_in_progress:
            self._cycled = True
            return Reach(True)  # a cycle: the path through it is the one being followed
        self._paths_in_progress.add(key)
        outer, self._cycled = self._cycled, False
        try:
            parts = function.split(".")
            name = parts[-1]
            needs: list[Reach] = []
            if class_name and len(parts) >= 2 and parts[-2] == class_name:
                if name not in _CONSTRUCTION:
                    needs.append(self._callers(name, function, module, depth, class_name))
                if (module, class_name) not in self._roots:
                    needs.append(self._callers(class_name, function, module, depth, None))
            else:
                needs.append(self._callers(name, function, module, depth, None))
            value = conjunction_of(needs)
            gates = [g for r in needs if r.value is not True for g in r.deciding()]
            result = Reach(value, gates, [u for r in needs for u in r.unresolved])
        finally:
            self._paths_in_progress.discard(key)
        self._remember(self._paths, key, result, outer)
        return result

    def _callers(
        self, callee: str, function: str, module: str, depth: int, method_of: str | None
    ) -> Reach:
        index = self.index
        what = f"{callee}()" if callee.lstrip("_")[:1].islower() else f"{callee} (built)"
        defined = index.defined.get(callee, 0)
        sites = [
            c for c in index.calls.get(callee, []) if (c.module, c.function) != (module, function)
        ]
        if defined > MAX_HOMONYMS:
            assumed = Reach(True, [], [f"{what}: {defined} definitions of the name"])
            # ``self.load_model()`` in the method's own class calls this one, whatever other
            # classes define a method of that name; another caller may exist, so only a path
            # that holds is taken from them
            lineage = index.lineage(method_of) if method_of is not None else set()
            own = [
                c
                for c in sites
                if (c.on_self and c.class_name == method_of and c.module == module)
                or (not c.on_self and index.receiver_class(c.receiver) in lineage)
            ]
            if method_of is None or not own:
                return assumed
            reach = self._through(own, depth, what)
            return reach if reach.value is True else assumed
        if defined > 1 and method_of is None:
            # a name defined more than once: only callers that can see this one
            sites = [c for c in sites if c.module == module or self._imports(c.module, module)]
        other = other_program(index, method_of or callee)
        if other is not None:
            return Reach(False, [GateEval("caller", other, Site("", 0), False, frozenset())])
        if not sites:
            if callee in index.named:
                return Reach(
                    True, [], [f"{what}: no call found (called through a table or by name)"]
                )
            # nothing in the package calls it or names it: the top of a call chain (a CLI,
            # a server's handler, code outside the package), taken as running
            return Reach(True, [], [f"{what}: nothing in the package calls or names it"])
        return self._through(sites, depth, what)

    def _through(self, sites: list[CallSite], depth: int, what: str) -> Reach:
        """One of the call sites' paths enough: their conditions and their callers'."""
        if depth + 1 > CALL_DEPTH:
            return Reach(True, [], [f"{what}: callers beyond {CALL_DEPTH} levels"])
        options: list[Reach] = []
        for site in sorted(sites, key=lambda c: (len(c.gates), c.site.path, c.site.line))[
            :_PATH_SITES
        ]:
            reach = self._call_site(site, depth)
            if reach.value is True and not reach.unresolved:
                return reach
            options.append(reach)
        unresolved = [u for o in options for u in o.unresolved]
        if len(sites) > _PATH_SITES:
            unresolved.append(f"{what}: {len(sites) - _PATH_SITES} more callers not followed")
        holding = [o for o in options if o.value is True]
        if holding:
            # one path is enough: the one that assumes least is the one to stand on (another
            # path's assumption says nothing of this one)
            best = min(
                holding, key=lambda o: (sum(map(is_assumed_note, o.unresolved)), len(o.unresolved))
            )
            return Reach(True, [], list(best.unresolved))
        if options and all(o.value is False for o in options):
            return Reach(False, [g for o in options for g in o.deciding()][:6], unresolved)
        gates = [g for o in options if o.value is None for g in o.deciding()][:6]
        return Reach(None, gates, unresolved)

    def call_reach(self, site: CallSite) -> Reach:
        """Whether one call runs here: its own conditions and its callers'."""
        return self._call_site(site, 0)

    def _call_site(self, site: CallSite, depth: int) -> Reach:
        gates: list[GateEval] = []
        runtime: list[str] = []
        for spec in site.gates:
            evaluated = self.gate(spec, site.scope) if site.scope is not None else None
            if evaluated is None:
                continue
            text = f"{evaluated.text} (caller {site.site})"
            if evaluated.value is None and (
                evaluated.runtime or not any(f.kind in _DECIDING for f in evaluated.facts)
            ):
                # A caller's condition on a run-time value (a parameter, the process's state):
                # the path is taken as followed, and the verdict is not ``proven``.
                runtime.append(f"{text}: a run-time value")
                continue
            gates.append(dataclasses.replace(evaluated, kind="caller", text=text))
            if evaluated.value is False:
                return Reach(False, gates[-1:])
        selected = False  # a registry's key decided: the table above it is not a guess
        if site.scope is not None:  # built in a function a backend registry selects
            registries = self.registry_gates(site.scope)
            for registry in registries:
                gates.append(
                    dataclasses.replace(registry, text=f"{registry.text} (caller {site.site})")
                )
                if registry.value is False:
                    return Reach(False, gates[-1:])
            selected = bool(registries) and all(r.value is True for r in registries)
        module = self.module_reach(site.module, inside=site.function != "<module>")
        if module.value is False:
            return Reach(False, module.deciding())
        upstream = self.path_reach(site.module, site.function, site.class_name, depth + 1)
        if selected and site.scope is not None:
            upstream = self._looked_up(site.scope, depth) or upstream
        value = conjunction_of([Reach(conjunction(gates), gates), module, upstream])
        deciding = [g for g in gates if g.value is not True]
        if module.value is None:
            deciding += module.deciding()
        if upstream.value is not True:
            deciding += upstream.deciding()
        above = [u for u in upstream.unresolved if not (selected and is_assumed_note(u))]
        return Reach(value, deciding, runtime + above)

    def _looked_up(self, scope: Scope, depth: int) -> Reach | None:
        """A registered function's path: that of the calls looking its table up, one enough
        (``registries.lookup_callers``); None where none is found."""
        options = [self.path_reach(*p, depth + 2) for p in lookup_callers(self, scope)]
        if not options or any(o.value is True for o in options):
            return next((o for o in options if o.value is True), None)
        off = all(o.value is False for o in options)
        gates = [g for o in options for g in o.deciding()][:6]
        return Reach(False if off else None, gates, [u for o in options for u in o.unresolved])

    def _imports(self, importer: str, module: str) -> bool:
        if self._forward is None:
            self._forward = {}
            for target, sites in self.index.importers.items():
                for site in sites:
                    self._forward.setdefault(_module_of(site), set()).add(target)
        targets = self._forward.get(importer, set())
        return module in targets or any(t.startswith(module + ".") for t in targets)

    # -- what a reading function does next ------------------------------------------------------

    def probe(self, read: ReadSite) -> Refusal | None:
        """Walk the function that reads the flag (its parameters unknown, the flags resolved):
        the first ``raise`` it reaches whatever its parameters are, if any. A check of the
        target that the engine runs when it uses the value (``requires SM90 or SM10X``). A
        raise the walk meets as well with the flag at its default is not the flag's doing
        (the function's other work: the engine starts with the default)."""
        function = self._function_of(read.scope)
        if function is None:
            return None
        self.interp.allow(_GATE_STEPS)  # a walk of its own: not what an earlier one left
        objects = self._annotated_params(function, read.scope)
        found = self._walk(function, objects=objects)
        refusal = next((r for r in found if r.certain and r.message), None)
        if refusal is None or read.flag not in self.interp.state.given:
            return refusal
        default = self._default_of(read.flag)
        if default is _MISSING:
            return refusal
        memo = dict(self.interp._memo)  # calls' results with the flag as given
        self.interp.forget()
        try:
            again = self._walk(function, {read.flag: default}, objects)
        finally:
            self.interp._memo.clear()
            self.interp._memo.update(memo)
        if any(r.certain and r.site == refusal.site for r in again):
            return None
        return refusal

    def _annotated_params(self, function: FunctionRef, scope: Scope) -> dict[str, Any]:
        """The reading function's parameters annotated with one of the engine's classes
        (``runner: "ModelRunner"``), as that class's objects: what the walk may ask of them."""
        node = function.node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return {}
        out: dict[str, Any] = {}
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            note = arg.annotation
            if arg.arg in ("self", "cls") or note is None:
                continue
            text = note.value if isinstance(note, ast.Constant) else ast.unparse(note)
            if not isinstance(text, str):
                continue
            cls = self._annotated_class(LocalDef("param", None, 0, text), scope)
            if cls is not None:
                out[arg.arg] = InstanceProxy(cls, self)
        return out

    def _walk(
        self,
        function: FunctionRef,
        values: dict[str, Any] | None = None,
        objects: dict[str, Any] | None = None,
    ) -> list[Refusal]:
        interp = self.interp
        saved = (interp.state.copy(), set(interp.state.changed), len(interp.changes))
        before = len(interp.refusals)
        interp.state.values.update(values or {})
        interp.allow(_PROBE_STEPS)
        try:
            interp.call_function(function, [], dict(objects or {}), function.node)
        except Budget:
            pass
        finally:
            interp.state.values, interp.state.changed = saved[0], saved[1]
            del interp.changes[saved[2] :]
            found = interp.refusals[before:]
            del interp.refusals[before:]
        return found

    def _default_of(self, field_name: str) -> Any:
        definition = self.index.definitions.get(field_name)
        if definition is None or definition.default is None:
            return None if definition is not None and definition.default_text is None else _MISSING
        try:
            expr = parse_expression(definition.default)
        except SyntaxError:
            return _MISSING
        value = self.interp.eval(expr, Frame(definition.module or self.index.engine))
        return _MISSING if isinstance(value, Unknown) else value

    def _function_of(self, scope: Scope) -> FunctionRef | None:
        if scope.function == "<module>":
            return None
        parts = scope.function.split(".")
        if len(parts) == 1:
            value = self.interp.global_value(scope.module, parts[0])
            return value if isinstance(value, FunctionRef) else None
        if len(parts) == 2:
            owner = self.interp.global_value(scope.module, parts[0])
            if isinstance(owner, ClassRef):
                for stmt in owner.node.body:
                    if isinstance(stmt, ast.FunctionDef) and stmt.name == parts[1]:
                        decorators = {ast.unparse(d) for d in stmt.decorator_list}
                        if "property" in decorators or "staticmethod" in decorators:
                            return None
                        return FunctionRef(scope.module, scope.function, stmt, owner)
        return None

    # -- modules -------------------------------------------------------------------------------

    def module_reach(self, module: str, inside: bool = True) -> Reach:
        """Whether the module is loaded (and, for a model's file, its classes used) here."""
        key = f"{module}|{inside}"
        if key in self._reach:
            return self._reach[key]
        if key in self._in_progress:
            self._cycled = True
            return Reach(True)  # an import cycle: loaded with the rest
        self._in_progress.add(key)
        outer, self._cycled = self._cycled, False
        try:
            result = self._module_reach(module, inside)
        finally:
            self._in_progress.discard(key)
        self._remember(self._reach, key, result, outer)
        return result

    def _remember(self, cache: dict[Any, Reach], key: Any, result: Reach, outer: bool) -> None:
        """Keep a result. One that leaned on a question still being worked out (a cycle taken
        as holding) is kept only until the outermost question is answered, that one included:
        asked later, from elsewhere, it may come out otherwise (a flag judged alone must read
        as in the whole run)."""
        cycled, self._cycled = self._cycled, outer or self._cycled
        cache[key] = result
        working = bool(self._in_progress or self._paths_in_progress)
        if cycled:
            self._provisional.append((cache, key))
        if not working:
            for held, provisional in self._provisional:
                held.pop(provisional, None)
            self._provisional.clear()
            self._cycled = False

    def model_scope(self) -> ModelScope | None:
        """The model files the target's architecture runs (None: no model, or none serves it)."""
        if self._scope is False:
            self._scope = model_scope(self.index, self.interp.target)
        return self._scope if isinstance(self._scope, ModelScope) else None

    def _module_reach(self, module: str, inside: bool) -> Reach:
        options: list[Reach] = []
        entry = self.index.entry_classes.get(module)
        scope = self.model_scope() if inside else None
        if scope is not None and scope.excludes(module):
            # Another model's file: its classes never run for this model, whoever imports
            # the module (the model registry imports every model file).
            return Reach(False, [scope.gate(module, self.index.paths.get(module, module))])
        if entry and inside:
            options.append(self.architecture_gate(module, entry))
        sites = self._importers(module)
        if not sites and not entry:
            return Reach(True)  # an entry point, or loaded by name: taken as loaded
        if any(o.value is True for o in options):
            return Reach(True)
        ordered = sorted(sites, key=lambda s: (bool(s.gates), s.function is not None))
        for site in ordered:
            reach = self.site_reach(site)
            if reach.value is True:
                return Reach(True)
            options.append(reach)
        if not options:
            return Reach(True)
        if all(o.value is False for o in options):
            return Reach(False, [g for o in options for g in o.deciding()])
        return Reach(None, [g for o in options if o.value is None for g in o.deciding() or o.gates])

    def _importers(self, module: str) -> list[ImportSite]:
        sites = [s for s in self.index.importers.get(module, []) if _module_of(s) != module]
        return sites

    def site_reach(self, site: ImportSite) -> Reach:
        gates = [self.gate(spec, site.scope) for spec in site.gates] if site.scope else []
        if site.scope is not None:
            gates.extend(self.registry_gates(site.scope))
        importer = _module_of(site)
        upstream = self.module_reach(importer, inside=site.function is not None)
        value = conjunction(gates)
        if upstream.value is False:
            return Reach(False, upstream.deciding())
        if site.function is not None and site.scope is not None and value is not False:
            # an import inside a function happens when the function runs: its callers'
            # conditions too (``SpeculativeAlgorithm.create_worker`` imports each worker's
            # module, and only a configured speculative algorithm calls it)
            called = self.path_reach(importer, site.function, site.scope.class_name)
            if called.value is False:
                return Reach(False, called.deciding())
            if called.value is None:
                gates = gates + called.deciding()
                value = None if value is True else value
        if upstream.value is None:
            return Reach(None if value is not False else False, gates + upstream.deciding())
        return Reach(value, gates)

    def architecture_gate(self, module: str, entry: tuple[str, ...]) -> Reach:
        path = self.index.paths.get(module, module)
        text = f"model architecture in {list(entry)} (the classes {path} registers)"
        site = Site(path, 0)
        model = self.interp.target.model
        if model is None or model.architecture is None:
            return Reach(
                None,
                [
                    GateEval(
                        "model", text, site, None, frozenset(), "the model (give --model-config)"
                    )
                ],
            )
        value = model.architecture in entry
        fact = Fact(MODEL, "architecture", f"model architecture {model.architecture}")
        return Reach(value, [GateEval("model", text, site, value, frozenset({fact}))])


__all__ = ["ArgsView", "GateEval", "GateEvaluator", "Reach"]
