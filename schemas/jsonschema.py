"""Generate the committed JSON Schema files, one per event type (``schemas/json/<type>.json``).

Run ``python -m schemas.jsonschema`` after changing a model; a test fails while
the committed files differ from what the models generate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .events import EVENT_TYPES

JSON_DIR = Path(__file__).with_name("json")


def generate() -> dict[str, str]:
    """Return ``{file name: JSON text}`` for every event type, deterministic and sorted."""
    out: dict[str, str] = {}
    for name, cls in sorted(EVENT_TYPES.items()):
        schema = cls.model_json_schema(mode="validation")
        schema["$id"] = f"https://tuneledger.dev/schemas/{name}.json"
        out[f"{name}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


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
