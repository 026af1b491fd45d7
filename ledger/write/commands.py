"""The command layer: every write to a ledger goes through ``ledger.write``, and this module is
its front door for events.

Front ends (the CLI's ``append``/``import``/``demo``, the TUI's actions, the server
runner, ``run bench``/``plan``/``spec``/``tune``, external benchmark tools) build their
events and hand them here; the bulk import (``ledger.write.bulk``) and replicated rows
(``ledger.write.replicated``) are the write layer's other paths. Only the write layer calls
the store's writes (``tests/write/test_commands.py`` checks that over the package's
source), and every path applies the rules of ``ledger.write.rules``, once:

- a retraction names a stored event (or one of its batch), and is final;
- a triage passes the candidate stream's expected version;
- **a proposal opens a new candidate stream** (``expected_version=0``): proposing an
  id twice is a conflict, never a second ``candidate_proposed``;
- **the previous run** a server run is compared with (``capacity-reduced`` findings)
  is the session's run started just before it, as the ``server_runs`` view pairs them
  (``previous_startup``), for the runner and for imported logs alike; an import of
  several logs chains them in the order given.

Loading recorded history (the demo campaign, synthetic ledgers) goes through
``restore``: those triages were decided elsewhere and carry no version to check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.errors import ConcurrencyConflict
from ledger.read import lookups
from ledger.write import rules
from schemas import (
    Actor,
    CandidateProposed,
    CandidateTriaged,
    Event,
    EventRetracted,
    FindingRecorded,
    FlagResearched,
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

    from ledger.store import AppendResult, AppendResults, LedgerStore


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
        InvalidInput, NotFound: a rule refused the batch (``rules.check_events``); NotFound also for a
            triage of a candidate never proposed.
        ConcurrencyConflict, EventIdReused, LedgerBusy: as ``LedgerStore.append``.
    """
    batch = [events] if isinstance(events, Event) else list(events)
    if not batch:
        return []
    rules.check_events(store, batch, expected_version=expected_version, where=where)
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
                raise rules.never_proposed(where, event.candidate_id) from None
        raise


def append_rows(
    store: LedgerStore, rows: list[dict[str, Any]], *, where: str = "input"
) -> list[AppendResult]:
    """``append`` for events already turned into store rows (``event_row``); the same rules,
    read off the rows (``rules.check_rows``).

    Raises:
        as ``append``.
    """
    rules.check_rows(store, rows, where=where)
    return store.append_rows(rows)


def append_table(store: LedgerStore, table: pa.Table, *, where: str = "input") -> AppendResults:
    """``append_rows`` for a batch held as one Arrow table of store rows (the column path:
    ``ledger.write.bulk``'s whole batch): the same rules, read off the columns
    (``rules.check_table``), then the store's ``append_columns``.

    Raises:
        as ``append``.
    """
    rules.check_table(store, table, where=where)
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
        rules.check_retractions(store, targets, {e.event_id for e in batch})
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


def record_research(store: LedgerStore, events: Sequence[FlagResearched]) -> list[AppendResult]:
    """Append the ``flag_researched`` events of one ``tuneledger research`` run, all or none.

    Their event ids are derived from what was researched (``ledger.engines.research.events``):
    recording the same research again appends nothing (``duplicate: true``).

    Raises:
        as ``append``.
    """
    return append(store, list(events), where="research")


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


def previous_startup(
    store: LedgerStore, session_id: str | None, *, run_id: str | None = None
) -> StartupFacts | None:
    """The startup facts of the server run a run of ``session_id`` is compared with
    (``capacity-reduced`` findings): the session's run started just before ``run_id`` (its
    latest run when ``run_id`` is ``None`` or not stored yet, as for a log being imported).

    The one definition of "the previous run": the same pairing as the ``server_runs`` view's
    ``previous_run_id`` and ``changes_vs_previous``, used by the server runner and ``import``
    (which chains the logs it is given in order: ``ledger.importers.ingest``). ``None`` for a missing
    ledger, a session without runs, or a previous run that logged no startup facts (it is
    still the previous run: nothing is compared, as in the view)."""
    text = lookups.previous_startup_json(store, session_id, run_id)
    return StartupFacts.model_validate_json(text) if text else None


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
