"""``append TYPE -f KEY=VALUE``: the options read against TYPE's JSON Schema, the one the
validator uses (``schemas.jsonschema.event_schema``) and ``tuneledger types TYPE`` shows.

- **Dotted keys** nest: ``-f metrics.output_throughput=1582.5``. Into a **list of objects**
  too: ``-f evidence.kind=source -f evidence.ref=x.py:12`` fills the first item,
  ``evidence.1.kind`` the second (or give the whole list as JSON: ``-f evidence='[{...}]'``).
- **Values** are read as the field's type: a string field keeps the text as typed
  (``-f engine_version=0.5`` stores ``"0.5"``, not the number 0.5 that JSON would read);
  any other field reads JSON (numbers, ``true``, lists, objects), else the text.
- **A key the type does not have** is refused naming it and the closest field names
  (``-f txt=hi`` on ``note_added``: ``did you mean text?``), before anything is validated.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

from ledger.errors import InvalidInput
from ledger.write.input_checks import loads
from schemas import EVENT_TYPES
from schemas.envelope import EventEnvelope
from schemas.jsonschema import array_items, event_schema, kinds, object_branch, resolve

#: ``-f`` keys every type takes besides its own fields (the envelope's; also options of append).
_ENVELOPE_KEYS = ("type", "schema_version")


def fields_object(event_type: str, fields: Sequence[str]) -> dict[str, Any]:
    """``{"type": event_type, ...}`` from ``-f KEY=VALUE`` items (see the module docstring).

    Raises:
        InvalidInput: an item without ``=``, a key the type does not have, a list index that
            skips items, or a key that goes through a value that is not an object.
    """
    if event_type not in EVENT_TYPES:
        raise InvalidInput(
            f"options: unknown event type {event_type!r} (known: {', '.join(sorted(EVENT_TYPES))})"
        )
    root = event_schema(event_type)
    data: dict[str, Any] = {"type": event_type}
    for item in fields:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--field {item!r}: expected KEY=VALUE")
        _set(data, root, event_type, key, text)
    return data


def _set(data: dict[str, Any], root: dict[str, Any], event_type: str, key: str, text: str) -> None:
    parts = key.split(".")
    node: dict[str, Any] = root
    target: Any = data
    for number, part in enumerate(parts):
        last = number == len(parts) - 1
        obj = object_branch(node, root)
        if obj is None or not isinstance(target, dict):
            where = ".".join(parts[:number]) or event_type
            raise InvalidInput(f"--field {key}: {where} is not an object")
        child = _property(obj, root, part)
        if child is None:
            raise InvalidInput(_unknown(event_type, key, part, obj))
        if last:
            target[part] = parse_value(text, child, root, key)
            return
        items = array_items(child, root)
        if items is not None and object_branch(items, root) is not None:
            # a list of objects: `evidence.kind` fills item 0, `evidence.1.kind` item 1
            index = 0
            if parts[number + 1].isdigit():
                index = int(parts.pop(number + 1))
                if number + 1 == len(parts):
                    raise InvalidInput(f"--field {key}: give a field of item {index}")
            listed = target.setdefault(part, [])
            if not isinstance(listed, list):
                raise InvalidInput(f"--field {key}: {part} was given as a whole already")
            if index > len(listed):
                raise InvalidInput(
                    f"--field {key}: item {index} of {part} before item {len(listed)}"
                )
            if index == len(listed):
                listed.append({})
            target, node = listed[index], items
            continue
        target = target.setdefault(part, {})
        node = child


def _property(obj: dict[str, Any], root: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The schema of property ``name`` of an object schema, or of its free-form values."""
    props = obj.get("properties") or {}
    if name in props:
        return resolve(props[name], root)
    extra = obj.get("additionalProperties")
    if isinstance(extra, dict):
        return resolve(extra, root)
    if extra is True or ("properties" not in obj and extra is None):
        return {}  # anything goes
    return None


def _unknown(event_type: str, key: str, part: str, obj: dict[str, Any]) -> str:
    hidden = set(_ENVELOPE_KEYS) | (set(EventEnvelope.ENVELOPE_FIELDS) if key == part else set())
    names = [n for n in (obj.get("properties") or {}) if n not in hidden]
    close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    where = event_type if key == part else f"{key.rsplit('.', 1)[0]} of {event_type}"
    listed = ", ".join(names[:25]) + (" ..." if len(names) > 25 else "")
    return (
        f"--field {key}: unknown field {part!r} of {where}{hint} "
        f"(fields: {listed}; `tuneledger types {event_type}` describes them)"
    )


def parse_value(text: str, node: dict[str, Any], root: dict[str, Any], key: str) -> Any:
    """``text`` as the value of a field of schema ``node`` (see the module docstring)."""
    allowed = kinds(node, root)
    if allowed and allowed <= {"string", "null"}:
        if text == "null" and "null" in allowed:
            return None
        if text.startswith('"'):  # a JSON-quoted string, as the docs showed before
            try:
                value = loads(text, f"--field {key}")
            except json.JSONDecodeError:
                return text
            return value if isinstance(value, str) else text
        return text
    try:
        return loads(text, f"--field {key}")
    except json.JSONDecodeError:
        return text
