"""Typed event models of the tuneledger ledger (pydantic v2), free of storage and UI code.

``parse_event`` turns any stored or typed event dict, at any known schema
version, into the current model.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .envelope import Actor, EventEnvelope, Evidence, Host, normalize_compute_capability
from .events import *  # noqa: F401,F403  (the event classes)
from .events import (
    CURRENT_VERSIONS,
    EVENT_ADAPTER,
    EVENT_CLASSES,
    EVENT_TYPES,
    AnyEvent,
    Event,
    normalize_flag,
)
from .parts import BenchMetrics, SettingOverride, StartupFacts, Workload
from .upcasting import UpcastError, upcast
from .vocab import NO_EFFECT_VERDICTS, VERDICTS


def parse_event(data: dict[str, Any]) -> Event:
    """Validate one event dict into its current model, upcasting older versions.

    ``data`` is flat: envelope and payload fields side by side, ``type`` required,
    ``schema_version`` optional (current when absent).

    Raises:
        pydantic.ValidationError: unknown ``type``, missing or mistyped field.
        UpcastError: a ``schema_version`` this code cannot read.
    """
    type_name = data.get("type")
    if not isinstance(type_name, str) or type_name not in CURRENT_VERSIONS:
        return EVENT_ADAPTER.validate_python(data)  # the union's error names the bad tag
    current = CURRENT_VERSIONS[type_name]
    version = data.get("schema_version")
    if isinstance(version, int) and version != current:
        envelope = {k: v for k, v in data.items() if k in EventEnvelope.ENVELOPE_FIELDS}
        payload = {k: v for k, v in data.items() if k not in EventEnvelope.ENVELOPE_FIELDS}
        data = {**envelope, **upcast(type_name, version, payload), "schema_version": current}
    # The type's own model, not the union: models build their validators on first use
    # (defer_build), so a process that validates one type never builds the other 21
    # (about 40 ms of a CLI append's start-up).
    model = EVENT_TYPES[type_name]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # Keep the union's error shape (locations start with the type's tag) for callers;
        # pydantic reads the keys it needs from each error dict and ignores ``msg``/``url``.
        raise ValidationError.from_exception_data(
            "tagged-union",
            [{**e, "loc": (type_name, *e["loc"])} for e in exc.errors()],  # type: ignore[typeddict-unknown-key]
        ) from None


__all__ = [
    "Actor",
    "AnyEvent",
    "BenchMetrics",
    "CURRENT_VERSIONS",
    "EVENT_CLASSES",
    "EVENT_TYPES",
    "Event",
    "EventEnvelope",
    "Evidence",
    "Host",
    "NO_EFFECT_VERDICTS",
    "SettingOverride",
    "StartupFacts",
    "UpcastError",
    "VERDICTS",
    "Workload",
    "normalize_compute_capability",
    "normalize_flag",
    "parse_event",
]
