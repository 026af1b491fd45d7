"""``tuneledger import FILE...``: turn result files of the field into ledger events.

``import_file`` reads one file, detects its format by content (``detect.py``)
and returns its events without writing anything: the caller
(``ledger.importers.ingest.import_files``) appends the events of all files in one atomic batch. Event ids are deterministic (file content +
position), so importing the same file again gives the same ids and the store
treats them as idempotent duplicates.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pydantic

from ledger.errors import InvalidInput, LedgerError
from schemas import Actor, Event, FindingRecorded, Host, ServerStarted, StartupFacts

from .detect import (
    ImportContext,
    Importer,
    InputFile,
    detect_format,
    read_input,
    registered_importers,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ImportResult", "SAMPLES_SCHEMA", "import_file", "pair_files", "registered_importers"]


def __getattr__(name: str) -> Any:
    """``SAMPLES_SCHEMA`` (``bench_samples`` columns but the event id), built (and pyarrow
    imported) on first use: the import of a server log needs no pyarrow."""
    if name == "SAMPLES_SCHEMA":
        from ..store import BENCH_SAMPLES_SCHEMA

        return BENCH_SAMPLES_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ImportResult:
    """What one file gave: its ``kind`` (the importer's, e.g. ``sglang-bench-serving``,
    ``vllm-bench-serve``, ``guidellm-benchmarks``; ``tuneledger import`` prints it),
    ``path``, ``events`` in append order, and per-request ``samples`` of bench runs
    that have them, keyed by the benchmark event's id (columns of ``bench_samples``
    in ledger/store/schema.py but the event id)."""

    kind: str
    path: Path
    events: list[Event]
    samples: dict[UUID, pa.Table] = field(default_factory=dict)
    #: the other file of the same run imported with this one (its events are this file's)
    paired_with: Path | None = None


@dataclass(frozen=True)
class FilePairs:
    """How the files given to one import pair up (``pair_files``): ``partner`` maps a file to
    the other file of its run whose requests it takes in; ``taken`` maps a file whose run
    another file gives to that file (it adds no event of its own)."""

    partner: dict[Path, Path] = field(default_factory=dict)
    taken: dict[Path, Path] = field(default_factory=dict)
    #: the importer kind of every file that read
    kinds: dict[Path, str] = field(default_factory=dict)


def pair_files(paths: Sequence[str | Path]) -> FilePairs:
    """Pair the files of one run among ``paths``: a tool's usual file set (AIPerf's summary
    JSON or CSV with its records, llmperf's summary with its individual responses, GuideLLM's
    JSON with its YAML) imported together is one benchmark per run, not one per file.

    Each importer's ``pairings`` say which other kinds it takes in and how a pair is checked
    to be one run. Files are considered in registry order (AIPerf's JSON before its CSV), then
    in the order given; a report in two formats keeps the JSON. A file that does not read is
    left alone here (its own import names what is wrong).
    """
    unique = list(dict.fromkeys(Path(p) for p in paths))
    if len(unique) < 2:
        # Nothing to pair: reading and sniffing the file here read a server log twice per import.
        return FilePairs()
    found: list[tuple[Path, InputFile, Importer]] = []
    for path in unique:
        try:
            file = read_input(path)
            found.append((path, file, detect_format(file)))
        except LedgerError:
            continue
    order = {importer.kind: i for i, importer in enumerate(registered_importers())}
    mains = sorted(
        (f for f in found if f[2].pairings),
        key=lambda f: (order[f[2].kind], f[1].path.suffix.lower() != ".json"),
    )
    pairs = FilePairs(kinds={path: importer.kind for path, _, importer in found})
    for path, file, importer in mains:
        if path in pairs.taken:
            continue
        for pairing in importer.pairings:
            for other_path, other, other_importer in found:
                if (
                    other_path == path
                    or other_importer.kind != pairing.kind
                    or other_path in pairs.taken
                    or other_path in pairs.partner
                    or (pairing.read is not None and path in pairs.partner)
                ):
                    continue
                try:
                    same = pairing.same_run(file, other)
                except (LedgerError, ValueError, TypeError, KeyError):
                    same = False
                if same:
                    pairs.taken[other_path] = path
                    if pairing.read is not None:
                        pairs.partner[path] = other_path
    return pairs


def import_file(
    path: str | Path,
    *,
    session_id: str | None = None,
    host: Host | None = None,
    actor: Actor | str | None = None,
    config_name: str | None = None,
    previous_startup: StartupFacts | None = None,
    remember: Callable[[ServerStarted], list[FindingRecorded]] | None = None,
    partner: str | Path | None = None,
) -> ImportResult:
    """Read ``path`` and return its events; nothing is written, nothing is returned partially.

    The importer is chosen by content (``detect.py``'s registry). ``host`` is merged
    into each event's host (for server logs it wins over what the log shows; for MoE
    configs the file's device wins for GPU name and arch). ``actor`` is an ``Actor``
    or ``"kind:name"`` (default: person ``unknown``). ``config_name`` names the
    configuration of bench runs (default: the file stem) and of a server log's
    ``ServerStarted``. ``previous_startup`` (the startup facts of the run to compare
    with) enables the ``capacity-reduced`` finding of a server log; ``remember`` (see
    ``server_log.import_server_log``) its ``known-no-effect`` findings.

    Raises:
        NotFound: no such file.
        InvalidInput: one line naming the file (and line, field where they apply):
            not a known format (naming the kinds tried), not UTF-8, empty, bad JSON,
            a mistyped field.
    """
    file = dataclasses.replace(read_input(path), scope=session_id or "")
    who = Actor.parse(actor) if isinstance(actor, str) else (actor or Actor())
    importer = detect_format(file)
    ctx = ImportContext(
        session_id=session_id,
        host=host,
        actor=who,
        config_name=config_name,
        previous_startup=previous_startup,
        remember=remember,
    )
    read: Callable[[InputFile, ImportContext], Any] = importer.read
    if partner is not None:
        other = dataclasses.replace(read_input(partner), scope=session_id or "")
        other_kind = detect_format(other).kind
        pairing = next((p for p in importer.pairings if p.kind == other_kind), None)
        if pairing is None or pairing.read is None or not pairing.same_run(file, other):
            raise InvalidInput(f"{file.label}: {partner}: not a file of the same run")
        pair_read = pairing.read
        read = lambda f, c: pair_read(f, other, c)  # noqa: E731
    try:
        events, samples = read(file, ctx)
    except pydantic.ValidationError as exc:
        # A value the importer passed on that an event model refuses: still the file's fault.
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ()))
        raise InvalidInput(
            f"{file.label}: {importer.kind}: field '{where}': {error.get('msg')}"
        ) from None
    except RecursionError:
        raise InvalidInput(f"{file.label}: {importer.kind}: JSON nested too deeply") from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        raise InvalidInput(f"{file.label}: {importer.kind}: {str(exc).split(';')[0]}") from None
    except Exception as exc:
        # e.g. a token count of 1e308 for an int32 column of bench_samples
        if not isinstance(exc, (OverflowError, *_arrow_errors())):
            raise
        raise InvalidInput(
            f"{file.label}: {importer.kind}: a per-request value out of range ({exc})"
        ) from None
    return ImportResult(
        kind=importer.kind,
        path=Path(path),
        events=list(events),
        samples=samples,
        paired_with=Path(partner) if partner is not None else None,
    )


def _arrow_errors() -> tuple[type[Exception], ...]:
    """pyarrow's error class where pyarrow is imported (by an importer that builds samples): an
    Arrow error comes from nowhere else, and a server log's import never imports it."""
    arrow = sys.modules.get("pyarrow")
    return (arrow.ArrowException,) if arrow is not None else ()
