"""The application layer: the use cases both front ends (the CLI and the MCP server) call.

A front end turns its input (options, tool arguments) into one of the value objects here
(``Proposal``, ``Triage``, ``Decision``, ``Record``, ``Export``, ``ResearchRequest`` in
``ledger.app.research``), calls one function with the store and
the ``Writer`` it speaks for, and prints or returns what comes back (``Written``). Neither
front end orchestrates: the order of checks, reads and appends lives here, once.

Who writes is the front end's to say (``Writer``: the CLI's ``--actor``, the MCP client's
declared name), never the input's: ``check`` refuses an envelope field a caller may not set
(``actor``, ``recorded_at``, ``seq``...), a runner's event type from anyone but a runner,
control characters in strings and times out of bounds, each as one line (exit 3).
"""

from __future__ import annotations

from ledger.app.candidates import (
    CandidateConflict,
    Decision,
    Proposal,
    Triage,
    Written,
    board_row,
    decide,
    propose,
    triage,
    written_json,
)
from ledger.app.checks import (
    FRONT_END_FIELDS,
    RUNNER_TYPES,
    Writer,
    agent_types,
    check_event,
    refuse_front_end_fields,
)
from ledger.app.export import Export, Exported, export_markdown
from ledger.app.records import Record, record
from ledger.app.verdicts import (
    STATUS_OF_VERDICT,
    TriageAsk,
    decide_asked,
    follow_triage,
    triage_asked,
    triage_by_verdict,
)

__all__ = [
    "TriageAsk",
    "decide_asked",
    "triage_asked",
    "FRONT_END_FIELDS",
    "RUNNER_TYPES",
    "STATUS_OF_VERDICT",
    "CandidateConflict",
    "Decision",
    "Export",
    "Exported",
    "Proposal",
    "Record",
    "Triage",
    "Writer",
    "Written",
    "agent_types",
    "board_row",
    "check_event",
    "decide",
    "export_markdown",
    "follow_triage",
    "propose",
    "record",
    "refuse_front_end_fields",
    "triage",
    "triage_by_verdict",
    "written_json",
]
