"""SGLang's server flags, from its source, for every generation of ``server_args``.

- up to 0.5.12: ``@dataclass class ServerArgs`` fields, registered by hand in
  ``ServerArgs.add_cli_args`` (``parser.add_argument("--x", default=ServerArgs.x, help=...)``);
- 0.5.13 on: the fields carry their CLI metadata, ``x: A[T, "help"]`` or
  ``x: A[T, Arg(help=..., choices=..., cli_name=..., no_cli=...)]``, registered by
  ``add_cli_args_from_dataclass``; a few flags are still registered by hand;
- 0.5.20 on: the fields live in namespace structs (``_NS_PATH = "exec.comm"``,
  ``arg_groups/fields/``), read at run time through the config bags (``get_exec().comm.x``).

All three are read the same way: every annotated field of ``ServerArgs`` and of the namespace
classes, then every ``add_argument`` call of the argument layer.
"""

from __future__ import annotations

import ast
import dataclasses

from ledger.errors import InvalidInput

from .access import ARGS, AccessModel, distinctive_names
from .definitions import (
    FlagDefinition,
    Registration,
    apply_registration,
    field_of_option,
    help_text,
    literal_strings,
    module_lists,
    registrations,
    spread_strings,
)
from .model import Site
from .pysource import module_name, squeeze
from .sources import EngineSource

SERVER_ARGS = "sglang/srt/server_args.py"
ARG_LAYER = (
    "sglang/srt/server_args.py",
    "sglang/srt/arg_groups/",
    "sglang/srt/server_args_config_parser.py",
)
_ANNOTATED = ("A", "Annotated")


def _parse(source: EngineSource, path: str) -> tuple[ast.Module, str]:
    text = source.read(path).decode("utf-8")
    return ast.parse(text, filename=path), text


def definition_files(source: EngineSource) -> list[str]:
    return [p for p in source.paths() if p.startswith(ARG_LAYER)]


def read_definitions(source: EngineSource) -> tuple[dict[str, FlagDefinition], AccessModel]:
    """Every field of SGLang's server arguments (CLI flags and the rest) and how code reads them."""
    if SERVER_ARGS not in source:
        raise InvalidInput(f"{source.origin}: no {SERVER_ARGS}: not an SGLang server")
    fields: dict[str, FlagDefinition] = {}
    regs: list[tuple[Registration, str]] = []
    namespaces: set[str] = set()
    self_classes: dict[str, str] = {}
    declare_calls: set[str] = set()
    derived: dict[str, str] = {}
    auto_cli = False
    parsed = [(path, *_parse(source, path)) for path in definition_files(source)]
    # ``choices=ATTENTION_BACKEND_CHOICES`` in a fields module names a list of another module
    # of the argument layer (``arg_groups/choices.py``): every module's lists, by name
    lists: dict[str, ast.List] = {}
    for _, tree, _ in parsed:
        for name, strings in module_lists(tree).items():
            lists.setdefault(name, strings)
    for path, tree, text in parsed:
        module = module_name(path)
        auto_cli = auto_cli or "add_cli_args_from_dataclass(" in text and path == SERVER_ARGS
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_field_class(node, path):
                self_classes[node.name] = ARGS
                ns = _namespace_path(node)
                if ns:
                    namespaces.add(ns)
                for definition in _class_fields(node, path, module, text, ns, lists):
                    fields.setdefault(definition.field, definition)
                derived.update(_derived_fields(node))
            elif isinstance(node, ast.FunctionDef) and "declare" in node.name and node.args.kwarg:
                declare_calls.add(node.name)
        regs.extend((reg, text) for reg in registrations(tree, path, module))
    _apply_cli(fields, regs, auto_cli)
    # 0.5.1x name a field's namespace in its annotation (``NS("exec.moe")``) before the
    # namespace structs: read at run time the same way (``get_exec().moe.enable_eplb``)
    namespaces |= {d.namespace for d in fields.values() if d.namespace}
    model = _access_model(fields, namespaces, self_classes, declare_calls)
    model = dataclasses.replace(
        model, derived={k: v for k, v in derived.items() if k not in fields}
    )
    return fields, _with_getter_modules(model, source, namespaces)


def _is_field_class(node: ast.ClassDef, path: str) -> bool:
    return (node.name == "ServerArgs" and path == SERVER_ARGS) or _namespace_path(node) is not None


def _namespace_path(node: ast.ClassDef) -> str | None:
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_NS_PATH" for t in stmt.targets
        ):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return stmt.value.value
    return None


def _class_fields(
    node: ast.ClassDef,
    path: str,
    module: str,
    text: str,
    namespace: str | None,
    lists: dict[str, ast.List],
) -> list[FlagDefinition]:
    found: list[FlagDefinition] = []
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = stmt.target.id
        if name.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
            continue
        definition = FlagDefinition(
            field=name,
            name=name.replace("_", "-"),
            module=module,
            namespace=namespace,
            site=Site(path, stmt.lineno),
        )
        annotation = stmt.annotation
        if _is_annotated(annotation):
            assert isinstance(annotation, ast.Subscript)
            elements = (
                annotation.slice.elts
                if isinstance(annotation.slice, ast.Tuple)
                else [annotation.slice]
            )
            definition.type_text = squeeze(ast.unparse(elements[0]))
            if not _read_metadata(definition, elements[1:], text, lists):
                continue  # a derived value, not an input
        else:
            definition.type_text = squeeze(ast.unparse(annotation))
        _read_default(definition, stmt.value)
        found.append(definition)
    return found


def _derived_fields(node: ast.ClassDef) -> dict[str, str]:
    """A namespace's values computed at publish from the resolved arguments (0.5.23:
    ``num_dp_ranks = Derived(fn="sglang.srt.runtime_context.num_dp_ranks_of", ...)``): name ->
    the dotted function that computes it. One without ``fn`` (a rank, a process group) is set
    at run time and has no entry."""
    found: dict[str, str] = {}
    for stmt in node.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "Derived"
        ):
            continue
        for keyword in stmt.value.keywords:
            value = keyword.value
            if keyword.arg == "fn" and isinstance(value, ast.Constant) and "." in str(value.value):
                found[stmt.targets[0].id] = str(value.value)
    return found


def _is_annotated(annotation: ast.expr) -> bool:
    if not isinstance(annotation, ast.Subscript):
        return False
    base = annotation.value
    return (isinstance(base, ast.Name) and base.id in _ANNOTATED) or (
        isinstance(base, ast.Attribute) and base.attr == "Annotated"
    )


def _read_metadata(
    definition: FlagDefinition, metadata: list[ast.expr], text: str, lists: dict[str, ast.List]
) -> bool:
    """Help, CLI spelling and choices from ``A[T, "help"]`` / ``A[T, Arg(...), NS(...)]``.

    Returns False for a ``Derived(...)`` field (computed, not an input).
    """
    for item in metadata:
        if isinstance(item, ast.Constant | ast.JoinedStr | ast.BinOp):
            definition.help = help_text(item, text)
            definition.extra["auto_cli"] = "1"
        elif isinstance(item, ast.Call) and isinstance(item.func, ast.Name):
            keywords = {kw.arg: kw.value for kw in item.keywords if kw.arg is not None}
            if item.func.id == "Derived":
                return False
            if item.func.id == "NS" and item.args and isinstance(item.args[0], ast.Constant):
                definition.namespace = str(item.args[0].value)
            if item.func.id != "Arg":
                continue
            definition.extra["auto_cli"] = "1"
            if item.args:
                definition.help = help_text(item.args[0], text)
            definition.help = help_text(keywords.get("help"), text) or definition.help
            if _true(keywords.get("no_cli")):
                definition.extra["no_cli"] = "1"
            cli = keywords.get("cli_name")
            if isinstance(cli, ast.Constant) and isinstance(cli.value, str):
                definition.extra["cli_name"] = cli.value
            aliases = literal_strings(keywords.get("aliases"))
            if aliases:
                definition.extra["aliases"] = " ".join(aliases)
            named = keywords.get("choices")
            choices = literal_strings(spread_strings(named, lists) or named)
            if choices:
                definition.choices = choices
            elif "choices" in keywords:
                definition.extra["choices"] = squeeze(ast.unparse(keywords["choices"]))
            action = keywords.get("action")
            if action is not None:
                definition.extra["action"] = ast.unparse(action)
            if "fallback" in keywords:
                definition.extra["fallback"] = squeeze(ast.unparse(keywords["fallback"]))
            if "type_parser" in keywords:
                definition.extra["type_parser"] = squeeze(ast.unparse(keywords["type_parser"]))
    return True


def _true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _read_default(definition: FlagDefinition, value: ast.expr | None) -> None:
    if value is None:
        return
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
        name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if name == "field":
            for keyword in value.keywords:
                if keyword.arg == "default":
                    value = keyword.value
                    break
                if keyword.arg == "default_factory":
                    definition.default_text = squeeze(ast.unparse(keyword.value)) + "()"
                    return
    definition.default = ast.unparse(value)
    definition.default_text = squeeze(definition.default)


def _apply_cli(
    fields: dict[str, FlagDefinition], regs: list[tuple[Registration, str]], auto_cli: bool
) -> None:
    if auto_cli:
        for definition in fields.values():
            if definition.extra.get("auto_cli") and not definition.extra.get("no_cli"):
                option = definition.extra.get("cli_name") or "--" + definition.field.replace(
                    "_", "-"
                )
                aliases = tuple(definition.extra.get("aliases", "").split())
                definition.options = (option, *aliases)
                definition.name = option.lstrip("-")
                definition.cli_site = definition.site
    for registration, text in regs:
        dest = registration.dest
        if dest is None:
            continue
        if dest not in fields:
            # ``--tensor-parallel-size`` stored as ``tp_size``: the default names the field.
            default = registration.keywords.get("default")
            if isinstance(default, ast.Attribute) and default.attr in fields:
                dest = default.attr
        found = fields.get(dest)
        if found is None:
            # A flag with no field (``--config``): defined by its registration alone.
            found = FlagDefinition(
                field=dest,
                name=field_of_option(registration.options[0]).replace("_", "-"),
                module=registration.module,
                site=None,
            )
            fields[dest] = found
        apply_registration(found, registration, text)


def _with_getter_modules(
    model: AccessModel, source: EngineSource, namespaces: set[str]
) -> AccessModel:
    """Where ``get_exec``, ``get_device``... are defined: ``get_device`` is also a utility's name."""
    tops = {ns.split(".")[0] for ns in namespaces}
    if not tops:
        return model
    wanted = {f"def get_{top}(".encode(): f"get_{top}" for top in tops}
    defining: list[tuple[str, set[str]]] = []
    for path in source.paths():
        if not path.startswith("sglang/srt/") or path.count("/") > 3:
            continue
        data = source.read(path)
        names = {name for marker, name in wanted.items() if marker in data}
        if names:
            defining.append((module_name(path), names))
    # ``get_model`` is also the model loader's: the home is the module that defines the
    # namespaces' getters together (``runtime_context``), not the first file with the name
    defining.sort(key=lambda entry: -len(entry[1]))
    found: dict[str, str] = {}
    for module, names in defining:
        for name in names:
            found.setdefault(name, module)
    return dataclasses.replace(model, getter_modules=found)


def _access_model(
    fields: dict[str, FlagDefinition],
    namespaces: set[str],
    self_classes: dict[str, str],
    declare_calls: set[str],
) -> AccessModel:
    names = set(fields)
    segments = {part for ns in namespaces for part in ns.split(".")}
    tops = {ns.split(".")[0] for ns in namespaces}
    getters = {
        "get_global_server_args": ARGS,
        "get_server_args": ARGS,
        "resolving_view": ARGS,
        "resolved_view": ARGS,
        "ResolvedView": ARGS,
    }
    getters.update({f"get_{top}": ARGS for top in tops})
    return AccessModel(
        objects={ARGS: {name: name for name in names}},
        names={"server_args": ARGS},
        suffixes=(("server_args", ARGS),),
        getters=getters,
        subobjects={(ARGS, segment): ARGS for segment in segments},
        dict_suffixes=("server_args_dict",),
        layer_names={"cfg": ARGS, "view": ARGS, "resolved": ARGS},
        self_classes=self_classes,
        arg_layer=ARG_LAYER,
        mixed_files=(SERVER_ARGS,),
        declare_calls=tuple(sorted(declare_calls)),
        distinctive=distinctive_names(names),
    )
