"""Where appended events landed: ``AppendResult`` for one event, ``AppendResults`` for a batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class AppendResult:
    """Where one event landed: global ``seq``, ``stream`` and ``stream_version``.

    ``duplicate`` is true when the event was already stored (an idempotent retry):
    the positions are then the original ones.
    """

    event_id: UUID
    seq: int
    stream: str
    stream_version: int
    duplicate: bool = False


class AppendResults(Sequence[AppendResult]):
    """Where each event of a bulk append landed, kept column-wise.

    A sequence of ``AppendResult`` in input order; each is built only when looked at
    (building 100,000 of them, a ``UUID`` parse each, cost more than inserting the rows).
    ``seqs`` (ints, input order) and ``applied`` (how many were new) need no object per event.
    """

    def __init__(
        self,
        event_ids: Any,
        seqs: Sequence[int],
        streams: Any,
        versions: Any,
        duplicates: Sequence[bool] | None = None,
    ) -> None:
        # ids, streams, versions: lists, or Arrow arrays turned into lists on first access.
        self._columns: list[Any] = [event_ids, streams, versions]
        self.seqs = seqs
        self._duplicates = duplicates

    @classmethod
    def of(cls, results: Sequence[AppendResult]) -> AppendResults:
        """The same results, from ``AppendResult`` objects (the careful path's)."""
        return cls(
            [str(r.event_id) for r in results],
            [r.seq for r in results],
            [r.stream for r in results],
            [r.stream_version for r in results],
            [r.duplicate for r in results],
        )

    @property
    def applied(self) -> int:
        """How many events this append stored (the others were already stored)."""
        if self._duplicates is None:
            return len(self.seqs)
        return len(self._duplicates) - sum(self._duplicates)

    def __len__(self) -> int:
        return len(self.seqs)

    def _lists(self) -> list[list[Any]]:
        if not isinstance(self._columns[0], list):
            self._columns = [column.to_pylist() for column in self._columns]
        return self._columns

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        ids, streams, versions = self._lists()
        duplicate = bool(self._duplicates[index]) if self._duplicates is not None else False
        return AppendResult(
            UUID(ids[index]), self.seqs[index], streams[index], versions[index], duplicate
        )

    def __repr__(self) -> str:
        return f"AppendResults({len(self)} events, {self.applied} new)"
