"""An event's payload and host as the store keeps them: JSON, secrets masked, every integer
within BIGINT, every string valid Unicode.

``payload_json`` is how the store turns an event's payload into the JSON it stores, the
one place every writer passes: secrets are masked (``schemas.secrets``), text that is not
valid Unicode and integers DuckDB cannot hold (beyond BIGINT, 64 bits; they would read back
as NULL) are refused naming the field. ``stored_payloads`` does the same for many payloads
at once (the bulk import's chunks); ``no_secret_ids`` refuses identifiers holding a secret.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_core import PydanticSerializationError

from ledger.errors import InvalidInput
from schemas import Event, EventEnvelope, secrets
from schemas.secrets import holds_secret, mask_json, mask_text

#: The most an event's payload may hold, as stored (JSON, UTF-8): 1 MiB, a hundred times the
#: largest event of the H200 campaign (10 KB). A 50 MB note was stored and then made
#: ``events``, ``export`` and ``sql`` run past 100 s at 860 MB (docs/reliability.md): large text
#: belongs in a file an event names (``source``, an artifact path), not in the log.
MAX_PAYLOAD_BYTES = 2**20
#: The most characters an event's ``source`` may hold (a file:line, a URL, a message).
MAX_SOURCE_CHARS = 4096

#: BIGINT's range (DuckDB's and the views' integer type).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Bytes to digits-as-"0", all else as " ": a run of 19 "0"s is the only way a JSON integer can
#: leave BIGINT's range. ``bytes.translate`` + ``in`` is ~20x cheaper than a regex per event.
_DIGITS_TABLE = bytes(ord("0") if chr(b).isdigit() and b < 128 else ord(" ") for b in range(256))
_NINETEEN = b"0" * 19
#: The envelope's fields, left out of the stored payload (they are columns of their own).
_ENVELOPE = set(EventEnvelope.ENVELOPE_FIELDS)


def check_text(value: Any, where: str, path: str = "") -> None:
    """Refuse strings (keys too) that are not valid Unicode text: a lone surrogate.

    Raises:
        InvalidInput: naming ``where`` and the field path.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                f"{where}: field '{path or '(value)'}': not valid Unicode text (a lone surrogate)"
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, where, path)
            check_text(item, where, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_text(item, where, f"{path}[{index}]")


def _big_int_path(value: Any, path: str = "") -> tuple[str, int] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (path, value) if not INT64_MIN <= value <= INT64_MAX else None
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _big_int_path(
            item,
            f"{path}.{key}"
            if path and isinstance(key, str)
            else f"{path}[{key}]"
            if isinstance(key, int)
            else str(key),
        )
        if found:
            return found
    return None


def payload_json(event: Event, where: str | None = None) -> str:
    """The event's payload as stored: JSON, secrets masked, every integer within BIGINT.

    ``where`` names the input in errors (default: the event's ``source``, else its type).

    Raises:
        InvalidInput: a string that is not valid Unicode, or an integer beyond 64 bits (names
            the field).
    """
    try:
        # ``model_dump_json``'s own serializer, called directly: half its cost for a small
        # event (its keyword handling), the same text (tests/store/test_store_contract.py).
        data = event.__pydantic_serializer__.to_json(event, exclude=_ENVELOPE)
    except PydanticSerializationError:
        label = where or event.source or event.type
        check_text(event.model_dump(exclude=_ENVELOPE), f"{label}: {event.type}")
        raise
    if len(data) > MAX_PAYLOAD_BYTES:
        raise too_large(event.model_dump(exclude=_ENVELOPE), len(data), where or event.type)
    check_source(event.source, where or event.type)
    if _NINETEEN in data.translate(_DIGITS_TABLE):
        check_ints(data.decode(), f"{where or event.source or event.type}: {event.type}", "")
    return mask_json(data.decode())


def too_large(payload: Any, size: int, label: str) -> InvalidInput:
    """The refusal of a payload over ``MAX_PAYLOAD_BYTES``, naming its largest field."""
    field = ""
    if isinstance(payload, dict) and payload:
        field = max(payload, key=lambda key: len(json.dumps(payload[key], default=str)))
    return InvalidInput(
        f"{label}: {'field ' + repr(field) + ': ' if field else ''}the event's payload is "
        f"{size / 2**20:.1f} MiB, over the {MAX_PAYLOAD_BYTES // 2**20} MiB an event may hold "
        "(keep large text in a file and name it in the event)"
    )


def check_source(source: str | None, label: str) -> None:
    """Refuse a ``source`` over ``MAX_SOURCE_CHARS``.

    Raises:
        InvalidInput: names the input and the length.
    """
    if source is not None and len(source) > MAX_SOURCE_CHARS:
        raise InvalidInput(
            f"{label}: field 'source': {len(source):,} characters, over the "
            f"{MAX_SOURCE_CHARS:,} a source may hold"
        )


#: Identifiers already found free of secrets (a batch's events share a few session ids and
#: actor names: each is scanned once, not once an event); "" holds the secret words' version.
_CLEAN_IDS: dict[str, object] = {}


#: Payload fields that name something people choose (a candidate, a configuration): kept as
#: given like the envelope's identifiers, so refused when they hold a secret. (Run and trial ids
#: are made by the runners, from configuration names that are checked where they are read; a
#: campaign repeats these two, so they are scanned once each: ``_CLEAN_IDS``.)
ID_FIELDS = ("candidate_id", "config_name")


def no_secret_ids(event: Event, where: str | None = None) -> None:
    """Refuse an event whose identifiers hold a secret: ``session_id``, ``stream``, the
    actor's name and the payload's identifiers (``ID_FIELDS``) are kept as given (masking them
    would merge every session named by a token into one called ``***``), so a token or
    password there would be stored in clear.

    Raises:
        InvalidInput: names the field (exit 3).
    """
    if _CLEAN_IDS.get("") is not secrets._roots:  # secret words added since: look again
        _CLEAN_IDS.clear()
        _CLEAN_IDS[""] = secrets._roots
    for field, value in (
        ("session_id", event.session_id),
        ("stream", event.stream),
        ("actor.name", event.actor.name),
        *((name, getattr(event, name, None)) for name in ID_FIELDS),
    ):
        if not value or not isinstance(value, str) or value in _CLEAN_IDS:
            continue
        if holds_secret(value):
            origin = where or event.source
            raise InvalidInput(
                f"{origin + ': ' if origin else ''}{event.type}: field '{field}' holds a "
                "secret (a token or a password) and would be stored in clear: name it otherwise"
            )
        if len(_CLEAN_IDS) >= 1024:  # a bound, not an LRU: a batch repeats a few identifiers
            _CLEAN_IDS.clear()
            _CLEAN_IDS[""] = secrets._roots
        _CLEAN_IDS[value] = True


def dumped_payload(event: Event, where: str) -> str:
    """The event's payload as JSON, as dumped: not yet checked or masked (``payload_json``
    does both for one event, ``stored_payloads`` for many).

    Raises:
        InvalidInput: a string that is not valid Unicode (names ``where`` and the field).
    """
    try:
        # as ``payload_json``: the model's serializer called directly
        return event.__pydantic_serializer__.to_json(event, exclude=_ENVELOPE).decode()
    except PydanticSerializationError:
        check_text(event.model_dump(exclude=_ENVELOPE), f"{where}: {event.type}")
        raise


def stored_payloads(
    payloads: list[str], sources: list[str | None], label: Callable[[int], str]
) -> None:
    """``payload_json``'s checks and masking for many dumped payloads at once, in place:
    every integer within BIGINT, secrets masked in each payload and ``source``.

    A bulk import's chunk: one BIGINT search and one secret gate (``may_hold_secrets``)
    over all the texts joined, so only the rare payload with a long digit run or a
    secret word is looked at alone; the results are ``payload_json``'s and ``mask_text``'s.
    ``label(i)``: how errors name payload ``i`` (``file:line: type``).

    Raises:
        InvalidInput: the first payload (in list order) with an integer beyond 64 bits.
    """
    n = len(payloads)
    for i, text in enumerate(payloads):
        # characters first: a text of n characters is at most 4n bytes of UTF-8 (``label`` only
        # on a refusal: it costs a look at the input)
        if len(text) * 4 > MAX_PAYLOAD_BYTES and len(text.encode()) > MAX_PAYLOAD_BYTES:
            raise too_large(json.loads(text), len(text.encode()), label(i))
        source = sources[i]
        if source is not None and len(source) > MAX_SOURCE_CHARS:
            check_source(source, label(i))
    joined = secrets.join_texts([*payloads, *sources])
    if _NINETEEN in joined.classes:  # (a run in a source only costs a closer look)
        for i, text in enumerate(payloads):
            check_ints(text, label(i), "")
    flags = secrets.may_hold_secrets(joined)
    for i, flag in enumerate(flags):
        if flag and i < n:
            payloads[i] = mask_json(payloads[i])
        elif flag:
            sources[i - n] = mask_text(sources[i - n])  # type: ignore[arg-type]


def host_json(event: Event, where: str | None = None) -> str | None:
    """The event's host as stored (JSON, secrets masked), or None; as ``payload_json``.

    Raises:
        InvalidInput: an integer beyond 64 bits (``host.gpu_count``).
    """
    if event.host is None:
        return None
    text = event.host.model_dump_json()
    if _HOSTS.get("") is not secrets._roots:  # secret words added since: mask again
        _HOSTS.clear()
        _HOSTS[""] = secrets._roots
    stored = _HOSTS.get(text)
    if stored is None:
        check_ints(text, f"{where or event.source or event.type}: {event.type}", "host.")
        stored = mask_json(text)
        if len(_HOSTS) >= 1024:  # a bound, not an LRU: a campaign has a handful of hosts
            _HOSTS.clear()
        _HOSTS[text] = stored
    return stored


#: Host JSON as dumped -> as stored. Most events of a campaign carry one of a few hosts, and
#: checking and masking one costs ~7 us (a bulk import's events: ~10% of their conversion).
#: Key "" holds the secret-word roots the entries were masked with.
_HOSTS: dict[str, Any] = {}


def check_ints(text: str, label: str, prefix: str) -> None:
    """Refuse JSON ``text`` holding an integer beyond BIGINT (a cheap digit-run test first).

    Raises:
        InvalidInput: ``label: field 'PREFIX.PATH': integer N is beyond 64 bits``.
    """
    if _NINETEEN not in text.encode("utf-8", "surrogatepass").translate(_DIGITS_TABLE):
        return
    found = _big_int_path(json.loads(text))
    if found:
        field, number = found
        shown = (
            str(number)
            if len(str(number)) <= 30
            else f"{str(number)[:12]}… ({len(str(number))} digits)"
        )
        raise InvalidInput(f"{label}: field '{prefix}{field}': integer {shown} is beyond 64 bits")
