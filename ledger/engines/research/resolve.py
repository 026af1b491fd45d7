"""The engine's own argument resolution, walked for the target: which values the flags end up
with, what the engine changed (and why, in its own log message), and what it refuses.

SGLang resolves in ``ServerArgs.__post_init__`` (its ``_handle_*`` steps) or, from 0.5.20, in
``ServerArgs.resolve_once`` (the ``arg_groups`` pipeline that declares values with
``declare_resolution``); vLLM in ``EngineArgs.create_engine_config`` and the configs'
``__post_init__``. The walk starts at those methods and follows every call it can.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from typing import Any

from .flags_given import Const
from .index import VersionIndex
from .interpreter import Interpreter
from .model import Site
from .records import Budget, Change, FlagState, Frame, Refusal, _bases
from .target import Target
from .values import ClassRef, FunctionRef, Unknown
from .world import World, parse_expression

#: Where each engine's resolution starts: (module, class, methods in order).
ENTRY_POINTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "sglang": ("sglang.srt.server_args", "ServerArgs", ("__post_init__", "resolve_once")),
    "vllm": ("vllm.engine.arg_utils", "EngineArgs", ("create_engine_config",)),
}

#: Methods of the same class the engine's launch calls on the resolved arguments before any
#: process starts (SGLang's ``Engine`` runs ``server_args.check_server_args()``): their raises
#: refuse the start as the resolution's do. vLLM's checks run inside its configs' resolution.
LAUNCH_CHECKS: dict[str, tuple[str, ...]] = {"sglang": ("check_server_args",)}
#: Functions ``vllm serve`` runs on the parsed arguments before the engine is built (its
#: frontend's checks: ``--enable-auto-tool-choice`` without ``--tool-call-parser`` raises),
#: by module, the newest place first.
LAUNCH_FUNCTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm": (
        ("vllm.entrypoints.common.cli_args", "validate_parsed_serve_args"),
        ("vllm.entrypoints.openai.cli_args", "validate_parsed_serve_args"),
    )
}

#: Flags given up to which a refusal no flag's read explains is tried without each in turn.
_ONE_BY_ONE = 6

#: A value for the model path when none is given: resolution branches on "dummy" models.
_MODEL_PLACEHOLDER = "/models/model"


@dataclass
class Resolution:
    state: FlagState
    changes: list[Change]
    refusals: list[Refusal]
    complete: bool  # False when the walk stopped on its step budget
    entry: str | None  # what was walked, for the report
    #: refusals the flags given cause (the walk without them does not reach them) whose
    #: conditions name no flag (a value computed through a view or a local): per flag field
    caused: dict[str, list[Refusal]] = field(default_factory=dict)


def initial_state(index: VersionIndex, target: Target, interp: Interpreter) -> FlagState:
    values: dict[str, Any] = {}
    for field_name, definition in index.definitions.items():
        if definition.default is None:
            values[field_name] = (
                None
                if definition.default_text is None
                else Unknown(f"the default of --{definition.name}")
            )
            continue
        try:
            expr = parse_expression(definition.default)
        except SyntaxError:
            values[field_name] = Unknown(f"the default of --{definition.name}")
            continue
        values[field_name] = interp.eval(expr, Frame(definition.module or index.engine))
    given = set(target.flags)
    values.update(target.flags)
    for name, value in target.flags.items():
        if isinstance(value, Const):  # an alias's constant: the enum member it names
            values[name] = interp.eval(parse_expression(value.text), Frame(value.module))
            target.flags[name] = values[name]  # what was given, as the resolution compares it
    if "model_path" in values and "model_path" not in given:
        values["model_path"] = _MODEL_PLACEHOLDER
    return FlagState(values, given)


def new_interpreter(world: World, index: VersionIndex, target: Target) -> Interpreter:
    module, self_class, _ = ENTRY_POINTS.get(index.engine, ("", "ServerArgs", ()))
    interp = Interpreter(
        world,
        index.access,
        target,
        FlagState({}, set()),
        self_class,
        module,
        config_classes=index.model_types,
        class_modules=index.class_modules,
    )
    state = initial_state(index, target, interp)
    interp.defaults = {k: v for k, v in state.values.items() if k not in state.given}
    interp.state = state
    interp.args.state = state
    return interp


def walk(interp: Interpreter, index: VersionIndex) -> Resolution:
    """Run the engine's resolution on the interpreter's state; the state ends resolved."""
    module, class_name, methods = ENTRY_POINTS.get(index.engine, ("", "", ()))
    node = interp.world.find_class(module, class_name)
    owner = ClassRef(module, class_name, node, _bases(node)) if node is not None else None
    walked: list[str] = []
    if owner is not None:
        for method in methods + LAUNCH_CHECKS.get(index.engine, ()):
            found = interp.class_attribute(owner, method, receiver=interp.args)
            if isinstance(found, Unknown):
                continue
            walked.append(f"{class_name}.{method}")
            try:
                interp.call(found, [], {}, ast.Expr(value=ast.Constant(None)), None)
            except Budget:
                break
    for module_name, function in LAUNCH_FUNCTIONS.get(index.engine, ()):
        found = interp.global_value(module_name, function) if not interp.exhausted else None
        if not isinstance(found, FunctionRef):
            continue
        walked.append(f"{module_name.rpartition('.')[2]}.{function}")
        try:
            interp.call(found, [interp.args], {}, ast.Expr(value=ast.Constant(None)), None)
        except Budget:
            pass
        break  # one module has it
    entry = ", ".join(walked) or None
    # a copy: what later evaluations reach (a gate building an object, a probe) is not the
    # resolution's refusal
    refusals = list(interp.refusals)
    return Resolution(interp.state, interp.changes, refusals, not interp.exhausted, entry)


def attribute_refusals(
    resolution: Resolution,
    world: World,
    index: VersionIndex,
    target: Target,
    implied: set[str] | None = None,
) -> None:
    """A certain refusal whose conditions name no flag given, that the same walk without the
    flags given does not reach, is the flags given refused: it goes to the given flags read in
    the function that raises (else, with one flag given, to that flag)."""
    # the tensor-parallel size a target names (SGLang's ``tp_size``, vLLM's
    # ``tensor_parallel_size``) is part of the start, not a flag the user is refused for
    given = set(resolution.state.given) - {"tp_size"} - (implied or set())
    loose = [r for r in resolution.refusals if r.certain and not (r.flags_read() & given)]
    if not given or not loose:
        return
    bare = replace(target, flags={k: v for k, v in target.flags.items() if k not in given})
    baseline = walk(new_interpreter(world, index, bare), index)
    reached = {r.site for r in baseline.refusals}
    for refusal in loose:
        if refusal.site in reached:
            continue
        function = _enclosing_function(world, refusal.site.path, refusal.site.line)
        readers = {
            name
            for name in given
            for read in index.reads.get(name, [])
            if read.site.path == refusal.site.path
            and function is not None
            and read.scope.function == function
        }
        if not readers and len(given) == 1:
            readers = set(given)
        if not readers and len(given) <= _ONE_BY_ONE:
            readers = {
                name
                for name in sorted(given)
                if refusal.site not in _reached_without(world, index, target, name)
            }
        for name in readers:
            resolution.caused.setdefault(name, []).append(refusal)


def _reached_without(world: World, index: VersionIndex, target: Target, name: str) -> set[Site]:
    bare = replace(target, flags={k: v for k, v in target.flags.items() if k != name})
    return {r.site for r in walk(new_interpreter(world, index, bare), index).refusals}


def _enclosing_function(world: World, path: str, line: int) -> str | None:
    from .pysource import module_name

    tree = world.tree(module_name(path))
    if tree is None:
        return None
    best: tuple[int, str] | None = None

    def visit(body: list[ast.stmt], prefix: str) -> None:
        nonlocal best
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                end = getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno
                if not stmt.lineno <= line <= end:
                    continue
                name = f"{prefix}{stmt.name}"
                if not isinstance(stmt, ast.ClassDef):
                    best = (stmt.lineno, name)
                visit(stmt.body, name + ".")

    visit(tree.body, "")
    return best[1] if best else None
