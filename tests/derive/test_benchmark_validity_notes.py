"""The ``benchmarks`` view says why a run is invalid (``validity_notes``), as the run recorded
it: an agent reading SQL sees the reason beside ``valid = false`` (docs/views.md)."""

from __future__ import annotations

from pathlib import Path

from ledger.derive import projections
from ledger.store import LedgerStore
from schemas import BenchmarkCompleted, BenchMetrics

NOTE = "achieved concurrency 7.15 < 0.9 x 8"


def _runs() -> list[BenchmarkCompleted]:
    return [
        BenchmarkCompleted(
            run_id="bad",
            config_name="baseline",
            concurrency=8,
            session_id="s",
            valid=False,
            validity_notes=[NOTE, "2 failed requests"],
            metrics=BenchMetrics(output_throughput=90.0),
        ),
        BenchmarkCompleted(
            run_id="good",
            config_name="baseline",
            concurrency=8,
            session_id="s",
            valid=True,
            metrics=BenchMetrics(output_throughput=100.0),
        ),
    ]


def test_benchmarks_view_has_each_runs_validity_notes(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "v.duckdb")
    store.append(_runs())
    query = "SELECT run_id, valid, validity_notes FROM benchmarks ORDER BY run_id"
    expected = [
        {"run_id": "bad", "valid": False, "validity_notes": [NOTE, "2 failed requests"]},
        {"run_id": "good", "valid": True, "validity_notes": []},
    ]
    assert store.query_arrow(query).to_pylist() == expected
    # a full replay of the log gives the same column
    with store.connect(read_only=False) as con:
        projections.rebuild(con)
    assert store.query_arrow(query).to_pylist() == expected
