"""What each event type carries, for people typing events: ``tuneledger types [TYPE]`` and
``tuneledger append TYPE --help``.

Read from the pydantic models (``schemas.EVENT_TYPES``), so it never drifts from what the
ledger validates. Units follow the field-name conventions of the schemas: ``*_ms``
milliseconds, ``*_s`` seconds, ``*_throughput`` tokens/s (``request_throughput``
and ``request_rate`` requests/s), ``*_len`` and ``*_tokens`` tokens, ``*_bytes`` bytes, ``*_mib`` MiB, ``*_gb`` GB, ``*_pct`` percent; changes,
CI bounds, CVs and thresholds of comparisons are fractions (0.05 = +5%).
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

import schemas.metrics
from ledger.errors import InvalidInput
from schemas import EVENT_TYPES
from schemas.envelope import EventEnvelope

_FRACTIONS = {"change", "ci_low", "ci_high", "noise_threshold", "baseline_cv", "cv", "confidence"}


def unit_of(name: str) -> str:
    """The unit of a field: a metric's from the metric table (``schemas.metrics``), else from
    its name (see the module docstring); "" when none applies."""
    metric_unit = schemas.metrics.unit_of(name)
    if metric_unit is not None:
        return metric_unit
    if name in _FRACTIONS:
        return "fraction"
    if name in ("request_throughput", "request_rate"):
        return "req/s"
    if name.endswith(("_len", "_tokens")) or name.startswith("total_") and name.endswith("tokens"):
        return "tokens"
    for suffix, unit in (
        ("_ms", "ms"),
        ("_s", "s"),
        ("_throughput", "tok/s"),
        ("_bytes", "bytes"),
        ("_mib", "MiB"),
        ("_gb", "GB"),
        ("_pct", "%"),
        ("_per_s", "/s"),
    ):
        if name.endswith(suffix):
            return unit
    return ""


def type_name(annotation: Any) -> str:
    """A short readable form of a field's type: ``int | None``, ``one of a|b``, ``list[str]``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + "|".join(str(a) for a in get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(annotation))
    if origin in (list, tuple, set):
        inner = ", ".join(type_name(a) for a in get_args(annotation) if a is not Ellipsis)
        return f"list[{inner}]"
    if origin is dict:
        key, value = get_args(annotation) or (Any, Any)
        return f"object of {type_name(value)}"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for arg in (annotation, *get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    rows = []
    for name, info in model.model_fields.items():
        if not prefix and name in EventEnvelope.ENVELOPE_FIELDS:
            continue
        key = prefix + name
        nested = _model_of(info.annotation)
        if nested is not None and nested is not model:
            rows.append((key, "object", "", _describe(info, "see below")))
            rows.extend(_rows(nested, key + "."))
            continue
        rows.append((key, type_name(info.annotation), unit_of(name), _describe(info)))
    return rows


def _describe(info: FieldInfo, extra: str = "") -> str:
    parts = ["required" if info.is_required() else ""]
    if info.description:
        parts.append(info.description)
    if extra:
        parts.append(extra)
    return "; ".join(p for p in parts if p)


def field_rows(event_type: str) -> list[tuple[str, str, str, str]]:
    """The payload fields of ``event_type``: (dotted name, type, unit, notes), nested models
    flattened after their field (``tuneledger types`` and docs/reference/events.md).

    Raises:
        InvalidInput: an unknown event type (the message lists the known ones).
    """
    model = EVENT_TYPES.get(event_type)
    if model is None:
        raise InvalidInput(
            f"unknown event type {event_type!r} (known: {', '.join(sorted(EVENT_TYPES))})"
        )
    return _rows(model)


def describe_type(event_type: str) -> str:
    """The fields of ``event_type`` as aligned text lines (name, type, unit, notes).

    Raises:
        InvalidInput: an unknown event type (the message lists the known ones).
    """
    rows = field_rows(event_type)
    model = EVENT_TYPES[event_type]
    doc = (model.__doc__ or "").strip().splitlines()
    head = [
        f"{event_type}: {doc[0] if doc else ''}".rstrip(),
        "fields (-f KEY=VALUE; nested ones as dotted keys, e.g. -f metrics.output_throughput=1582.5):",
    ]
    width = max(len(r[0]) for r in rows) if rows else 0
    twidth = min(40, max((len(r[1]) for r in rows), default=0))
    lines = [f"  {n:<{width}}  {t:<{twidth}}  {u:<8} {d}".rstrip() for n, t, u, d in rows]
    return "\n".join(
        head
        + lines
        + [
            "envelope (every type): session_id, stream, event_id, causation_id, "
            "correlation_id, source, host, actor (options of `append`)"
        ]
    )


def describe_all() -> str:
    """One line per event type: its name and the first line of its docstring."""
    width = max(len(name) for name in EVENT_TYPES)
    lines = []
    for name in sorted(EVENT_TYPES):
        doc = (EVENT_TYPES[name].__doc__ or "").strip().splitlines()
        lines.append(f"{name:<{width}}  {doc[0] if doc else ''}".rstrip())
    return "\n".join(
        lines + ["", "`tuneledger types TYPE` lists a type's fields with their types and units."]
    )
