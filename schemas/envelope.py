"""The envelope every ledger event carries: identity, position, provenance, host.

The envelope fields live flat on each event next to its payload fields, so an
agent can append ``{"type": "note_added", "text": "..."}`` without nesting. The
store splits envelope from payload when it writes (see ``ENVELOPE_FIELDS``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .vocab import ActorKind, EvidenceKind

_SM_RE = re.compile(r"^sm_?(\d{2,3})[a-z]?$")


def normalize_compute_capability(value: str | float | None) -> str | None:
    """Spell a compute capability as ``smNN``.

    Accepts ``"12.0"``, ``12.0``, ``"sm120"``, ``"SM_90"``, ``"9.0"``; returns
    ``"sm120"``, ``"sm90"``. ``None`` stays ``None``.

    Raises:
        ValueError: the value is not a compute capability.
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    match = _SM_RE.match(text)
    if match:
        return f"sm{match.group(1)}"
    try:
        major, _, minor = text.partition(".")
        return f"sm{int(major)}{int(minor or 0)}"
    except ValueError:
        raise ValueError(
            f"not a compute capability: {value!r} (want e.g. 'sm120' or '12.0')"
        ) from None


class StrictModel(BaseModel):
    """Base of every ledger model: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class Actor(StrictModel):
    """Who appended an event: a person, a coding agent, or a runner."""

    kind: ActorKind = "person"
    name: str = "unknown"

    @classmethod
    def parse(cls, text: str) -> Actor:
        """Parse ``"kind:name"`` (``"agent:claude"``) or a bare name (a person).

        Raises:
            ValueError: the kind is not person, agent or runner.
        """
        kind, sep, name = text.partition(":")
        if not sep:
            kind, name = "person", text
        if not name.strip():
            raise ValueError(f"actor {text!r} has no name")
        return cls.model_validate({"kind": kind, "name": name})


class Host(StrictModel):
    """The machine an event applies to. Every field may be unknown (``None``).

    ``compute_capability`` is spelled ``smNN`` (``sm120`` for RTX PRO 6000
    Blackwell, ``sm90`` for H100/H200); ``gpu_memory_mib`` is per GPU in MiB.
    """

    gpu_name: str | None = None
    compute_capability: str | None = None
    gpu_count: int | None = Field(default=None, ge=0)
    gpu_memory_mib: int | None = Field(default=None, ge=0)
    driver: str | None = None
    cuda: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    hostname: str | None = None

    @field_validator("compute_capability", mode="before")
    @classmethod
    def _sm(cls, value: Any) -> str | None:
        return normalize_compute_capability(value)


class Evidence(StrictModel):
    """A pointer to why something is believed.

    ``kind`` says what ``ref`` is: ``source`` (``file.py:123``), ``log`` (a log
    line, ``ref`` the file:line where known), ``event`` (an event id),
    ``benchmark``, ``seed`` (a write-up and message id), ``file``, ``url``, or
    ``text`` (free text only).
    """

    kind: EvidenceKind = "text"
    ref: str | None = None
    text: str | None = None


def _now() -> datetime:
    return datetime.now(UTC)


def _new_event_id() -> UUID:
    """A new UUIDv7 (``uuid6.uuid7``). uuid6 is imported on first use: at import it reads its
    own version from the installed packages' metadata, which a process that makes no new id
    (an import of a file: its ids derive from the content) need not pay."""
    from uuid6 import uuid7

    return uuid7()


class EventEnvelope(StrictModel):
    """Fields common to every event.

    ``seq`` (global position, gapless, 1-based) and ``stream_version`` (position
    in the stream, 1-based) are assigned by the store; ``recorded_at`` too when
    not given. ``occurred_at`` is when the fact happened, when that is not when it
    was recorded (an imported log line's timestamp, a benchmark file's date);
    ``None`` means "when recorded". ``event_id`` is a UUIDv7 unless given: giving it makes an append
    idempotent (a retry returns the original ``seq``).
    """

    event_id: UUID = Field(default_factory=_new_event_id)
    seq: int | None = None
    stream: str | None = None
    stream_version: int | None = Field(default=None, ge=1)
    recorded_at: datetime | None = None
    occurred_at: datetime | None = None
    actor: Actor = Field(default_factory=Actor)
    session_id: str | None = None
    causation_id: UUID | None = None
    correlation_id: UUID | None = None
    host: Host | None = None
    source: str | None = Field(
        default=None,
        description="Where this record came from: an imported file:line, a seed message.",
    )

    #: Names of the envelope fields: everything else on an event is payload.
    ENVELOPE_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @field_validator("recorded_at", "occurred_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC) if value is not None else None
        except OverflowError:  # 0001-01-01T00:00+05:00 is before year 1 in UTC
            raise ValueError("out of range once converted to UTC (years 1 to 9999)") from None


EventEnvelope.ENVELOPE_FIELDS = frozenset(EventEnvelope.model_fields) | {"type", "schema_version"}
