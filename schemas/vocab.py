"""The controlled vocabularies of the ledger: verdicts, statuses, kinds.

Kept as ``Literal`` types (not enums) so that the JSON written to the ledger and
the JSON an agent types on the command line are the same plain strings.
"""

from __future__ import annotations

from typing import Literal, get_args

#: What a flag (or any candidate) turned out to do in one engine version on one arch.
#: ``effective``: it takes effect and does what it says; ``no-op``: the code ignores
#: it in this configuration; ``dead-code``: defined but never read; ``not-activated``:
#: its activation condition is not met here (arch, model, other flags);
#: ``harmful``: it has side effects that cost performance or capacity;
#: ``incompatible``: it crashes or is refused; ``already-default``: the engine
#: already does this; ``no-measurable-change``: measured, change within noise;
#: ``overridden``: the engine replaces the value given (under some other setting, say);
#: ``conditional``: whether it takes effect depends on a value known only at run time
#: (the verdict names it); ``unknown``: not settled yet.
Verdict = Literal[
    "effective",
    "no-op",
    "dead-code",
    "not-activated",
    "harmful",
    "incompatible",
    "already-default",
    "no-measurable-change",
    "overridden",
    "conditional",
    "unknown",
]
VERDICTS: tuple[str, ...] = get_args(Verdict)

#: How far a verdict read off the source can be trusted (``tuneledger research``):
#: ``proven``: every path to every read was followed and every condition decided;
#: ``likely``: decided, but on paths partly followed (a caller not found, a run-time value);
#: ``unknown``: the analysis could not tell (docs/research.md gives each level's precision).
Confidence = Literal["proven", "likely", "unknown"]
CONFIDENCES: tuple[str, ...] = get_args(Confidence)

#: Verdicts meaning "the flag changed nothing or was not in effect" (``no_effect``).
NO_EFFECT_VERDICTS: tuple[str, ...] = (
    "no-op",
    "dead-code",
    "not-activated",
    "no-measurable-change",
)

#: Where a verdict comes from: reading code/docs (a person or an agent), a measurement, the
#: server log, or ``source``: the engine's own source read by ``tuneledger research``
#: (``ledger.engines.research``), for one engine version, arch and model.
VerdictBasis = Literal["researched", "measured", "log", "source"]

#: Each ``VerdictBasis`` in words, as the ``flag_verdicts`` view's docs and the MCP tool say them
#: (docs/views.md): ``researched`` and ``source`` are both reading, a person's or agent's and
#: ``tuneledger research``'s.
BASIS_WORDS: dict[str, str] = {
    "researched": "a person or agent read the code or docs",
    "source": "tuneledger research read the engine's source",
    "measured": "a benchmark comparison",
    "log": "the server's log shows it",
}


def basis_text(*, words: bool = True) -> str:
    """``researched (a person ...) / source (...) / measured (...) / log (...)``; without
    ``words``, the names alone (the MCP tool list has a size budget)."""
    if not words:
        return " / ".join(BASIS_WORDS)
    return " / ".join(f"{basis} ({text})" for basis, text in BASIS_WORDS.items())


#: Who appended an event.
ActorKind = Literal["person", "agent", "runner"]

#: What a todo item (candidate) is.
CandidateKind = Literal["flag", "kernel-tune", "spec-decoding", "patch", "config", "other"]

Priority = Literal["high", "medium", "low"]

#: Outcome of triaging a candidate. ``accepted``: will be tried; ``rejected``: will
#: not be tried (reason says why); ``deferred``: later; ``done``: tried and closed.
TriageStatus = Literal["accepted", "rejected", "deferred", "done"]

#: Kind of cause of a failed server start.
FailureCause = Literal[
    "crash", "port-in-use", "out-of-memory", "timeout", "missing-binary", "interrupted", "other"
]

#: Outcome of a kernel tuning run.
TuneOutcome = Literal["completed", "timed-out", "failed", "cancelled"]

#: Kind of an automatically derived finding.
FindingKind = Literal[
    "flag-not-in-effect",
    "piecewise-cuda-graph-off",
    "default-moe-config",
    "decode-without-cuda-graph",
    "capacity-reduced",
    "known-no-effect",
    "crash",
    "warning",
    "measured-change",
    "moe-config-exceeds-shared-memory",
    "other",
]

#: Kind of an evidence pointer.
EvidenceKind = Literal["source", "log", "event", "benchmark", "seed", "file", "url", "text"]

#: Load pattern of a benchmark run.
LoadKind = Literal["closed-loop", "open-loop"]

#: Outcome of comparing a configuration against the baseline on one metric (``comparison_completed``,
#: the ``benchmark_deltas`` view, the plan table, the TUI and the export all use these words; they
#: are spelled like the flag verdicts above, so ``no-measurable-change`` is one word in both).
#: ``improved`` / ``regressed``: the CI clears the practical threshold tau; ``no-measurable-change``:
#: the whole CI lies within +-tau; ``inconclusive``: neither (more runs needed); ``insufficient-data``:
#: fewer than 2 runs in an arm (or a metric without a value); ``invalid``: a run failed its validity
#: gate; ``too-noisy``: undecided, and at the runs' spread neither the change seen nor no change
#: would be decided within ``schemas.student_t.MAX_PRACTICAL_RUNS`` runs per arm (docs/comparison.md).
ComparisonVerdict = Literal[
    "improved",
    "regressed",
    "no-measurable-change",
    "inconclusive",
    "insufficient-data",
    "invalid",
    "too-noisy",
]
COMPARISON_VERDICTS: tuple[str, ...] = get_args(ComparisonVerdict)

#: Spellings of comparison verdicts that older tuneledgers stored (``comparison_completed`` v1):
#: the ``comparison_completed`` upcaster reads them as the current words.
LEGACY_COMPARISON_VERDICTS: dict[str, str] = {
    "no measurable change": "no-measurable-change",
    "insufficient data": "insufficient-data",
    "too noisy": "too-noisy",
}

#: The flag verdict a consistent comparison verdict stands for (a measured ``finding_recorded``,
#: a speculative-decoding trial's verdict); the other comparison verdicts settle nothing.
FLAG_VERDICT_OF_COMPARISON: dict[str, str] = {
    "improved": "effective",
    "regressed": "harmful",
    "no-measurable-change": "no-measurable-change",
}
