"""A served log's bulk lines read by their whole shape, without a ``LogLine`` (docs/reliability.md,
"Server log import speed and memory").

Most lines of a served log are a few shapes repeated: SGLang's ``Decode batch`` / ``Prefill
batch`` lines and uvicorn's access lines, vLLM's access lines and ``Avg prompt throughput``
lines. Once a reader holds what it keeps of them (the first ``BATCH_LINES_KEPT`` batch lines of a
kind, the first ``IGNORED_KEPT`` lines ``assess`` files under ``ignored``), such a line's only
effects are its time, its count, its place in the log's tail, (vLLM) its record, and what the
findings read of every such line: an accept length (SGLang's ``accept len``, vLLM's
``SpecDecoding metrics``: the series, its first line and its last, ``AcceptSeries``) and an SGLang
decode line logged with ``cuda graph: False`` (its ``#running-req`` counted among the eager ones,
``eager_decodes.EagerDecodes``, its ``LogLine`` made only if kept there): each regex
below matches a line only when its every field has the shape that makes those its only effects
(digits where numbers go, no level but ``INFO``, no words a rule of the reader, ``classify``,
``quiet_kind`` or ``find_tracebacks`` looks for), and ``take`` does just that, handing the line to
``KeptLines.add_quiet``, which makes its ``LogLine`` only if it is kept. Any other line, or a
bulk line while the reader still keeps its kind, goes the full way: the answers are the same
(``tests/engines/test_bulk_lines.py`` reads every fixture log and served variants both ways).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

from ledger.input_files import BulkRun

from .failure import IGNORED_KEPT
from .kept_lines import KeptLines, QuietLine
from .lines import LogLine, parse_stamp

#: How many lines of each batch kind an SGLang reader keeps whole (``sglang_facts``): a served log
#: has one per rank per step (a million in a day), and each held ~400 bytes; what the findings
#: read of all of them is kept beside.
BATCH_LINES_KEPT = 1000

_ACCESS = (
    r'INFO:     \d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+ - "(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) '
    r'/[a-z0-9_/.-]* HTTP/1\.[01]" \d{3} (?:OK|[A-Z][a-z]+(?: [A-Z][a-z]+)*)'
)
_NUM = r"\d+(?:\.\d+)?"
SGLANG_BULK_RE = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: TP\d{1,3})?\] (?:"
    r"(?P<decode>Decode batch, #running-req: (?P<running>\d+), #token: \d+, token usage: \d+\.\d+, "
    r"(?:accept len: (?P<accept>\d+\.\d+), (?:accept rate: \d+\.\d+, )?)?"
    r"cuda graph: (?:True|(?P<eager>False)), gen throughput \(token/s\): \d+\.\d+, "
    r"#queue-req: \d+(?:, )?)"
    r"|(?P<prefill>Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, "
    r"token usage: \d+\.\d+, #running-req: \d+, #queue-req: \d+(?:, )?)"
    rf"|(?P<access>{_ACCESS}))$"
)
VLLM_BULK_RE = re.compile(
    r"(?:\((?P<proc>APIServer) pid=\d+\) )?(?:"
    rf"(?P<access>{_ACCESS})"
    r"|(?P<head>INFO (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d) \[(?:loggers|metrics)\.py:\d+\] )"
    rf"(?:(?:Engine \d+: )?Avg prompt throughput: {_NUM} tokens/s, Avg generation throughput: "
    rf"{_NUM} tokens/s, Running: \d+ reqs, (?:Swapped: \d+ reqs, )?Waiting: \d+ reqs, "
    rf"(?:GPU|CPU) KV cache usage: {_NUM}%(?:, Prefix cache hit rate: {_NUM}%)?\.?"
    rf"|SpecDecoding metrics: Mean acceptance length: (?P<accept>\d+\.\d+), Accepted throughput: "
    rf"{_NUM} tokens/s, Drafted throughput: {_NUM} tokens/s, Accepted: \d+ tokens, Drafted: \d+ "
    rf"tokens, Per-position acceptance rate: \d+\.\d+(?:, \d+\.\d+)*, Avg Draft acceptance "
    rf"rate: {_NUM}%))$"
)


#: A time every month has (day 28 at most, no year 0): one ``parse_stamp`` reads without fail.
_SURE_STAMP = (
    r"(?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8]) (?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
)
#: One or more SGLang bulk lines in a row, each with its ``\n`` (``input_files.iter_lines``), each
#: with a time that can be (the others are read line by line, where the full way says what is
#: wrong with one).
SGLANG_RUN_RE = re.compile(
    r"(?:^"
    + SGLANG_BULK_RE.pattern.removesuffix("$").replace(
        r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", rf"(?P<ts>{_SURE_STAMP})", 1
    )
    + r"\n)+",
    re.MULTILINE,
)


def numbered(
    items: Iterable[str], take_run: Callable[[int, BulkRun], int]
) -> Iterator[tuple[int, str]]:
    """``enumerate(items, start=1)`` of a reader's lines where a ``BulkRun`` is its lines: each
    is first offered whole to ``take_run(number, run)``, which returns how many lines it took
    (all or none); the lines of one it did not take come one at a time."""
    number = 0
    for item in items:
        if type(item) is BulkRun:
            taken = take_run(number + 1, item)
            if taken:
                number += taken
                continue
            for line in item.split("\n"):
                number += 1
                yield number, line
            continue
        number += 1
        yield number, item


class AcceptSeries:
    """What a reader keeps of the accept lengths of the bulk lines it takes (SGLang's ``accept
    len``, vLLM's ``SpecDecoding metrics``): each value in ``series``, in order; the line of the
    first, if it is the series' first (``first_accept_line``), made at once; the last line with
    one, held as its number and text and made once the log is read (``close``), unless a line
    read the full way came after it. ``key``: the text before a value (one a line)."""

    def __init__(self, key: str, split: Callable[[int, str], LogLine]) -> None:
        self.key, self.split = key, split
        self._value = re.compile(re.escape(key) + r"(\d+\.\d+)")
        self._last: tuple[int, str] | None = None

    def take(self, owner: Any, series: Any, number: int, raw: str, value: str) -> None:
        """One line's accept length ``value`` (line ``number``, ``raw``)."""
        series.append(float(value))
        if owner.first_accept_line is None:
            owner.first_accept_line = self.split(number, raw)
        self._last = (number, raw)

    def take_run(self, owner: Any, series: Any, number: int, run: str) -> None:
        """Every accept length of ``run`` (from line ``number``), in order."""
        if self.key not in run:
            return
        series.extend(map(float, self._value.findall(run)))
        if owner.first_accept_line is None:
            first = _line_at(run, run.find(self.key), number)
            owner.first_accept_line = self.split(*first)
        self._last = _line_at(run, run.rfind(self.key), number)

    def close(self, owner: Any) -> None:
        """Make the last line with an accept length taken here ``last_accept_stamped`` when it
        comes after the one the full way read (every bulk line has a time)."""
        last, held = self._last, owner.last_accept_stamped
        if last is not None and (held is None or held.number < last[0]):
            owner.last_accept_stamped = self.split(*last)


def _line_at(run: str, at: int, number: int) -> tuple[int, str]:
    """The number and text of the line of ``run`` (its first line numbered ``number``) that
    holds offset ``at``."""
    start = run.rfind("\n", 0, at) + 1
    end = run.find("\n", at)
    return number + run.count("\n", 0, start), run[start : end if end >= 0 else len(run)]


_EAGER = "cuda graph: False"
_RUNNING = "#running-req: "


class SglangBulk:
    """``parse_server_log``'s shortcut for one log: ``take`` a line when it is a bulk line whose
    every effect is known now."""

    def __init__(self, kept: KeptLines, split: Callable[[int, str], LogLine]) -> None:
        self.kept, self.split = kept, split
        self._stamp: tuple[str, datetime] | None = None
        #: the number of the last line taken (a prefixed line: the record of a line after it)
        self.taken = 0
        self.accepts = AcceptSeries("accept len: ", split)

    def take_run(self, number: int, run: BulkRun, facts: Any) -> int:
        """``take`` of every line of ``run`` (from line ``number``) at once: how many, or 0 (none
        taken) while the reader keeps batch lines of a kind it holds."""
        if facts.first_timestamp is None or self.kept.ignored < IGNORED_KEPT:
            return 0
        # a kind the reader still keeps: only a run without it (a spec log may log no prefill)
        if len(facts.decode_batches) < BATCH_LINES_KEPT and "] Decode batch" in run:
            return 0
        if len(facts.prefill_batches) < BATCH_LINES_KEPT and "] Prefill batch" in run:
            return 0
        count = run.count("\n") + 1
        last_raw = run[run.rfind("\n") + 1 :]
        m = SGLANG_BULK_RE.match(last_raw)
        if m is None:
            return 0
        kind = "none" if m.lastgroup == "access" else "ignored"
        facts.last_timestamp = parse_stamp(m.group("ts"))  # every time of a run can be
        last = number + count - 1
        self.kept.add_run(
            number, run, count, QuietLine(last, last_raw, True, kind, last, None, self.split)
        )
        self.taken = last
        self.accepts.take_run(facts, facts.accept_series, number, run)
        eager = facts.eager_decodes
        at = run.find(_EAGER)
        while at >= 0:  # in the order of the lines, as the full way reads them
            # a decode line of the pattern: its first field is ``#running-req: N,`` (N digits)
            value = run.find(_RUNNING, run.rfind("\n", 0, at) + 1) + len(_RUNNING)
            eager.add(int(run[value : run.find(",", value)]), partial(self._line, run, at, number))
            at = run.find(_EAGER, at + len(_EAGER))
        return count

    def _line(self, run: str, at: int, number: int) -> LogLine:
        """The ``LogLine`` of the line of ``run`` (from line ``number``) that holds offset ``at``."""
        return self.split(*_line_at(run, at, number))

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
        self.taken = number
        if kind == "decode":
            if (accept := m.group("accept")) is not None:
                self.accepts.take(facts, facts.accept_series, number, raw, accept)
            if m.group("eager") is not None:
                facts.eager_decodes.add(int(m.group("running")), partial(self.split, number, raw))
        return True


class VllmBulk:
    """``parse_vllm_log``'s shortcut for one log (see ``SglangBulk``); ``records`` is its
    ``_Records`` (each line's record, per process)."""

    def __init__(
        self, kept: KeptLines, split: Callable[[int, str], LogLine], records: Any, out: Any
    ) -> None:
        """``out``: the reader's ``VllmLogFacts`` (its spec series)."""
        self.kept, self.split, self.records, self.out = kept, split, records, out
        self._stamp: tuple[str, datetime] | None = None
        self.accepts = AcceptSeries("Mean acceptance length: ", split)

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
        if head is not None and (accept := m.group("accept")) is not None:
            self.accepts.take(self.out, self.out.accept_lengths, number, raw, accept)
        return True


#: One or more vLLM bulk lines in a row (as ``SGLANG_RUN_RE``), each time one that can be.
VLLM_RUN_RE = re.compile(
    r"(?:^"
    + VLLM_BULK_RE.pattern.removesuffix("$")
    .replace(r"(?P<md>\d\d-\d\d)", r"(?P<md>(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8]))", 1)
    .replace(r"(?P<hms>\d\d:\d\d:\d\d)", r"(?P<hms>(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d)", 1)
    + r"\n)+",
    re.MULTILINE,
)


def _proc_and_head(raw: str) -> tuple[str | None, str | None]:
    """The process tag of a vLLM bulk line and its header (``None``: an access line)."""
    proc, start = None, 0
    if raw[:1] == "(":
        proc, start = raw[1 : raw.index(" pid=")], raw.index(") ") + 2
    if raw.startswith("INFO:", start):
        return proc, None
    return proc, raw[: raw.index("] ", start) + 2]


def vllm_take_run(bulk: VllmBulk, number: int, run: BulkRun, facts: Any) -> int:
    """``VllmBulk.take`` of every line of ``run`` (from line ``number``) at once: how many, or 0
    (none taken) while a traceback block is open (``ProcessKeptLines``) or the pid is not read.
    Each process's record after the run is found from the run's end: its last line (an access
    line's own; a throughput line's, that of the first line of its process's last streak of
    lines with the same header, which may go on from before the run)."""
    if facts.first_timestamp is None or facts.pid is None:
        return 0
    lines = run.split("\n")
    records = bulk.records
    # the processes whose lines it holds: the API server's tag, or none (the shapes' only two)
    tagged = run.count("\n(") + (run[:1] == "(")
    unresolved: set[str | None] = {"APIServer"} if tagged else set()
    if tagged < len(lines):
        unresolved.add(None)
    final: dict[str | None, tuple[int, str]] = {}
    streak: dict[str | None, tuple[str, int]] = {}
    for offset in range(len(lines) - 1, -1, -1):
        proc, head = _proc_and_head(lines[offset])
        if proc not in unresolved:
            continue
        if head is not None and (proc not in streak or streak[proc][0] == head):
            streak[proc] = (head, number + offset)  # the streak goes on back
            continue
        if proc in streak:
            head_after, first = streak.pop(proc)
            final[proc] = (first, head_after)
        else:
            final[proc] = (number + offset, "")
        unresolved.discard(proc)
        if not unresolved:
            break
    for proc, (head, first) in streak.items():  # streaks that reach the run's start
        if records.header.get(proc) == head:
            final[proc] = (records.current[proc], head)
        else:
            final[proc] = (first, head)
    last_proc, last_head = _proc_and_head(lines[-1])
    last = number + len(lines) - 1
    quiet = QuietLine(
        last, lines[-1], last_head is not None, "none", final[last_proc][0], last_proc, bulk.split
    )
    first_prefixed = _proc_and_head(lines[0])[1] is not None
    if not bulk.kept.add_run(number, run, len(lines), quiet, first_prefixed):
        return 0
    for proc, (record, head) in final.items():
        records.current[proc], records.header[proc] = record, head
    records.last = final[last_proc][0]
    if (src := run.rfind(".py:")) >= 0:  # the last throughput line's time
        m = VLLM_BULK_RE.match(run, run.rfind("\n", 0, src) + 1)
        if m is not None and m.group("md"):
            facts.last_timestamp = parse_stamp(f"1900-{m.group('md')} {m.group('hms')}")
    bulk.accepts.take_run(bulk.out, bulk.out.accept_lengths, number, run)
    return len(lines)
