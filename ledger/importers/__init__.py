"""``tuneledger import FILE...``: turn result files of the field into ledger events.

``import_file`` reads one file, detects its format by content (``detect.py``)
and returns its events without writing anything: the caller appends the events
of all files in one atomic batch. Event ids are deterministic (file content +
position), so importing the same file again gives the same ids and the store
treats them as idempotent duplicates.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import pyarrow as pa

from collections.abc import Callable

from schemas import Actor, Event, FindingRecorded, Host, ServerStarted, StartupFacts

from .bench_serving import SAMPLES_SCHEMA, import_bench_serving
from .detect import BENCH, MOE, SERVER_LOG, detect_format, read_input
from .moe_config import import_moe_config
from .server_log import import_server_log

__all__ = ["ImportResult", "SAMPLES_SCHEMA", "import_file", "BENCH", "MOE", "SERVER_LOG"]


@dataclass
class ImportResult:
    """What one file gave: its ``kind`` (``sglang-bench-serving``, ``sglang-moe-config``,
    ``sglang-server-log``), ``path``, ``events`` in append order, and per-request
    ``samples`` of bench runs with ``--output-details``, keyed by the benchmark event's id
    (columns of ``bench_samples`` in ledger/store.py but the event id)."""

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

    ``host`` is merged into each event's host (for server logs it wins over what
    the log shows; for MoE configs the file's device wins for GPU name and arch).
    ``actor`` is an ``Actor`` or ``"kind:name"`` (default: person ``unknown``).
    ``config_name`` names the configuration of bench runs (default: the file stem)
    and of a server log's ``ServerStarted``. ``previous_startup`` (the startup facts
    of the run to compare with) enables the ``capacity-reduced`` finding of a server log;
    ``remember`` (see ``server_log.import_server_log``) its ``known-no-effect`` findings.

    Raises:
        NotFound: no such file.
        InvalidInput: one line naming the file (and line, field where they apply):
            not a known format, not UTF-8, empty, bad JSON, a mistyped field.
    """
    file = dataclasses.replace(read_input(path), scope=session_id or "")
    who = Actor.parse(actor) if isinstance(actor, str) else (actor or Actor())
    kind = detect_format(file)
    samples: dict[UUID, pa.Table] = {}
    if kind == BENCH:
        bench_events, samples = import_bench_serving(
            file, config_name=config_name, session_id=session_id, host=host, actor=who
        )
        events: list[Event] = list(bench_events)
    elif kind == MOE:
        events = [import_moe_config(file, session_id=session_id, host=host, actor=who)]
    else:
        events = import_server_log(
            file, config_name=config_name, session_id=session_id, host=host, actor=who,
            previous_startup=previous_startup, remember=remember,
        )
    return ImportResult(kind=kind, path=Path(path), events=events, samples=samples)
