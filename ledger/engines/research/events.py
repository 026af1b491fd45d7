"""A research result as ledger events: one ``flag_researched`` (basis ``source``) per flag of
interest, with the version, arch and model it holds for, and its evidence as source pointers.

Event ids are derived from what was researched (the wheel's hash, the target, the flags given,
the flag, who and in which session), so recording the same research twice appends nothing new.
"""

from __future__ import annotations

import uuid
from typing import Any

from schemas import Actor, CandidateProposed, Evidence, FlagResearched, Host

from .analysis import Research
from .reports import FlagReport

_NAMESPACE = uuid.UUID("0e4b6a1c-6f2d-5b7a-9c3e-2d1f0a9b8c7d")
_HELP_CHARS = 400


def _event_id(
    result: Research, report: FlagReport, actor: Actor | None, session: str | None
) -> uuid.UUID:
    target = result.target
    given = sorted(f"{k}={target.flags[k]!r}" for k in target.flags)
    seed = "\n".join(
        [
            result.index.key,
            str(target.arch),
            str(target.model.architecture if target.model else None),
            str(target.tp),
            str(target.cuda),
            *given,
            report.field,
            str(actor),
            str(session),
        ]
    )
    return uuid.uuid5(_NAMESPACE, seed)


def researched_event(
    result: Research, report: FlagReport, *, actor: Actor | None = None, session: str | None = None
) -> FlagResearched:
    target = result.target
    help_text = report.definition.help or None
    if help_text and len(help_text) > _HELP_CHARS:
        help_text = help_text[: _HELP_CHARS - 1] + "…"
    hardware = sorted(
        {
            fact
            for reader in report.readers
            for gate in reader.reach.deciding()
            for fact in (f.text for f in gate.facts if f.kind == "hardware")
        }
    )
    fields = {
        "event_id": _event_id(result, report, actor, session),
        "flag": report.flag,
        "engine": result.index.engine,
        "engine_version": result.index.version,
        "what_it_does": help_text,
        "activation_condition": "; ".join(report.conditions) or None,
        "arch_gating": "; ".join(hardware) or None,
        "verdict": report.verdict,
        "basis": "source",
        "arch": target.arch,
        "model_architecture": target.model.architecture if target.model else None,
        "tp_size": target.tp,
        "conditions": list(report.conditions),
        "evidence": [Evidence(kind="source", ref=e.ref, text=e.text) for e in report.evidence],
        "notes": report.reason,
        "verdict_confidence": report.confidence,
        "session_id": session,
        "source": f"tuneledger research {result.index.engine}=={result.index.version} "
        f"(sha256 {result.index.key[:16]})",
    }
    if actor is not None:
        fields["actor"] = actor
    return FlagResearched(**fields)


def researched_events(
    result: Research, *, actor: Actor | None = None, session: str | None = None
) -> list[FlagResearched]:
    return [researched_event(result, r, actor=actor, session=session) for r in result.reports]


#: Verdicts worth a trial on the board: the source says it may take effect here.
WORTH_TRYING = ("effective", "conditional")


def proposed_candidates(
    result: Research, *, actor: Actor | None = None, session: str | None = None
) -> list[CandidateProposed]:
    """A board candidate (``flag:NAME``) for each flag given that the source says may take
    effect here; the flags it says do nothing are not proposed (their verdicts say why)."""
    index, target = result.index, result.target
    host = Host(compute_capability=target.arch, engine=index.engine, engine_version=index.version)
    out = []
    for report in result.reports:
        if not report.is_given or report.verdict not in WORTH_TRYING:
            continue
        value = report.given if isinstance(report.given, str | int | float | bool) else None
        fields: dict[str, Any] = {
            "candidate_id": f"flag:{report.flag}",
            "kind": "flag",
            "title": f"--{report.flag} ({index.engine} {index.version}: {report.verdict})",
            "flag": report.flag,
            "value": value,
            "hypothesis": report.reason,
            "host": host,
            "session_id": session,
            "source": f"tuneledger research {index.engine}=={index.version}",
        }
        if actor is not None:
            fields["actor"] = actor
        out.append(CandidateProposed(**fields))
    return out
