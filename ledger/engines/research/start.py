"""The start with the values the flags end up with: a check the engine runs on its way up that
fails on this target refuses every flag researched, whichever it is.

SGLang 0.5.9 picks ``--attention-backend flashinfer`` for Qwen3.5 on sm120 (no MLA, not Hopper,
not sm100), and the attention wrapper it builds for hybrid-GDN models asserts ``triton`` or
``trtllm_mha`` on every Blackwell part: the server does not start at defaults, so no flag that
leaves that value alone takes effect. The check is the engine's own: a read of a flag's
resolved value inside an ``assert`` or a raise's test (``use == "validation"``), reached on this
target with every condition decided, whose function raises there whatever its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import Refusal
from .reports import Evidence, FlagReport
from .values import Unknown, show
from .verdicts import Judge, _is_runtime_read


@dataclass(frozen=True)
class StartRefusal:
    flag: str  # the field whose resolved value the check refuses
    value: Any
    read: str  # file:line of the check's read
    function: str
    refusal: Refusal

    def why(self, cli_name: str) -> str:
        return (
            f"the engine does not start this target with the flags given: --{cli_name} "
            f"resolves to {show(self.value)} here, and {self.function}() ({self.read}) raises: "
            f"{self.refusal.message!r} ({self.refusal.site})"
        )


def start_refusal(judge: Judge) -> StartRefusal | None:
    """The first check of a flag not given (at the value the resolution leaves it) that refuses
    the start on this target; ``None`` when none is found."""
    index, evaluator = judge.index, judge.evaluator
    state = judge.resolution.state
    for name in sorted(n for n in state.changed if n not in state.given):
        if isinstance(state.values.get(name), Unknown):
            continue  # a value the walk could not decide decides no start
        for read in index.reads.get(name, []):
            if read.use != "validation" or not _is_runtime_read(read, index):
                continue
            reach = evaluator.read_reach(read)
            if reach.value is not True:
                continue
            refusal = evaluator.probe(read)
            if refusal is not None and refusal.certain and refusal.message:
                return StartRefusal(
                    name, state.values.get(name), str(read.site), read.scope.function, refusal
                )
    return None


def refuse_at_start(report: FlagReport, start: StartRefusal, cli_name: str) -> None:
    """``report``'s verdict on a target the engine refuses to start: ``incompatible``, the flag's
    own reading kept in the reason (as for a model the engine does not serve)."""
    if report.verdict == "incompatible" or report.field == start.flag:
        return
    report.reason = f"{start.why(cli_name)} (the flag itself: {report.verdict}; {report.reason})"
    report.verdict = "incompatible"
    report.evidence.append(Evidence(start.read, f"checks --{cli_name}"))
    report.evidence.append(Evidence(str(start.refusal.site), f"raises {start.refusal.message!r}"))
    # the check's path is decided, but the resolution that picked the value may be partly walked
    report.confidence = "likely"
