"""Triage by the measured verdict, and the decision that follows a triage.

What the README walkthrough did with ``sql | tail | tr`` and a shell ``case``, as two use cases:

- ``triage_by_verdict``: the candidate's configuration's comparison against the baseline for a
  metric at a concurrency (``benchmark_deltas``) sets the status (``STATUS_OF_VERDICT``:
  improved -> accepted, regressed -> rejected, anything else -> deferred: noise is no reason to
  drop or adopt), the reason names the measurement, and the triage is caused by (cites) the
  comparison event.
- ``follow_triage``: the decision on a candidate that its latest triage took: ``"TEXT: status"``,
  the triage's reason as rationale unless one is given, and the triage's cause (the comparison)
  as evidence.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.app.candidates import Decision, Triage, Written, decide, triage
from ledger.app.checks import Writer
from ledger.errors import InvalidInput, NotFound
from schemas.metrics import COMPARED_METRICS

if TYPE_CHECKING:
    from ledger.store import LedgerStore

#: A measured verdict's triage status (``benchmark_deltas.verdict`` -> ``candidate_triaged``).
STATUS_OF_VERDICT = {"improved": "accepted", "regressed": "rejected"}


def measured_delta(
    store: LedgerStore, candidate_id: str, metric: str, concurrency: int | None, where: str
) -> dict[str, Any]:
    """The comparison of ``candidate_id``'s configuration with the baseline for ``metric`` at
    ``concurrency`` (None: the board's, its highest): ``verdict``, ``config_name``,
    ``concurrency``, ``event_id`` (of the comparison).

    Raises:
        InvalidInput: ``metric`` is none of the compared metrics (exit 3).
        NotFound: no such comparison (the candidate measured by no plan, another metric).
    """
    from ledger.read import agent_reads  # DuckDB's: not at import (docs/mcp.md, Start-up)

    compared = [m.name for m in COMPARED_METRICS]
    if metric not in compared:  # a typo is not a metric no plan measured yet
        close = difflib.get_close_matches(metric, compared, n=2, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}?" if close else f"known: {', '.join(compared)}"
        raise InvalidInput(f"{where}: {metric!r} is no metric a comparison judges ({hint})")
    with store.connect() as con:
        row = agent_reads.measured_delta(con, candidate_id, metric, concurrency)
    if row is None:
        at = f" at c={concurrency}" if concurrency is not None else ""
        raise NotFound(
            f"{where}: no {metric} comparison{at} for candidate {candidate_id!r} "
            "(benchmark_deltas; run a plan with it first)"
        )
    return asdict(row)


def triage_by_verdict(
    store: LedgerStore,
    candidate_id: str,
    metric: str,
    concurrency: int | None,
    writer: Writer,
    where: str,
    *,
    expected_version: int | None = None,
) -> Written:
    """Triage ``candidate_id`` as its measured verdict says (module doc).

    Raises:
        NotFound: no such candidate or comparison (exit 5).
        CandidateConflict: triaged since ``expected_version`` (exit 4).
    """
    delta = measured_delta(store, candidate_id, metric, concurrency, where)
    verdict = delta["verdict"] or "unknown"
    at = f" at c={delta['concurrency']}" if delta["concurrency"] is not None else ""
    request = Triage(
        candidate_id=candidate_id,
        status=STATUS_OF_VERDICT.get(verdict, "deferred"),
        reason=f"{metric.replace('_', ' ')}{at}: {verdict}",
        expected_version=expected_version,
        causation_id=UUID(delta["event_id"]),
    )
    return triage(store, request, writer, where)


def follow_triage(store: LedgerStore, decision: Decision, writer: Writer, where: str) -> Written:
    """Record ``decision`` as the candidate's latest triage took it (module doc).

    Raises:
        InvalidInput: no candidate named (exit 3).
        NotFound: the candidate was never triaged (exit 5).
    """
    if decision.candidate_id is None:
        raise InvalidInput(f"{where}: following a triage needs the candidate (--candidate)")
    from ledger.read import agent_reads

    with store.connect() as con:
        triage = agent_reads.latest_triage(con, decision.candidate_id)
    if triage is None:
        raise NotFound(f"{where}: candidate {decision.candidate_id!r} was never triaged")
    status, reason, cause = triage.status, triage.reason, triage.causation_id
    evidence = list(decision.evidence_event_ids) or ([cause] if cause else [])
    followed = replace(
        decision,
        decision=f"{decision.decision}: {status}",
        rationale=decision.rationale or (f"The triage: {reason}." if reason else None),
        evidence_event_ids=evidence,
    )
    return decide(store, followed, writer, where)


@dataclass(frozen=True)
class TriageAsk:
    """A triage as a front end takes it: a ``status`` given (with its reason and verdict), or
    ``by_verdict``, a metric, to triage as the candidate's measured verdict on it says (at
    ``concurrency``; None: the board's)."""

    candidate_id: str
    status: str | None = None
    reason: str | None = None
    verdict: str | None = None
    by_verdict: str | None = None
    concurrency: int | None = None
    expected_version: int | None = None
    event_id: UUID | None = None


def triage_asked(store: LedgerStore, ask: TriageAsk, writer: Writer, where: str) -> Written:
    """``ask``: ``triage`` with its status, or ``triage_by_verdict`` with its metric.

    Raises:
        InvalidInput: both or neither given, or a reason, verdict or event id beside a metric
            (the measurement sets the status and reason itself) (exit 3).
        NotFound, CandidateConflict: as ``triage`` and ``triage_by_verdict``.
    """
    if (ask.status is None) == (ask.by_verdict is None):
        raise InvalidInput(f"{where}: give a status or a metric to triage by (one of the two)")
    if ask.by_verdict is None:
        request = Triage(
            candidate_id=ask.candidate_id,
            status=ask.status or "",
            reason=ask.reason,
            verdict=ask.verdict,
            expected_version=ask.expected_version,
            event_id=ask.event_id,
        )
        return triage(store, request, writer, where)
    if ask.reason or ask.verdict or ask.event_id:
        raise InvalidInput(f"{where}: triage by a metric sets the status and reason itself")
    return triage_by_verdict(
        store,
        ask.candidate_id,
        ask.by_verdict,
        ask.concurrency,
        writer,
        where,
        expected_version=ask.expected_version,
    )


def decide_asked(
    store: LedgerStore, decision: Decision, writer: Writer, where: str, *, follow: bool = False
) -> Written:
    """``decision`` recorded as given (``decide``), or with ``follow`` as the candidate's latest
    triage took it (``follow_triage``)."""
    if follow:
        return follow_triage(store, decision, writer, where)
    return decide(store, decision, writer, where)
