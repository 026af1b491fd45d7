"""The analysis of one engine build that does not depend on the arch, model or flags: every
flag's definition, every read and change of a flag with its conditions, the import graph.

Built once per wheel (minutes of CPU spread over worker processes), then cached by the wheel's
hash (``cache``); evaluating it for an arch and a model (``verdicts``) takes seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .access import AccessModel
from .definitions import FlagDefinition
from .model import CallSite, ImportSite, ModuleSummary, ReadSite, Site, StoreSite
from .pysource import module_name, scan_imports
from .scan import scan_source
from .sources import EngineSource
from .world import BindingSpec

#: A name defined more often than this in the package: its calls are not told apart (nor kept).
MAX_HOMONYMS = 3

#: Callers followed up from a read (a function's caller's caller...).
CALL_DEPTH = 8

#: Callers up from a read whose names make a file that names no flag parsed for its calls (the
#: reading function's callers, and theirs: a factory and who calls the factory).
CALL_PASS_DEPTH = 1
#: A name found in more files that name no flag than this does not make them parsed.
CALL_PASS_FILES = 8

#: Bump when what the index holds changes: older cache entries are then ignored.
INDEX_FORMAT = 55


@dataclass
class VersionIndex:
    engine: str
    version: str
    key: str  # the source's identity (the wheel's sha256)
    definitions: dict[str, FlagDefinition]
    access: AccessModel
    paths: dict[str, str] = field(default_factory=dict)  # module -> path
    reads: dict[str, list[ReadSite]] = field(default_factory=dict)
    stores: dict[str, list[StoreSite]] = field(default_factory=dict)
    mentions: dict[str, list[Site]] = field(default_factory=dict)
    importers: dict[str, list[ImportSite]] = field(default_factory=dict)
    entry_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tables: dict[str, dict[str, list[BindingSpec]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: who calls (or names as a value) each function or class of the package, by its name
    calls: dict[str, list[CallSite]] = field(default_factory=dict)
    #: how many functions and classes of the package have each name (a call by a name defined
    #: many times cannot be told apart)
    defined: dict[str, int] = field(default_factory=dict)
    #: names used as values somewhere or registered by a decorator (``ModuleSummary.named``)
    named: set[str] = field(default_factory=set)
    #: a function's return annotation by the function's name ("": its definitions disagree)
    returns: dict[str, str] = field(default_factory=dict)
    #: each class's bases by the class's name (every class of that name: their union)
    bases: dict[str, set[str]] = field(default_factory=dict)
    #: the modules that define a class of each name
    class_modules: dict[str, list[str]] = field(default_factory=dict)
    #: ``module:X`` -> the functions of the module reading the global ``X`` its functions set
    global_readers: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    #: ``model_type`` -> (module, class) of the package's config classes declaring it
    model_types: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    format: int = INDEX_FORMAT

    def lineage(self, class_name: str) -> set[str]:
        """The class and every class it derives from, by name (a call on an object typed as
        one of these may run the class's own method)."""
        found, frontier = {class_name}, [class_name]
        while frontier and len(found) < 64:
            for base in self.bases.get(frontier.pop(), ()):
                if base not in found:
                    found.add(base)
                    frontier.append(base)
        return found

    def receiver_class(self, receiver: str | None) -> str | None:
        """A call site's receiver as a class name: ``"f()"`` is what ``f`` is annotated to
        return, when every ``f`` of the package agrees."""
        if receiver is None or not receiver.endswith("()"):
            return receiver
        return self.returns.get(receiver[:-2]) or None

    def flag(self, name: str) -> FlagDefinition | None:
        """A flag by CLI spelling (``--tp-size``, ``tp-size``) or field name (``tp_size``)."""
        wanted = name.strip().lstrip("-")
        as_field = wanted.replace("-", "_")
        if as_field in self.definitions:
            return self.definitions[as_field]
        for definition in self.definitions.values():
            if any(option.lstrip("-") == wanted for option in definition.options):
                return definition
        # argparse takes an unambiguous prefix of a long option (``--tp`` for ``--tp-size``)
        matches = {
            id(d): d
            for d in self.definitions.values()
            for option in d.options
            if option.startswith("--") and option[2:].startswith(wanted)
        }
        return next(iter(matches.values())) if len(matches) == 1 else None

    def cli_flags(self) -> list[FlagDefinition]:
        return sorted((d for d in self.definitions.values() if d.cli), key=lambda d: d.name)


def markers(model: AccessModel) -> list[bytes]:
    """Byte strings at least one of which a file must hold to read a flag."""
    words = set(model.distinctive) | set(model.names) | {s for s, _ in model.suffixes}
    words |= {name + "(" for name in model.getters} | set(model.dict_suffixes)
    return sorted(word.encode() for word in words if word)


def _scan_chunk(items: list[tuple[str, bytes]], model: AccessModel) -> list[ModuleSummary]:
    import ahocorasick_rs  # a project dependency; imported in the worker

    finder = ahocorasick_rs.BytesAhoCorasick(markers(model))
    out = []
    for path, data in items:
        if model.in_arg_layer(path) or finder.find_matches_as_indexes(data):
            out.append(scan_source(path, data, model))
        else:
            out.append(scan_imports(path, data))
    return out


def _chunks(items: list[tuple[str, bytes]], count: int) -> list[list[tuple[str, bytes]]]:
    # Big files first, dealt round-robin, so the workers finish together.
    ordered = sorted(items, key=lambda item: len(item[1]), reverse=True)
    return [ordered[i::count] for i in range(count)]


def _parse_chunk(items: list[tuple[str, bytes]], model: AccessModel) -> list[ModuleSummary]:
    return [scan_source(path, data, model) for path, data in items]


def _run(
    chunk_function: Callable[[list[tuple[str, bytes]], AccessModel], list[ModuleSummary]],
    items: list[tuple[str, bytes]],
    model: AccessModel,
    workers: int | None,
) -> list[ModuleSummary]:
    count = max(1, min(workers or os.cpu_count() or 1, 8))
    if count == 1 or len(items) < 200:
        return chunk_function(items, model)
    with ProcessPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(chunk_function, chunk, model) for chunk in _chunks(items, count * 4)]
        return [summary for future in futures for summary in future.result()]


def scan_all(
    source: EngineSource, model: AccessModel, workers: int | None = None
) -> list[ModuleSummary]:
    """Every file: parsed where it names a flag, its imports only elsewhere; then parsed too,
    for its calls, a file that names a function or class on a read's path (a factory that
    returns the class reading the flag names no flag itself)."""
    items = [(path, source.read(path)) for path in source.paths()]
    summaries = _run(_scan_chunk, items, model, workers)
    wanted = path_names(summaries, CALL_PASS_DEPTH)
    if not wanted:
        return summaries
    import ahocorasick_rs

    finder = ahocorasick_rs.BytesAhoCorasick(
        sorted(name.encode() for name in wanted),
        matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_LONGEST,
    )
    by_path = {s.path: i for i, s in enumerate(summaries)}
    named: list[tuple[str, bytes, set[int]]] = []
    files_naming: dict[int, int] = {}
    for path, data in items:
        summary = summaries[by_path[path]]
        if summary.table is not None or summary.error:
            continue
        found = _words(finder, data)
        if found:
            named.append((path, data, found))
            for name in found:
                files_naming[name] = files_naming.get(name, 0) + 1
    # A name in many files (``launch``, ``ForwardBatch`` in signatures) is everyone's: parsing
    # them all would double the scan for calls that cannot be told apart anyway.
    again = [
        (path, data)
        for path, data, found in named
        if any(files_naming[name] <= CALL_PASS_FILES for name in found)
    ]
    for summary in _run(_parse_chunk, again, model, workers):
        summaries[by_path[summary.path]] = summary
    return summaries


def _words(finder: Any, data: bytes) -> set[int]:
    """The finder's names in ``data`` as whole identifiers (by their index)."""
    found: set[int] = set()
    for name, start, end in finder.find_matches_as_indexes(data):
        before = data[start - 1 : start] if start else b" "
        after = data[end : end + 1] or b" "
        if not (before.isalnum() or before == b"_" or after.isalnum() or after == b"_"):
            found.add(name)
    return found


def path_names(summaries: list[ModuleSummary], depth: int = CALL_DEPTH) -> set[str]:
    """The functions and classes that read a flag, and their callers ``depth`` up, whose name
    is defined a few times at most (the rest cannot be told apart by name)."""
    defined: dict[str, int] = {}
    calls: list[CallSite] = []
    wanted: set[str] = set()
    for summary in summaries:
        for name in summary.defined:
            defined[name] = defined.get(name, 0) + 1
        calls.extend(summary.calls)
        for read in summary.reads:
            wanted |= _names_of((read.scope.function, read.scope.class_name))
    by_callee: dict[str, list[CallSite]] = {}
    for call in calls:
        by_callee.setdefault(call.callee, []).append(call)
    wanted = _with_callers(wanted, by_callee, depth)
    return {name for name in wanted if 0 < defined.get(name, 0) <= MAX_HOMONYMS and len(name) > 5}


def build_index(
    source: EngineSource,
    definitions: dict[str, FlagDefinition],
    model: AccessModel,
    workers: int | None = None,
) -> VersionIndex:
    index = VersionIndex(source.engine, source.version, source.key, definitions, model)
    add_summaries(index, scan_all(source, model, workers))
    index.paths = {module_name(path): path for path in source.paths()}
    return index


def add_summaries(index: VersionIndex, summaries: Iterable[ModuleSummary]) -> None:
    calls: list[CallSite] = []
    summaries = list(summaries)
    # an attribute the engine derives from a flag and something else is not the flag: its
    # loose reads (by the flag's name on any object) are dropped; the flag's read where the
    # value is derived stands, gated by what it is combined with
    derived = set().union(*(s.derived for s in summaries))
    for summary in summaries:
        for name in summary.defined:
            index.defined[name] = index.defined.get(name, 0) + 1
        index.named |= summary.named
        for name, returned in summary.returns.items():
            index.returns[name] = returned if index.returns.get(name, returned) == returned else ""
        for name, bases in summary.bases.items():
            index.bases.setdefault(name, set()).update(bases)
            index.class_modules.setdefault(name, []).append(summary.module)
        calls.extend(summary.calls)
        if summary.error:
            index.errors[summary.path] = summary.error
        for read in summary.reads:
            if read.strict or read.form.rpartition(".")[2] not in derived:
                index.reads.setdefault(read.flag, []).append(read)
        for model_type, classes in summary.model_types.items():
            index.model_types.setdefault(model_type, []).extend(
                (summary.module, name) for name in classes
            )
        for name, readers in summary.global_loads.items():
            index.global_readers[f"{summary.module}:{name}"] = readers
        for store in summary.stores:
            index.stores.setdefault(store.flag, []).append(store)
        for flag, sites in summary.mentions.items():
            index.mentions.setdefault(flag, []).extend(sites)
        for site in summary.imports:
            index.importers.setdefault(site.target, []).append(site)
        if summary.table is not None:
            index.tables[summary.module] = summary.table
        if summary.entry_classes:
            index.entry_classes[summary.module] = summary.entry_classes
    keep_calls(index, calls)


def _with_callers(names: set[str], by_callee: dict[str, list[CallSite]], depth: int) -> set[str]:
    """``names`` and the functions and classes that call them, ``depth`` callers up."""
    wanted, frontier = set(names), set(names)
    for _ in range(depth):
        found: set[str] = set()
        for name in frontier:
            for call in by_callee.get(name, ()):
                found |= _names_of((call.function, call.class_name))
        frontier = found - wanted
        wanted |= found
    return wanted


def _names_of(module_function: tuple[str, str | None]) -> set[str]:
    function, class_name = module_function
    names = {class_name} if class_name else set()
    if function != "<module>":
        names.add(function.split(".")[-1])
    return names


def keep_calls(index: VersionIndex, calls: list[CallSite]) -> None:
    """Keep the calls a read's path may go through: of the functions and classes that read a
    flag, of their callers, up to ``CALL_DEPTH`` callers up (the rest is never asked about)."""
    by_callee: dict[str, list[CallSite]] = {}
    for call in calls:  # a name defined many times cannot be told apart: not kept, unless
        # the call is on ``self`` (a method of the caller's own class: told apart by its class)
        # or its object's class is known (``self.model_runner.load_model()``)
        if 0 < index.defined.get(call.callee, 0) <= MAX_HOMONYMS or call.on_self or call.receiver:
            by_callee.setdefault(call.callee, []).append(call)
    wanted: set[str] = set()
    for reads in index.reads.values():
        for read in reads:
            wanted |= _names_of((read.scope.function, read.scope.class_name))
    # a global a flag's value is stored in is used where it is read: those functions' callers
    carried = {
        f"{read.scope.module}:{read.carried}"
        for reads in index.reads.values()
        for read in reads
        if read.carried is not None
    }
    for key in carried:
        for module_function in index.global_readers.get(key, []):
            wanted |= _names_of(module_function)
    # a module imported inside a function is loaded when the function runs: its callers too
    for sites in index.importers.values():
        for site in sites:
            if site.function is not None:
                wanted.add(site.function.split(".")[-1])
    wanted = _with_callers(wanted, by_callee, CALL_DEPTH)
    index.calls = {name: by_callee[name] for name in sorted(wanted) if name in by_callee}
