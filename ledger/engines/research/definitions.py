"""What a flag is, as its engine defines it: CLI spelling, field, type, default, help, deprecation.

Shared by the engines' definition readers (``sglang_defs``, ``vllm_defs``): the record, and the
reading of ``parser.add_argument(...)`` calls that both engines use.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from .model import Site
from .pysource import call_name, squeeze

_DEPRECATED_HELP = re.compile(r"^\W*(\[|\()?\s*deprecated\b", re.IGNORECASE)


@dataclass
class FlagDefinition:
    """One configuration field of the engine, and its command-line spelling if it has one."""

    field: str  # the attribute the code reads: enable_mixed_chunk
    name: str  # the CLI spelling without dashes: enable-mixed-chunk
    options: tuple[str, ...] = ()  # every option string: ("--tp-size", "--tensor-parallel-size")
    type_text: str | None = None
    default_text: str | None = None
    default: str | None = None  # the default's source, evaluated later in ``module``
    module: str = ""
    help: str | None = None
    choices: tuple[str, ...] = ()
    deprecated: str | None = None  # the deprecation note, the replacement when named
    namespace: str | None = None  # SGLang's config namespace (exec.comm), vLLM's config class
    site: Site | None = None  # the field's definition
    cli_site: Site | None = None  # the add_argument call (or the field, when derived from it)
    extra: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def cli(self) -> bool:
        return bool(self.options)

    def evidence_site(self) -> Site | None:
        return self.site or self.cli_site


def cli_name(option: str) -> str:
    return option.lstrip("-")


def field_of_option(option: str) -> str:
    return cli_name(option).replace("-", "_")


def literal_strings(node: ast.expr | None) -> tuple[str, ...]:
    """The strings of a list/tuple literal (choices), empty when not a literal."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return tuple(
            str(element.value) for element in node.elts if isinstance(element, ast.Constant)
        )
    return ()


def help_text(node: ast.expr | None, source: str) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return squeeze(node.value, 2000)
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return squeeze("".join(parts), 2000)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = help_text(node.left, source), help_text(node.right, source)
        return squeeze((left or "") + (right or ""), 2000)
    if isinstance(node, ast.Tuple) and node.elts:  # a trailing comma made a tuple
        return help_text(node.elts[0], source)
    return squeeze(ast.unparse(node), 2000)


def deprecation(help_: str | None, action: str | None, keywords: dict[str, ast.expr]) -> str | None:
    """Whether a flag is deprecated, and what it says instead (``new_flag``, its help)."""
    replacement = keywords.get("new_flag")
    new = (
        replacement.value
        if isinstance(replacement, ast.Constant) and isinstance(replacement.value, str)
        else None
    )
    marked = (
        (action is not None and "deprecat" in action.lower())
        or (help_ is not None and bool(_DEPRECATED_HELP.match(help_)))
        or _is_true(keywords.get("deprecated"))
    )
    if not marked:
        return None
    if new:
        return f"deprecated: use {new}"
    return "deprecated" + (f": {help_}" if help_ else "")


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


@dataclass
class Registration:
    """One ``add_argument`` call: its option strings and keyword arguments."""

    options: tuple[str, ...]
    keywords: dict[str, ast.expr]
    site: Site
    module: str

    @property
    def dest(self) -> str | None:
        dest = self.keywords.get("dest")
        if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
            return dest.value
        longs = [o for o in self.options if o.startswith("--")]
        chosen = longs[0] if longs else (self.options[0] if self.options else None)
        return field_of_option(chosen) if chosen else None


def module_lists(tree: ast.AST) -> dict[str, ast.List]:
    """The module's lists of strings by name (``ATTENTION_BACKEND_CHOICES = ["triton", ...]``,
    ``[*QUANTIZATION_CHOICES, "unquant"]`` spreading one found before), so ``choices=NAME``
    reads as the literal it names."""
    found: dict[str, ast.List] = {}
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, strings = stmt.targets[0], spread_strings(stmt.value, found)
            if isinstance(target, ast.Name) and strings is not None:
                found[target.id] = strings
    return found


def spread_strings(node: ast.expr | None, lists: dict[str, ast.List]) -> ast.List | None:
    """``NAME`` or ``[*NAME, "x"]`` of the module's ``lists`` as one list of strings; None when
    any part of it is not known here."""
    if isinstance(node, ast.Name):
        return lists.get(node.id)
    if not isinstance(node, ast.List | ast.Tuple):
        return None
    elements: list[ast.expr] = []
    for element in node.elts:
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            elements.append(element)
        elif isinstance(element, ast.Starred) and isinstance(element.value, ast.Name):
            named = lists.get(element.value.id)
            if named is None:
                return None
            elements.extend(named.elts)
        else:
            return None
    return ast.List(elts=elements, ctx=ast.Load())


def registrations(tree: ast.AST, path: str, module: str) -> list[Registration]:
    """Every ``<parser>.add_argument("--x", ...)`` call in a module."""
    found: list[Registration] = []
    lists = module_lists(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and call_name(node.func) == "add_argument":
            options = tuple(
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.startswith("-")
            )
            if not options:
                continue
            keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
            spread = spread_strings(keywords.get("choices"), lists)
            if spread is not None:
                keywords["choices"] = spread
            found.append(Registration(options, keywords, Site(path, node.lineno), module))
    return found


def apply_registration(definition: FlagDefinition, registration: Registration, source: str) -> None:
    """Fold an ``add_argument`` call into the field's definition (options, help, choices)."""
    keywords = registration.keywords
    definition.options = tuple(dict.fromkeys([*definition.options, *registration.options]))
    longs = [o for o in definition.options if o.startswith("--")]
    definition.name = cli_name(longs[0] if longs else definition.options[0])
    definition.cli_site = definition.cli_site or registration.site
    help_ = help_text(keywords.get("help"), source)
    if help_:
        definition.help = help_
    choices = literal_strings(keywords.get("choices"))
    if choices:
        definition.choices = choices
    elif "choices" in keywords and not definition.extra.get("choices"):
        definition.extra["choices"] = squeeze(ast.unparse(keywords["choices"]))
    const = keywords.get("const", keywords.get("const_value"))
    if const is not None and len(registration.options) == 1:
        # ``--enable-breakable-cuda-graph``: an alias storing a constant into another field
        definition.extra[f"const {registration.options[0]}"] = (
            f"{registration.module}|{ast.unparse(const)}"
        )
    if definition.type_text is None and "type" in keywords:
        definition.type_text = squeeze(ast.unparse(keywords["type"]))
    action = keywords.get("action")
    action_text = ast.unparse(action) if action is not None else None
    if action_text and definition.type_text is None:
        definition.type_text = "bool" if "store_true" in action_text else action_text
    if definition.default is None and "default" in keywords:
        definition.default = ast.unparse(keywords["default"])
        definition.default_text = squeeze(definition.default)
        definition.module = registration.module
    note = deprecation(help_, action_text, keywords)
    if note:
        definition.deprecated = note
