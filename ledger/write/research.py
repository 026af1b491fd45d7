"""Recording a flag research: ``tuneledger research --record/--propose`` and the MCP server's
``research_flags`` write the same events through this one function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledger.errors import ConcurrencyConflict
from ledger.write import commands

if TYPE_CHECKING:
    from ledger.engines.research import Research
    from ledger.store import AppendResult, LedgerStore
    from schemas import Actor


@dataclass
class Recorded:
    """What a research left in the ledger: the ``flag_researched`` appends (None: not asked)
    and the candidates it put on the board."""

    researched: list[AppendResult] | None = None
    proposed: list[str] = field(default_factory=list)

    def appends_json(self) -> list[dict[str, object]]:
        """The ``flag_researched`` appends as the CLI's ``--json`` and the MCP tool show them."""
        return [
            {"event_id": str(r.event_id), "seq": r.seq, "duplicate": r.duplicate}
            for r in self.researched or []
        ]


def record_research_result(
    store: LedgerStore,
    result: Research,
    *,
    actor: Actor | None,
    session: str | None,
    record: bool,
    propose: bool,
) -> Recorded:
    """Propose the flags given that may take effect here (a candidate already on the board is
    left as it is), then append one ``flag_researched`` per flag shown (ids derived from what
    was researched: the same research again appends nothing).

    Raises:
        as ``commands.append``.
    """
    from ledger.engines.research.events import proposed_candidates, researched_events

    done = Recorded()
    if propose:
        for event in proposed_candidates(result, actor=actor, session=session):
            try:
                commands.propose_candidate(store, event)
            except ConcurrencyConflict:  # its stream exists: on the board already
                continue
            done.proposed.append(event.candidate_id)
    if record:
        events = researched_events(result, actor=actor, session=session)
        done.researched = commands.record_research(store, events)
    return done
