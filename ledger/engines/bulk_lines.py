"""A served log's bulk lines read by their whole shape, without a ``LogLine`` (docs/reliability.md,
"Server log import speed and memory").

Most lines of a served log are a few shapes repeated: SGLang's ``Decode batch`` / ``Prefill
batch`` lines and uvicorn's access lines, vLLM's access lines and ``Avg prompt throughput``
lines. Once a reader holds what it keeps of them (the first ``BATCH_LINES_KEPT`` batch lines of a
kind, the first ``IGNORED_KEPT`` lines ``assess`` files under ``ignored``), such a line's only
effects are its time, its count, its place in the log's tail and (vLLM) its record: each regex
below matches a line only when its every field has the shape that makes those its only effects
(digits where numbers go, no level but ``INFO``, no words a rule of the reader, ``classify``,
``quiet_kind`` or ``find_tracebacks`` looks for), and ``take`` does just that, handing the line to
``KeptLines.add_quiet``, which makes its ``LogLine`` only if it is kept. Any other line, or a
bulk line while the reader still keeps its kind, goes the full way: the answers are the same
(``tests/engines/test_bulk_lines.py`` reads every fixture log and served variants both ways).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .failure import IGNORED_KEPT
from .kept_lines import KeptLines, QuietLine
from .lines import LogLine, parse_stamp

#: How many lines of each batch kind an SGLang reader keeps whole (``sglang_facts``).
BATCH_LINES_KEPT = 1000

_ACCESS = (
    r'INFO:     \d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+ - "(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) '
    r'/[a-z0-9_/.-]* HTTP/1\.[01]" \d{3} (?:OK|[A-Z][a-z]+(?: [A-Z][a-z]+)*)'
)
_NUM = r"\d+(?:\.\d+)?"
SGLANG_BULK_RE = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: TP\d{1,3})?\] (?:"
    r"(?P<decode>Decode batch, #running-req: \d+, #token: \d+, token usage: \d+\.\d+, "
    r"cuda graph: True, gen throughput \(token/s\): \d+\.\d+, #queue-req: \d+(?:, )?)"
    r"|(?P<prefill>Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, "
    r"token usage: \d+\.\d+, #running-req: \d+, #queue-req: \d+(?:, )?)"
    rf"|(?P<access>{_ACCESS}))$"
)
VLLM_BULK_RE = re.compile(
    r"(?:\((?P<proc>APIServer|EngineCore_DP\d+|EngineCore) pid=\d+\) )?(?:"
    rf"(?P<access>{_ACCESS})"
    r"|(?P<head>INFO (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d) \[(?:loggers|metrics)\.py:\d+\] )"
    rf"(?:Engine \d+: )?Avg prompt throughput: {_NUM} tokens/s, Avg generation throughput: "
    rf"{_NUM} tokens/s, Running: \d+ reqs, (?:Swapped: \d+ reqs, )?Waiting: \d+ reqs, "
    rf"(?:GPU|CPU) KV cache usage: {_NUM}%(?:, Prefix cache hit rate: {_NUM}%)?\.?)$"
)


class SglangBulk:
    """``parse_server_log``'s shortcut for one log: ``take`` a line when it is a bulk line whose
    every effect is known now."""

    def __init__(self, kept: KeptLines, split: Callable[[int, str], LogLine]) -> None:
        self.kept, self.split = kept, split
        self._stamp: tuple[str, datetime] | None = None

    def take(self, number: int, raw: str, facts: Any) -> bool:
        """Read ``raw`` (line ``number``) into ``facts`` and ``kept`` as the bulk line it is;
        False (nothing done) for a line to read the full way."""
        m = SGLANG_BULK_RE.match(raw)
        if m is None or facts.first_timestamp is None:
            return False
        kind = m.lastgroup
        if kind != "access":
            batches = facts.decode_batches if kind == "decode" else facts.prefill_batches
            if len(batches) < BATCH_LINES_KEPT or self.kept.ignored < IGNORED_KEPT:
                return False
        text = m.group("ts")
        if self._stamp is None or self._stamp[0] != text:
            try:
                self._stamp = (text, parse_stamp(text))
            except ValueError:
                return False  # the full way says what is wrong with it
        facts.last_timestamp = self._stamp[1]
        quiet = "none" if kind == "access" else "ignored"
        self.kept.add_quiet(QuietLine(number, raw, True, quiet, number, None, self.split))
        return True


class VllmBulk:
    """``parse_vllm_log``'s shortcut for one log (see ``SglangBulk``); ``records`` is its
    ``_Records`` (each line's record, per process)."""

    def __init__(self, kept: KeptLines, split: Callable[[int, str], LogLine], records: Any) -> None:
        self.kept, self.split, self.records = kept, split, records
        self._stamp: tuple[str, datetime] | None = None

    def take(self, number: int, raw: str, facts: Any) -> bool:
        m = VLLM_BULK_RE.match(raw)
        if m is None or facts.first_timestamp is None:
            return False
        proc = m.group("proc")
        if proc is not None and facts.pid is None:
            return False  # the full way reads the pid
        records = self.records
        head = m.group("head")
        if head is None:  # an access line: its own record, uvicorn's level
            prefixed, record = False, number
            records.current[proc], records.header[proc] = number, ""
        else:
            text = f"1900-{m.group('md')} {m.group('hms')}"
            if self._stamp is None or self._stamp[0] != text:
                try:
                    self._stamp = (text, parse_stamp(text))
                except ValueError:
                    return False
            facts.last_timestamp = self._stamp[1]
            this = raw[: m.end("head")]
            if this != records.header.get(proc):
                records.current[proc], records.header[proc] = number, this
            prefixed, record = True, records.current[proc]
        records.last = record
        self.kept.add_quiet(QuietLine(number, raw, prefixed, "none", record, proc, self.split))
        return True
