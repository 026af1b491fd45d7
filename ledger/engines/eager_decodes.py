"""What an SGLang reader keeps of its decode lines logged with ``cuda graph: False``: enough for the
decode-eager finding (``sglang_findings._decode_eager``), in memory bounded by the number of
distinct ``#running-req`` values, not by the number of lines (docs/reliability.md, "Server log
import speed and memory").

The finding reads, of the eager lines whose ``#running-req`` is above the largest captured CUDA
graph batch size (known only once the log is read: a 0.5.23 verify phase may replace it), their
count, the largest such ``#running-req`` and the first three of those lines. Per distinct value,
its count and its first three lines answer all three for any size: the lines above a size are
the union of the values above it, and the first three of a union are among the first three of
each part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .lines import LogLine

#: The lines the finding quotes as evidence (the first ones above the largest captured size).
EAGER_LINES_QUOTED = 3


@dataclass
class EagerGroup:
    """The eager lines of one ``#running-req`` value: how many, and the first
    ``EAGER_LINES_QUOTED`` with their place among all eager lines (0 for the first)."""

    value: Any
    count: int = 0
    lines: list[tuple[int, LogLine]] = field(default_factory=list)


@dataclass(frozen=True)
class EagerAbove:
    """The eager lines above a batch size: their ``count``, the largest ``#running-req`` among them
    (``peak``) and the first ``EAGER_LINES_QUOTED`` of them, in the order of the log."""

    count: int
    peak: Any
    lines: list[LogLine]


@dataclass
class EagerDecodes:
    """Every decode line logged with ``cuda graph: False``, by ``#running-req`` (``None`` or 0 read
    as 0, as the finding reads it): ``count`` lines in all, a group per distinct value in the
    order each value first came. Equal values share a group (``70`` and ``70.0``): its value is
    the first line's, the one ``max`` over the lines gives for the peak; a NaN, never above any
    size (and never equal to itself, so a key of its own each time), is counted only."""

    count: int = 0
    groups: dict[Any, EagerGroup] = field(default_factory=dict)

    def add(self, running_req: Any, line: Callable[[], LogLine]) -> None:
        """One more eager line, its ``#running-req`` value as parsed; ``line`` makes its
        ``LogLine``, called only when the line is kept."""
        place = self.count
        self.count += 1
        value = running_req or 0
        if value != value:  # NaN
            return
        group = self.groups.get(value)
        if group is None:
            group = self.groups[value] = EagerGroup(value)
        group.count += 1
        if len(group.lines) < EAGER_LINES_QUOTED:
            group.lines.append((place, line()))

    def above(self, largest: Any) -> EagerAbove | None:
        """The eager lines whose ``#running-req`` is above ``largest``; ``None`` for none. The peak is
        the first value to reach the largest in the order of the lines, as ``max`` over them
        gives it (groups are in the order of their first line)."""
        hits = [group for group in self.groups.values() if group.value > largest]
        if not hits:
            return None
        first = sorted((kept for group in hits for kept in group.lines), key=lambda kept: kept[0])
        return EagerAbove(
            count=sum(group.count for group in hits),
            peak=max(group.value for group in hits),
            lines=[line for _, line in first[:EAGER_LINES_QUOTED]],
        )

    def kept(self) -> list[tuple[Any, LogLine]]:
        """Every line kept (``#running-req`` value and line), in the order of the log."""
        every = [
            (place, group.value, line)
            for group in self.groups.values()
            for place, line in group.lines
        ]
        return [(value, line) for _, value, line in sorted(every, key=lambda kept: kept[0])]
