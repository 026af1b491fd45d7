"""Reading and writing events as JSON Lines: one flat event object per line.

This is the format of ``data/demo_campaign.jsonl``, of ``tuneledger append``'s
standard input and of ``tuneledger events --format json``. Errors name the
input, the line and the field, in one line (``InvalidInput``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from ledger.errors import InvalidInput
from ledger.write.input_checks import loads
from schemas import EVENT_ADAPTER, EVENT_TYPES, Event, UpcastError, parse_event


def describe_validation_error(exc: ValidationError, type_name: str | None = None) -> str:
    """One line naming the first offending field: ``field 'metrics.ttft': Input should be a number``."""
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    if loc and type_name and loc[0] == type_name:
        loc = loc[1:]
    where = ".".join(loc) or "(event)"
    message = first.get("msg", "invalid")
    if first.get("type") == "missing":
        return f"field '{where}' is required"
    if first.get("type") == "extra_forbidden":
        return f"field '{where}' is not a field of {type_name or 'this event'}"
    return f"field '{where}': {message}"


def event_from_obj(obj: Any, where: str) -> Event:
    """Validate one decoded JSON value into an event; errors say ``where`` (``file:line``).

    Raises:
        InvalidInput: not an object, no or unknown ``type``, or a field that does not validate.
    """
    if not isinstance(obj, dict):
        kind = {type(None): "null", list: "an array", str: "a string", bool: "a boolean"}.get(
            type(obj), "a number"
        )
        raise InvalidInput(f"{where}: expected a JSON object, got {kind}")
    type_name = obj.get("type")
    if type_name is None:
        raise InvalidInput(f"{where}: field 'type' is required")
    if not isinstance(type_name, str):
        raise InvalidInput(
            f"{where}: field 'type': expected a string (an event type), got {json.dumps(type_name)[:40]}"
        )
    if type_name not in EVENT_TYPES:
        raise InvalidInput(
            f"{where}: unknown event type {type_name!r} (known: {', '.join(sorted(EVENT_TYPES))})"
        )
    try:
        return parse_event(obj)
    except ValidationError as exc:
        raise InvalidInput(
            f"{where}: {type_name}: {describe_validation_error(exc, type_name)}"
        ) from None
    except UpcastError as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def jsonl_lines(text: str) -> list[str]:
    """JSON Lines text split at its newlines only (a ``\r`` before one is stripped later, with
    the line's other whitespace). Not ``str.splitlines``: it also splits at U+2028, U+2029
    and U+0085, which JSON allows raw inside a string (a valid line was refused)."""
    return text.split("\n")


def iter_jsonl(lines: Iterable[str], name: str, first_line: int = 1) -> Iterator[Event]:
    """Yield events from JSON lines; blank lines are skipped. ``first_line``: the number of
    the first line in messages (a part of a longer input).

    Raises:
        InvalidInput: ``name:line``: bad JSON (for example a truncated line), or a bad event.
    """
    for number, line in enumerate(lines, start=first_line):
        text = line.strip()
        if not text:
            continue
        try:
            # Fast path: pydantic-core parses and validates the line in one go (2x faster
            # than json.loads + validate). Anything it refuses — bad JSON, an older
            # schema_version to upcast, a wrong field — takes the slow path below,
            # which upcasts or words the error.
            yield EVENT_ADAPTER.validate_json(text)
            continue
        except ValidationError:
            pass
        try:
            obj = loads(text, f"{name}:{number}")
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"{name}:{number}: not valid JSON ({exc.msg}, column {exc.colno})"
            ) from None
        yield event_from_obj(obj, f"{name}:{number}")


def read_jsonl(path: str | Path) -> list[Event]:
    """All events of a JSONL file, validated before any is returned (all or nothing).

    Raises:
        InvalidInput: a bad line (named ``file:line``), or bytes that are not UTF-8 text.
        NotFound: the file does not exist.
    """
    from ledger.input_files import read_regular

    path = Path(path)
    data = read_regular(path, "result")  # NotFound; a FIFO, a device, past 256 MiB: refused
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return list(iter_jsonl(jsonl_lines(text), str(path)))


def read_stdin_text(stream: TextIO, name: str = "<stdin>") -> str:
    """All of standard input as text, decoded as UTF-8 from its bytes (not the locale's codec).

    Raises:
        InvalidInput: bytes that are not UTF-8, naming the line and the byte offset; more
            than ``ledger.input_files.LIMITS["result"]``.
    """
    from ledger.input_files import read_stream

    if not hasattr(stream, "buffer"):
        return stream.read()
    raw = read_stream(stream.buffer, name)  # bounded as a file is: /dev/zero | append is one line
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InvalidInput(f"{name}:{line}: not UTF-8 text (byte {exc.start})") from None


def read_stdin_events(stream: TextIO, name: str = "<stdin>") -> list[Event]:
    """Events from standard input: one JSON object, a JSON array of objects, or JSON lines.

    Raises:
        InvalidInput: as ``iter_jsonl``; an array element is named ``<stdin>:[i]``.
    """
    text = read_stdin_text(stream, name)
    stripped = text.strip()
    if not stripped:
        raise InvalidInput(f"{name}: no event given (expected JSON or JSON lines)")
    if stripped.startswith("["):
        try:
            items = loads(stripped, name)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
        # elements are numbered from 1, like lines
        return [event_from_obj(item, f"{name}:[{i}]") for i, item in enumerate(items, start=1)]
    return list(iter_jsonl(jsonl_lines(text), name))


def event_to_json(event: Event, *, indent: int | None = None) -> str:
    """One event as flat JSON (envelope and payload), ``None`` fields left out."""
    return json.dumps(event.model_dump(mode="json", exclude_none=True), indent=indent)
