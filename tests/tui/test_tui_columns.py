"""A table's columns in one declaration (``tui.render.Columns``): names, order and the width
below which each is dropped, and the rows' cells checked against it."""

from __future__ import annotations

import pytest

from tui.benchmarks import BenchmarksPane
from tui.board import BoardPane
from tui.queries import BENCH_METRICS
from tui.render import Columns


def test_the_columns_that_fit_a_width_keep_their_order() -> None:
    columns = Columns((("a", 0), ("b", 120), ("c", 0), ("d", 90)))
    assert columns.names == ("a", "b", "c", "d")
    assert columns.fitting(200) == ("a", "b", "c", "d")
    assert columns.fitting(100) == ("a", "c", "d")
    assert columns.fitting(80) == ("a", "c")


def test_a_row_is_its_shown_cells_and_must_have_every_declared_column() -> None:
    columns = Columns((("a", 0), ("b", 120)))
    assert columns.row({"a": 1, "b": 2}, ("b", "a")) == [2, 1]
    assert columns.row({"a": 1, "b": 2}, ("a",)) == [1]
    with pytest.raises(ValueError, match="not the columns"):
        columns.row({"a": 1}, ("a",))  # a column declared but not filled
    with pytest.raises(ValueError, match="not the columns"):
        columns.row({"a": 1, "b": 2, "x": 3}, ("a",))  # filled but not declared


def test_the_panes_columns() -> None:
    assert BoardPane.COLUMNS.fitting(200)[-2:] == ("priority", "reason")
    assert BoardPane.COLUMNS.fitting(120) == (
        "status",
        "candidate",
        "verdict",
        "Δ out tok/s",
        "priority",
    )
    assert BoardPane.COLUMNS.fitting(100) == ("status", "candidate", "verdict", "Δ out tok/s")
    labels = tuple(label for _, label in BENCH_METRICS)
    assert BenchmarksPane.COLUMNS.names == ("configuration", "workload", "c", "runs", *labels)
    narrow = BenchmarksPane.COLUMNS.fitting(100)
    assert "workload" not in narrow and "runs" in narrow
    assert not {"TPOT p99 ms", "TTFT p99 ms"} & set(BenchmarksPane.COLUMNS.fitting(120))
