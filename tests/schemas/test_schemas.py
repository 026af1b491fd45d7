"""The event models: names, versions, vocabularies, and committed JSON Schemas."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

import schemas
from schemas import EVENT_TYPES, parse_event
from schemas.jsonschema import JSON_DIR, generate

REQUIRED_TYPES = {
    "session_started",
    "session_ended",
    "host_observed",
    "candidate_proposed",
    "flag_researched",
    "candidate_triaged",
    "server_started",
    "server_ready",
    "server_stopped",
    "server_failed",
    "benchmark_completed",
    "kernel_tune_started",
    "kernel_config_measured",
    "kernel_tune_completed",
    "spec_decoding_trial_completed",
    "patch_applied",
    "decision_recorded",
    "note_added",
    "event_retracted",
}


def test_every_required_type_exists_snake_case_and_versioned() -> None:
    assert REQUIRED_TYPES <= set(EVENT_TYPES)
    for name, cls in EVENT_TYPES.items():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)+", name), name
        assert isinstance(cls.model_fields["schema_version"].default, int)


def test_verdict_vocabulary() -> None:
    assert {
        "effective",
        "no-op",
        "dead-code",
        "not-activated",
        "harmful",
        "incompatible",
        "already-default",
        "no-measurable-change",
        "unknown",
    } <= set(schemas.VERDICTS)
    assert set(schemas.NO_EFFECT_VERDICTS) == {
        "no-op",
        "dead-code",
        "not-activated",
        "no-measurable-change",
    }


def test_committed_json_schemas_are_current() -> None:
    generated = generate()
    on_disk = {p.name: p.read_text() for p in JSON_DIR.glob("*.json")}
    assert set(on_disk) == set(generated), "run: python -m schemas.jsonschema"
    for name, text in generated.items():
        assert on_disk[name] == text, f"{name} is stale: run python -m schemas.jsonschema"
        assert json.loads(text)["properties"]["type"]["const"] == name.removesuffix(".json")


def test_envelope_defaults_and_normalisation() -> None:
    event = parse_event(
        {
            "type": "flag_researched",
            "flag": "--enable_fused_moe_sum_all_reduce",
            "verdict": "no-op",
            "host": {
                "gpu_name": "NVIDIA RTX PRO 6000 Blackwell",
                "compute_capability": "12.0",
                "gpu_count": 4,
            },
            "recorded_at": "2026-11-20T14:02:11",
        }
    )
    assert event.flag == "enable-fused-moe-sum-all-reduce"
    assert event.host.compute_capability == "sm120"
    assert event.event_id.version == 7
    assert event.recorded_at.utcoffset().total_seconds() == 0
    assert event.default_stream() == "flag:enable-fused-moe-sum-all-reduce"


@pytest.mark.parametrize(
    "data, field",
    [
        ({"type": "flag_researched", "flag": "x", "verdict": "maybe"}, "verdict"),
        ({"type": "note_added"}, "text"),
        ({"type": "note_added", "text": "x", "colour": "red"}, "colour"),
        (
            {"type": "benchmark_completed", "run_id": "r", "config_name": "c", "concurrency": 0},
            "concurrency",
        ),
        (
            {
                "type": "benchmark_completed",
                "run_id": "r",
                "config_name": "c",
                "metrics": {"output_throughput": -50},
            },
            "output_throughput",
        ),
        (
            {
                "type": "benchmark_completed",
                "run_id": "r",
                "config_name": "c",
                "metrics": {"median_ttft_ms": float("inf")},  # pydantic would store null
            },
            "median_ttft_ms",
        ),
        (
            {
                "type": "benchmark_completed",
                "run_id": "r",
                "config_name": "c",
                "workload": {"input_len": -5},
            },
            "input_len",
        ),
        ({"type": "candidate_triaged", "candidate_id": "c", "status": "kept"}, "status"),
        (
            {"type": "note_added", "text": "x", "host": {"compute_capability": "blackwell"}},
            "compute_capability",
        ),
    ],
)
def test_invalid_events_are_rejected(data: dict, field: str) -> None:
    with pytest.raises((ValidationError, ValueError)) as info:
        parse_event(data)
    assert field in str(info.value)
