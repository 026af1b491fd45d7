"""Who may write what, and the input no front end lets through.

- ``Writer``: the actor and default session a front end writes for. The actor is set here,
  always: an event's own ``actor`` is never taken from input (``refuse_front_end_fields``).
- ``RUNNER_TYPES``: the event types only the runners write (a server's lifecycle, benchmark
  runs, comparisons, kernel tuning, speculative-decoding trials, MoE configs). A forged
  ``benchmark_completed`` would move ``benchmark_deltas``; an agent records what it learns
  with the other types (``agent_types()``) and measures through the runners' tools.
- ``check_event``: control characters in strings (a NUL, an escape sequence; tab and line
  breaks are text) and times before 2000 or more than a day ahead of the store's clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.errors import InvalidInput
from schemas import EVENT_TYPES, Actor, Event

#: Event types written only by the runners (``runner:*`` actors), never through a record tool.
RUNNER_TYPES: frozenset[str] = frozenset(
    {
        "server_started",
        "server_ready",
        "server_stopped",
        "server_failed",
        "benchmark_completed",
        "comparison_completed",
        "kernel_tune_started",
        "kernel_config_measured",
        "kernel_tune_completed",
        "spec_decoding_trial_completed",
        "moe_config_recorded",
    }
)


def agent_types() -> tuple[str, ...]:
    """The event types a person or an agent records directly, in name order (read from the
    registry when asked: a type registered later is one too)."""
    return tuple(sorted(set(EVENT_TYPES) - RUNNER_TYPES))


#: Envelope fields the front end or the store sets, never the input: who wrote it (the front
#: end's actor), when it was recorded and where it landed (the store's clock and positions).
FRONT_END_FIELDS: frozenset[str] = frozenset(
    {"actor", "recorded_at", "seq", "stream", "stream_version", "schema_version"}
)

#: The earliest time an event may carry (no inference server is older).
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
#: How far ahead of the store's clock a time may be (clocks of two hosts disagree a little).
FUTURE_SLACK = timedelta(days=1)
#: Characters below U+0020 (and DEL, C1) that are text: tab, line feed, carriage return.
_TEXT_CONTROLS = frozenset("\t\n\r")


@dataclass(frozen=True)
class Writer:
    """Who a front end writes for: its actor (always) and its default session."""

    actor: Actor
    session_id: str | None = None

    def stamp(self, event: Event, session_id: str | None = None) -> Event:
        """``event`` by this writer, in ``session_id`` (else its own, else the default)."""
        session = session_id or event.session_id or self.session_id
        if event.actor == self.actor and event.session_id == session:
            return event
        return type(event).model_validate(
            {**event.model_dump(), "actor": self.actor, "session_id": session}
        )


def refuse_front_end_fields(fields: Mapping[str, Any], where: str) -> None:
    """Refuse input that sets an envelope field only the front end or the store sets.

    Raises:
        InvalidInput: naming the field (exit 3).
    """
    given = sorted(FRONT_END_FIELDS & set(fields))
    if given:
        raise InvalidInput(
            f"{where}: field '{given[0]}' is set by the ledger, not by the caller "
            "(the actor is the client's declared name; recorded_at, seq and stream the store's)"
        )


def refuse_runner_type(event_type: str, writer: Writer, where: str) -> None:
    """Refuse a runner's event type from a writer that is not a runner.

    Raises:
        InvalidInput: naming the type and the tool that records it (exit 3).
    """
    if event_type in RUNNER_TYPES and writer.actor.kind != "runner":
        raise InvalidInput(
            f"{where}: {event_type} events are written by the runners only (run bench, "
            "run plan, start a server: they measure and record them)"
        )


def _strings(value: Any, path: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key, path)
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _times(value: Any, path: str) -> Iterable[tuple[str, datetime]]:
    if isinstance(value, datetime):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _times(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _times(item, f"{path}[{index}]")


def _control(text: str) -> str | None:
    for ch in text:
        code = ord(ch)
        if (code < 0x20 or 0x7F <= code < 0xA0) and ch not in _TEXT_CONTROLS:
            return f"U+{code:04X}"
    return None


def check_event(event: Event, where: str, now: datetime) -> None:
    """Refuse control characters in ``event``'s strings and times out of bounds.

    ``now``: the store's clock (``LedgerStore.clock()``).

    Raises:
        InvalidInput: the first offending field, named (exit 3).
    """
    data = event.model_dump()
    for path, text in _strings(data, ""):
        found = _control(text)
        if found:
            raise InvalidInput(
                f"{where}: field '{path or '(key)'}': control character {found} "
                "(text may hold tabs and line breaks, nothing else below U+0020)"
            )
    latest = now + FUTURE_SLACK
    for path, when in _times(data, ""):
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        if when < EARLIEST or when > latest:
            raise InvalidInput(
                f"{where}: field '{path}': {when.isoformat()} is out of bounds "
                f"(from {EARLIEST.date()} to a day after now, {now.isoformat(timespec='seconds')})"
            )
