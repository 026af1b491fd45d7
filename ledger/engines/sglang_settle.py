"""The last touches on an SGLang log's facts once every line is read: limits a line capped, the
run's warnings, whether piecewise CUDA graph ran (``sglang_facts.parse_server_log``; ``keep_warnings``
serves the vLLM reader too)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sglang_facts import ServerLogFacts

#: Limits an override line can lower: the fact then holds the value in effect.
LIMIT_FLAGS = ("max_running_requests", "max_total_num_tokens")


def apply_caps(facts: ServerLogFacts) -> None:
    """A limit a line capped (``max_running_requests is capped to 24 by the mamba state cache``)
    holds the value in effect, whichever of the cap line and the limits line came first; the
    requested value stays in ``server_args`` and the override."""
    for override in facts.overrides:
        name = (override.flag or "").replace("-", "_")
        if name in LIMIT_FLAGS and isinstance(override.effective, int):
            current = getattr(facts, name)
            if current is None or override.effective < current:
                setattr(facts, name, override.effective)
                facts.evidence[name] = override.line


def keep_warnings(facts: ServerLogFacts) -> None:
    """The run's warnings: the warning lines read, then the error lines the engine handled, each
    text once (every rank prints its own copy), in log order."""
    lines = [*facts.warnings, *(line for line, _ in facts.outcome.harmless), *facts.outcome.handled]
    seen: set[str] = set()
    kept = []
    for line in sorted(lines, key=lambda x: x.number):
        if line.message not in seen:
            seen.add(line.message)
            kept.append(line)
    facts.warnings = kept


def settle_piecewise(facts: ServerLogFacts, begin: bool, end: bool) -> None:
    """Piecewise (0.5.23: prefill) CUDA graph is switched off silently: no capture lines after the
    decode CUDA graph capture finished means off (docs/engines.md); a "Disable ... because" line
    says so and why. A capture that began counts as done once the server said it was ready (the
    capture runs before). Before the decode capture ends (a crash, a truncated log) it is unknown."""
    if end or (begin and facts.ready):
        facts.piecewise_cuda_graph = True
        if not end and "piecewise_begin" in facts.evidence:
            facts.evidence["piecewise_cuda_graph"] = facts.evidence["piecewise_begin"]
    elif facts.piecewise_disabled_reason is not None:
        facts.piecewise_cuda_graph = False
    elif not begin and facts.cuda_graph_captured and not facts.phase_graphs:
        # 0.5.23 logs "Disable prefill CUDA graph because ..." whenever it is off: there,
        # silence means an excerpt, not off.
        facts.piecewise_cuda_graph = False
        if facts.server_args.get("disable_piecewise_cuda_graph") is True:
            facts.piecewise_disabled_reason = "disable_piecewise_cuda_graph=True in server_args"
        elif facts.server_args.get("cuda_graph_backend_prefill") == "disabled":
            facts.piecewise_disabled_reason = "cuda_graph_backend_prefill='disabled' in server_args"


def backend_from_args(facts: ServerLogFacts) -> None:
    """The attention backend the server args name, where no line said which one ran."""
    if facts.attention_backend is None and isinstance(
        facts.server_args.get("attention_backend"), str
    ):
        facts.attention_backend = facts.server_args["attention_backend"]
        if "server_args" in facts.evidence:
            facts.evidence["attention_backend"] = facts.evidence["server_args"]
