"""The engine's modules as the evaluator needs them: what each top-level name of a module is
bound to, under which top-level conditions, and the code of a function when it is called.

``if _is_cuda: from x import f`` / ``else: f = None`` gives ``f`` two bindings, each with its
condition; the evaluator picks the one whose conditions hold for the target (``interpreter``).

The index keeps each scanned module's table as text spans (``BindingSpec``), so a module is
not parsed again to look a name up: only the one statement needed is (a function when it is
called). Modules the index did not scan are parsed whole on first use.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class CondSpec:
    source: str | None  # None: "an exception was raised" (an except block)
    negate: bool


@dataclass(frozen=True, slots=True)
class BindingSpec:
    kind: str  # assign | initialized | def | class | import | star | unknown
    start: int  # the statement's first line (its decorators included)
    end: int
    conditions: tuple[CondSpec, ...]
    value: str | None = None  # assign: the value as written
    target: str | None = None  # import: the module; star: the module; initialized: the function
    attribute: str | None = None  # ``from m import a``: a


@dataclass(frozen=True)
class Condition:
    expr: ast.expr | None
    negate: bool


@dataclass
class Binding:
    kind: str
    module: str
    spec: BindingSpec
    conditions: tuple[Condition, ...]
    target: str | None = None
    attribute: str | None = None
    _node: ast.AST | None = None
    _world: World | None = None

    @property
    def node(self) -> ast.AST | None:
        if self._node is None and self._world is not None:
            self._node = self._world.node_of(self.module, self.spec)
        return self._node


@lru_cache(maxsize=8192)
def parse_expression(source: str) -> ast.expr:
    """An expression recorded as source text, parsed again (in parentheses: it may span lines)."""
    return ast.parse("(" + source + "\n)", mode="eval").body


@dataclass
class Parsed:
    """What was read and parsed of one build: the same for every target and flag, so every
    analysis of the build shares it (the analysis never changes a tree)."""

    texts: dict[str, str] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=dict)
    trees: dict[str, ast.Module | None] = field(default_factory=dict)
    nodes: dict[tuple[str, int, int], ast.AST | None] = field(default_factory=dict)


#: by the build (where it was read from and its key), the most recent few: a second analysis of a build
#: (another flag, another target, the MCP server's next call) parses nothing again. Parsing the
#: functions it calls was half of a one-flag analysis' CPU time (docs/performance.md).
_PARSED: OrderedDict[str, Parsed] = OrderedDict()
_PARSED_KEPT = 2


def parsed(key: str) -> Parsed:
    found = _PARSED.pop(key, None) or Parsed()
    _PARSED[key] = found
    while len(_PARSED) > _PARSED_KEPT:
        _PARSED.popitem(last=False)
    return found


class World:
    """One engine build's modules, read from its source on demand."""

    def __init__(
        self,
        read: Callable[[str], bytes | None],
        paths: dict[str, str],
        tables: dict[str, dict[str, list[BindingSpec]]] | None = None,
        installed: frozenset[str] = frozenset(),
        shared: Parsed | None = None,
    ) -> None:
        self._read = read
        #: import names of what the engine's wheel requires on a Linux x86-64 GPU host
        self.installed = installed
        self.paths = paths  # module -> path
        self.tables = tables or {}
        self._parsed = shared if shared is not None else Parsed()
        self._trees = self._parsed.trees
        self._texts = self._parsed.texts
        self._lines = self._parsed.lines
        self._bindings: dict[str, dict[str, list[Binding]]] = {}
        self.package = next(iter(paths), "").split(".")[0]

    def has_module(self, name: str) -> bool:
        return name in self.paths

    def path(self, module: str) -> str:
        return self.paths.get(module, module.replace(".", "/") + ".py")

    def text(self, module: str) -> str:
        if module not in self._texts:
            path = self.paths.get(module)
            data = self._read(path) if path else None
            try:
                self._texts[module] = data.decode("utf-8") if data is not None else ""
            except UnicodeDecodeError:
                self._texts[module] = ""
        return self._texts[module]

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            text = self.text(module)
            try:
                self._trees[module] = ast.parse(text, filename=self.path(module)) if text else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._trees[module] = None
        return self._trees[module]

    def bindings(self, module: str) -> dict[str, list[Binding]]:
        if module not in self._bindings:
            table = self.tables.get(module)
            if table is None:
                tree = self.tree(module)
                table = binding_table(tree, module, self.path(module)) if tree is not None else {}
            self._bindings[module] = {
                name: [self._binding(module, spec) for spec in specs]
                for name, specs in table.items()
            }
        return self._bindings[module]

    def _binding(self, module: str, spec: BindingSpec) -> Binding:
        conditions = tuple(
            Condition(parse_expression(c.source) if c.source is not None else None, c.negate)
            for c in spec.conditions
        )
        return Binding(spec.kind, module, spec, conditions, spec.target, spec.attribute, None, self)

    def node_of(self, module: str, spec: BindingSpec) -> ast.AST | None:
        """The statement a binding comes from, parsed alone (line numbers kept)."""
        if spec.kind in ("assign", "initialized") and spec.value is not None:
            return parse_expression(spec.value)
        if spec.kind not in ("def", "class"):
            return None
        key = (module, spec.start, spec.end)
        if key not in self._parsed.nodes:
            self._parsed.nodes[key] = self._statement(module, spec)
        return self._parsed.nodes[key]

    def _statement(self, module: str, spec: BindingSpec) -> ast.AST | None:
        tree = self._trees.get(module)
        if tree is not None:  # parsed whole already: take the node from it
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                    _first_line(node) == spec.start
                ):
                    return node
        lines = self._lines.get(module)
        if lines is None:
            lines = self.text(module).splitlines(keepends=True)
            self._lines[module] = lines
        snippet = "".join(lines[spec.start - 1 : spec.end])
        # Blank lines in front keep the statement's line numbers; ``if True:`` lets an
        # indented one (under a top-level ``if``) parse with its columns unchanged.
        try:
            wrapper = ast.parse("\n" * (spec.start - 2) + "if True:\n" + snippet)
        except (RecursionError, MemoryError):
            return None
        except SyntaxError:
            try:
                wrapper = ast.parse("\n" * (spec.start - 1) + snippet)
            except (SyntaxError, RecursionError, MemoryError):
                return None
            return wrapper.body[0] if wrapper.body else None
        first = wrapper.body[0]
        return first.body[0] if isinstance(first, ast.If) and first.body else None

    def find_class(self, module: str, name: str) -> ast.ClassDef | None:
        for binding in self.bindings(module).get(name, []):
            node = binding.node
            if binding.kind == "class" and isinstance(node, ast.ClassDef):
                return node
        return None


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def binding_table(tree: ast.Module, module: str, path: str) -> dict[str, list[BindingSpec]]:
    table: dict[str, list[BindingSpec]] = {}
    for name, spec in _top_bindings(tree.body, (), module, path):
        table.setdefault(name, []).append(spec)
    # A module variable a function rebinds (``global _INITIALISED``) holds its first value
    # only until that function runs: unknown, unless one function sets it at its top level and
    # any other only fills it in when unset (``initialized``, below).
    rebound = [node for node in ast.walk(tree) if isinstance(node, ast.Global)]
    # most modules rebind none: their functions are looked into only where one does
    initialized = _initialized_globals(tree, rebound) if rebound else {}
    for node in rebound:
        for name in node.names:
            spec = initialized.get(name) or BindingSpec("unknown", node.lineno, node.lineno, ())
            if spec not in table.setdefault(name, []):
                table[name].append(spec)
    return table


def _initialized_globals(tree: ast.Module, rebound: list[ast.Global]) -> dict[str, BindingSpec]:
    """The module variables one function sets from the start-up state: ``global
    MOE_A2A_BACKEND; MOE_A2A_BACKEND = MoeA2ABackend(server_args.moe_a2a_backend)`` in SGLang's
    ``initialize_moe_config(server_args)``, which the scheduler runs once per process before
    the model is built. Read after that (a getter, a layer), the variable holds that value,
    where its first value (None) said nothing. Why so narrow: the assignment is a statement of
    the function's own body, the only one of the name there, and another function may only
    set it under a test of the name itself (a getter's ``if X is None: X = default``)."""
    found: dict[str, list[tuple[str, set[str], ast.Assign]]] = {}
    spoiled: set[str] = set()
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    declared: dict[int, set[str]] = {}  # the innermost function of each ``global``
    for statement in rebound:
        line = statement.lineno
        around = [f for f in functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
        if around:
            inner = max(around, key=lambda f: f.lineno)
            declared.setdefault(id(inner), set()).update(statement.names)
    for function in functions:
        names = declared.get(id(function), set()) - _swapped_back(function)
        if not names:
            continue
        top = {id(stmt) for stmt in function.body}
        guarded = {
            id(inner)
            for stmt in ast.walk(function)
            if isinstance(stmt, ast.If)
            for inner in ast.walk(stmt)
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt.test))
        }
        params = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        local = {n for node in ast.walk(function) for n in _stored_names(node)} - names
        for node in ast.walk(function):
            for name in _stored_names(node) & names:
                single = isinstance(node, ast.Assign) and len(node.targets) == 1
                if single and id(node) in top:
                    used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}  # type: ignore[attr-defined]
                    if used & local:  # a local of the function: not evaluated here
                        spoiled.add(name)
                    found.setdefault(name, []).append((function.name, params & used, node))  # type: ignore[arg-type]
                elif not (single and id(node) in guarded):
                    spoiled.add(name)
    return {
        name: BindingSpec(
            "initialized",
            node.lineno,
            node.end_lineno or node.lineno,
            (),
            ast.unparse(node.value),
            target=function_name,
            attribute=",".join(sorted(params)),  # its parameters: the start-up state's holders
        )
        for name, sets in found.items()
        if len(sets) == 1 and name not in spoiled
        for function_name, params, node in sets
    }


def _swapped_back(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The variables a context manager sets for its block and puts back in its ``finally``
    (SGLang's ``speculative_moe_a2a_backend_context`` for a draft model): outside the block,
    the value before it."""
    decorators = {ast.unparse(d).split(".")[-1] for d in function.decorator_list}
    if not decorators & {"contextmanager", "asynccontextmanager"}:
        return set()
    return {
        name
        for node in ast.walk(function)
        if isinstance(node, ast.Try)
        for stmt in node.finalbody
        for name in _stored_names(stmt)
    }


def _stored_names(node: ast.AST) -> set[str]:
    """The plain names a statement binds (``X = ...``, ``X += ...``, ``for X in``, ``del X``)."""
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    elif isinstance(node, ast.For | ast.AsyncFor):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _span(stmt: ast.stmt) -> tuple[int, int]:
    start = (
        _first_line(stmt)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        else stmt.lineno
    )
    return start, stmt.end_lineno or stmt.lineno


def _top_bindings(
    body: list[ast.stmt], conditions: tuple[CondSpec, ...], module: str, path: str
) -> Iterator[tuple[str, BindingSpec]]:
    for stmt in body:
        start, end = _span(stmt)
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    yield (
                        target.id,
                        BindingSpec("assign", start, end, conditions, ast.unparse(stmt.value)),
                    )
                elif isinstance(target, ast.Tuple | ast.List):
                    for element in target.elts:
                        if isinstance(element, ast.Name):
                            yield element.id, BindingSpec("unknown", start, end, conditions)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.value is not None:
                yield (
                    stmt.target.id,
                    BindingSpec("assign", start, end, conditions, ast.unparse(stmt.value)),
                )
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            yield stmt.target.id, BindingSpec("unknown", start, end, conditions)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            yield stmt.name, BindingSpec("def", start, end, conditions)
        elif isinstance(stmt, ast.ClassDef):
            yield stmt.name, BindingSpec("class", start, end, conditions)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    yield (
                        alias.asname,
                        BindingSpec("import", start, end, conditions, target=alias.name),
                    )
                else:
                    top = alias.name.split(".")[0]
                    yield top, BindingSpec("import", start, end, conditions, target=top)
        elif isinstance(stmt, ast.ImportFrom):
            base = absolute_module(module, path, stmt.module, stmt.level)
            if base is None:
                continue
            for alias in stmt.names:
                if alias.name == "*":
                    yield "*", BindingSpec("star", start, end, conditions, target=base)
                else:
                    spec = BindingSpec(
                        "import", start, end, conditions, target=base, attribute=alias.name
                    )
                    yield alias.asname or alias.name, spec
        elif isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            yield from _top_bindings(stmt.body, (*conditions, CondSpec(test, False)), module, path)
            yield from _top_bindings(stmt.orelse, (*conditions, CondSpec(test, True)), module, path)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            yield from _top_bindings(stmt.body, conditions, module, path)
            for handler in stmt.handlers:
                yield from _top_bindings(
                    handler.body, (*conditions, CondSpec(None, False)), module, path
                )
            yield from _top_bindings(stmt.orelse, conditions, module, path)
            yield from _top_bindings(stmt.finalbody, conditions, module, path)
        elif isinstance(stmt, ast.With):
            yield from _top_bindings(stmt.body, conditions, module, path)


def absolute_module(module: str, path: str, name: str | None, level: int) -> str | None:
    """The module ``from <level dots><name> import ...`` names, from inside ``module``."""
    if level == 0:
        return name
    parts = module.split(".")
    package = parts if path.endswith("__init__.py") else parts[:-1]
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, name] if name else base)
