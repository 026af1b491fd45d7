"""The engines' own log statements, read from their source with ``ast`` (never imported).

What a reader of logs must know is what the engine can print: this module finds, in an engine's
wheel, every ``logger.error`` / ``exception`` / ``critical`` / ``warning`` call and every
``raise X("...")`` in the modules its server reaches by import from its entry points, as a
format template; ``synthesize`` writes a line from each in the engine's real format, with
plausible values in the placeholders. ``engine_coverage`` (the test and the docs' figures) feeds
each line to the reader and counts what it made of it.
"""

from __future__ import annotations

import ast
import re
import warnings
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_LEVELS = {
    "error": "error",
    "exception": "error",
    "critical": "error",
    "fatal": "error",
    "error_once": "error",
    "warning": "warning",
    "warn": "warning",
    "warning_once": "warning",
}
_LOGGER_NAME_RE = re.compile(r"^_?(?:logger|log|LOGGER|LOG|logging)$|_logger$")
_PERCENT_RE = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifgexXc%]")

#: Each engine's server entry points (the modules ``launch_server`` / ``vllm serve`` run) and the
#: packages left out of its reach (tests, benchmarks, the diffusion server).
ENTRY_POINTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sglang": (
        (
            "sglang.launch_server",
            "sglang.srt.entrypoints.http_server",
            "sglang.srt.managers.scheduler",
        ),
        ("sglang.test", "sglang.benchmark", "sglang.bench", "sglang.multimodal_gen"),
    ),
    "vllm": (
        (
            "vllm.entrypoints.cli.main",
            "vllm.entrypoints.openai.api_server",
            "vllm.v1.engine.core",
        ),
        ("vllm.benchmarks", "vllm.tests"),
    ),
}


@dataclass(frozen=True)
class Statement:
    """One statement: ``path`` and ``line`` in the package, ``kind`` ``log`` or ``raise``,
    ``level`` ``error`` / ``warning``, the ``template`` (``{}`` for each placeholder; ``{d}``,
    ``{f}`` ... for a %-format's type), the source of each placeholder, the exception class of a
    ``raise``, and whether the call prints a traceback (``logger.exception``, ``exc_info``)."""

    path: str
    line: int
    kind: str
    level: str
    template: str
    placeholders: tuple[str, ...] = ()
    exc_class: str | None = None
    traceback: bool = False
    #: What the source does right after a log call: ``raise`` (the exception that follows, as
    #: ``Class: message``) or ``exit`` (``sys.exit`` / ``os._exit``); ``None`` when it goes on.
    then: str | None = None

    @property
    def dynamic(self) -> bool:
        """True when the message is computed elsewhere (``logger.error(msg)``): no text to test."""
        return not re.sub(r"\{[^{}]*\}", "", self.template).strip(" ,:.;-\n")


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _percent(text: str, args: list[ast.expr]) -> tuple[str, list[str]]:
    out, names, i, pos = [], [], 0, 0
    for m in _PERCENT_RE.finditer(text):
        out.append(_escape(text[pos : m.start()]))
        pos = m.end()
        if m.group() == "%%":
            out.append("%")
            continue
        names.append(ast.unparse(args[i]) if i < len(args) else "")
        out.append("{" + m.group()[-1] + "}")
        i += 1
    out.append(_escape(text[pos:]))
    return "".join(out), names


def template_of(
    node: ast.expr, assigned: Mapping[str, ast.expr] | None = None
) -> tuple[str, list[str]] | None:
    """(template, placeholder sources) of a message expression; ``None`` when it is no string.
    A name assigned a string earlier in the same function (``msg = f"..."``) is followed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escape(node.value), []
    if isinstance(node, ast.Name) and assigned and node.id in assigned:
        return template_of(assigned[node.id])
    if isinstance(node, ast.JoinedStr):
        parts, names = [], []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(_escape(str(value.value)))
            elif isinstance(value, ast.FormattedValue):
                names.append(ast.unparse(value.value))
                parts.append("{}")
        return "".join(parts), names
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template_of(node.left, assigned), template_of(node.right, assigned)
        if left is None and right is None:
            return None
        left = left or ("{}", [ast.unparse(node.left)])
        right = right or ("{}", [ast.unparse(node.right)])
        return left[0] + right[0], left[1] + right[1]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return _percent(node.left.value, list(args))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        base = template_of(node.func.value, assigned)
        if base is not None:
            text = re.sub(r"(?<!\{)\{[^{}]*\}(?!\})", "{}", base[0])
            names = [ast.unparse(a) for a in node.args] + [k.arg or "" for k in node.keywords]
            return text, names
    return None


def _exits(node: ast.stmt) -> bool:
    call = node.value if isinstance(node, ast.Expr) else None
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and (call.func.value.id, call.func.attr) in (("sys", "exit"), ("os", "_exit"))
    )


class _Finder(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Statement] = []
        self.assigned: list[dict[str, ast.expr]] = [{}]
        self.then: dict[int, str] = {}  # a log call's line -> what its block does next

    def generic_visit(self, node: ast.AST) -> None:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                self._note_then(block)
        super().generic_visit(node)

    def _note_then(self, block: list[ast.stmt]) -> None:
        for stmt, after in zip(block, block[1:], strict=False):
            if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                continue
            if isinstance(after, ast.Raise) and after.exc is not None:
                self.then[stmt.value.lineno] = "raise"
            elif _exits(after):
                self.then[stmt.value.lineno] = "exit"

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.assigned.append({})
        self.generic_visit(node)
        self.assigned.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if template_of(node.value) is not None:
                self.assigned[-1][node.targets[0].id] = node.value
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _LEVELS
            and isinstance(func.value, ast.Name)
            and _LOGGER_NAME_RE.search(func.value.id)
            and node.args
        ):
            first = node.args[0]
            if (
                len(node.args) > 1
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                text, names = _percent(first.value, list(node.args[1:]))
            else:
                text, names = template_of(first, self.assigned[-1]) or ("{}", [ast.unparse(first)])
            traceback = func.attr == "exception" or any(
                k.arg == "exc_info"
                and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords
            )
            self.found.append(
                Statement(
                    self.path,
                    node.lineno,
                    "log",
                    _LEVELS[func.attr],
                    text,
                    tuple(names),
                    None,
                    traceback,
                    self.then.get(node.lineno),
                )
            )
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = (
                exc.func.id if isinstance(exc.func, ast.Name) else getattr(exc.func, "attr", None)
            )
            if name and name[:1].isupper():
                if exc.args:
                    text, names = template_of(exc.args[0], self.assigned[-1]) or (
                        "{}",
                        [ast.unparse(exc.args[0])],
                    )
                else:
                    text, names = "", []
                self.found.append(
                    Statement(self.path, node.lineno, "raise", "error", text, tuple(names), name)
                )
        self.generic_visit(node)


def statements_of(path: str, source: str) -> list[Statement]:
    """The statements of one module's ``source`` (none when it does not parse)."""
    try:
        with warnings.catch_warnings():  # the engine's own invalid escapes are not our warnings
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    finder = _Finder(path)
    finder.visit(tree)
    return finder.found


def _imports(source: str, module: str, is_package: bool) -> set[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.add(name)
            out.update(f"{name}.{alias.name}" for alias in node.names)
    return out


def reachable(
    sources: Mapping[str, str], entries: Iterable[str], exclude: tuple[str, ...]
) -> list[str]:
    """The files of ``sources`` (path in the wheel -> text) that the ``entries`` modules reach by
    import, lazy imports inside functions included, leaving out packages under ``exclude``."""
    by_module: dict[str, tuple[str, bool]] = {}
    for path in sources:
        if path.endswith("/__init__.py"):
            by_module[path[: -len("/__init__.py")].replace("/", ".")] = (path, True)
        elif path.endswith(".py"):
            by_module[path[:-3].replace("/", ".")] = (path, False)
    top = {module.split(".")[0] for module in entries}
    seen: dict[str, str] = {}
    todo = list(entries)
    while todo:
        module = todo.pop()
        if module in seen or module.split(".")[0] not in top or module.startswith(exclude):
            continue
        if module not in by_module:
            continue
        path, is_package = by_module[module]
        seen[module] = path
        parent = module.rpartition(".")[0]
        if parent:
            todo.append(parent)
        todo.extend(_imports(sources[path], module, is_package))
    return sorted(set(seen.values()))


def wheel_sources(wheel: Path) -> dict[str, str]:
    """Every ``.py`` file of a wheel, path -> text (read from the zip: nothing is unpacked)."""
    with zipfile.ZipFile(wheel) as zf:
        return {
            name: zf.read(name).decode("utf-8", errors="replace")
            for name in zf.namelist()
            if name.endswith(".py")
        }


def engine_statements(engine: str, sources: Mapping[str, str]) -> list[Statement]:
    """Every statement on ``engine``'s start and serving paths (see ``ENTRY_POINTS``)."""
    entries, exclude = ENTRY_POINTS[engine]
    out: list[Statement] = []
    for path in reachable(sources, entries, exclude):
        out += statements_of(path, sources[path])
    return out


# --- a line from a statement ----------------------------------------------------------------

_ERRORISH_NAME_RE = re.compile(
    r"(?:^|[^a-z])(?:e|exc|err|error|ex|exception)(?:$|[^a-z])|traceback|str\(e\)"
)


def fill(template: str, placeholders: Iterable[str]) -> str:
    """``template`` with a plausible value in each placeholder, chosen by the placeholder's
    source: an exception's text for ``e`` / ``exc``, a number for counts and sizes, a path for
    paths, a word otherwise."""
    names = list(placeholders)
    index = 0

    def value(m: re.Match[str]) -> str:
        nonlocal index
        name = (names[index] if index < len(names) else "").lower()
        index += 1
        kind = m.group(1)
        if _ERRORISH_NAME_RE.search(name):
            return "ValueError: bad value"
        if kind in ("d", "i") or re.search(r"num|count|size|len|port|rank|pid|idx|\bn\b", name):
            return "3"
        if kind in ("f", "g", "e") or re.search(r"time|elapsed|sec|frac|ratio", name):
            return "0.50"
        if re.search(r"path|file|dir", name):
            return "/models/m/config.json"
        return "x"

    text = re.sub(r"(?<!\{)\{([a-zA-Z]?)\}(?!\})", value, template)
    return text.replace("{{", "{").replace("}}", "}")


#: Each engine's line prefix, as its default logging setup prints it, by level.
def prefixed(engine: str, level: str, message: str) -> list[str]:
    """``message`` (maybe several lines) as ``engine`` logs it at ``level``: SGLang's
    ``[ts TP0]`` on the first line only, vLLM's tag and header on every line."""
    lines = message.split("\n")
    if engine == "sglang":
        return [f"[2026-05-01 10:00:00 TP0] {lines[0]}", *lines[1:]]
    head = f"(EngineCore_DP0 pid=7) {level.upper()} 05-01 10:00:00 [core.py:100] "
    return [head + line for line in lines]


def synthesize(engine: str, statement: Statement) -> list[str]:
    """The log lines ``statement`` prints in ``engine``'s format: a log call's message (and a
    traceback of a ``RuntimeError`` for ``logger.exception``), or a raised exception as the last
    line of an uncaught traceback."""
    message = fill(statement.template, statement.placeholders)
    tb = [
        "Traceback (most recent call last):",
        '  File "/srv/engine/module.py", line 10, in run',
        "    step()",
    ]
    if statement.kind == "raise":
        text = f"{statement.exc_class}: {message}" if message else str(statement.exc_class)
        return [*tb, *text.split("\n")]
    if statement.traceback:
        lines = prefixed(
            engine, statement.level, "\n".join([message, *tb, "RuntimeError: bad value"])
        )
    else:
        lines = prefixed(engine, statement.level, message)
    if statement.then == "raise":
        # the exception raised next reaches the log the way the engine reports a worker's
        # uncaught exception: SGLang's "Scheduler hit an exception: <traceback>", vLLM's
        # "EngineCore encountered a fatal error." with the traceback
        error = "RuntimeError: " + message.split("\n")[0]
        if engine == "sglang":
            lines += prefixed(
                engine, "error", "\n".join(["Scheduler hit an exception: " + tb[0], *tb[1:], error])
            )
        else:
            lines += prefixed(
                engine, "error", "\n".join(["EngineCore encountered a fatal error.", *tb, error])
            )
    return lines
