"""What the research says of one flag: its verdict, the reads and overrides behind it, its
evidence (the verdicts themselves are decided in verdicts.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .definitions import FlagDefinition
from .gates import Reach
from .model import Site
from .records import Change, Refusal
from .values import show

NO_EFFECT = ("dead-code", "not-activated", "no-op", "overridden")


@dataclass
class Evidence:
    ref: str  # file:line inside the engine package
    text: str  # what is there: the read, the condition as written, the warning


@dataclass
class ReaderResult:
    site: Site
    form: str
    text: str
    strict: bool
    reach: Reach
    raises: Refusal | None = None  # what the reading function certainly raises here
    function: str = ""
    use: str = "value"  # ``ReadSite.use``: a limit on a run-time value, a copy, ...


@dataclass
class OverrideResult:
    site: Site
    value: str
    conditions: list[str]
    warning: str | None
    applies: bool | None  # True: happens here; None: depends; False: not here
    kind: str  # "resolution" (the walk passed it) | "static" (found, not walked) | "runtime"
    target: str | None = None  # for a coupling: the flag set


@dataclass
class FlagReport:
    engine: str
    version: str
    flag: str  # CLI spelling without dashes
    field: str
    definition: FlagDefinition
    verdict: str
    reason: str
    given: Any = None
    is_given: bool = False
    resolved: Any = None
    conditions: list[str] = dataclasses.field(default_factory=list)
    readers: list[ReaderResult] = dataclasses.field(default_factory=list)
    overrides: list[OverrideResult] = dataclasses.field(default_factory=list)
    couplings: list[OverrideResult] = dataclasses.field(default_factory=list)
    refusals: list[Refusal] = dataclasses.field(default_factory=list)
    evidence: list[Evidence] = dataclasses.field(default_factory=list)
    #: ``proven`` (every path to every read followed, every condition decided), ``likely``
    #: (decided on paths partly followed), ``unknown`` (the analysis cannot tell)
    confidence: str = "unknown"
    #: the paths not followed or the conditions taken as run-time values, for people
    unresolved: list[str] = dataclasses.field(default_factory=list)
    #: the read that would decide hangs on a call that was assumed, not seen: nothing decided
    path_assumed: bool = False

    @property
    def no_effect(self) -> bool:
        return self.verdict in NO_EFFECT


def from_change(change: Change) -> OverrideResult:
    conditions = []
    for cond in change.conditions:
        state = {True: "holds", None: "unknown"}.get(cond.value, "does not hold")
        basis = "; ".join(sorted(f.text for f in cond.facts if f.kind != "runtime"))
        conditions.append(f"{cond.text}: {state}" + (f" ({basis})" if basis else ""))
    applies: bool | None = True if change.certain else None
    return OverrideResult(
        change.site, show(change.value), conditions, change.warning, applies, "resolution"
    )


def override_text(override: OverrideResult) -> str:
    when = (
        f" when {' and '.join(c.split(':')[0] for c in override.conditions[-3:])}"
        if override.conditions
        else ""
    )
    warning = f"; logs {override.warning!r}" if override.warning else ""
    return f"sets {override.value}{when}{warning}"


def reader_text(reader: ReaderResult) -> str:
    gates = reader.reach.deciding() or reader.reach.gates
    if not gates:
        return f"read: {reader.text}"
    return f"read: {reader.text} — " + "; ".join(g.describe() for g in gates[:3])
