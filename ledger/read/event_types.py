"""What each event type carries, for people typing events: ``tuneledger types [TYPE]`` and
``tuneledger append TYPE --help``.

Read from each type's JSON Schema (``schemas.jsonschema.event_schema``, the pydantic model's
validation schema, the one ``append -f`` parses against: ``ledger.write.fields``), so it never
drifts from what the ledger validates. Units follow the field-name conventions of the schemas: ``*_ms``
milliseconds, ``*_s`` seconds, ``*_throughput`` tokens/s (``request_throughput``
and ``request_rate`` requests/s), ``*_len`` and ``*_tokens`` tokens, ``*_bytes`` bytes, ``*_mib`` MiB, ``*_gb`` GB, ``*_pct`` percent; changes,
CI bounds, CVs and thresholds of comparisons are fractions (0.05 = +5%).
"""

from __future__ import annotations

from typing import Any

import schemas.metrics
from ledger.errors import InvalidInput
from schemas import EVENT_TYPES
from schemas.envelope import EventEnvelope
from schemas.jsonschema import array_items, branches, event_schema, kinds, object_branch, resolve

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


_KIND_ORDER = ("string", "integer", "number", "boolean", "array", "object", "null")


def type_text(node: dict[str, Any], root: dict[str, Any]) -> str:
    """A field's type in the JSON Schema's words: ``string | null``, ``one of a|b``,
    ``list of string (uuid)``, ``object of integer``; ``any`` for a free value."""
    alternatives = branches(node, root)
    enum = [v for b in alternatives for v in b.get("enum", [b["const"]] if "const" in b else [])]
    nullable = "null" in kinds(node, root)
    if enum:
        text = "one of " + "|".join(str(v) for v in enum if v is not None)
        return text + (" | null" if nullable else "")
    parts = []
    for b in alternatives:
        t = b.get("type")
        if t == "null":
            continue
        if t == "array":
            items = resolve(b.get("items") or {}, root)
            inner = "object" if object_branch(items, root) is not None else type_text(items, root)
            parts.append(f"list of {inner}")
        elif t == "object" or "properties" in b:
            extra = b.get("additionalProperties")
            if isinstance(extra, dict) and "properties" not in b:
                parts.append(f"object of {type_text(resolve(extra, root), root)}")
            elif "properties" not in b:
                parts.append("object of any")
            else:
                parts.append("object")
        elif isinstance(t, str):
            fmt = b.get("format")
            parts.append(f"{t} ({fmt})" if fmt else t)
    if not parts:
        return "any"
    text = " | ".join(dict.fromkeys(parts))
    return text + (" | null" if nullable else "")


def _rows(
    node: dict[str, Any], root: dict[str, Any], prefix: str = ""
) -> list[tuple[str, str, str, str]]:
    """(key as -f takes it, type, unit, notes) of every field under ``node``, nested ones after
    their parent as dotted keys."""
    rows = []
    required = set(node.get("required") or [])
    for name, raw in (node.get("properties") or {}).items():
        if not prefix and name in (*EventEnvelope.ENVELOPE_FIELDS, "type", "schema_version"):
            continue
        prop = resolve(raw, root)
        key = prefix + name
        notes = ["required"] if name in required else []
        description = prop.get("description") or next(
            (b.get("description") for b in branches(prop, root) if b.get("description")), None
        )
        items = array_items(prop, root)
        nested = object_branch(items, root) if items is not None else object_branch(prop, root)
        if nested is not None and nested.get("properties"):
            if items is not None:
                notes.append(
                    f"a list: -f {key}.FIELD=... fills the first item, -f {key}.1.FIELD=... "
                    f"the second (or -f {key}='[{{...}}]')"
                )
                kind = "list of object" + (" | null" if "null" in kinds(prop, root) else "")
            else:
                notes.append("see below")
                kind = "object" + (" | null" if "null" in kinds(prop, root) else "")
            if description and items is None:
                notes.insert(len(notes) - 1, _first_line(description))
            rows.append((key, kind, "", "; ".join(notes)))
            rows.extend(_rows(nested, root, key + "."))
            continue
        if description:
            notes.append(_first_line(description))
        if items is not None:
            notes.append(f"JSON: -f {key}='[...]'")
        rows.append((key, type_text(prop, root), unit_of(name), "; ".join(notes)))
    return rows


def _first_line(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split()).rstrip(".")


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
    root = event_schema(event_type)  # the schema the validator uses
    return _rows(root, root)


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
        "fields (-f KEY=VALUE; a string field keeps the text as typed, other values are JSON; "
        "nested ones as dotted keys, e.g. -f metrics.output_throughput=1582.5):",
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


def type_json(event_type: str) -> dict[str, Any]:
    """``tuneledger types TYPE --json``: TYPE's JSON Schema, the validator's
    (``schemas.jsonschema.schema_of``, what ``schemas/json/TYPE.json`` holds).

    Raises:
        InvalidInput: an unknown event type (the message lists the known ones).
    """
    from schemas.jsonschema import schema_of

    if event_type not in EVENT_TYPES:
        field_rows(event_type)  # raises, naming the known types
    return schema_of(event_type)


def types_json() -> list[dict[str, Any]]:
    """``tuneledger types --json``: every type, its docstring's first line and its JSON Schema."""
    rows = []
    for name in sorted(EVENT_TYPES):
        doc = (EVENT_TYPES[name].__doc__ or "").strip().splitlines()
        rows.append({"type": name, "description": doc[0] if doc else "", "schema": type_json(name)})
    return rows
