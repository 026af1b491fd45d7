"""``tuneledger import FILE...``: turn result files of the field into ledger events.

``import_file`` reads one file, detects its format by content (``detect.py``)
and returns its events without writing anything: the caller
(``ledger.write.commands.import_files``) appends the events of all files in one atomic batch. Event ids are deterministic (file content +
position), so importing the same file again gives the same ids and the store
treats them as idempotent duplicates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import pyarrow as pa
import pydantic

from ledger.errors import InvalidInput
from schemas import Actor, Event, FindingRecorded, Host, ServerStarted, StartupFacts

from ..store import BENCH_SAMPLES_SCHEMA as SAMPLES_SCHEMA
from .detect import ImportContext, detect_format, read_input, registered_importers

__all__ = ["ImportResult", "SAMPLES_SCHEMA", "import_file", "registered_importers"]


@dataclass
class ImportResult:
    """What one file gave: its ``kind`` (the importer's, e.g. ``sglang-bench-serving``,
    ``vllm-bench-serve``, ``guidellm-benchmarks``; ``tuneledger import`` prints it),
    ``path``, ``events`` in append order, and per-request ``samples`` of bench runs
    that have them, keyed by the benchmark event's id (columns of ``bench_samples``
    in ledger/store/ledger_store.py but the event id)."""

    kind: str
    path: Path
    events: list[Event]
    samples: dict[UUID, pa.Table] = field(default_factory=dict)


def import_file(
    path: str | Path,
    *,
    session_id: str | None = None,
    host: Host | None = None,
    actor: Actor | str | None = None,
    config_name: str | None = None,
    previous_startup: StartupFacts | None = None,
    remember: Callable[[ServerStarted], list[FindingRecorded]] | None = None,
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
    try:
        events, samples = importer.read(file, ctx)
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
    except (OverflowError, pa.ArrowException) as exc:
        # e.g. a token count of 1e308 for an int32 column of bench_samples
        raise InvalidInput(
            f"{file.label}: {importer.kind}: a per-request value out of range ({exc})"
        ) from None
    return ImportResult(kind=importer.kind, path=Path(path), events=list(events), samples=samples)
