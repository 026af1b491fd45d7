"""The command layer: every write to a ledger goes through one of these functions.

Front ends (the CLI's ``append``/``import``/``demo``, the TUI's actions, the server
runner, ``run bench``/``plan``/``spec``/``tune``, external benchmark tools) build their
events and hand them here; only this module calls ``LedgerStore.append`` /
``append_rows`` (``tests/write/test_commands.py`` checks that over the package's source).
The rules of a write live here, once, whichever front end asks:

- **a retraction names a stored event**: an ``event_retracted`` whose
  ``retracted_event_id`` is neither in the ledger nor earlier in the same batch is
  refused with ``NotFound`` (exit 5), naming the input, and nothing is appended. (The
  store checks it again inside its transaction, for replicated rows that do not come
  through here: ``ledger.sync.replicate``.)
- **a triage passes the candidate stream's expected version** (optimistic
  concurrency): a ``candidate_triaged`` appended without ``expected_version`` and
  without its own ``stream_version`` is refused with ``InvalidInput`` (exit 3); a stale
  one raises the store's ``ConcurrencyConflict`` (exit 4). A triage made on a board read
  before someone else's triage therefore never silently overrides it.
- **a proposal opens a new candidate stream** (``expected_version=0``): proposing an
  id twice is a conflict, never a second ``candidate_proposed``.
- **the previous run** a server run is compared with (``capacity-reduced`` findings)
  is the session's run started just before it, as the ``server_runs`` view pairs them
  (``previous_startup``), for the runner and for imported logs alike; an import of
  several logs chains them in the order given.

Loading recorded history (the demo campaign, synthetic ledgers) goes through
``restore``: those triages were decided elsewhere and carry no version to check.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.errors import ConcurrencyConflict, EventIdReused, InvalidInput, NotFound
from schemas import (
    Actor,
    CandidateProposed,
    CandidateTriaged,
    Event,
    EventRetracted,
    Evidence,
    FindingRecorded,
    Host,
    ServerFailed,
    ServerReady,
    ServerStarted,
    ServerStopped,
    StartupFacts,
)

if TYPE_CHECKING:
    # Only annotations: a runner that records into a sink of its own (the kernel tune on a GPU
    # host without DuckDB) imports the commands without the store.
    import pyarrow as pa

    from ledger.importers import ImportResult
    from ledger.store import AppendResult, AppendResults, LedgerStore


# --- the rules ------------------------------------------------------------------------


def _label(where: str, number: int, total: int) -> str:
    """``where`` for a single event, ``where: event N`` inside a batch (for error messages)."""
    return where if total == 1 else f"{where}: event {number}"


def _triage_refusal(label: str, candidate_id: str) -> InvalidInput:
    return InvalidInput(
        f"{label}: candidate_triaged {candidate_id}: a triage needs the candidate stream's "
        'expected version (--expected-version N, or "stream_version": N+1 in the event; N is '
        "the board's stream_version for the candidate); nothing was appended"
    )


def _stored_types(store: LedgerStore, ids: Sequence[UUID]) -> dict[UUID, str]:
    """The type of each of ``ids`` the ledger holds (an empty or missing file holds none)."""
    if not store.path.exists() or store.path.stat().st_size == 0:
        return {}
    table = store.query_arrow(
        "SELECT event_id, type FROM events WHERE event_id IN (SELECT unnest(?::UUID[]))",
        [[str(i) for i in ids]],
    )
    return {
        UUID(str(event_id)): kind
        for event_id, kind in zip(
            table.column("event_id").to_pylist(), table.column("type").to_pylist(), strict=True
        )
    }


def _check_retractions(
    store: LedgerStore,
    targets: list[tuple[str, UUID]],
    batch_ids: set[UUID],
    batch_retractions: set[UUID] | None = None,
) -> None:
    """Check each ``(label, target)``: one in the batch must not be one of the batch's
    retractions (``batch_retractions``); one not in the batch, against the ledger.

    Raises:
        NotFound: the first target not stored (exit 5).
        InvalidInput: a target that is itself a retraction (exit 3): a retraction is final,
            since undoing one would change what every view said about the event in between.
    """
    for label, target in targets:
        if batch_retractions and target in batch_retractions:
            raise _final(label, target)
    missing = [(label, target) for label, target in targets if target not in batch_ids]
    if not missing:
        return
    known = _stored_types(store, [target for _, target in missing])
    for label, target in missing:
        if target not in known:
            raise NotFound(
                f"{label}: event_retracted: no event {target} to retract in {store.path} "
                "(a retraction must name a stored event); nothing was appended"
            )
        if known[target] == "event_retracted":
            raise _final(label, target)


def _final(label: str, target: UUID) -> InvalidInput:
    """The refusal of a retraction of a retraction (exit 3)."""
    return InvalidInput(
        f"{label}: event_retracted: {target} is itself a retraction, and a retraction "
        "is final (append the retracted fact again, as a new event, to restore it); "
        "nothing was appended"
    )


def check_rules(
    store: LedgerStore,
    events: Sequence[Event],
    *,
    expected_version: int | None = None,
    where: str = "input",
) -> None:
    """Apply the write rules (module doc) to a batch before it is appended.

    ``where`` names the input in messages (``options``, ``<stdin>``, a file).

    Raises:
        InvalidInput: a ``candidate_triaged`` with no expected version (exit 3).
        NotFound: an ``event_retracted`` naming an event the ledger does not hold, or a
            ``candidate_triaged`` that would be its candidate's first event (exit 5).
    """
    total = len(events)
    proposed: set[str] = set()
    for number, event in enumerate(events, start=1):
        if isinstance(event, CandidateProposed):
            proposed.add(event.stream or event.default_stream())
        if not isinstance(event, CandidateTriaged):
            continue
        if expected_version is None and event.stream_version is None:
            raise _triage_refusal(_label(where, number, total), event.candidate_id)
        # A candidate's stream opens with its proposal: a triage at version 1 (or expected at
        # 0 with no proposal before it in the batch) triages a candidate nobody proposed.
        first = event.stream_version == 1 or (
            event.stream_version is None
            and expected_version == 0
            and (event.stream or event.default_stream()) not in proposed
        )
        if first:
            raise _never_proposed(_label(where, number, total), event.candidate_id)
    targets = [
        (_label(where, number, total), event.retracted_event_id)
        for number, event in enumerate(events, start=1)
        if isinstance(event, EventRetracted)
    ]
    if targets:
        retractions = {event.event_id for event in events if isinstance(event, EventRetracted)}
        _check_retractions(store, targets, {event.event_id for event in events}, retractions)


# --- appending ---------------------------------------------------------------------------


def append(
    store: LedgerStore,
    events: Event | Sequence[Event],
    *,
    expected_version: int | None = None,
    samples: Mapping[UUID, pa.Table] | None = None,
    where: str = "input",
) -> list[AppendResult]:
    """Check the rules, then append ``events`` atomically (``LedgerStore.append``'s guarantees:
    in order, idempotent by ``event_id``, all or nothing). Returns where each event landed.

    Raises:
        InvalidInput, NotFound: a rule refused the batch (``check_rules``); NotFound also for a
            triage of a candidate never proposed.
        ConcurrencyConflict, EventIdReused, LedgerBusy: as ``LedgerStore.append``.
    """
    batch = [events] if isinstance(events, Event) else list(events)
    if not batch:
        return []
    check_rules(store, batch, expected_version=expected_version, where=where)
    try:
        return store.append(batch, expected_version=expected_version, samples=samples)
    except ConcurrencyConflict as exc:
        # A triage whose candidate stream is empty names a candidate nobody proposed: a typo
        # (exit 5), not someone else's concurrent triage (exit 4).
        for event in batch:
            if (
                isinstance(event, CandidateTriaged)
                and exc.actual == 0
                and (event.stream or event.default_stream()) == exc.stream
            ):
                raise _never_proposed(where, event.candidate_id) from None
        raise


def _never_proposed(label: str, candidate_id: str) -> NotFound:
    """The refusal of a triage of a candidate nobody proposed (a typo: exit 5)."""
    return NotFound(
        f"{label}: no candidate {candidate_id!r} was proposed "
        '(`tuneledger sql "SELECT candidate_id FROM board"` lists them)'
    )


def append_rows(
    store: LedgerStore, rows: list[dict[str, Any]], *, where: str = "input"
) -> list[AppendResult]:
    """``append`` for events already validated into store rows (``ledger.write.bulk``: validation in
    worker processes); the same rules, read off the rows.

    Raises:
        as ``append``.
    """
    total = len(rows)
    targets = []
    batch_ids = set()
    for number, row in enumerate(rows, start=1):
        kind = row["type"]
        if kind == "candidate_triaged" and row["stream_version"] in (None, 1):
            payload = json.loads(row["payload"])
            refusal = _triage_refusal if row["stream_version"] is None else _never_proposed
            raise refusal(_label(where, number, total), payload.get("candidate_id", "?"))
        if kind == "event_retracted":
            target = UUID(json.loads(row["payload"])["retracted_event_id"])
            targets.append((_label(where, number, total), target))
    if targets:
        batch_ids = {UUID(str(row["event_id"])) for row in rows}
        retractions = {
            UUID(str(row["event_id"])) for row in rows if row["type"] == "event_retracted"
        }
        _check_retractions(store, targets, batch_ids, retractions)
    return store.append_rows(rows)


def refuse_untriaged(
    table: pa.Table, *, where: str = "input", before: int = 0, total: int | None = None
) -> None:
    """The triage rule of ``append_rows`` for a bulk batch, or a part of one (``ledger.write.bulk``
    checks each validated chunk as it comes): ``before`` events precede ``table`` in a batch
    of ``total`` (None: ``table`` is the batch), for the message's event number.

    Raises:
        InvalidInput: a ``candidate_triaged`` with no expected version (exit 3).
        NotFound: a ``candidate_triaged`` at stream version 1: its candidate was never
            proposed (exit 5).
    """
    import pyarrow.compute as pc

    triages = pc.equal(table.column("type"), "candidate_triaged")
    versions = table.column("stream_version")
    refused = pc.and_(triages, pc.or_kleene(pc.is_null(versions), pc.equal(versions, 1)))
    if pc.any(refused).as_py():
        index = pc.index(refused, True).as_py()
        payload = json.loads(table.column("payload")[index].as_py())
        label = _label(where, before + index + 1, table.num_rows if total is None else total)
        refusal = _triage_refusal if versions[index].as_py() is None else _never_proposed
        raise refusal(label, payload.get("candidate_id", "?"))


def append_table(store: LedgerStore, table: pa.Table, *, where: str = "input") -> AppendResults:
    """``append_rows`` for a bulk batch held as one Arrow table of store rows (``ledger.write.bulk``):
    the same rules, read off the columns, then the store's column path (``append_columns``).

    Raises:
        as ``append``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    total = table.num_rows
    types = table.column("type")
    refuse_untriaged(table, where=where)
    retractions = pc.equal(types, "event_retracted")
    if pc.any(retractions).as_py():
        indices = pc.indices_nonzero(retractions).to_pylist()
        payloads = table.column("payload").take(indices).to_pylist()
        targets = [
            (_label(where, i + 1, total), UUID(json.loads(text)["retracted_event_id"]))
            for i, text in zip(indices, payloads, strict=True)
        ]
        inside = pc.is_in(
            pa.array([str(target) for _, target in targets], pa.string()),
            value_set=table.column("event_id"),
        ).to_pylist()
        batch_ids = {target for (_, target), here in zip(targets, inside, strict=True) if here}
        retractions = {UUID(str(i)) for i in table.column("event_id").take(indices).to_pylist()}
        _check_retractions(store, targets, batch_ids, retractions)
    return store.append_columns(table)


def restore(store: LedgerStore, events: Sequence[Event]) -> list[AppendResult]:
    """Append recorded history (the demo campaign, a synthetic ledger) as one atomic batch.

    Why no triage rule: these triages were decided (and checked) where they were recorded;
    the files keep their order, not the stream versions they were decided at. Retractions
    must still name an event (of the ledger or of the batch).

    Raises:
        NotFound: a retraction of an event neither stored nor in ``events``.
        EventIdReused, LedgerBusy: as ``LedgerStore.append``.
    """
    batch = list(events)
    targets = [
        (f"event {n}", e.retracted_event_id)
        for n, e in enumerate(batch, start=1)
        if isinstance(e, EventRetracted)
    ]
    if targets:
        _check_retractions(store, targets, {e.event_id for e in batch})
    return store.append(batch)


# --- one function per intent -----------------------------------------------------------


def record(store: LedgerStore, event: Event) -> AppendResult:
    """Append one event that has no rule of its own (a finding, a comparison, a server
    lifecycle event, a kernel measurement, a note, a decision, a session start).

    Raises:
        as ``append``.
    """
    return append(store, event, where=event.type)[0]


#: Intents with no rule of their own, named as the front ends use them.
add_note = record_decision = record_finding = record_comparison = record


def record_benchmark(
    store: LedgerStore, event: Event, samples: pa.Table | None = None
) -> AppendResult:
    """Append a benchmark run (``benchmark_completed``) with its per-request samples table
    (``bench_samples`` columns but ``benchmark_event_id``), in one transaction.

    Raises:
        as ``append``.
    """
    table = {event.event_id: samples} if samples is not None else None
    return append(store, event, samples=table, where=event.type)[0]


def propose_candidate(
    store: LedgerStore, event: CandidateProposed, *, expected_version: int = 0
) -> AppendResult:
    """Append ``candidate_proposed``, expecting its candidate stream at ``expected_version``
    (0: a new candidate): proposing an id twice, even concurrently, is a conflict, never a
    second proposal. (A candidate whose proposal was retracted is off the board but its
    stream goes on: proposing it again expects the stream's version as read.)

    Raises:
        ConcurrencyConflict: the stream is not at ``expected_version`` (exit 4).
    """
    return append(store, event, expected_version=expected_version, where="candidate_proposed")[0]


def triage(
    store: LedgerStore,
    *,
    candidate_id: str,
    status: str,
    expected_version: int,
    reason: str | None = None,
    actor: Actor,
    session_id: str | None = None,
) -> AppendResult:
    """Append ``candidate_triaged`` (status ``accepted``/``deferred``/``rejected``...) expecting
    the candidate stream at ``expected_version`` (the ``stream_version`` the board showed).

    Raises:
        ValueError: a status or field the event model refuses (pydantic's message).
        ConcurrencyConflict: the candidate changed since it was read (exit 4).
    """
    event = CandidateTriaged(
        candidate_id=candidate_id,
        status=status,
        reason=reason or None,
        actor=actor,
        session_id=session_id,
    )
    return append(store, event, expected_version=expected_version, where="triage")[0]


def retract(
    store: LedgerStore,
    event_id: str | UUID,
    *,
    reason: str,
    actor: Actor,
    session_id: str | None = None,
) -> AppendResult:
    """Append ``event_retracted`` for the stored event ``event_id`` (a unique prefix of 8+ hex
    digits is enough): it stays in the log and drops out of every view but ``events``.

    Raises:
        NotFound: no stored event with this id (exit 5).
        InvalidInput: the prefix is ambiguous (exit 3).
    """
    target = store.get(event_id)  # resolves a prefix; NotFound names the id
    event = EventRetracted(
        retracted_event_id=target.event_id,
        reason=reason,
        actor=actor,
        session_id=session_id or target.session_id,
    )
    return append(store, event, where="retract")[0]


# --- server runs ------------------------------------------------------------------------


#: The startup facts of the run started just before run ``$2`` in session ``$1`` (the latest run
#: of the session when ``$2`` is not stored): the pairing of ``server_runs.previous_run_id``, and
#: that run's facts as the view picks them (its ``server_ready``'s, else its ``server_failed``'s,
#: else its ``server_started``'s).
_PREVIOUS_STARTUP_SQL = """
WITH previous AS (
    SELECT run_id FROM server_runs
    WHERE session_id IS NOT DISTINCT FROM $1
      AND started_seq < coalesce((SELECT min(started_seq) FROM server_runs WHERE run_id = $2),
                                 9223372036854775807)
    ORDER BY started_seq DESC LIMIT 1
)
SELECT CAST(e.payload->'startup' AS VARCHAR) AS startup
FROM previous p LEFT JOIN live_events e
  ON (e.payload->>'run_id') = p.run_id
 AND e.type IN ('server_ready', 'server_failed', 'server_started')
 AND json_type(e.payload->'startup') = 'OBJECT'
ORDER BY e.type = 'server_ready' DESC, e.type = 'server_failed' DESC, e.seq DESC
LIMIT 1
"""


def previous_startup(
    store: LedgerStore, session_id: str | None, *, run_id: str | None = None
) -> StartupFacts | None:
    """The startup facts of the server run a run of ``session_id`` is compared with
    (``capacity-reduced`` findings): the session's run started just before ``run_id`` (its
    latest run when ``run_id`` is ``None`` or not stored yet, as for a log being imported).

    The one definition of "the previous run": the same pairing as the ``server_runs`` view's
    ``previous_run_id`` and ``changes_vs_previous``, used by the server runner and ``import``
    (which chains the logs it is given in order, see ``import_files``). ``None`` for a missing
    ledger, a session without runs, or a previous run that logged no startup facts (it is
    still the previous run: nothing is compared, as in the view)."""
    if not store.path.exists() or store.path.stat().st_size == 0:
        return None
    table = store.query_arrow(_PREVIOUS_STARTUP_SQL, [session_id, run_id])
    text = table.column("startup")[0].as_py() if table.num_rows else None
    return StartupFacts.model_validate_json(text) if text else None


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


@dataclass
class LoggedRun:
    """What a server log shows of one run, as the two log importers (SGLang, vLLM) read it.

    ``started``/``ready``/``failed``: the fields of ``ServerStarted``, ``ServerReady`` and
    ``ServerFailed`` beyond the envelope and ``run_id`` (``ready``/``failed`` ``None``: the
    log shows no such event). ``sources``: the ``source`` (``name:line``) of each of the
    three, by event type. ``findings``: the log's findings, in order; ``finding_source`` and
    ``finding_time`` give each one's ``source`` and ``occurred_at``."""

    engine: str
    run_id: str
    host: Host
    started: dict[str, Any]
    ready: dict[str, Any] | None
    failed: dict[str, Any] | None
    sources: dict[str, str]
    findings: list[FindingRecorded] = field(default_factory=list)
    #: The fields of a ``ServerStopped`` when the log shows a clean shutdown after readiness
    #: (its source is ``sources["server_stopped"]``); ``None`` otherwise.
    stopped: dict[str, Any] | None = None
    finding_source: Callable[[FindingRecorded], str] = lambda f: ""
    finding_time: Callable[[FindingRecorded], datetime | None] = lambda f: None


def server_run_events(
    run: LoggedRun,
    *,
    event_id: Callable[[str], UUID],
    actor: Actor,
    session_id: str | None,
    remember: Callable[[ServerStarted], list[FindingRecorded]] | None = None,
) -> list[Event]:
    """The events of one logged server run: ``server_started``, then ``server_ready`` and/or
    ``server_failed`` (or ``server_stopped`` after a clean shutdown), then one ``finding_recorded`` per fact (a finding repeated with the same
    kind, flag and message is kept once). Ids come from ``event_id(label)`` (deterministic
    for a file: re-importing stores nothing twice). ``remember`` (``ledger.read.flag_memory.
    remembered_findings`` bound to the ledger) adds the ``known-no-effect`` findings of the
    run's flags, after the log's own.

    Raises:
        pydantic.ValidationError: a field the event models refuse (the importer names the file).
    """
    common: dict[str, Any] = dict(
        run_id=run.run_id, session_id=session_id, host=run.host, actor=actor
    )
    events: list[Event] = [
        ServerStarted(
            event_id=event_id("server_started"),
            source=run.sources["server_started"],
            engine=run.engine,
            **run.started,
            **common,
        )
    ]
    if run.ready is not None:
        events.append(
            ServerReady(
                event_id=event_id("server_ready"),
                source=run.sources["server_ready"],
                **run.ready,
                **common,
            )
        )
    if run.failed is not None:
        events.append(
            ServerFailed(
                event_id=event_id("server_failed"),
                source=run.sources["server_failed"],
                **run.failed,
                **common,
            )
        )
    if run.stopped is not None and run.failed is None:
        events.append(
            ServerStopped(
                event_id=event_id("server_stopped"),
                source=run.sources.get("server_stopped"),
                **run.stopped,
                **common,
            )
        )
    findings = list(run.findings)
    if remember is not None:
        findings += remember(events[0])  # type: ignore[arg-type]  # the ServerStarted above
    seen: set[UUID] = set()
    for finding in findings:
        fid = event_id(f"finding:{finding.kind}:{finding.flag}:{finding.message}")
        if fid in seen:
            continue
        seen.add(fid)
        events.append(
            finding.model_copy(
                update={
                    "event_id": fid,
                    "source": run.finding_source(finding),
                    "host": run.host,
                    "actor": actor,
                    "occurred_at": run.finding_time(finding) or finding.occurred_at,
                }
            )
        )
    return events


# --- import ------------------------------------------------------------------------------


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
    from ledger.importers import ImportResult, import_file, pair_files
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
