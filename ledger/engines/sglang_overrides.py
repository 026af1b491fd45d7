"""SGLang's lines that override a requested setting later in the startup, and the requested
values the resolved limits undercut without a line of their own.

SGLang's ``server_args.py``, ``model_runner.py`` and the KV cache configurator log these with the
reason (``sglang_spellings.LINE_SPELLINGS``, fact ``overrides``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .lines import LogLine
from .sglang_lines import scalar

if TYPE_CHECKING:
    from .sglang_facts import ServerLogFacts

_CAPPED_RE = re.compile(
    r"^(?P<name>max_running_requests|max_total_num_tokens|cuda_graph_max_bs\w*) is capped to "
    r"(?P<value>-?\d+) by the (?P<reason>.+?)(?: \(.*\))?\.?$"
)
_AUTO_FLAG_RE = re.compile(
    r"^Automatically (?P<verb>reduce|increase|set|adjust|change|enable|disable|turn off) (?P<flag>--[\w-]+)(?P<rest>.*)$"
)
_TO_VALUE_RE = re.compile(r"^ to ([^\s,]+?)\.?(?:[\s,]|$)")
_REASON_RE = re.compile(r"\b(?:because|for|since|as) (.+?)\.?$")
_DISABLE_FLAG_RE = re.compile(r"^Disable (?P<flag>--[\w-]+) because (?P<reason>.+?)\.?$")
_IS_DISABLED_RE = re.compile(
    r"^(?P<what>[A-Z][\w .-]*?) (?:is|are) (?:disabled|turned off|not supported)(?: and will be turned off)?"
    r" (?:because|since|as|for|due to) (?P<reason>.+?)\.?$"
)
#: The setting an "X is disabled because ..." line names, in CLI spelling (value once overridden).
#: A line naming anything else ("CUTLASS backend is disabled when ...") overrides no flag: it is
#: kept as a warning, never a flag-less finding.
_DISABLED_WHAT: dict[str, tuple[str, Any]] = {
    "overlap scheduler": ("disable-overlap-schedule", True),
    "overlap schedule": ("disable-overlap-schedule", True),
    "cuda graph": ("disable-cuda-graph", True),
    "mixed chunked prefill": ("enable-mixed-chunk", False),
    "mixed chunk": ("enable-mixed-chunk", False),
    "radix cache": ("disable-radix-cache", True),
    "chunked prefill": ("chunked-prefill-size", -1),
    "torch compile": ("enable-torch-compile", False),
    "two batch overlap": ("enable-two-batch-overlap", False),
}


@dataclass(frozen=True)
class OverrideLine:
    """A later line that changed a requested setting: ``flag`` (CLI spelling, no dashes, or
    ``None``), the ``effective`` value when the line states one, the ``reason``, and the line."""

    line: LogLine
    flag: str | None
    effective: Any = None
    reason: str | None = None
    implied: bool = False  # no line of its own: read from the resolved limits (no finding)


def with_line(override: OverrideLine, line: LogLine) -> OverrideLine:
    return OverrideLine(line, override.flag, override.effective, override.reason, override.implied)


_NO_LINE = LogLine(0, "", "")


def override_line_of(msg: str) -> OverrideLine | None:
    """The setting a later startup line overrides, in its spellings (see ``LINE_SPELLINGS``);
    the line itself is filled in by the caller."""
    msg = msg.strip()
    if m := _CAPPED_RE.match(msg):
        return OverrideLine(
            _NO_LINE,
            m.group("name").replace("_", "-"),
            int(m.group("value")),
            f"capped by the {m.group('reason')}",
        )
    if m := _AUTO_FLAG_RE.match(msg):
        flag, rest = m.group("flag").lstrip("-"), m.group("rest")
        value = _TO_VALUE_RE.match(rest)
        effective: Any = scalar(value.group(1)) if value else None
        reason = _REASON_RE.search(rest) if "because" in rest else None
        return OverrideLine(
            _NO_LINE, flag, effective, reason.group(1) if reason else f"SGLang: {msg.rstrip('.')}"
        )
    if m := _DISABLE_FLAG_RE.match(msg):
        return OverrideLine(_NO_LINE, m.group("flag").lstrip("-"), None, m.group("reason"))
    if m := _IS_DISABLED_RE.match(msg):
        what = m.group("what").strip().lower()
        if what.startswith(("piecewise", "prefill")):
            return None  # read as the piecewise / prefill CUDA graph fact
        flag, effective = _DISABLED_WHAT.get(what, (None, None))
        return OverrideLine(_NO_LINE, flag, effective, m.group("reason"))
    return None


def implied_overrides(facts: ServerLogFacts) -> None:
    """Requested values the resolved limits undercut without a line of their own: a
    ``max_running_requests`` above the one the limits line shows, a CUDA graph max batch size
    above the largest captured one."""
    args = facts.server_args
    named = {o.flag for o in facts.overrides}
    asked = args.get("max_running_requests")
    if (
        isinstance(asked, int)
        and facts.max_running_requests is not None
        and facts.max_running_requests < asked
        and "max-running-requests" not in named
    ):
        facts.overrides.append(
            OverrideLine(
                facts.evidence["max_running_requests"],
                "max-running-requests",
                facts.max_running_requests,
                "lowered at startup (the KV cache or another pool holds fewer requests)",
                implied=True,
            )
        )
    if facts.cuda_graph_bs:
        for name in ("cuda_graph_max_bs_decode", "cuda_graph_max_bs"):
            asked = args.get(name)
            if (
                isinstance(asked, int)
                and max(facts.cuda_graph_bs) < asked
                and name.replace("_", "-") not in named
            ):
                facts.overrides.append(
                    OverrideLine(
                        facts.evidence["cuda_graph_bs"],
                        name.replace("_", "-"),
                        max(facts.cuda_graph_bs),
                        "capped at startup (captured batch sizes stop lower, e.g. at max_running_requests)",
                        implied=True,
                    )
                )
                break
