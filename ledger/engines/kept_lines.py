"""The lines of a log that its failure model needs, kept as a reader splits them: the bulk lines of
a served log (SGLang's ``Decode batch`` / ``Prefill batch``, uvicorn's access lines) are not held.

``failure.assess`` used to get every ``LogLine`` of the log (a served SGLang log of 20 MB is
140,000 of them, ~1.7 MB of objects and messages per MB). Most are lines it reads only to set
them aside: a prefixed line that is no ready line, no traceback's start or frame, no source line,
whose verdict (``failure.classify``) is ``none`` or ``warning`` with no stop wording, or
``ignored`` once ``IGNORED_KEPT`` such lines are kept before it. Such a line is dropped from
``lines`` when the line after it is prefixed and starts no traceback, so that every traceback
block, its head and the line above it are what they were (an SGLang block ends at the next
prefixed line: that line is its end whether the lines between are held or not). What
``assess`` reads of the dropped lines is kept beside: the last ``TAIL_LINES`` raw lines of the
whole log (the crash tail) and the raw text of the dropped lines within ``TRACEBACK_LINES`` after
a kept line that may start a failure's excerpt (a traceback's start, a line ``classify`` finds
fatal, a line without the engine's prefix). So ``assess`` over ``lines`` gives what it gave over
every line; ``tests/engines/test_kept_lines.py`` compares the two.

What is held then grows with the lines that are not bulk lines (startup, warnings, errors,
tracebacks and what follows a possible failure's start), not with the served traffic
(docs/reliability.md, "Server log import speed and memory").

``ProcessKeptLines`` is the same for a log whose records interleave per process (vLLM's), where
a traceback block is not ended by the next prefixed line: see its doc.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from .failure import (
    IGNORED_KEPT,
    TAIL_LINES,
    TRACEBACK_LINES,
    may_be_lone_exception,
    may_start_excerpt,
    quiet_kind,
    starts_block,
)
from .lines import LogLine


class QuietLine(NamedTuple):  # a tuple: made for each bulk line, a dataclass cost more
    """A line ``KeptLines.add_quiet`` takes without its ``LogLine``: its ``number``, ``raw`` text,
    whether it has the engine's prefix, its ``quiet_kind``, its record and process, and how to
    make its ``LogLine`` (``split(number, raw)``) if it is kept."""

    number: int
    raw: str
    prefixed: bool
    kind: str
    record: int
    process: str | None
    split: Callable[[int, str], LogLine]


class KeptLines:
    """Feed every line in order with ``add`` (with the number of the line that began its record),
    then ``close``; ``lines`` are the kept ones, ``record`` their records, ``tail`` the last
    ``TAIL_LINES`` raw lines, ``count`` every line, ``raw_at(n)`` the raw text of line ``n``
    within a failure's possible excerpt.

    ``is_ready(line)``: whether any reading of ``assess`` may take the line as a ready line.
    """

    def __init__(self, is_ready: Callable[[LogLine], bool]) -> None:
        self.lines: list[LogLine] = []
        self.record: dict[int, int] = {}
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.count = 0
        self._is_ready = is_ready
        self._pending: tuple[LogLine, int, bool] | QuietLine | None = None
        self._ignored = 0  # kept lines ``assess`` files under ``ignored`` whatever else it reads
        self._window_end = 0  # the last line of the excerpt a kept line may start
        self._dropped_raw: dict[int, str] = {}
        self._by_number: dict[int, str] | None = None

    @property
    def ignored(self) -> int:
        """How many kept lines ``assess`` files under ``ignored`` (it keeps ``IGNORED_KEPT``)."""
        return self._ignored

    def add(self, line: LogLine, record: int) -> None:
        """Take the next line of the log (numbered one past the last)."""
        self.count += 1
        self.tail.append(line.raw)
        block = starts_block(line)
        self._settle_pending(line.prefixed, block)
        self._pending = (line, record, block)

    def add_quiet(self, quiet: QuietLine) -> None:
        """``add`` of a line known by its shape (a served log's bulk line, ``bulk_lines``) to start
        no block, be no ready line, no lone exception and ``quiet.kind`` to ``quiet_kind``: its
        ``LogLine`` is made only if it is kept (most are not)."""
        self.count += 1
        self.tail.append(quiet.raw)
        self._settle_pending(quiet.prefixed, False)
        self._pending = quiet

    def add_run(
        self, number: int, run: str, count: int, last: QuietLine, first_prefixed: bool = True
    ) -> bool:
        """``add_quiet`` of each line of ``run`` (``count`` lines from ``number``, each a line
        ``add_quiet`` could take, each droppable once followed by one), ``last`` its last: all
        but the last are dropped at once (the raw text of those within a failure's excerpt
        kept). False when they may not be (then only the line before the run was settled)."""
        self._settle_pending(first_prefixed, False)
        if not self._run_droppable():
            return False
        self.count += count
        self.tail.extend(run.rsplit("\n", TAIL_LINES)[-TAIL_LINES:])
        within = min(count - 1, self._window_end - number + 1)
        if within > 0:
            for offset, raw in enumerate(run.split("\n", within)[:within]):
                self._dropped_raw[number + offset] = raw
        self._pending = last
        return True

    def _run_droppable(self) -> bool:
        """Whether a run's lines but its last may be dropped now (``add_run``)."""
        return self._ignored >= IGNORED_KEPT  # the caller took only lines its quiet kinds allow

    def _settle_pending(self, following_prefixed: bool, following_block: bool) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if isinstance(pending, QuietLine):
            if self._quick_drop(pending, following_prefixed, following_block):
                if pending.number <= self._window_end:
                    self._dropped_raw[pending.number] = pending.raw
                return
            # not dropped: read the full way, as any line
            pending = (pending.split(pending.number, pending.raw), pending.record, False)
        self._settle(*pending, following_prefixed, following_block)

    def _quick_drop(
        self, quiet: QuietLine, following_prefixed: bool, following_block: bool
    ) -> bool:
        """Whether ``_settle`` drops ``quiet`` (what it would find is known by its shape)."""
        return (
            following_prefixed
            and not following_block
            and (quiet.kind == "none" or self._ignored >= IGNORED_KEPT)
        )

    def close(self) -> None:
        """The log ended: the last line is kept."""
        pending = self._pending
        if isinstance(pending, QuietLine):
            pending = (pending.split(pending.number, pending.raw), pending.record, False)
        if pending is not None:
            line, record, block = pending
            self._keep(line, record, None, block)
        self._pending = None

    def raw_at(self, number: int) -> str:
        """The raw text of line ``number``, a kept line or a dropped one within the excerpt of a
        kept line that may start a failure."""
        raw = self._dropped_raw.get(number)
        if raw is not None:
            return raw
        return self._kept_raw()[number]

    def _kept_raw(self) -> dict[int, str]:
        # built once, on a failure's excerpt only
        if self._by_number is None:
            self._by_number = {x.number: x.raw for x in self.lines}
        return self._by_number

    def _settle(
        self,
        line: LogLine,
        record: int,
        block: bool,
        following_prefixed: bool,
        following_block: bool,
    ) -> None:
        kind = quiet_kind(line, block) if line.prefixed and not self._is_ready(line) else None
        if (
            kind is not None
            and following_prefixed
            and not following_block
            and (kind == "none" or self._ignored >= IGNORED_KEPT)
        ):
            self._drop(line)
            return
        self._keep(line, record, kind, block)

    def _drop(self, line: LogLine) -> None:
        # its raw text stays while it is within an excerpt's window of a kept line
        if line.number <= self._window_end:
            self._dropped_raw[line.number] = line.raw

    def _keep(self, line: LogLine, record: int, kind: str | None, block: bool) -> None:
        self.lines.append(line)
        self.record[line.number] = record
        if kind == "ignored":
            self._ignored += 1
        if block or self._starts_excerpt(line):
            self._window_end = max(self._window_end, line.number + TRACEBACK_LINES - 1)

    def _starts_excerpt(self, line: LogLine) -> bool:
        return may_start_excerpt(line)


class ProcessKeptLines(KeptLines):
    """``KeptLines`` for a log whose processes interleave their records (vLLM): a traceback block
    (``failure.find_tracebacks``) takes the later lines of its record whatever comes between,
    prefixed or not, until its process starts another record. So a line is dropped on other
    grounds than an SGLang line:

    - every line of a block's record after its start is kept, and the first line of the block's
      process in another record (the block's end), whatever it says (``_open``);
    - a line without the prefix may be dropped too (uvicorn's access lines carry the process tag
      and their own level, not vLLM's prefix), unless ``assess`` may read it as a lone exception
      (``failure.may_be_lone_exception``), and a ready line is never dropped, prefixed or not;
    - the line above a block's start is kept (its head), whatever the following line's prefix;
    - only a line that may be a lone exception opens the raw-text window of a line without the
      prefix (the only way ``assess`` finds such a line fatal beyond ``classify``).

    ``tests/engines/test_vllm_kept_lines.py`` compares ``assess`` over the kept lines with
    ``assess`` over every line.
    """

    def __init__(self, is_ready: Callable[[LogLine], bool]) -> None:
        super().__init__(is_ready)
        self._open: dict[str | None, int] = {}  # process -> the record of its open block

    def _run_droppable(self) -> bool:
        return not self._open  # no block open: no line of the run is in one or ends one

    def _quick_drop(
        self, quiet: QuietLine, following_prefixed: bool, following_block: bool
    ) -> bool:
        return (
            quiet.process not in self._open
            and quiet.record not in self._open.values()
            and not following_block
            and (quiet.kind == "none" or self._ignored >= IGNORED_KEPT)
        )

    def _settle(
        self,
        line: LogLine,
        record: int,
        block: bool,
        following_prefixed: bool,
        following_block: bool,
    ) -> None:
        opened = self._open.get(line.process)
        if opened is not None and opened != record:
            del self._open[line.process]  # the block's process moved on: this line ends it
        if opened is not None or record in self._open.values():
            self._keep(line, record, None, block)
            return
        kind = None
        if not self._is_ready(line) and (line.prefixed or not may_be_lone_exception(line)):
            kind = quiet_kind(line, block)
        if (
            kind is not None
            and not following_block
            and (kind == "none" or self._ignored >= IGNORED_KEPT)
        ):
            self._drop(line)
            return
        self._keep(line, record, kind, block)

    def _keep(self, line: LogLine, record: int, kind: str | None, block: bool) -> None:
        if block:
            self._open[line.process] = record
        super()._keep(line, record, kind, block)

    def _starts_excerpt(self, line: LogLine) -> bool:
        return may_start_excerpt(line, unprefixed=False)
