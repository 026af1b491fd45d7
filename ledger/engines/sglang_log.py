"""SGLang server logs: the public face of the reader.

The line grammar is ``sglang_lines`` (launchers' prefixes: ``lines``), the facts
``sglang_facts``, the lines it reads with their spellings ``sglang_spellings``, the run's state
and failure ``failure``, the findings ``sglang_findings``. Shared by ``tuneledger import`` and the
server runner: no store code.
"""

from __future__ import annotations

from .failure import TAIL_LINES, CrashInfo, RunOutcome
from .lines import LogLine
from .sglang_facts import (
    BatchLine,
    MoeConfigLine,
    ServerLogFacts,
    is_ready_line,
    parse_server_log,
)
from .sglang_findings import (
    CRASH_CULPRITS,
    PIECEWISE_DEFAULT_ON_SINCE,
    derive_findings,
    fusion_requested,
    piecewise_on_by_default,
    resolve_arch,
    unclassified_finding,
)
from .sglang_lines import (
    LOG_MARKERS,
    LogFormatError,
    jsonable_args,
    looks_like_server_log,
    parse_batch_fields,
    parse_server_args,
    split_line,
)
from .sglang_overrides import OverrideLine
from .sglang_spellings import FLAG_NAMES, LINE_SPELLINGS

__all__ = [
    "BatchLine",
    "CRASH_CULPRITS",
    "CrashInfo",
    "FLAG_NAMES",
    "LINE_SPELLINGS",
    "LOG_MARKERS",
    "LogFormatError",
    "LogLine",
    "MoeConfigLine",
    "OverrideLine",
    "PIECEWISE_DEFAULT_ON_SINCE",
    "RunOutcome",
    "ServerLogFacts",
    "TAIL_LINES",
    "derive_findings",
    "fusion_requested",
    "is_ready_line",
    "jsonable_args",
    "looks_like_server_log",
    "parse_batch_fields",
    "parse_server_args",
    "parse_server_log",
    "piecewise_on_by_default",
    "resolve_arch",
    "split_line",
    "unclassified_finding",
]
