"""``tuneledger propose``, ``triage``, ``decide``: the board's verbs, one use case each.

Options -> one value object -> one call of the application layer (``ledger.app``, the same use
cases the MCP server's ``propose_candidate``, ``triage_candidate`` and ``record_decision``
call) -> print. ``--json`` prints the object the MCP tools answer with.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from uuid import UUID

import click

from ledger.cli.context import Context, ledger_option, pass_ctx
from ledger.cli.json_output import json_option, print_json
from ledger.errors import InvalidInput
from schemas.vocab import CandidateKind, Priority, TriageStatus, Verdict

if TYPE_CHECKING:
    from ledger.app import Writer, Written

_KINDS = list(CandidateKind.__args__)  # type: ignore[attr-defined]
_PRIORITIES = list(Priority.__args__)  # type: ignore[attr-defined]
_STATUSES = list(TriageStatus.__args__)  # type: ignore[attr-defined]
_VERDICTS = list(Verdict.__args__)  # type: ignore[attr-defined]


def _event_id(text: str | None) -> UUID | None:
    if text is None:
        return None
    try:
        return UUID(text)
    except ValueError:
        raise InvalidInput(f"--event-id: not a UUID: {text[:60]!r}") from None


def _value(text: str | None) -> object:
    """A flag value: JSON when it parses (4096, true), else the text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _print(written: Written, as_json: bool, line: str) -> None:
    from ledger import app

    if as_json:
        print_json(app.written_json(written))
    else:
        click.echo(line)
    for warning in written.warnings:  # once stored, as ``append`` says it
        click.echo(f"tuneledger: warning: {warning}", err=True)


event_id_option = click.option(
    "--event-id", "event_id_text", help="Give the event id (makes a retry idempotent)."
)


@click.command()
@click.argument("title")
@click.option("--kind", type=click.Choice(_KINDS), default="flag", show_default=True)
@click.option("--flag", help="The server flag (without dashes) for kind flag.")
@click.option("--value", "value_text", help="The flag's value (JSON when it parses, else text).")
@click.option("--hypothesis", help="What should change, and why.")
@click.option("--priority", type=click.Choice(_PRIORITIES))
@click.option("--candidate", "candidate_id", help="Stable id (default: KIND:FLAG).")
@event_id_option
@json_option
@ledger_option
@pass_ctx
def propose(
    ctx: Context,
    title: str,
    kind: str,
    flag: str | None,
    value_text: str | None,
    hypothesis: str | None,
    priority: str | None,
    candidate_id: str | None,
    event_id_text: str | None,
    as_json: bool,
) -> None:
    """Put a candidate on the board (candidate_proposed).

    A candidate already on the board is a conflict (exit 4) naming its status and
    stream_version: never a second proposal.
    """
    from ledger import app

    proposal = app.Proposal(
        title=title,
        kind=kind,
        flag=flag,
        value=_value(value_text),
        hypothesis=hypothesis,
        priority=priority,
        candidate_id=candidate_id,
        event_id=_event_id(event_id_text),
    )
    written = app.propose(ctx.writable_store(), proposal, _writer(ctx), "propose")
    cid = written.candidate["candidate_id"] if written.candidate else candidate_id
    _print(written, as_json, f"proposed {cid} (seq {written.result.seq})")


@click.command()
@click.argument("candidate_id", metavar="CANDIDATE")
@click.argument("status", required=False, type=click.Choice(_STATUSES))
@click.option("--reason", help="Why (shown on the board and in the log).")
@click.option("--verdict", type=click.Choice(_VERDICTS), help="The flag's verdict, if settled.")
@click.option(
    "--by-verdict",
    "metric",
    metavar="METRIC",
    help="Take STATUS from the measured verdict of METRIC (e.g. output_throughput) of the "
    "candidate's configuration against the baseline: improved -> accepted, regressed -> "
    "rejected, else deferred; the triage cites the comparison.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="With --by-verdict: the concurrency compared (default: the board's, the highest).",
)
@click.option(
    "--expected-version",
    type=click.IntRange(min=1),
    help="The stream_version you read on the board (default: the current one): a triage "
    "since is a conflict (exit 4).",
)
@event_id_option
@json_option
@ledger_option
@pass_ctx
def triage(
    ctx: Context,
    candidate_id: str,
    status: str | None,
    reason: str | None,
    verdict: str | None,
    metric: str | None,
    concurrency: int | None,
    expected_version: int | None,
    event_id_text: str | None,
    as_json: bool,
) -> None:
    """Accept, reject, defer or close a candidate (candidate_triaged).

    Give STATUS, or --by-verdict METRIC to follow the measurement. A triage made on a stale
    read is a conflict (exit 4) naming the candidate's new status and stream_version.
    """
    from ledger import app

    ask = app.TriageAsk(
        candidate_id=candidate_id,
        status=status,
        reason=reason,
        verdict=verdict,
        by_verdict=metric,
        concurrency=concurrency,
        expected_version=expected_version,
        event_id=_event_id(event_id_text),
    )
    written = app.triage_asked(ctx.writable_store(), ask, _writer(ctx), "triage")
    event = written.event
    shown = f"{candidate_id} -> {event.status}"  # type: ignore[attr-defined]
    if event.reason:  # type: ignore[attr-defined]
        shown += f": {event.reason}"  # type: ignore[attr-defined]
    _print(written, as_json, f"{shown} (seq {written.result.seq})")


@click.command()
@click.argument("decision")
@click.option("--rationale", help="Why, in the evidence's terms.")
@click.option("--alternative", "alternatives", multiple=True, help="What else was considered.")
@click.option(
    "--evidence", "evidence", multiple=True, metavar="ID", help="An event id (or 8+ digit prefix)."
)
@click.option("--candidate", "candidate_id", help="The candidate it settles.")
@click.option(
    "--follow-triage",
    is_flag=True,
    help="The decision the candidate's latest triage took: DECISION becomes 'DECISION: "
    "STATUS', the rationale defaults to the triage's reason, the evidence to what it cites.",
)
@event_id_option
@json_option
@ledger_option
@pass_ctx
def decide(
    ctx: Context,
    decision: str,
    rationale: str | None,
    alternatives: tuple[str, ...],
    evidence: tuple[str, ...],
    candidate_id: str | None,
    follow_triage: bool,
    event_id_text: str | None,
    as_json: bool,
) -> None:
    """Record a decision with its rationale and evidence (decision_recorded).

    Every evidence id must name a stored event (exit 5 names the one that does not).
    """
    from ledger import app

    request = app.Decision(
        decision=decision,
        rationale=rationale,
        alternatives=alternatives,
        evidence_event_ids=evidence,
        candidate_id=candidate_id,
        event_id=_event_id(event_id_text),
    )
    written = app.decide_asked(
        ctx.writable_store(), request, _writer(ctx), "decide", follow=follow_triage
    )
    # the whole id: events recorded together share their first 12 hex digits (UUIDv7's
    # millisecond), so a cut prefix was ambiguous to ``show``
    cites = "".join(f"\n  cites {e['event_id']} {e['summary']}" for e in written.evidence)
    line = f"decided: {written.event.decision} (seq {written.result.seq}){cites}"  # type: ignore[attr-defined]
    _print(written, as_json, line)


def _writer(ctx: Context) -> Writer:
    from ledger import app

    return app.Writer(ctx.actor, ctx.session)
