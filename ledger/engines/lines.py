"""The line grammar shared by every engine log: what launchers put around a line, and its level.

An engine's line reaches a log file through layers, each adding its own prefix; this module takes
them off, outermost first, and says which level the line was logged at when any layer says so:

- ANSI colour codes (a terminal capture, ``docker logs`` of a TTY container);
- docker compose's ``name  | `` column (``sglang-1  | [2025-10-29 11:25:58 TP3] ...``);
- systemd's journal (``Mar 07 23:50:27 host python[811]: ...``, short or ISO time);
- a host program re-logging the engine's output with its own prefix (a Python logger's
  ``2025-03-07 23:50:27,531 - __main__ - INFO - ``, a launcher's
  ``2026-06-09 14:01:54.604 [Info] (Process) ``): its shape is learned from a line that holds
  an engine line inside, then taken off every line of that shape, traceback lines included;
- torch's rank prefix ``[rank0]:`` and its C++ (glog) header ``[E1201 02:07:08.408271257 123
  ProcessGroupNCCL.cpp:607]`` (level from the letter: E error, W warning, I info, F fatal);
- uvicorn's ``ERROR:    `` / ``INFO:     `` level column.

The engines' own prefixes (SGLang's ``[ts TPn]``, vLLM's ``LEVEL MM-DD hh:mm:ss [file.py:N]`` and
process tag) are read by ``sglang_facts`` and ``vllm_facts``; both give a ``LogLine``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import chain, islice

from ledger.input_files import BulkRun


@lru_cache(maxsize=4096)
def parse_stamp(text: str) -> datetime:
    """``text`` read as ``%Y-%m-%d %H:%M:%S`` (``ValueError`` if it is not one). Cached: a served
    log repeats each second's time on many lines (every rank, every batch), and ``strptime``
    was a tenth of a log import's time (docs/reliability.md)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


def head_lines(text: str, count: int) -> list[str]:
    """``text.splitlines()[:count]`` without splitting the whole text (a sniff of a 200 MB log
    read its first 5,000 lines from a list of all of them): every ``\n`` is a line end of
    ``splitlines``, so the first ``count`` lines end by the ``count``-th ``\n``."""
    end = 0
    for _ in range(count):
        end = text.find("\n", end) + 1
        if end == 0:
            return text.splitlines()[:count]
    return text[:end].splitlines()[:count]


#: Levels as this package names them (``None``: the line carries none, as SGLang's own format).
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# A colour code whose ESC byte a paste dropped (GitHub shows "[1;36m(EngineCore_DP0 pid=1)[0;0m").
_BARE_SGR_RE = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
# CI runners and log collectors put a time first (a cloud log viewer's export its severity before
# it: "ERROR 2025-04-07T19:13:52.3178Z "): GitHub Actions' and kubectl --timestamps'
# RFC 3339 time ("2024-05-01T12:34:56.1234567Z "), Buildkite's bracketed one
# ("[2024-05-01T12:34:56Z] "), kubectl --prefix's "[pod/name/container] ".
_CI_TIME_RE = re.compile(
    r"^(?P<wrap>(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) )?\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)\]? )"
)
_KUBECTL_PREFIX_RE = re.compile(r"^(?P<wrap>\[pod/[\w.-]+/[\w.-]+\] )")
# What a paste into an issue adds: a Markdown code fence or inline-code backticks around a line,
# GitHub's phone-number autolink of a timestamp ("[[2025-11-19 14](tel:2025-11-19 14):41:27]"),
# a terminal's echo of Ctrl-C before the next line ("^C(EngineCore pid=1) INFO ...").
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
_TEL_LINK_RE = re.compile(r"\[([^\[\]]*)\]\(tel:[^)]*\)")
_CTRL_ECHO_RE = re.compile(r"^(?P<wrap>(?:\^[CZ\\])+)")
# A gutter with no name before it: Buildkite's and many CI viewers' "  | ", a quoted paste's "> ".
_GUTTER_RE = re.compile(r"^(?P<wrap> {0,8}\| |> )")
# docker compose pads the service name (``name-1``, ``name_1``) to a column, then "| ".
_COMPOSE_RE = re.compile(r"^(?P<wrap>[A-Za-z0-9][\w.-]{0,80}\s+\|(?: |$))")
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_JOURNAL_RE = re.compile(
    rf"^(?P<wrap>(?:{_MONTH} [ \d]\d \d\d:\d\d:\d\d|\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?)"
    r" [\w.-]+ [\w.@/-]+(?:\[\d+\])?: )"
)
_TORCH_RANK_RE = re.compile(r"^(?P<wrap>(?:\[\d+\] )?\[rank\d+\]: ?)")
_GLOG_RE = re.compile(r"^\[(?P<letter>[EWIF])\d{4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [\w./-]+:\d+\] ?")
_GLOG_LEVEL = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "CRITICAL"}
_UVICORN_RE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
# "[2025-03-07 23:50:27][ERROR]: msg" and "[ERROR] msg": a bracketed level before the message.
_BRACKET_LEVEL_RE = re.compile(
    r"^(?:\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\])?\[(?P<level>DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\]:? "
)

#: Where an engine line starts inside a host program's line: SGLang's "[YYYY-mm-dd HH:MM:SS" or
#: vLLM's "LEVEL MM-DD hh:mm:ss" (its process tag first when there is one).
ENGINE_START_RE = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: [A-Z][A-Z_]*\d+)*\] "
    r"|(?:\([\w.-]+(?: rank=\d+)? pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
)
# What a host prefix looks like: a time of day, a level word, a "|" column or Ray's actor tag
# ("(WorkerDict pid=281552) ", ", ip=..." on another node), in at most 200
# characters without a "[" of its own (but a pid's "[811]", a bracketed level "[Info]"). The
# mark may open the prefix: Python's default logging format is "INFO:__main__:" before the line.
_HOST_WRAP_RE = re.compile(
    r"^(?P<wrap>(?:[^\[]|\[\d+\]|\[(?:[Ii]nfo|INFO|[Ww]arn(?:ing)?|WARN(?:ING)?|[Ee]rror|ERROR|[Dd]ebug|DEBUG)\]){0,200}?"
    r"(?:\d{1,2}:\d\d:\d\d|\b(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|Info|Warning|Error|Debug)\b|\||"
    r"\bpid=\d+(?:, ip=[\d.]+)?\))"
    r"(?:[^\[]|\[\d+\]|\[(?:[Ii]nfo|INFO|[Ww]arn(?:ing)?|WARN(?:ING)?|[Ee]rror|ERROR|[Dd]ebug|DEBUG)\]){0,120}?)$"
)
_LEVEL_WORDS = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|Info|Warning|Warn|Error|Debug|Critical)"


@dataclass(frozen=True, slots=True)  # one per line of a log: no __dict__ each
class LogLine:
    """One line of a log: 1-based ``number``, the ``raw`` text, and what its prefixes said.

    ``message`` is the text after every prefix (the raw text, stripped, for a line without
    one); ``timestamp`` naive local time as the engine printed it; ``ranks`` maps ``TP`` / ``DP``
    / ``EP`` / ``PP`` (SGLang) or ``rank`` (torch) to its number; ``level`` the level a prefix
    stated (``None``: none did, as in SGLang's default format); ``wrapped``: a launcher or host
    program's own prefix was taken off; ``process`` vLLM's process tag (``EngineCore_DP0``).
    """

    number: int
    raw: str
    message: str
    timestamp: datetime | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    level: str | None = None
    wrapped: bool = False
    process: str | None = None

    @property
    def prefixed(self) -> bool:
        """True when the line carries the engine's own timestamped prefix."""
        return self.timestamp is not None


@dataclass(frozen=True)
class Unwrapped:
    """A raw line without its launchers' prefixes: ``text``, whether any was taken off, the
    level a launcher layer stated (glog, uvicorn, a bracketed level) and torch's rank."""

    text: str
    wrapped: bool = False
    level: str | None = None
    rank: int | None = None


#: How many first lines of a log ``Unwrapper.learn`` reads for a host prefix.
LEARN_LINES = 5000


class Unwrapper:
    """Takes launcher prefixes off the lines of one log (see the module doc).

    A host program's prefix has no fixed form: it is learned from the first line that holds an
    engine line after a prefix of host shape (a time of day, a level word or a ``|`` column),
    as a pattern with its digits and level words free, and then taken off every line that starts
    with that pattern, continuation lines included (so a traceback keeps its exception).
    """

    def __init__(self) -> None:
        self.host: re.Pattern[str] | None = None

    def learn(self, lines: list[str], scan: int = LEARN_LINES) -> None:
        """Learn a host prefix from the first ``scan`` lines (no-op when none has one)."""
        for raw in lines[:scan]:
            text = strip_layers(raw.rstrip("\r\n"))[0]
            inner = ENGINE_START_RE.search(text)
            if inner is None or inner.start() == 0:
                continue
            head = text[: inner.start()]
            if _HOST_WRAP_RE.match(head):
                self.host = _shape_of(head)
                return

    def unwrap(self, raw: str) -> Unwrapped:
        """``raw`` without its prefixes; see ``Unwrapped``. A line a progress bar redrew with
        ``\r`` reads as a terminal shows it: its last frame."""
        if self.host is None and raw[:1] == "(" and plain_of_layers(raw):
            return Unwrapped(raw.rstrip("\r\n"))
        return self.unwrap_in_full(raw)

    def unwrap_in_full(self, raw: str) -> Unwrapped:
        """``unwrap`` looking for every layer (``unwrap`` skips that for a line no layer can
        start, ``plain_of_layers``)."""
        text = raw.rstrip("\r\n")
        if "\r" in text:
            frames = [frame for frame in text.split("\r") if frame.strip()]
            text = frames[-1] if frames else ""
        text, wrapped = strip_layers(text)
        if self.host is not None and (m := self.host.match(text)):
            text, wrapped = text[m.end() :], True
            text, again = strip_layers(text)
            wrapped = wrapped or again
        rank = None
        if m := _TORCH_RANK_RE.match(text):
            rank = int(re.findall(r"rank(\d+)", m.group("wrap"))[0])
            text, wrapped = text[m.end() :], True
        level, text = inner_level(text)
        return Unwrapped(text, wrapped, level, rank)


#: What may make a launcher layer inside a line (``strip_layers``: ANSI codes, a bare colour
#: code's ``[1;36m``, a fence or backticks, an autolink) or redraw it (``\r``).
LAYER_MARKS = ("\x1b", "\r", "\n", "`", "~~~", "](tel:")
_BRACKET_DIGIT_RE = re.compile(r"\[\d")


def has_layer_mark(raw: str) -> bool:
    """``any(mark in raw for mark in LAYER_MARKS)``, written out (a generator costed more than
    the searches, on every line of a log)."""
    return (
        "\x1b" in raw or "\r" in raw or "\n" in raw or "`" in raw or "~~~" in raw or "](tel:" in raw
    )


def plain_of_layers(raw: str) -> bool:
    """True when no launcher rule can take anything off ``raw`` as long as it starts with
    ``(`` (vLLM's process tag, Ray's actor tag): every rule of ``strip_layers``, torch's rank,
    ``inner_level`` and a bracketed level needs another first character, and the rules that
    search inside a line need one of ``LAYER_MARKS`` or a ``[`` before a digit. Most lines of a
    served vLLM log are such lines; ``unwrap`` gives them back as they are without the ~8 us
    of looking (``tests/engines/test_plain_line.py`` compares it with ``unwrap_in_full``)."""
    if has_layer_mark(raw):
        return False
    return "[" not in raw or _BRACKET_DIGIT_RE.search(raw) is None


def strip_layers(text: str) -> tuple[str, bool]:
    """``text`` without ANSI codes (with or without their ESC byte), a CI runner's or kubectl's
    time or pod prefix, docker compose's column, the journal's prefix and a bare ``| `` gutter
    (repeated while one is found: a journal of a compose service has both)."""
    wrapped = False
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "m" in text and "[" in text:
        text = _BARE_SGR_RE.sub("", text)
    if "`" in text or "~~~" in text:
        if _FENCE_RE.match(text):
            return "", True
        if text.startswith("`") and text.rstrip().endswith("`") and len(text.strip()) > 1:
            text, wrapped = text.strip().strip("`"), True
    if "](tel:" in text:
        text, wrapped = _TEL_LINK_RE.sub(r"\1", text), True
    while True:
        m = (
            _CI_TIME_RE.match(text)
            or _CTRL_ECHO_RE.match(text)
            or _KUBECTL_PREFIX_RE.match(text)
            or _COMPOSE_RE.match(text)
            or _JOURNAL_RE.match(text)
            or _GUTTER_RE.match(text)
        )
        if m is None:
            return text, wrapped
        text, wrapped = text[m.end() :], True


#: Where a record starts inside a line that lost its newlines (a log pasted as one paragraph):
#: an engine prefix, a traceback's header, frame or chain line, an exception line.
_RECORD_START_RE = re.compile(
    r"(?P<prefix> )(?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    r"|\((?:EngineCore|APIServer|VllmWorker|Worker)\w* (?:rank=\d+ )?pid=\d+\))"
    # vLLM's level and time, unless right after its process tag (one prefix, not two)
    r"|(?P<level> )(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d)"
    # a traceback's lines, unless right after a prefix (vLLM repeats its prefix on each of them)
    r"|(?<!\]) (?=Traceback \(most recent call last\):|File \"[^\"]+\", line \d+"
    r"|The above exception was|During handling of the above"
    r"|(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): )"
)
_PROC_TAG_END_RE = re.compile(r"pid=\d+\)$")
#: What each engine prefix ``_RECORD_START_RE`` finds begins with: a line holding fewer than two
#: of these has fewer than two prefixes (a cheap test that skips its search on most lines).
_PREFIX_CUES = (" [", " (", " DEBUG ", " INFO ", " WARNING ", " ERROR ", " CRITICAL ")


def _cue_count(line: str) -> int:
    """``sum(line.count(cue) for cue in _PREFIX_CUES)``, written out: a generator cost more than
    the counts on every line of a log."""
    return (
        line.count(" [")
        + line.count(" (")
        + line.count(" DEBUG ")
        + line.count(" INFO ")
        + line.count(" WARNING ")
        + line.count(" ERROR ")
        + line.count(" CRITICAL ")
    )


#: A line this long with this many record starts is a flattened paste, not one record.
FLATTENED_LEN, FLATTENED_STARTS = 300, 3


_LEADING_TIME_RE = re.compile(
    r"^(?:`{3})?(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) )?\[?"
    r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
)


#: ``_LEADING_TIME_RE`` at the start of a line after the first: it starts with the literal ``\n``,
#: so a search jumps from one line end to the next, where ``^`` in ``re.MULTILINE`` is tried at
#: every character of a run (docs/reliability.md, "Server log import speed and memory").
_NEXT_TIMED_LINE_RE = re.compile("\n" + _LEADING_TIME_RE.pattern.removeprefix("^"))


def _has_timed_line(text: str) -> bool:
    """Whether a line of ``text`` (lines joined by ``\\n``) has a leading time."""
    return _LEADING_TIME_RE.match(text) is not None or _NEXT_TIMED_LINE_RE.search(text) is not None


def oldest_first(lines: list[str]) -> list[str]:
    """``lines`` in the order they were written: a cloud log viewer exports newest first, which
    shows as leading times that never rise and fall at least once; such a log is turned round."""
    times = [m.group(1).replace(" ", "T") for line in lines if (m := _LEADING_TIME_RE.match(line))]
    if len(times) < 5 or len(times) < len([x for x in lines if x.strip()]) * 0.8:
        return lines
    pairs = list(zip(times, times[1:], strict=False))
    if any(b > a for a, b in pairs) or not any(b < a for a, b in pairs):
        return lines
    return lines[::-1]


class Chronology:
    """``oldest_first``'s decision taken one line at a time, holding no line: ``watch`` the
    lines as they are read, then ``backwards`` says whether ``oldest_first`` turns them round."""

    def __init__(self) -> None:
        self.times = self.nonblank = 0
        self.previous: str | None = None
        self.rise = self.fall = False

    def watch(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` as they are, each seen on its way. Once a leading time rose, ``backwards``
        is False whatever follows (it needs no rise), so the rest is passed on unlooked-at: a
        served log's times rise within its first lines, and the match cost ~3 µs a line. A
        ``BulkRun`` none of whose lines has a leading time (vLLM's) is counted whole; one with
        (SGLang's) is seen line by line until a time rose."""
        lines = iter(lines)
        for item in lines:
            if type(item) is BulkRun and not _has_timed_line(item):
                self.nonblank += item.count("\n") + 1  # a bulk line is never blank
                yield item
                continue
            for line in item.split("\n") if type(item) is BulkRun else (item,):
                self._see(line)
                yield line
            if self.rise:
                break
        yield from lines

    def _see(self, line: str) -> None:
        if line.strip():
            self.nonblank += 1
        if m := _LEADING_TIME_RE.match(line):
            stamp = m.group(1).replace(" ", "T")
            if self.previous is not None:
                self.rise = self.rise or stamp > self.previous
                self.fall = self.fall or stamp < self.previous
            self.previous = stamp
            self.times += 1

    @property
    def backwards(self) -> bool:
        if self.times < 5 or self.times < self.nonblank * 0.8:
            return False
        return self.fall and not self.rise


def runs_backwards(lines: Iterable[str]) -> bool:
    """Whether ``oldest_first`` turns ``lines`` round, in one pass holding no line."""
    chronology = Chronology()
    for _ in chronology.watch(lines):
        pass
    return chronology.backwards


def unflatten(lines: list[str]) -> list[str]:
    """``lines`` oldest first (``oldest_first``), with each flattened line (a log that lost its
    newlines: a record boundary is a prefix or a timestamp, not a newline) split at its records'
    starts; a frame line gets the indentation Python gave it. Lines are then numbered as split
    or turned (the paste had no lines of its own)."""
    return list(split_flattened(oldest_first(lines)))


def split_flattened(lines: Iterable[str]) -> Iterator[str]:
    """``unflatten`` without turning the log round, one line at a time (a log read as a stream,
    once ``runs_backwards`` said it runs forward)."""
    for line in lines:
        if len(line) <= FLATTENED_LEN and _cue_count(line) < 2:
            yield line  # fewer than two engine prefixes can start in it: one record
            continue
        if type(line) is BulkRun:
            yield line  # lines of a bulk shape, each one record
            continue
        found = [
            m
            for m in _RECORD_START_RE.finditer(line)
            if not (m.group("level") and _PROC_TAG_END_RE.search(line, 0, m.start()))
        ]
        starts = [m.end() for m in found]
        prefixes = sum(
            1 for m in found if m.group("prefix") or m.group("level")
        )  # an engine prefix inside the line
        if not (len(line) > FLATTENED_LEN and len(starts) >= FLATTENED_STARTS) and prefixes < 2:
            yield line
            continue
        for begin, end in zip([0, *starts], [*starts, len(line)], strict=True):
            part = line[begin:end].rstrip()
            if part.strip():
                yield f"  {part}" if part.startswith('File "') else part


def learned_lines(lines: Iterable[str], forward: bool) -> tuple[Unwrapper, Iterable[str]]:
    """A log's lines as a reader takes them (line ends off, ``unflatten``) and the ``Unwrapper``
    learned from their first ``LEARN_LINES``. ``forward``: the caller checked that the log runs
    forward (``runs_backwards``), so its lines are split one at a time and none is held past the
    ones learned from (a log read as a stream); else they are read whole."""
    unwrapper = Unwrapper()
    if not forward:
        whole = unflatten([raw.rstrip("\r\n") for raw in lines])
        unwrapper.learn(whole)
        return unwrapper, whole
    stream = split_flattened(raw if type(raw) is BulkRun else raw.rstrip("\r\n") for raw in lines)
    head = list(islice(stream, LEARN_LINES))
    unwrapper.learn(head)
    return unwrapper, chain(head, stream)


def _shape_of(head: str) -> re.Pattern[str]:
    """A pattern for host prefixes like ``head``: digit runs and level words free, the rest as is,
    runs of spaces of any width (columns padded to the level's length)."""
    parts = re.split(rf"(\d+|{_LEVEL_WORDS}\b| +)", head)
    out = []
    for part in parts:
        if not part:
            continue
        if part.isdigit():
            out.append(r"\d+")
        elif re.fullmatch(_LEVEL_WORDS, part):
            out.append(_LEVEL_WORDS)
        elif part.isspace():
            out.append(r" +")
        else:
            out.append(re.escape(part))
    return re.compile("^" + "".join(out))


_FILE_LEVEL_RE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w./-]+\.py:\d+: ")


def inner_level(message: str) -> tuple[str | None, str]:
    """(level, message) of an engine line's message that starts with a level of its own: some
    SGLang builds' ``LEVEL file.py:NNN: ``, uvicorn's ``INFO:     ``, a bracketed ``[ERROR]``,
    torch's C++ ``[E1201 ...]`` header. ``(None, message)`` when it starts with none."""
    for rx in (_FILE_LEVEL_RE, _UVICORN_RE, _BRACKET_LEVEL_RE):
        if m := rx.match(message):
            word = m.group("level")
            return ("WARNING" if word == "WARN" else word), message[m.end() :]
    if m := _GLOG_RE.match(message):
        return _GLOG_LEVEL[m.group("letter")], message[m.end() :]
    return None, message


#: The exception line of a Python traceback, by shape: a dotted class name, then ": message"
#: or nothing (``KeyboardInterrupt``).
EXCEPTION_LINE_RE = re.compile(r"^(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(?P<msg>.*))?$")
