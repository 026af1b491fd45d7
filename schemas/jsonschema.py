"""Generate the committed JSON Schema files, one per event type (``schemas/json/<type>.json``).

Run ``python -m schemas.jsonschema`` after changing a model; a test fails while
the committed files differ from what the models generate.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from .events import EVENT_TYPES

JSON_DIR = Path(__file__).with_name("json")


def schema_of(name: str) -> dict[str, Any]:
    """The JSON Schema of the registered event type ``name`` (what ``schemas/json/<name>.json``
    holds; the MCP server's ``record_<name>`` tool takes it as its input schema)."""
    schema = EVENT_TYPES[name].model_json_schema(mode="validation")
    schema["$id"] = f"https://tuneledger.dev/schemas/{name}.json"
    return schema


def generate() -> dict[str, str]:
    """Return ``{file name: JSON text}`` for every event type, deterministic and sorted."""
    return {
        f"{name}.json": json.dumps(schema_of(name), indent=2, sort_keys=True) + "\n"
        for name in sorted(EVENT_TYPES)
    }


def write(directory: Path = JSON_DIR) -> list[Path]:
    """Write every schema file into ``directory`` (created if needed); return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for file_name, text in generate().items():
        path = directory / file_name
        path.write_text(text)
        paths.append(path)
    return paths


# --- reading a type's schema: what `types` shows and what `append -f` parses against ---------


@functools.cache
def event_schema(name: str) -> dict[str, Any]:
    """The validation JSON Schema of event type ``name`` (the committed file's content).

    Raises:
        KeyError: an unknown type.
    """
    return EVENT_TYPES[name].model_json_schema(mode="validation")


def resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a ``$ref`` into ``root``'s ``$defs`` followed (its own keys kept)."""
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return node
    target = dict(root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {}))
    return {**target, **{k: v for k, v in node.items() if k != "$ref"}}


def branches(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of ``node`` (``anyOf`` / ``oneOf``, flattened and resolved), else itself."""
    node = resolve(node, root)
    alternatives = node.get("anyOf") or node.get("oneOf")
    if not alternatives:
        return [node]
    return [b for alt in alternatives for b in branches(alt, root)]


def kinds(node: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The JSON types ``node`` allows (``string``, ``integer``, ``number``, ``boolean``,
    ``object``, ``array``, ``null``); empty for "anything"."""
    out: set[str] = set()
    for b in branches(node, root):
        t = b.get("type")
        if isinstance(t, str):
            out.add(t)
        elif isinstance(t, list):
            out.update(t)
        elif "enum" in b or "const" in b:
            values = b.get("enum", [b.get("const")])
            out.update(_json_type(v) for v in values)
        elif "properties" in b:
            out.add("object")
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object"


def object_branch(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    """The object alternative of ``node`` (with ``properties`` or ``additionalProperties``)."""
    return next(
        (b for b in branches(node, root) if b.get("type") == "object" or "properties" in b), None
    )


def array_items(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    """The item schema of the array alternative of ``node``, or None when it is no array."""
    for b in branches(node, root):
        if b.get("type") == "array":
            return resolve(b.get("items") or {}, root)
    return None


if __name__ == "__main__":
    for p in write():
        print(p, file=sys.stderr)
