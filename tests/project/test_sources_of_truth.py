"""One source of truth per fact.

- the metric table (``schemas.metrics``) is what the event model, projections, comparison
  rules, importers, TUI and export list and label metrics from;
- one sign convention: the plan table, the ``benchmark_deltas`` view, the TUI's Benchmarks pane
  and the Markdown export show the same signed figure for the same TTFT comparison;
- event types register themselves with a one-line summary and a candidate link;
- ``VIEWS_VERSION`` is a digest of the view SQL: a changed view is rebuilt on an old ledger;
  the stored layout version decides which migrations run.
"""

from __future__ import annotations

import ast
import re
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args, get_origin
from uuid import uuid4

import duckdb
import pytest
from rich.console import Console

import ledger.store.schema as store_module
from ledger.derive import projections, views
from ledger.export.markdown import format_metric, render_markdown
from ledger.importers import results
from ledger.store import LAYOUT_VERSION, LedgerStore
from runners.bench.metrics import RequestResult
from runners.compare import compare
from runners.plan import PlanResult, verdict_table
from schemas import CURRENT_VERSIONS, EVENT_TYPES, parse_event
from schemas.events import (
    BenchmarkCompleted,
    BenchMetrics,
    ComparisonCompleted,
    Event,
    SessionStarted,
    Workload,
)
from schemas.metrics import (
    COMPARED_METRICS,
    HEADLINE_METRICS,
    INTEGER_METRICS,
    METRICS,
    VIEW_METRICS,
    metric,
    tpot,
)
from schemas.vocab import COMPARISON_VERDICTS, VERDICTS
from tui.benchmarks import PLOT_METRICS, BenchmarksPane
from tui.panes import snapshot as load_snapshot
from tui.queries import BENCH_METRICS
from tui.render import DELTA_STYLE

ROOT = Path(__file__).resolve().parents[2]

# --- the metric table ------------------------------------------------------------------------


def test_the_event_model_is_the_metric_table() -> None:
    assert list(BenchMetrics.model_fields) == [m.name for m in METRICS]
    for m in METRICS:
        info = BenchMetrics.model_fields[m.name]
        assert info.annotation == (int | None if m.integer else float | None), m.name
        assert info.description == f"{m.label} ({m.unit})"


def test_projections_views_and_rules_derive_from_the_table() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE ledger_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    projections.create(con)
    columns = {
        name: kind
        for name, kind in con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'bench_runs'"
        ).fetchall()
    }
    for name in VIEW_METRICS:
        assert columns[name] == ("BIGINT" if name in INTEGER_METRICS else "DOUBLE")
    assert projections.DELTA_METRICS == tuple(
        (m.name, m.direction, m.noise_floor) for m in COMPARED_METRICS
    )
    # the default practical thresholds of docs/comparison.md
    assert metric("output_throughput").noise_floor == 0.05
    assert metric("median_ttft_ms").noise_floor == 0.05
    assert metric("p99_tpot_ms").noise_floor == 0.10
    assert {m.direction for m in COMPARED_METRICS} == {1, -1}


def test_tui_and_export_labels_and_units_come_from_the_table() -> None:
    assert BENCH_METRICS == tuple((m.name, m.header) for m in HEADLINE_METRICS)
    assert dict(BENCH_METRICS)["median_ttft_ms"] == "TTFT med ms"
    assert dict(PLOT_METRICS)["output_throughput"] == "output throughput (tok/s)"
    assert format_metric("median_ttft_ms", 12.345) == "12.35 ms"
    assert format_metric("max_itl_ms", 3.0) == "3.00 ms"
    assert format_metric("request_throughput", 1.23456) == "1.235 req/s"
    assert format_metric("output_throughput", 1582.46) == "1,582.5 tok/s"
    assert format_metric("accept_length", 2.5) == "2.5 tokens"
    assert format_metric("not_a_metric", 2.5) == "2.5"


def _spells_tpot(path: Path) -> bool:
    """Whether the code (not a docstring) divides a difference of two times by ``tokens - 1``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        left, right = node.left, node.right
        if (
            isinstance(left, ast.BinOp)
            and isinstance(left.op, ast.Sub)
            and not isinstance(left.right, ast.Constant)
            and isinstance(right, ast.BinOp)
            and isinstance(right.op, ast.Sub)
            and isinstance(right.right, ast.Constant)
            and right.right.value == 1
        ):
            return True
    return False


def test_the_tpot_formula_exists_once() -> None:
    """TPOT = (E2E - TTFT) / (output tokens - 1): the runner's, the importers' and the table's
    are one function, and no other module spells the formula."""
    assert results.tpot_ms is tpot
    assert tpot(10.0, 110.0, 11) == pytest.approx(10.0)
    assert tpot(10.0, 110.0, 1) is None and tpot(None, 110.0, 5) is None
    request = RequestResult(ok=True, ttft=0.01, latency=0.11, output_tokens=11)
    assert request.tpot == pytest.approx(0.01)
    assert RequestResult(ok=False, ttft=0.01, latency=0.11, output_tokens=11).tpot is None
    hits = [
        str(p.relative_to(ROOT))
        for top in ("schemas", "ledger", "runners", "tui")
        for p in (ROOT / top).rglob("*.py")
        if _spells_tpot(p)
    ]
    assert hits == ["schemas/metrics.py"]


# --- one verdict vocabulary ------------------------------------------------------------------


def test_one_verdict_vocabulary_spelled_like_the_flag_verdicts() -> None:
    assert "no-measurable-change" in COMPARISON_VERDICTS and "no-measurable-change" in VERDICTS
    assert all(" " not in v for v in COMPARISON_VERDICTS)
    assert set(DELTA_STYLE) == set(COMPARISON_VERDICTS)  # the TUI colours every verdict
    # No module spells a comparison verdict the old way any more (they are upcast on read).
    old = re.compile(r"['\"](no measurable change|insufficient data|too noisy)['\"]")
    hits = [
        str(p.relative_to(ROOT))
        for top in ("ledger", "runners", "tui")
        for p in (ROOT / top).rglob("*.py")
        if old.search(p.read_text(encoding="utf-8"))
    ]
    assert hits == []


# --- one sign convention ---------------------------------------------------------------------

SESSION = "sign"
BASE_TTFT = [100.0, 101.0, 99.0]
FAST_TTFT = [80.0, 81.0, 79.0]


def _run(config: str, ttft: float, repeat: int) -> BenchmarkCompleted:
    return BenchmarkCompleted(
        run_id=f"{config}-{repeat}",
        config_name=config,
        is_baseline=config == "baseline",
        concurrency=4,
        repeat=repeat,
        workload=Workload(dataset="random", input_len=64, output_len=16),
        metrics=BenchMetrics(completed=8, failed=0, median_ttft_ms=ttft, output_throughput=100.0),
        valid=True,
        session_id=SESSION,
    )


def test_plan_table_view_tui_and_export_show_one_signed_figure(store: LedgerStore) -> None:
    """A TTFT that fell 20% reads -20.0% (and improved) in all four places; it once read +25%
    in the plan table and -20% in the view."""
    runs = [_run("baseline", v, i) for i, v in enumerate(BASE_TTFT)]
    runs += [_run("fast", v, i) for i, v in enumerate(FAST_TTFT)]
    cmp = compare("median_ttft_ms", BASE_TTFT, FAST_TTFT)
    event = ComparisonCompleted(
        baseline_config="baseline",
        config_name="fast",
        metric="median_ttft_ms",
        concurrency=4,
        dataset="random",
        input_len=64,
        output_len=16,
        better_direction=cmp.better_direction,
        baseline_runs=cmp.baseline_runs,
        runs=cmp.runs,
        baseline_mean=cmp.baseline_mean,
        mean=cmp.mean,
        change=cmp.change,
        ci_low=cmp.ci_low,
        ci_high=cmp.ci_high,
        noise_threshold=cmp.noise_threshold,
        verdict=cmp.verdict,
        session_id=SESSION,
    )
    store.append([SessionStarted(title="sign", session_id=SESSION), *runs, event])
    expected = 100 * (cmp.mean / cmp.baseline_mean - 1)
    assert expected == pytest.approx(-20.0, abs=0.1) and cmp.verdict == "improved"
    figure = f"{expected:+.1f}%"

    # the plan table
    console = Console(width=200, record=True)
    console.print(verdict_table(PlanResult(comparisons=[event])))
    plan_row = next(line for line in console.export_text().splitlines() if "median_ttft_ms" in line)
    assert figure in plan_row and "improved" in plan_row

    # the view
    (view,) = store.query_arrow(
        "SELECT change_pct, verdict FROM benchmark_deltas WHERE metric = 'median_ttft_ms'"
    ).to_pylist()
    assert f"{view['change_pct']:+.1f}%" == figure and view["verdict"] == "improved"

    # the TUI's Benchmarks pane
    bench = load_snapshot(store, SESSION)["bench"]
    fast = next(r for r in bench if r["config_name"] == "fast")
    cell = BenchmarksPane._cell(
        fast["median_ttft_ms"],
        fast["median_ttft_ms_change_pct"],
        fast["median_ttft_ms_verdict"],
        False,
    )
    assert figure in cell.plain

    # the Markdown export (two decimals)
    markdown = render_markdown(store, session_id=SESSION)
    export_row = next(
        line for line in markdown.splitlines() if "median_ttft_ms" in line and "| fast" in line
    )
    assert f"{expected:+.2f}%" in export_row and "improved" in export_row


# --- event types register themselves ---------------------------------------------------------


def test_every_event_type_has_a_summary_and_a_candidate_link() -> None:
    assert len(EVENT_TYPES) == 22
    for name, cls in EVENT_TYPES.items():
        assert cls.summary_sql.strip(), name
        assert isinstance(cls.candidate_link, tuple), name
        assert all(field in cls.model_fields for field in cls.candidate_link), name
    linked = {n for n, c in EVENT_TYPES.items() if "candidate_id" in c.candidate_link}
    assert {"candidate_triaged", "note_added", "decision_recorded", "patch_applied"} <= linked
    assert EVENT_TYPES["finding_recorded"].candidate_link == ("flag",)


def _value(annotation: Any) -> Any:
    """A valid value of a required field's type (enough to build a minimal event)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return get_args(annotation)[0]
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in get_args(annotation) if a is not type(None)))
    if origin is dict or annotation is dict:
        return {}
    if origin is list or annotation is list:
        return []
    return {str: "x", int: 1, float: 1.0, bool: False}.get(annotation, uuid4())


def test_every_event_type_s_summary_shows_in_the_timeline(store: LedgerStore) -> None:
    """One minimal event of every registered type: each gets its own one-line summary (not the
    fallback, its type name) from the registry's SQL."""
    events = []
    for cls in EVENT_TYPES.values():
        data = {
            name: _value(info.annotation)
            for name, info in cls.model_fields.items()
            if info.is_required()
        }
        if "retracted_event_id" in data:
            data["retracted_event_id"] = events[0].event_id  # a retraction names a stored event
        events.append(cls.model_validate(data))
    store.append(events)
    rows = store.query_arrow("SELECT type, summary FROM event_log ORDER BY seq").to_pylist()
    assert [r["type"] for r in rows] == list(EVENT_TYPES)
    for row in rows:
        assert row["summary"] and row["summary"] != row["type"], row


def test_a_new_event_type_is_its_model_alone() -> None:
    """Defining the class registers it: parse_event reads it; a class without a summary or a
    candidate link is refused when it is defined."""
    try:

        class ThingMeasured(Event):
            """A test-only event type."""

            type: Literal["thing_measured"] = "thing_measured"
            schema_version: Literal[1] = 1
            summary_sql: ClassVar[str] = "'thing ' || p.name"
            candidate_link: ClassVar[tuple[str, ...]] = ()
            name: str

        assert EVENT_TYPES["thing_measured"] is ThingMeasured
        assert CURRENT_VERSIONS["thing_measured"] == 1
        parsed = parse_event({"type": "thing_measured", "name": "a"})
        assert isinstance(parsed, ThingMeasured) and parsed.name == "a"

        with pytest.raises(TypeError, match="summary_sql"):

            class NoSummary(Event):
                type: Literal["no_summary"] = "no_summary"
                candidate_link: ClassVar[tuple[str, ...]] = ()

        with pytest.raises(TypeError, match="candidate_link"):

            class NoLink(Event):
                type: Literal["no_link"] = "no_link"
                summary_sql: ClassVar[str] = "'x'"

        with pytest.raises(TypeError, match="unknown field"):

            class BadLink(Event):
                type: Literal["bad_link"] = "bad_link"
                summary_sql: ClassVar[str] = "'x'"
                candidate_link: ClassVar[tuple[str, ...]] = ("candidate_id",)
    finally:
        for name in ("thing_measured", "no_summary", "no_link", "bad_link"):
            EVENT_TYPES.pop(name, None)
            CURRENT_VERSIONS.pop(name, None)
    assert "no_summary" not in EVENT_TYPES


# --- VIEWS_VERSION and LAYOUT_VERSION --------------------------------------------------------


def _with_a_changed_view(original: Any) -> Any:
    """``view_sql`` with the decisions view's SQL changed (one more column, ``answer``)."""

    def changed() -> dict[str, str]:
        sql = original()
        sql["decisions"] = sql["decisions"].replace("SELECT seq,", "SELECT 42 AS answer, seq,", 1)
        return sql

    return changed


def test_views_version_is_a_digest_of_the_view_sql(monkeypatch: pytest.MonkeyPatch) -> None:
    assert views.VIEWS_VERSION == views.views_version()
    monkeypatch.setattr(views, "view_sql", _with_a_changed_view(views.view_sql))
    assert views.views_version() != views.VIEWS_VERSION


def test_a_changed_view_is_rebuilt_on_an_old_ledger(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = LedgerStore(ledger_path)
    old.append(SessionStarted(title="old", session_id="s"))
    assert "answer" not in old.query_arrow("SELECT * FROM decisions").column_names

    # A newer tuneledger whose decisions view gained a column, nobody bumping a number.
    monkeypatch.setattr(views, "view_sql", _with_a_changed_view(views.view_sql))
    monkeypatch.setattr(views, "VIEWS_VERSION", views.views_version())
    new = LedgerStore(ledger_path)
    assert "answer" in new.query_arrow("SELECT * FROM decisions").column_names
    # a read answers with the running code's views and leaves the file as it was ...
    stored = "SELECT value FROM ledger_meta WHERE key = 'views_version'"
    assert new.query_arrow(stored).to_pylist() != [{"value": views.VIEWS_VERSION}]
    # ... the next write brings it up to date
    new.init()
    assert new.query_arrow(stored).to_pylist() == [{"value": views.VIEWS_VERSION}]


@pytest.mark.parametrize(("stored", "runs"), [(LAYOUT_VERSION, False), (LAYOUT_VERSION - 1, True)])
def test_migrations_run_for_the_layouts_the_file_is_behind(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch, stored: int, runs: bool
) -> None:
    LedgerStore(ledger_path).init()
    con = duckdb.connect(str(ledger_path))
    con.execute("UPDATE ledger_meta SET value = ? WHERE key = 'layout_version'", [str(stored)])
    con.execute("UPDATE ledger_meta SET value = '20' WHERE key = 'views_version'")
    con.close()
    marker = (LAYOUT_VERSION, "CREATE TABLE IF NOT EXISTS migration_marker (x INTEGER)")
    monkeypatch.setattr(store_module, "MIGRATIONS", (*store_module.MIGRATIONS, marker))
    store = LedgerStore(ledger_path)
    store.init()
    tables = {
        r["table_name"]
        for r in store.query_arrow("SELECT table_name FROM duckdb_tables()").to_pylist()
    }
    assert ("migration_marker" in tables) is runs
    assert store.query_arrow(
        "SELECT value FROM ledger_meta WHERE key = 'layout_version'"
    ).to_pylist() == [{"value": str(LAYOUT_VERSION)}]


def test_catch_up_upcasts_a_stale_row_that_arrives_after_the_views(store: LedgerStore) -> None:
    """Appends of this code skip the upcasters (their SQL is costly to bind); a v1 row arriving
    later (a sync pull writes rows as stored elsewhere) is still upcast by the next catch-up."""
    store.append(SessionStarted(title="t", session_id=SESSION))
    payload = (
        '{"baseline_config": "baseline", "config_name": "fast", "metric": "median_ttft_ms", '
        '"baseline_runs": 3, "runs": 3, "change": 0.25, "noise_threshold": 0.05, '
        '"verdict": "no measurable change"}'
    )
    with store.connect(read_only=False) as con:
        seq = con.execute("SELECT max(seq) + 1 FROM events").fetchall()[0][0]
        con.execute(
            "INSERT INTO events (seq, event_id, type, schema_version, stream, stream_version, "
            "recorded_at, actor_kind, actor_name, session_id, payload) VALUES (?, ?, "
            "'comparison_completed', 1, 'comparison:fast', 1, now(), 'runner', 'elsewhere', ?, ?)",
            [seq, str(uuid4()), SESSION, payload],
        )
    (row,) = store.query_arrow(
        "SELECT change_pct, verdict, better_direction FROM benchmark_deltas"
    ).to_pylist()
    assert row["change_pct"] == pytest.approx(-20.0)
    assert (row["verdict"], row["better_direction"]) == ("no-measurable-change", -1)
