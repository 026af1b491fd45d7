"""`append TYPE -f KEY=VALUE` and `tuneledger types TYPE` read one JSON Schema, the validator's.

`types flag_researched` documented `evidence` as an object with dotted `evidence.kind/ref/text`
keys, and following it was refused (`Input should be a valid list`); `-f engine_version=0.5`
stored a number; a misspelt field was refused without naming it. Here every key `types` shows,
for every event type, is typed as shown and accepted."""

from __future__ import annotations

import json
import re

import pytest

from ledger.errors import InvalidInput
from ledger.read.event_types import describe_type
from ledger.write.fields import fields_object
from ledger.write.jsonl import event_from_obj
from schemas import EVENT_TYPES


def _sample(type_text: str, key: str) -> str | None:
    """A value of the shown type, as a person types it after -f KEY=."""
    text = type_text.removesuffix(" | null")
    if text.startswith("one of "):
        return text.removeprefix("one of ").split("|")[0]
    if text.startswith("list of object"):
        return None  # its fields are rows of their own
    if text.startswith("list of string (uuid)"):
        return '["01a22e2b-6710-715b-8354-f868058572bc"]'
    if text.startswith("list of string"):
        return '["x"]'
    if text.startswith("list of number") or text.startswith("list of integer"):
        return "[1]"
    if text.startswith("list of"):
        return "[]"
    if text.startswith("object of object"):
        return '{"k": {}}'
    if text.startswith("object of"):
        return '{"k": 1}' if "integer" in text or "number" in text else '{"k": "v"}'
    if text in ("object",):
        return None
    if text.startswith("string (uuid)"):
        return "01a22e2b-6710-715b-8354-f868058572bc"
    if text.startswith("string (date-time)"):
        return "2026-12-01T10:00:00Z"
    if text.startswith("string"):
        return {"compute_capability": "sm90", "flag": "enable-foo"}.get(key.rsplit(".", 1)[-1], "x")
    if text.startswith("integer"):
        return "1"
    if text.startswith("number"):
        return "1.5"
    if text.startswith("boolean"):
        return "true"
    return '"x"'


def _rows(event_type: str) -> list[tuple[str, str, bool]]:
    out = []
    for line in describe_type(event_type).splitlines()[2:-1]:
        m = re.match(r"  (\S+)\s+(.+?)(?:\s{2,}(.*))?$", line)
        assert m, line
        key, rest = m.group(1), m.group(2)
        type_text = re.split(r"\s{2,}", rest)[0]
        out.append((key, type_text, "required" in (m.group(3) or "") + rest))
    return out


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_every_key_types_shows_is_accepted_as_shown(event_type: str) -> None:
    rows = _rows(event_type)
    required = [
        f"{k}={_sample(t, k)}"
        for k, t, req in rows
        if req and "." not in k and _sample(t, k) is not None
    ]
    # a required list of objects or object: its required sub-fields
    for k, t, req in rows:
        if "." in k and req:
            required.append(f"{k}={_sample(t, k)}")
    base = fields_object(event_type, required)
    event_from_obj(base, "options")
    for key, type_text, _req in rows:
        value = _sample(type_text, key)
        if value is None:
            continue
        data = fields_object(event_type, [*required, f"{key}={value}"])
        try:
            event_from_obj(data, "options")
        except InvalidInput as exc:
            # a value the sample cannot know the rule of is fine; a refused *shape* is not
            assert "valid list" not in str(exc) and "valid dictionary" not in str(exc), (key, exc)


def test_a_list_of_objects_takes_dotted_keys_and_indexes() -> None:
    data = fields_object(
        "flag_researched",
        ["flag=x", "evidence.kind=source", "evidence.ref=a.py:1", "evidence.1.kind=url"],
    )
    event = event_from_obj(data, "options")
    assert [(e.kind, e.ref) for e in event.evidence] == [("source", "a.py:1"), ("url", None)]
    with pytest.raises(InvalidInput, match="item 3 of evidence before item 1"):
        fields_object("flag_researched", ["flag=x", "evidence.kind=x", "evidence.3.kind=url"])
    whole = fields_object("flag_researched", ["flag=x", 'evidence=[{"kind": "seed"}]'])
    assert event_from_obj(whole, "options").evidence[0].kind == "seed"


def test_a_string_field_keeps_the_text_as_typed() -> None:
    event = event_from_obj(
        fields_object("flag_researched", ["flag=x", "engine_version=0.5"]), "options"
    )
    assert event.engine_version == "0.5"
    quoted = fields_object("flag_researched", ["flag=x", 'engine_version="0.5"'])
    assert quoted["engine_version"] == "0.5"
    nothing = fields_object("flag_researched", ["flag=x", "engine_version=null"])
    assert nothing["engine_version"] is None
    # a number field reads JSON
    bench = fields_object(
        "benchmark_completed", ["run_id=r", "config_name=c", "metrics.output_throughput=12.5"]
    )
    assert bench["metrics"]["output_throughput"] == 12.5


def test_a_misspelt_field_is_named_with_the_closest_ones() -> None:
    with pytest.raises(InvalidInput) as refused:
        fields_object("note_added", ["txt=hi"])
    text = str(refused.value)
    assert text.startswith("--field txt: unknown field 'txt' of note_added; did you mean text?")
    assert "event_id" not in text  # the envelope is not the type's fields
    with pytest.raises(
        InvalidInput,
        match="unknown field 'output_thruput' of metrics of benchmark_completed; did you mean output_throughput",
    ):
        fields_object("benchmark_completed", ["metrics.output_thruput=1"])
    # free-form objects take any key
    flags = fields_object(
        "server_started", ["engine=sglang", "flags.tp=4", "flags.enable-foo=true"]
    )
    assert flags["flags"] == {"tp": 4, "enable-foo": True}


def test_types_shows_json_schema_words() -> None:
    text = describe_type("flag_researched")
    assert re.search(r"evidence\s+list of object\s+a list: -f evidence.FIELD", text)
    assert re.search(r"evidence\.kind\s+one of source\|log", text)
    assert re.search(r"engine_version\s+string \| null", text)
    line = next(
        x for x in describe_type("decision_recorded").splitlines() if "evidence_event_ids" in x
    )
    assert "list of string (uuid)" in line and json.dumps([]) not in line
