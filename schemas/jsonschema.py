"""Generate the committed JSON Schema files, one per event type (``schemas/json/<type>.json``).

Run ``python -m schemas.jsonschema`` after changing a model; a test fails while
the committed files differ from what the models generate.
"""

from __future__ import annotations

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


if __name__ == "__main__":
    for p in write():
        print(p, file=sys.stderr)
