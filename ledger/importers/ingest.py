"""``tuneledger import``: the files of other tools read by their importers, then appended
through the command layer as one atomic batch.

Above both: it runs the importers (``ledger.importers``: one file's events, nothing written)
and appends with ``ledger.write.commands`` (the rules of a write).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from ledger.errors import EventIdReused, InvalidInput
from ledger.importers import ImportResult, import_file, pair_files
from ledger.write.commands import append, previous_startup
from schemas import (
    Actor,
    Event,
    Evidence,
    FindingRecorded,
    Host,
    ServerFailed,
    ServerReady,
    ServerStarted,
    StartupFacts,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.store import AppendResult, LedgerStore


@dataclass
class Imported:
    """What ``import_files`` did: each file's ``ImportResult``, the shared-memory findings of
    ``check_arch`` and the append results by event id."""

    results: list[ImportResult]
    findings: list[FindingRecorded]
    appended: dict[UUID, AppendResult]


def import_files(
    store: LedgerStore,
    paths: Sequence[Path],
    *,
    session_id: str | None,
    actor: Actor,
    config_name: str | None = None,
    host: Host | None = None,
    check_arch: Sequence[str] = (),
) -> Imported:
    """Read every file (``ledger.importers.import_file``), then append all their events as one
    atomic batch (a file given twice, or two files with one content, stores its events once).
    Files of one run (``ledger.importers.pair_files``: a summary and its per-request records)
    give one benchmark: the file taken in by another has no events of its own and names it
    in ``paired_with``.

    ``host`` (default: the host the session recorded) goes into each event's host. Server
    logs are compared with the run before them: the session's previous run in the ledger
    (``previous_startup``), then each imported log in the order given. An MoE config file is
    checked against the shared memory per block of its own device's arch and the host's
    (when known), and of every arch of ``check_arch`` (``sm120``...): one ``finding_recorded``
    per entry that needs more than that arch has.

    Raises:
        NotFound, InvalidInput: a file that is missing or not of a known format (nothing appended).
        InvalidInput: an unknown arch in ``check_arch``.
        EventIdReused: one event id with two contents among the files (exit 8).
        NotFound, ConcurrencyConflict, LedgerBusy: as ``append``.
    """
    from ledger.read.flag_memory import remembered_findings

    if host is None:
        host = _session_host(store, session_id)
    previous = previous_startup(store, session_id)
    results = []
    # A tool's usual files of one run (a summary and its per-request records) give one benchmark.
    pairs = pair_files(paths)
    for path in paths:
        if Path(path) in pairs.taken:
            kind = pairs.kinds[Path(path)]
            results.append(ImportResult(kind, Path(path), [], paired_with=pairs.taken[Path(path)]))
            continue
        result = import_file(
            path,
            session_id=session_id,
            actor=actor,
            config_name=config_name,
            host=host,
            previous_startup=previous,
            remember=lambda started: remembered_findings(store, started),
            partner=pairs.partner.get(Path(path)),
        )
        results.append(result)
        has_run, facts = _run_startup(result.events)
        if has_run:  # the next log's run was started after this one
            previous = facts
    events = _one_per_id(results)
    findings = shared_memory_findings(events, check_arch, session_id, actor, host=host)
    samples: dict[UUID, pa.Table] = {}
    for result in results:
        samples.update(result.samples)
    where = ", ".join(str(p) for p in paths)
    try:
        appended = append(store, [*events, *findings], samples=samples, where=where)
    except EventIdReused as error:
        # An imported event's id comes from the file's content and the import's options:
        # the same file imported again with another --host, say, reads as other content.
        raise EventIdReused(
            f"{where}: {error} — this file was imported before with other options (--host, "
            "--config-name, --check-arch) or other content; nothing was appended. Import it "
            "with the options it was first imported with, or into another --session",
            event_id=error.event_id,
        ) from None
    return Imported(results, findings, {r.event_id: r for r in appended})


def _session_host(store: LedgerStore, session_id: str | None) -> Host | None:
    """The host a session recorded (``ledger.read.model.session_host``), so files imported into
    it carry its GPU and arch when they do not say; None without a session or a ledger file."""
    from ledger.read.model import session_host

    if session_id is None or not store.path.exists():
        return None
    with store.connect() as con:
        return session_host(con, session_id)


def shared_memory_findings(
    events: Sequence[Event],
    archs: Sequence[str],
    session: str | None,
    actor: Actor,
    *,
    host: Host | None = None,
) -> list[FindingRecorded]:
    """One ``finding_recorded`` per MoE config entry that needs more shared memory than an arch
    has (the seeds' SM120 crash, caught before a server starts). The archs checked, per config
    file: those of ``archs`` (``--check-arch``), the arch of the file's own ``device_name``
    (a config tuned for an SM120 card whose entries cannot launch on SM120, sglang PR
    #28077), and ``host``'s arch (where the session runs); automatic ones only when
    ``gpu_arch`` knows their shared memory. Ids are uuid5 of the config event, arch and batch
    size M (re-importing stores nothing twice).

    Raises:
        InvalidInput: an arch of ``archs`` with no known shared-memory figure.
    """
    from ledger.engines.gpu_arch import (
        SHARED_MEMORY_PER_BLOCK,
        compute_capability_for,
        moe_config_overruns,
    )
    from schemas.events import MoeConfigRecorded

    unknown = [a for a in archs if a not in SHARED_MEMORY_PER_BLOCK]
    if unknown:
        raise InvalidInput(
            f"--check-arch {unknown[0]}: unknown arch; known: {', '.join(SHARED_MEMORY_PER_BLOCK)}"
        )
    host_arch = host.compute_capability if host else None
    out = []
    for event in events:
        if not isinstance(event, MoeConfigRecorded):
            continue
        device_arch = compute_capability_for(event.device_name)
        automatic = [a for a in (device_arch, host_arch) if a in SHARED_MEMORY_PER_BLOCK]
        for arch in dict.fromkeys([*archs, *automatic]):
            for over in moe_config_overruns(event.configs, arch, event.dtype):
                m, need, limit = over.m, over.need, over.limit
                c = event.configs[m]
                out.append(
                    FindingRecorded(
                        event_id=uuid.uuid5(event.event_id, f"shared-memory/{arch}/{m}"),
                        kind="moe-config-exceeds-shared-memory",
                        basis="researched",
                        verdict="incompatible" if over.certain else None,
                        message=(
                            f"{event.file_name}: M={m} ({c['BLOCK_SIZE_M']}/{c['BLOCK_SIZE_N']}/{c['BLOCK_SIZE_K']} "
                            f"{c['num_stages']} stages) needs {need} B shared memory ({over.rule}), "
                            f"{arch} has {limit} B per block: {over.verdict}"
                        ),
                        evidence=[Evidence(kind="event", ref=str(event.event_id))],
                        host=Host(compute_capability=arch),
                        session_id=session,
                        actor=actor,
                        source=event.file_name,
                    )
                )
    return out


#: What names the file an event was read from, not the fact: a copy under another name differs there alone.
_FILE_NAMING_FIELDS = {"source", "evidence"}


def _same_fact(a: Event, b: Event) -> bool:
    """Whether two events with one id say the same thing, whichever file name they quote."""
    return a == b or a.model_dump(exclude=_FILE_NAMING_FIELDS) == b.model_dump(
        exclude=_FILE_NAMING_FIELDS
    )


def _one_per_id(results: Sequence[ImportResult]) -> list[Event]:
    """The events of all files, each id once: a file given twice (or two files with one
    content, under other names) gives the same events, stored once (the first file's). The
    same id with other content is an error naming both files and lines.

    Raises:
        EventIdReused: one ``event_id`` with two contents (exit 8).
    """
    seen: dict[UUID, tuple[Path, Event]] = {}
    events = []
    for result in results:
        for event in result.events:
            prior = seen.get(event.event_id)
            if prior is None:
                seen[event.event_id] = (result.path, event)
                events.append(event)
            elif not _same_fact(prior[1], event):
                raise EventIdReused(
                    f"{result.path} ({event.source}): event id {event.event_id} is also given by "
                    f"{prior[0]} ({prior[1].source}) with other content"
                )
    return events


def _run_startup(events: Sequence[Event]) -> tuple[bool, StartupFacts | None]:
    """Whether ``events`` (one imported log's) hold a server run, and its startup facts as
    ``previous_startup`` would read them once stored (ready's, else failed's, else started's)."""
    facts: dict[str, StartupFacts | None] = {}
    for event in events:
        if isinstance(event, ServerStarted | ServerReady | ServerFailed):
            facts.setdefault(event.type, event.startup)
    for kind in ("server_ready", "server_failed", "server_started"):
        if facts.get(kind) is not None:
            return True, facts[kind]
    return bool(facts), None
