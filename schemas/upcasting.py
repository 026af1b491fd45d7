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
- ``flag_researched`` v2 had no ``basis`` (every research was a person's or agent's reading:
  ``researched``), ``arch``, ``model_architecture``, ``tp_size`` nor ``conditions``; v3 has them
  (``tuneledger research`` records ``basis: source`` with the arch and model it read the
  source for). A v2 row reads as ``basis: researched`` and no arch of its own (the views fall
  back to the envelope host's, as before).
- ``flag_researched`` v3 had no ``verdict_confidence``; v4 has it (``tuneledger research`` states how
  far each verdict read off the source can be trusted). A v3 row reads with no confidence
  (None: not stated), its payload unchanged.
- ``comparison_completed`` v1 signed ``change``, ``ci_low`` and ``ci_high`` so that + was
  better (a 10% lower latency read +11.1%) and spelled three verdicts with spaces
  (``no measurable change``); v2 holds the metric's own change ``value / baseline - 1`` (the one
  sign convention, ``schemas.metrics``), states ``better_direction`` (v1's, else the metric
  table's) and spells verdicts as ``schemas.vocab.ComparisonVerdict``. For a lower-is-better
  metric the better-signed change ``x = baseline / value - 1`` becomes ``1 / (1 + x) - 1`` and
  the CI bounds swap.
- ``spec_decoding_trial_completed`` v1 signed ``median_tpot_change`` and ``median_ttft_change``
  so that + was shorter; v2 holds ``value / baseline - 1`` (the same flip).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .events import CURRENT_VERSIONS, normalize_flag
from .metrics import METRICS, direction_of
from .vocab import LEGACY_COMPARISON_VERDICTS

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


def _flag_v2_to_v3(payload: Payload) -> Payload:
    out = dict(payload)
    out["basis"] = payload.get("basis") or "researched"
    out.setdefault("conditions", [])
    return out


def _flag_v3_to_v4(payload: Payload) -> Payload:
    return dict(payload)  # ``verdict_confidence`` absent: the model's None


def _flip(x: Any) -> float | None:
    """A better-signed change of a lower-is-better metric (``baseline / value - 1``) as the
    metric's own change (``value / baseline - 1``); None for None or an impossible value."""
    if not isinstance(x, int | float) or isinstance(x, bool) or x <= -1:
        return None
    return 1 / (1 + x) - 1


def _sql_flip(field: str) -> str:
    """``_flip`` of the payload's ``field`` in DuckDB SQL, as JSON (NULL for NULL or <= -1)."""
    value = f"(payload->'{field}')"
    return (
        f"to_json(CASE WHEN json_type({value}) IN ('DOUBLE', 'BIGINT', 'UBIGINT') "
        f"AND {value}::DOUBLE > -1 THEN 1 / (1 + {value}::DOUBLE) - 1 END)"
    )


def _comparison_v1_direction(payload: Payload) -> int:
    stated = payload.get("better_direction")
    if stated in (1, -1) and not isinstance(stated, bool):
        return int(stated)
    return direction_of(str(payload.get("metric"))) or 1


def _comparison_v1_to_v2(payload: Payload) -> Payload:
    out = dict(payload)
    direction = _comparison_v1_direction(payload)
    out["better_direction"] = direction
    if direction == -1:
        out["change"] = _flip(payload.get("change"))
        out["ci_low"] = _flip(payload.get("ci_high"))
        out["ci_high"] = _flip(payload.get("ci_low"))
    verdict = payload.get("verdict")
    if isinstance(verdict, str):
        out["verdict"] = LEGACY_COMPARISON_VERDICTS.get(verdict, verdict)
    return out


#: The metric table's lower-is-better metrics as one SQL list (one function call to bind, not a
#: CASE per metric: every append binds the upcast expression, so its size costs CPU there).
_SQL_LOWER_IS_BETTER = "[" + ", ".join(f"'{m.name}'" for m in METRICS if m.direction == -1) + "]"
#: A v1 comparison's direction: its own ``better_direction`` when it is +-1, else the table's.
_SQL_V1_DIRECTION = (
    "CASE WHEN json_type(payload, '$.better_direction') IN ('BIGINT', 'UBIGINT', 'DOUBLE') "
    "AND (payload->>'better_direction')::DOUBLE IN (1, -1) "
    "THEN (payload->>'better_direction')::DOUBLE::INTEGER "
    f"WHEN list_contains({_SQL_LOWER_IS_BETTER}, payload->>'metric') THEN -1 ELSE 1 END"
)
_SQL_LEGACY_VERDICT = (
    "CASE payload->>'verdict' "
    + " ".join(f"WHEN '{old}' THEN '{new}'" for old, new in LEGACY_COMPARISON_VERDICTS.items())
    + " ELSE payload->>'verdict' END"
)
#: v1 -> v2 of ``comparison_completed`` in SQL: the direction is evaluated once; only a
#: lower-is-better comparison has its change flipped and its CI bounds flipped and swapped.
_SQL_COMPARISON_V1 = (
    f"json_merge_patch(payload, json_object('verdict', {_SQL_LEGACY_VERDICT}), "
    f"CASE WHEN ({_SQL_V1_DIRECTION}) = -1 THEN json_object('better_direction', -1, "
    f"'change', {{flip_change}}, 'ci_low', {{flip_high}}, 'ci_high', {{flip_low}}) "
    "ELSE json_object('better_direction', 1) END)"
)


def _spec_v1_to_v2(payload: Payload) -> Payload:
    out = dict(payload)
    for field in ("median_tpot_change", "median_ttft_change"):
        if field in payload:
            out[field] = _flip(payload[field])
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
    Upcaster(
        "flag_researched",
        2,
        _flag_v2_to_v3,
        "json_merge_patch(payload, json_object("
        "'basis', coalesce(payload->>'basis', 'researched'), "
        "'conditions', coalesce(payload->'conditions', json('[]'))))",
    ),
    Upcaster("flag_researched", 3, _flag_v3_to_v4, "payload"),
    Upcaster(
        "comparison_completed",
        1,
        _comparison_v1_to_v2,
        _SQL_COMPARISON_V1.format(
            flip_change=_sql_flip("change"),
            flip_high=_sql_flip("ci_high"),
            flip_low=_sql_flip("ci_low"),
        ),
    ),
    Upcaster(
        "spec_decoding_trial_completed",
        1,
        _spec_v1_to_v2,
        "json_merge_patch(payload, json_object("
        f"'median_tpot_change', {_sql_flip('median_tpot_change')}, "
        f"'median_ttft_change', {_sql_flip('median_ttft_change')}))",
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
