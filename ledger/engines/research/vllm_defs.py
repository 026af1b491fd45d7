"""vLLM's server flags, from its source: ``EngineArgs`` and the config dataclasses it fills.

``EngineArgs`` declares each flag as a field whose default names the config field it lands in
(``max_model_len: int = ModelConfig.max_model_len``, ``get_field(KernelConfig, "x")``);
``add_cli_args`` registers ``--max-model-len`` with the config's keyword arguments (help from
the docstring under the config field). At run time the value is read from the config object
(``vllm_config.model_config.max_model_len``, ``self.cache_config.cache_dtype``), so the
access model maps each ``*_config`` name and attribute back to the flag.
"""

from __future__ import annotations

import ast

from ledger.errors import InvalidInput

from .access import AccessModel, distinctive_names
from .definitions import (
    FlagDefinition,
    apply_registration,
    field_of_option,
    help_text,
    registrations,
)
from .model import Site
from .pysource import module_name, squeeze
from .sources import EngineSource

ARG_UTILS = "vllm/engine/arg_utils.py"
# Where ``VllmConfig`` is defined: its own module since 0.11.x, ``vllm/config/__init__.py`` before.
VLLM_CONFIG_PATHS = ("vllm/config/vllm.py", "vllm/config/__init__.py")
ARG_LAYER = ("vllm/config/", "vllm/engine/arg_utils.py")
ENGINE_ARGS = "engine_args"
FRONTEND = "frontend_args"
#: ``vllm serve``'s API-server flags (``--enable-auto-tool-choice``, ``--headless``): the
#: ``FrontendArgs`` dataclass (and its bases) and ``make_arg_parser``'s own ``add_argument``s,
#: read at run time from the parsed arguments (``args.enable_auto_tool_choice``).
FRONTEND_ARGS = ("vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/openai/cli_args.py")


def _parse(source: EngineSource, path: str) -> tuple[ast.Module, str]:
    text = source.read(path).decode("utf-8")
    return ast.parse(text, filename=path), text


def _config_target(value: ast.expr | None) -> tuple[str, str] | None:
    """``ModelConfig.max_model_len`` / ``get_field(ModelConfig, "x")`` -> (class, attribute)."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id, value.attr
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "get_field"
        and len(value.args) == 2
        and isinstance(value.args[0], ast.Name)
        and isinstance(value.args[1], ast.Constant)
        and isinstance(value.args[1].value, str)
    ):
        return value.args[0].id, value.args[1].value
    return None


def _config_classes(source: EngineSource) -> dict[str, tuple[str, ast.ClassDef, str]]:
    """Every class of ``vllm/config/``: name -> (path, node, source text)."""
    out: dict[str, tuple[str, ast.ClassDef, str]] = {}
    for path in source.paths():
        if not path.startswith("vllm/config/"):
            continue
        tree, text = _parse(source, path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, (path, node, text))
    return out


def _attribute_docs(node: ast.ClassDef) -> dict[str, tuple[int, str | None, str]]:
    """A config class's fields: name -> (line, default as written, the docstring under it)."""
    out: dict[str, tuple[int, str | None, str]] = {}
    body = node.body
    for position, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            doc = ""
            following = body[position + 1] if position + 1 < len(body) else None
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                doc = squeeze(following.value.value, 2000)
            out[stmt.target.id] = (stmt.lineno, _default_of(stmt.value), doc)
    return out


def _default_of(value: ast.expr | None) -> str | None:
    """The default a field's value gives: ``Field(default=1, gt=0)`` / ``field(default=1)``."""
    if value is None:
        return None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
        name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if name in ("Field", "field"):
            for keyword in value.keywords:
                if keyword.arg == "default":
                    return ast.unparse(keyword.value)
            if value.args:
                return ast.unparse(value.args[0])
            return None
    return ast.unparse(value)


def model_registry(source: EngineSource) -> dict[str, tuple[str, ...]]:
    """Which architectures each model module serves, from vLLM's registry tables
    (``"Qwen3_5MoeForConditionalGeneration": ("qwen3_5", ...)``)."""
    path = "vllm/model_executor/models/registry.py"
    if path not in source:
        return {}
    tree, _ = _parse(source, path)
    served: dict[str, list[str]] = {}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and isinstance(item, ast.Tuple)
                and item.elts
                and isinstance(item.elts[0], ast.Constant)
                and isinstance(item.elts[0].value, str)
            ):
                named = item.elts[0].value
                # ``("llama", ...)`` is a module of ``model_executor/models``; newer releases
                # also name a package of their own (``("vllm.models.qwen3_5", ...)``)
                module = named if "." in named else f"vllm.model_executor.models.{named}"
                served.setdefault(module, []).append(key.value)
    return {module: tuple(sorted(set(archs))) for module, archs in served.items()}


def read_definitions(source: EngineSource) -> tuple[dict[str, FlagDefinition], AccessModel]:
    if ARG_UTILS not in source:
        raise InvalidInput(f"{source.origin}: no {ARG_UTILS}: not a vLLM engine")
    tree, text = _parse(source, ARG_UTILS)
    engine_args = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"), None
    )
    if engine_args is None:
        raise InvalidInput(f"{source.origin}: {ARG_UTILS} has no class EngineArgs")
    configs = _config_classes(source)
    docs = {name: _attribute_docs(node) for name, (_, node, _) in configs.items()}
    module = module_name(ARG_UTILS)
    fields: dict[str, FlagDefinition] = {}
    targets: dict[str, tuple[str, str]] = {}
    for stmt in engine_args.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = stmt.target.id
        definition = FlagDefinition(
            field=name,
            name=name.replace("_", "-"),
            type_text=squeeze(ast.unparse(stmt.annotation)),
            module=module,
            site=Site(ARG_UTILS, stmt.lineno),
        )
        target = _config_target(stmt.value)
        if target is not None and target[0] in docs and target[1] in docs[target[0]]:
            targets[name] = target
            line, default, doc = docs[target[0]][target[1]]
            config_path = configs[target[0]][0]
            definition.namespace = f"{target[0]}.{target[1]}"
            definition.default = default
            definition.default_text = squeeze(default) if default else None
            definition.module = module_name(config_path)
            definition.help = doc or None
            definition.extra["config_site"] = f"{config_path}:{line}"
        elif stmt.value is not None:
            definition.default = ast.unparse(stmt.value)
            definition.default_text = squeeze(definition.default)
        fields[name] = definition
    for registration in registrations(tree, ARG_UTILS, module):
        dest = registration.dest
        if dest not in fields:
            dest = field_of_option(registration.options[0])
        if dest not in fields:
            continue
        definition = fields[dest]
        had_help = definition.help
        apply_registration(definition, registration, text)
        if definition.help and definition.help.startswith("{") and had_help:
            definition.help = had_help  # ``**kwargs["x"]``: the config's docstring is the help
    for definition in fields.values():
        if definition.help is None and definition.namespace is None:
            definition.help = help_text(None, text)
    frontend: set[str] = set()
    for path in FRONTEND_ARGS:
        if path in source:
            frontend |= _frontend(source, path, fields)
    forwarded = _forwarded(engine_args, fields, docs)
    for name, target in forwarded.items():
        targets.setdefault(name, target)
    return fields, _access_model(source, fields, targets, configs, frontend)


def _frontend(source: EngineSource, path: str, fields: dict[str, FlagDefinition]) -> set[str]:
    """The API server's flags of one module: its ``*FrontendArgs`` fields, then its
    ``add_argument`` calls; a flag ``EngineArgs`` defines is kept as ``EngineArgs`` has it."""
    tree, text = _parse(source, path)
    module = module_name(path)
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name.endswith("FrontendArgs")):
            continue
        for name, (line, default, doc) in _attribute_docs(node).items():
            if name in fields or name.startswith("_"):
                continue
            stmt = next(s for s in node.body if isinstance(s, ast.AnnAssign) and s.lineno == line)
            fields[name] = FlagDefinition(
                field=name,
                name=name.replace("_", "-"),
                options=(f"--{name.replace('_', '-')}",),  # ``add_cli_args`` spells them so
                cli_site=Site(path, line),
                type_text=squeeze(ast.unparse(stmt.annotation)),
                module=module,
                site=Site(path, line),
                default=default,
                default_text=squeeze(default) if default else None,
                help=doc or None,
            )
    for registration in registrations(tree, path, module):
        dest = registration.dest
        if dest is None or dest in fields and fields[dest].module != module:
            continue
        definition = fields.get(dest) or FlagDefinition(
            field=dest, name=dest.replace("_", "-"), module=module, site=registration.site
        )
        apply_registration(definition, registration, text)
        fields[dest] = definition
    return {name for name, d in fields.items() if d.module == module}


def _forwarded(
    engine_args: ast.ClassDef,
    fields: dict[str, FlagDefinition],
    docs: dict[str, dict[str, tuple[int, str | None, str]]],
) -> dict[str, tuple[str, str]]:
    """Flags ``EngineArgs`` hands to a config class by keyword (``ModelConfig(...,
    renderer_num_workers=self.renderer_num_workers)``) whose default does not name the config
    (``renderer_num_workers: int = 1``): ``model_config.renderer_num_workers`` is the flag."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(engine_args):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        attributes = docs.get(node.func.id)
        if attributes is None:
            continue
        for keyword in node.keywords:
            value = keyword.value
            if (
                keyword.arg in attributes
                and isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and value.value.id == "self"
                and value.attr in fields
            ):
                out.setdefault(value.attr, (node.func.id, keyword.arg))
    return out


def _vllm_config_fields(source: EngineSource) -> dict[str, str]:
    """``VllmConfig``'s attributes: ``model_config`` -> ``ModelConfig``."""
    for path in VLLM_CONFIG_PATHS:
        if path not in source:
            continue
        tree, _ = _parse(source, path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "VllmConfig":
                out: dict[str, str] = {}
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        annotation = ast.unparse(stmt.annotation)
                        annotation = annotation.replace(" | None", "").replace("Optional[", "")
                        out[stmt.target.id] = annotation.strip().strip("]'\"")
                return out
    return {}


def _access_model(
    source: EngineSource,
    fields: dict[str, FlagDefinition],
    targets: dict[str, tuple[str, str]],
    configs: dict[str, tuple[str, ast.ClassDef, str]],
    frontend: set[str],
) -> AccessModel:
    holders = _vllm_config_fields(source)  # model_config -> ModelConfig
    kind_of_class = {cls: attr for attr, cls in holders.items()}
    kind_of_class["VllmConfig"] = "vllm_config"
    objects: dict[str, dict[str, str]] = {ENGINE_ARGS: {name: name for name in fields}}
    for flag, (cls, attr) in targets.items():
        kind = kind_of_class.get(cls, cls)
        objects.setdefault(kind, {})[attr] = flag
    # a flag that is a whole config of ``VllmConfig`` (``--watermark-config``,
    # ``--attention-config``): ``vllm_config.watermark_config`` is its value, built from it
    for attr in holders:
        if attr in fields and attr not in targets:
            objects.setdefault("vllm_config", {})[attr] = attr
    names = {kind: kind for kind in objects if kind != ENGINE_ARGS}
    names.update({"engine_args": ENGINE_ARGS, "vllm_config": "vllm_config"})
    if frontend:  # the API server's parsed arguments: ``args.response_role``
        objects[FRONTEND] = {name: name for name in frontend}
        names["args"] = FRONTEND
    scoped: dict[str, tuple[str, ...]] = {"args": ("vllm/entrypoints/",)} if frontend else {}
    subobjects = {("vllm_config", attr): attr for attr in holders if attr in objects}
    self_classes = {cls: kind_of_class.get(cls, cls) for cls in {c for c, _ in targets.values()}}
    self_classes["EngineArgs"] = ENGINE_ARGS
    distinctive: dict[str, str] = {}
    for flag, (_, attr) in targets.items():
        if attr in distinctive_names({attr}):
            distinctive[attr] = flag
    distinctive.update(distinctive_names(set(fields)))
    return AccessModel(
        objects=objects,
        names=names,
        suffixes=(),
        getters={"get_current_vllm_config": "vllm_config"},
        subobjects=subobjects,
        layer_names={"args": ENGINE_ARGS},
        self_classes=self_classes,
        arg_layer=ARG_LAYER,
        distinctive=distinctive,
        scoped_names=scoped,
    )
