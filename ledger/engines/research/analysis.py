"""The research of one engine version for one target: the library call behind
``tuneledger research``.

``open_engine`` finds the source (a wheel, a folder, the installed package, or
``sglang==0.5.23``: a wheel from the wheel folders, else ``pip download --no-deps``);
``load_index`` analyses it, or reads the analysis back from the cache; ``research`` evaluates
it for an arch, a model, a TP size and the flags given.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import InvalidInput, LedgerError, NotFound

from . import cache, sglang_defs, wheels
from .access import AccessModel
from .definitions import FlagDefinition
from .flags_given import GivenFlag, match_flags
from .gates import GateEvaluator
from .index import VersionIndex, build_index
from .optional import absent_kinds
from .reports import FlagReport
from .resolve import ENTRY_POINTS, Resolution, attribute_refusals, new_interpreter, walk
from .resolved_default import mark_picked_anyway, picked_anyway
from .sources import ENGINES, EngineSource, installed_package, open_folder, open_wheel
from .start import refuse_at_start, start_refusal
from .target import Target
from .verdicts import Judge
from .world import World, parsed

#: The flags listed (and recorded) without being given: those that do nothing here whatever
#: else is set. A flag read only behind another flag (``no-op``) is listed when given.
LISTED = ("dead-code", "not-activated", "overridden")

_SPEC = re.compile(r"^([A-Za-z][\w\-]*)==([\w.+\-]+)$")


class DownloadFailed(LedgerError):
    """``pip download`` could not fetch the engine's wheel (offline, or no such version)."""

    exit_code = 5


def wheel_dirs() -> list[Path]:
    configured = os.environ.get("TUNELEDGER_WHEELS")
    dirs = [Path(p) for p in configured.split(os.pathsep) if p] if configured else []
    return [*dirs, cache.cache_dir() / "wheels"]


def find_wheel(distribution: str, version: str, dirs: list[Path]) -> Path | None:
    stem = distribution.replace("-", "_").lower()
    for directory in dirs:
        if not directory.is_dir():
            continue
        for wheel in sorted(directory.glob("*.whl")):
            name, _, rest = wheel.name.partition("-")
            if name.lower() == stem and rest.split("-")[0] == version:
                return wheel
    return None


def download_wheel(distribution: str, version: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "--dest",
        str(directory),
        f"{distribution}=={version}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wheel = find_wheel(distribution, version, [directory])
    if done.returncode != 0 or wheel is None:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise DownloadFailed(f"{distribution}=={version}: pip download failed: {last}")
    return wheel


def fetch_wheel(distribution: str, version: str, directory: Path) -> Path:
    """The wheel in ``directory``, downloaded there unless another process that asked first
    fetched it meanwhile (it holds the lock while it downloads)."""
    with cache.held(directory / f".{distribution}-{version}.lock"):
        return find_wheel(distribution, version, [directory]) or download_wheel(
            distribution, version, directory
        )


def _same_version(found: str, asked: str) -> bool:
    """Whether two version strings name one release (PEP 440: ``0.5.23`` is ``0.5.23.0``)."""
    try:  # (packaging comes with pip; without it, the strings are compared as given)
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return found == asked
    try:
        return Version(found) == Version(asked)
    except InvalidVersion:
        return found == asked


def open_engine(spec: str, engine: str | None = None, download: bool = True) -> EngineSource:
    """An engine's source from ``sglang==0.5.23``, a wheel, a folder, or an installed name."""
    match = _SPEC.match(spec.strip())
    if match:
        distribution, version = match.groups()
        if distribution.lower().replace("_", "-") not in ENGINES:
            raise InvalidInput(f"{spec}: unknown engine (known: {', '.join(sorted(ENGINES))})")
        dirs = wheel_dirs()
        wheel = find_wheel(distribution, version, dirs)
        notes: list[str] = []
        if wheel is None:
            if not download:
                raise NotFound(f"{spec}: no wheel in {', '.join(map(str, dirs))} (and --offline)")
            wheel = fetch_wheel(distribution, version, dirs[-1])  # pip checks its hash
        else:  # found, not fetched: its hash against the index's (a note where it cannot be)
            note = wheels.check_found_wheel(
                wheel, distribution, version, wheels.published_digests if download else None
            )
            notes = [note] if note else []
        source = open_wheel(wheel, distribution)
        source.notes.extend(notes)
        if not _same_version(source.version, version):
            # a wheel under a version's file name that is another build (planted, or renamed)
            raise InvalidInput(
                f"{wheel}: its METADATA says version {source.version}, {spec} was asked: refused"
            )
        return source
    path = Path(spec)
    if path.suffix == ".whl":
        return open_wheel(path, engine)
    if path.is_dir():
        guessed = engine or next(
            (name for name in ("sglang", "vllm") if (path / name).is_dir() or path.name == name),
            None,
        )
        if guessed is None:
            raise InvalidInput(
                f"{spec}: say which engine this folder holds (--engine-name sglang|vllm)"
            )
        return open_folder(path, guessed)
    if spec.lower() in ENGINES:
        return installed_package(spec)
    raise InvalidInput(f"{spec}: not ENGINE==VERSION, a wheel, a folder or an installed engine")


def read_definitions(source: EngineSource) -> tuple[dict[str, FlagDefinition], AccessModel]:
    """The flags of the engine's argument files; one that is missing or does not parse is a
    bad input, said in one line (never a traceback)."""
    try:
        if source.engine == "sglang":
            return sglang_defs.read_definitions(source)
        if source.engine == "vllm":
            from .vllm_defs import read_definitions as vllm_definitions

            return vllm_definitions(source)
    except LedgerError:
        raise
    except SyntaxError as exc:
        raise InvalidInput(
            f"{source.origin}: {exc.filename or 'its argument file'} does not parse "
            f"(line {exc.lineno}: {exc.msg})"
        ) from None
    except Exception as exc:  # any other shape the reader does not know: one line, no trace
        text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise InvalidInput(f"{source.origin}: cannot read its flags: {text}") from None
    raise InvalidInput(f"{source.origin}: no flag reader for {source.engine}")


def load_index(
    source: EngineSource, use_cache: bool = True, workers: int | None = None
) -> VersionIndex:
    if not use_cache:
        return _build(source, workers)
    cached = cache.load(source.engine, source.version, source.key)
    if cached is not None:
        return cached
    with cache.building(source.engine, source.version, source.key):
        cached = cache.load(source.engine, source.version, source.key)  # built while we waited
        if cached is not None:
            return cached
        index = _build(source, workers)
        cache.store(index)
        return index


def _build(source: EngineSource, workers: int | None) -> VersionIndex:
    definitions, access = read_definitions(source)
    index = build_index(source, definitions, access, workers)
    if source.engine == "vllm":
        from .vllm_defs import model_registry

        index.entry_classes.update(model_registry(source))
    return index


@dataclass
class Research:
    index: VersionIndex
    target: Target
    given: list[GivenFlag]
    resolution: Resolution
    reports: list[FlagReport] = field(default_factory=list)
    #: what could not be checked about the source (``EngineSource.notes``)
    notes: list[str] = field(default_factory=list)

    @property
    def unknown_flags(self) -> list[GivenFlag]:
        return [g for g in self.given if g.definition is None]


def research(
    source: EngineSource,
    index: VersionIndex,
    target: Target,
    given: list[tuple[str, object]] | None = None,
    only: list[str] | None = None,
    everything: bool = False,
) -> Research:
    """Verdicts for the flags given plus every flag with no effect here (or all: ``everything``)."""
    matched = match_flags(index, list(given or []))
    # SGLang's ``--tp-size``, vLLM's ``--tensor-parallel-size``: the target's TP is that flag
    tp_field = index.flag("tp-size") or index.flag("tensor-parallel-size")
    implied: set[str] = set()  # set by the target, not by the user: never refused as given
    if (
        target.tp is not None
        and tp_field is not None
        and not any(f.definition is tp_field for f in matched)
    ):
        target.flags[tp_field.field] = target.tp
        implied.add(tp_field.field)
    for flag in matched:
        if flag.definition is not None:
            target.flags[flag.definition.field] = flag.value
    world = World(
        source.read_or_none,
        index.paths,
        index.tables,
        source.installed,
        parsed(f"{source.origin}\0{source.key}"),
    )
    interp = new_interpreter(world, index, target)
    resolution = walk(interp, index)
    attribute_refusals(resolution, world, index, target, implied)
    evaluator = GateEvaluator(interp, index)
    module, class_name, methods = ENTRY_POINTS.get(index.engine, ("", "", ()))
    evaluator.absent = absent_kinds(evaluator, [(module, class_name, m) for m in methods])
    if evaluator.absent:
        interp.absent_kinds = {kind: gate.facts for kind, gate in evaluator.absent.items()}
        interp.forget()  # values worked out while every object was taken as built
    judge = Judge(index, evaluator, resolution)
    wanted: list[str]
    if only:
        wanted = []
        for name in only:
            definition = index.flag(name)
            if definition is None:
                raise NotFound(
                    f"--flag {name}: {index.engine} {index.version} defines no such flag"
                )
            wanted.append(definition.field)
    else:
        wanted = [d.field for d in index.cli_flags()]
    given_fields = {f.definition.field for f in matched if f.definition is not None}
    result = Research(index, target, matched, resolution)
    for field_name in wanted:
        report = judge.report(field_name)
        if field_name in given_fields:
            picked = picked_anyway(world, index, target, resolution, field_name)
            if picked is not None:
                name = index.definitions[field_name].options[0]
                value = resolution.state.values.get(field_name)
                mark_picked_anyway(report, picked, name, value)
        if only or everything or field_name in given_fields or report.verdict in LISTED:
            result.reports.append(report)
    unserved = unserved_architecture(index, target)
    if unserved is not None:
        for report in result.reports:
            refuse_for_the_model(report, unserved)
    elif result.reports:
        start = start_refusal(judge)
        if start is not None:
            name = index.definitions[start.flag].name
            for report in result.reports:
                refuse_at_start(report, start, name)
    return result


def unserved_architecture(index: VersionIndex, target: Target) -> str | None:
    """Why the engine refuses the target's model, when no model file of this version registers
    its architecture (SGLang's ``EntryClass``, vLLM's registry tables) while others do; ``None``
    when one does, or when no model or no registry is known."""
    model = target.model
    if model is None or not model.architecture or not index.entry_classes:
        return None
    if any(model.architecture in classes for classes in index.entry_classes.values()):
        return None
    return (
        f"{index.engine} {index.version} serves no {model.architecture}: no model file registers "
        "it, so the engine refuses the model at start"
    )


def refuse_for_the_model(report: FlagReport, why: str) -> None:
    """``report``'s verdict when the engine refuses the model itself: ``incompatible`` (nothing
    takes effect on a server that does not start), the flag's own reading kept in the reason.
    A flag nothing reads too: the server does not start (``the flag itself: dead-code``); the
    deeper walk of this round's configs made more flags ``dead-code``, and each then read as if
    the model ran (docs/research.md, the sixth round)."""
    if report.verdict == "incompatible":
        return
    report.reason = f"{why} (the flag itself: {report.verdict}; {report.reason})"
    report.verdict = "incompatible"
    # the registry is read whole, but a fallback (vLLM's Transformers backend) may still serve it
    report.confidence = "likely"


def research_spec(
    spec: str,
    target: Target,
    given: list[tuple[str, object]] | None = None,
    *,
    only: list[str] | None = None,
    everything: bool = False,
    download: bool = True,
    use_cache: bool = True,
) -> Research:
    """``open_engine``, ``load_index`` and ``research`` in one call: what ``tuneledger
    research`` and the MCP server's ``research_flags`` run for one engine version."""
    source = open_engine(spec, download=download)
    index = load_index(source, use_cache=use_cache)
    result = research(source, index, target, given, only=only, everything=everything)
    result.notes = list(source.notes)
    return result
