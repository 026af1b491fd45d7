"""The rules of a write, once: every write path of ``ledger.write`` applies them here.

- **a retraction names a stored event**: an ``event_retracted`` whose ``retracted_event_id``
  is neither in the ledger nor in the same batch is refused with ``NotFound`` (exit 5),
  naming the input, and nothing is appended;
- **a retraction is final**: a retraction of a retraction is refused with ``InvalidInput``
  (exit 3), since undoing one would change what every view said about the event in between;
- **a triage passes the candidate stream's expected version** (optimistic concurrency): a
  ``candidate_triaged`` appended without ``expected_version`` and without its own
  ``stream_version`` is refused with ``InvalidInput`` (exit 3); one that would be its
  candidate stream's first event triages a candidate nobody proposed (``NotFound``, exit 5).

Each rule is read off what the path holds: events (the careful path), store rows, or an
Arrow table of store rows (the column and chunked paths). Recorded history (``restore``)
and rows replicated from a sync hub were decided elsewhere: only the retraction's target is
checked for them (``check_targets``). The store itself only stores.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.errors import InvalidInput, NotFound
from ledger.read import lookups
from schemas import CandidateProposed, CandidateTriaged, Event, EventRetracted

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from ledger.store import LedgerStore


# --- wording --------------------------------------------------------------------------------


def label(where: str, number: int, total: int) -> str:
    """``where`` for a single event, ``where: event N`` inside a batch (for error messages)."""
    return where if total == 1 else f"{where}: event {number}"


def triage_refusal(where: str, candidate_id: str) -> InvalidInput:
    """The refusal of a triage without an expected version (exit 3)."""
    return InvalidInput(
        f"{where}: candidate_triaged {candidate_id}: a triage needs the candidate stream's "
        'expected version (--expected-version N, or "stream_version": N+1 in the event; N is '
        "the board's stream_version for the candidate); nothing was appended"
    )


def never_proposed(where: str, candidate_id: str) -> NotFound:
    """The refusal of a triage of a candidate nobody proposed (a typo: exit 5)."""
    return NotFound(
        f"{where}: no candidate {candidate_id!r} was proposed "
        '(`tuneledger sql "SELECT candidate_id FROM board"` lists them)'
    )


def final(where: str, target: UUID) -> InvalidInput:
    """The refusal of a retraction of a retraction (exit 3)."""
    return InvalidInput(
        f"{where}: event_retracted: {target} is itself a retraction, and a retraction "
        "is final (append the retracted fact again, as a new event, to restore it); "
        "nothing was appended"
    )


# --- retractions ------------------------------------------------------------------------------


def check_retractions(
    store: LedgerStore,
    targets: list[tuple[str, UUID]],
    batch_ids: set[UUID],
    batch_retractions: set[UUID] | None = None,
) -> None:
    """Check each ``(label, target)``: one in the batch must not be one of the batch's
    retractions (``batch_retractions``; None: not checked); one not in the batch, against
    the ledger (stored, and not a retraction unless ``batch_retractions`` is None).

    Raises:
        NotFound: the first target not stored (exit 5).
        InvalidInput: a target that is itself a retraction (exit 3).
    """
    for where, target in targets:
        if batch_retractions and target in batch_retractions:
            raise final(where, target)
    missing = [(where, target) for where, target in targets if target not in batch_ids]
    if not missing:
        return
    known = lookups.stored_types(store, [target for _, target in missing])
    for where, target in missing:
        if target not in known:
            raise NotFound(
                f"{where}: event_retracted: no event {target} to retract in {store.path} "
                "(a retraction must name a stored event); nothing was appended"
            )
        if batch_retractions is not None and known[target] == "event_retracted":
            raise final(where, target)


def _table_targets(
    table: pa.Table, where: str, before: int = 0, total: int | None = None
) -> tuple[list[tuple[str, UUID]], set[UUID], set[UUID]]:
    """A table's retractions: (label, target) each, the targets inside the table, and the
    retractions' own ids."""
    import pyarrow as pa
    import pyarrow.compute as pc

    retractions = pc.equal(table.column("type"), "event_retracted")
    if not pc.any(retractions).as_py():
        return [], set(), set()
    total = table.num_rows if total is None else total
    indices = pc.indices_nonzero(retractions).to_pylist()
    payloads = table.column("payload").take(indices).to_pylist()
    targets = [
        (label(where, before + i + 1, total), UUID(json.loads(text)["retracted_event_id"]))
        for i, text in zip(indices, payloads, strict=True)
    ]
    inside = pc.is_in(
        pa.array([str(target) for _, target in targets], pa.string()),
        value_set=table.column("event_id"),
    ).to_pylist()
    batch_ids = {target for (_, target), here in zip(targets, inside, strict=True) if here}
    own = {UUID(str(i)) for i in table.column("event_id").take(indices).to_pylist()}
    return targets, batch_ids, own


def check_targets(store: LedgerStore, table: pa.Table, *, where: str = "input") -> None:
    """Recorded or replicated rows: each retraction's target is in the batch or stored.

    Raises:
        NotFound: a target neither stored nor in ``table`` (exit 5).
    """
    targets, batch_ids, _ = _table_targets(table, where)
    if targets:
        check_retractions(store, targets, batch_ids)


# --- triages ------------------------------------------------------------------------------------


def refuse_untriaged(
    table: pa.Table, *, where: str = "input", before: int = 0, total: int | None = None
) -> None:
    """The triage rule over a table of store rows, or a part of a batch: ``before`` events
    precede ``table`` in a batch of ``total`` (None: ``table`` is the batch), for the
    message's event number.

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
        at = label(where, before + index + 1, table.num_rows if total is None else total)
        refusal = triage_refusal if versions[index].as_py() is None else never_proposed
        raise refusal(at, payload.get("candidate_id", "?"))


# --- the rules by what a path holds ------------------------------------------------------------


def check_events(
    store: LedgerStore,
    events: Sequence[Event],
    *,
    expected_version: int | None = None,
    where: str = "input",
) -> None:
    """Every rule, for a batch of events (the careful path) before it is appended.

    ``where`` names the input in messages (``options``, ``<stdin>``, a file).

    Raises:
        InvalidInput: a ``candidate_triaged`` with no expected version, a retraction of a
            retraction (exit 3).
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
            raise triage_refusal(label(where, number, total), event.candidate_id)
        # A candidate's stream opens with its proposal: a triage at version 1 (or expected at
        # 0 with no proposal before it in the batch) triages a candidate nobody proposed.
        first = event.stream_version == 1 or (
            event.stream_version is None
            and expected_version == 0
            and (event.stream or event.default_stream()) not in proposed
        )
        # ... unless the ledger holds the candidate: then the version given is stale, someone
        # else's change came first (exit 4 from the store, naming the version there), not a typo
        if first and store.stream_version(event.stream or event.default_stream()) == 0:
            raise never_proposed(label(where, number, total), event.candidate_id)
    targets = [
        (label(where, number, total), event.retracted_event_id)
        for number, event in enumerate(events, start=1)
        if isinstance(event, EventRetracted)
    ]
    if targets:
        retractions = {event.event_id for event in events if isinstance(event, EventRetracted)}
        check_retractions(store, targets, {event.event_id for event in events}, retractions)


def check_rows(store: LedgerStore, rows: list[dict[str, Any]], *, where: str = "input") -> None:
    """Every rule, for a batch of store rows (``event_row``'s).

    Raises:
        as ``check_events``.
    """
    total = len(rows)
    targets = []
    for number, row in enumerate(rows, start=1):
        kind = row["type"]
        if kind == "candidate_triaged" and row["stream_version"] in (None, 1):
            payload = json.loads(row["payload"])
            refusal = triage_refusal if row["stream_version"] is None else never_proposed
            raise refusal(label(where, number, total), payload.get("candidate_id", "?"))
        if kind == "event_retracted":
            target = UUID(json.loads(row["payload"])["retracted_event_id"])
            targets.append((label(where, number, total), target))
    if targets:
        batch_ids = {UUID(str(row["event_id"])) for row in rows}
        retractions = {
            UUID(str(row["event_id"])) for row in rows if row["type"] == "event_retracted"
        }
        check_retractions(store, targets, batch_ids, retractions)


def check_table(store: LedgerStore, table: pa.Table, *, where: str = "input") -> None:
    """Every rule, for a batch held as one Arrow table of store rows (the column path).

    Raises:
        as ``check_events``.
    """
    refuse_untriaged(table, where=where)
    targets, batch_ids, own = _table_targets(table, where)
    if targets:
        check_retractions(store, targets, batch_ids, own)


def part_is_clear(con: duckdb.DuckDBPyConnection, table: pa.Table) -> bool:
    """The retraction rules for one part of a batch appended in parts (the chunked path), run
    inside the store's transaction through ``con`` (earlier parts included): a retraction
    whose target is neither in the part nor stored (it may come later in the batch), or that
    targets a retraction, is a doubt: False, and the whole batch takes the column path
    (``check_table`` words the error, or appends it). The triage rule needs no ledger: the
    chunked path applies ``refuse_untriaged`` to each part as it comes.
    """
    import pyarrow.compute as pc

    retractions = pc.equal(table.column("type"), "event_retracted")
    if not pc.any(retractions).as_py():
        return True
    own = set(table.filter(retractions).column("event_id").to_pylist())
    targets = {
        json.loads(text)["retracted_event_id"]
        for text in table.filter(retractions).column("payload").to_pylist()
    }
    if targets & own:
        return False
    outside = sorted(targets - set(table.column("event_id").to_pylist()))
    stored = lookups.stored_types_in(con, outside) if outside else {}
    return len(stored) == len(outside) and "event_retracted" not in stored.values()
