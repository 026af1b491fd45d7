"""Upcasting: read an event stored at an older ``schema_version`` as the current model.

Stored rows are never rewritten. Each upcaster turns the payload of version
``v`` into version ``v + 1``; they chain up to ``CURRENT_VERSIONS[type]``.
Every upcaster exists twice, once as a Python function (used when events are
read into models) and once as a DuckDB SQL expression over ``payload`` (used by
the derived views, so SQL over the ledger sees current payloads too). A test
checks that both give the same result for each upcaster.

History of the schemas:

- ``note_added`` v1 had ``body``; v2 calls it ``text``.
- ``flag_researched`` v1 had ``flag`` with its dashes (``--enable-x``), a
  single free-text ``finding`` and ``evidence`` as one string; v2 has the flag
  without dashes, ``what_it_does``, and ``evidence`` as a list of pointers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .events import CURRENT_VERSIONS, normalize_flag

Payload = dict[str, Any]


@dataclass(frozen=True)
class Upcaster:
    """Turns the payload of ``type`` at ``from_version`` into ``from_version + 1``.

    ``sql`` is a DuckDB expression of the column ``payload`` (JSON) giving the
    upcast payload as JSON.
    """

    type: str
    from_version: int
    python: Callable[[Payload], Payload]
    sql: str


def _note_v1_to_v2(payload: Payload) -> Payload:
    out = {k: v for k, v in payload.items() if k != "body"}
    out["text"] = payload.get("body")
    return out


def _flag_v1_to_v2(payload: Payload) -> Payload:
    out = {k: v for k, v in payload.items() if k not in ("finding",)}
    out["flag"] = normalize_flag(payload["flag"])
    out["what_it_does"] = payload.get("finding")
    evidence = payload.get("evidence")
    if isinstance(evidence, str):
        out["evidence"] = [{"kind": "text", "ref": None, "text": evidence}]
    elif evidence is None:
        out["evidence"] = []
    return out


UPCASTERS: tuple[Upcaster, ...] = (
    Upcaster(
        "note_added",
        1,
        _note_v1_to_v2,
        "json_merge_patch(payload, json_object('text', payload->>'body', 'body', NULL))",
    ),
    Upcaster(
        "flag_researched",
        1,
        _flag_v1_to_v2,
        "json_merge_patch(payload, json_object("
        "'flag', replace(ltrim(trim(payload->>'flag', ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)), '-'), '_', '-'), "
        "'what_it_does', payload->>'finding', 'finding', NULL, "
        "'evidence', CASE WHEN json_type(payload, '$.evidence') = 'VARCHAR' "
        "THEN json_array(json_object('kind', 'text', 'ref', NULL, 'text', payload->>'evidence')) "
        "WHEN (payload->'evidence') IS NULL OR json_type(payload, '$.evidence') = 'NULL' THEN json('[]') "
        "ELSE (payload->'evidence') END))",
    ),
)

_BY_KEY: dict[tuple[str, int], Upcaster] = {(u.type, u.from_version): u for u in UPCASTERS}


class UpcastError(ValueError):
    """A stored version has no upcaster path to the current version, or is newer than this code."""


def upcast(type_name: str, version: int, payload: Payload) -> Payload:
    """Return ``payload`` (of ``type_name`` at ``version``) at the current version.

    Raises:
        UpcastError: no upcaster from ``version``, or ``version`` is newer than current.
    """
    current = CURRENT_VERSIONS.get(type_name)
    if current is None:
        return payload
    if version > current:
        raise UpcastError(
            f"{type_name} schema_version {version} is newer than this tuneledger ({current})"
        )
    while version < current:
        step = _BY_KEY.get((type_name, version))
        if step is None:
            raise UpcastError(f"no upcaster for {type_name} from schema_version {version}")
        payload = step.python(payload)
        version += 1
    return payload


def sql_upcast_expression(payload_column: str = "payload") -> str:
    """A DuckDB ``CASE`` expression giving the current-version payload of any row.

    Uses the row's ``type`` and ``schema_version`` columns; chains upcasters by
    nesting them (v1 -> v2 -> ...).
    """
    branches: list[str] = []
    for type_name, current in CURRENT_VERSIONS.items():
        for start in range(1, current):
            expr = payload_column
            for version in range(start, current):
                step = _BY_KEY.get((type_name, version))
                if step is None:
                    break
                expr = "(" + step.sql.replace("payload", expr) + ")"
            else:
                branches.append(
                    f"WHEN type = '{type_name}' AND schema_version = {start} THEN {expr}"
                )
    if not branches:
        return payload_column
    return "CASE " + " ".join(branches) + f" ELSE {payload_column} END"
