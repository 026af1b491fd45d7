"""The workload lengths of an sglang.bench_serving line by data set: the tool writes
``random_input_len``, ``random_output_len`` and ``random_range_ratio`` on every line, their defaults
when the data set does not read them (sglang 0.5.23 ``benchmark/serving.py``; the data sets that
read them in ``benchmark/datasets/``). Lines from sgl-project/sglang PR #5360's sweep
(tests/fixtures/cases/sglang-pr5360-bench-jsonl-sweep/, see tests/fixtures/MANIFEST.md) with only
their data set changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.importers import import_file
from schemas import BenchmarkCompleted

SWEEP = (
    Path(__file__).parents[1]
    / "fixtures"
    / "cases"
    / "sglang-pr5360-bench-jsonl-sweep"
    / "llama_405b_results.jsonl"
)


def workload_of(tmp_path: Path, **changes: object):
    line = json.loads(SWEEP.read_text().splitlines()[0])
    line.update(changes)
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (event,) = [
        e for e in import_file(path, session_id="s1").events if isinstance(e, BenchmarkCompleted)
    ]
    return event.workload


@pytest.mark.parametrize("dataset", ["random", "random-ids", "image"])
def test_random_lengths_are_the_workload_of_the_data_sets_that_read_them(
    tmp_path: Path, dataset: str
) -> None:
    w = workload_of(tmp_path, dataset_name=dataset)
    assert (w.dataset, w.input_len, w.output_len, w.range_ratio) == (dataset, 8192, 1024, 1.0)


def test_a_sharegpt_run_does_not_take_the_unused_random_lengths(tmp_path: Path) -> None:
    """The defaults 1024/1024 stand on a ShareGPT line: recording them would be a wrong fact."""
    w = workload_of(
        tmp_path, dataset_name="sharegpt", random_input_len=1024, random_output_len=1024
    )
    assert (w.dataset, w.input_len, w.output_len, w.range_ratio) == ("sharegpt", None, None, None)


def test_a_sharegpt_run_with_a_fixed_output_length(tmp_path: Path) -> None:
    w = workload_of(tmp_path, dataset_name="sharegpt", sharegpt_output_len=256)
    assert (w.input_len, w.output_len) == (None, 256)


@pytest.mark.parametrize(
    ("dataset", "output_len"), [("mmmu", 1024), ("generated-shared-prefix", None), (None, None)]
)
def test_other_data_sets_keep_only_what_they_read(
    tmp_path: Path, dataset: str | None, output_len: int | None
) -> None:
    w = workload_of(tmp_path, dataset_name=dataset)
    assert (w.input_len, w.output_len, w.range_ratio) == (None, output_len, None)
