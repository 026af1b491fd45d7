"""The Compare pane: the session's configurations compared, as ``tuneledger compare`` and the
decision log show them (``docs/compare-runs.md``).

The read is ``ledger.read.comparison.read_session_comparison`` and the tables are
``ledger.export.comparison``'s, the same rows as the CLI's and the export's: what differs
between the configurations (diff only: the flags, environment and startup facts that are not
the same for all), their metrics per workload and concurrency with the change against the
first (the baseline), each arm's repeats with the noise band (mean ± the 95% CI of the mean),
and the Pareto front of output throughput against latency. Each is a table of its own that
scrolls sideways, so eight configurations side by side stay readable on a narrow terminal.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ledger.export.comparison import (
    TextTable,
    diff_tables,
    pareto_table,
    repeats_table,
)
from ledger.read.comparison import SessionComparison, read_session_comparison

from .pane import Pane
from .parts import Part, Reading

#: The tables, in the order shown.
SECTIONS = ("differs", "metrics", "repeats", "pareto")


def _read(reading: Reading) -> SessionComparison | None:
    if reading.session_id is None:
        return None
    return read_session_comparison(reading.con, reading.session_id)


def tables(comparison: SessionComparison) -> dict[str, TextTable]:
    """The pane's tables by section (``ledger.export.comparison``'s, as the CLI prints them)."""
    differs, metrics = diff_tables(comparison.diff)
    return {
        "differs": differs,
        "metrics": metrics,
        "repeats": repeats_table(comparison.repeats),
        "pareto": pareto_table(comparison.pareto),
    }


class ComparePane(Pane):
    """What differs between the session's configurations, their repeats, the Pareto front."""

    NAME = "compare"
    TITLE = "Compare"
    KEYS = "6,f7"
    FOCUS = "#compare-differs"
    PART = Part(
        "compare",
        _read,
        # the configurations' server runs (flags, startup facts) and their benchmarks; what it
        # reads of live_control (server_started, comparison_completed) the other views name
        ("live_control", "server_runs", "benchmarks", "benchmark_deltas"),
    )
    SUMMARY = "what differs between the configurations, repeats, Pareto front"

    DEFAULT_CSS = """
    ComparePane #compare-body { height: 1fr; }
    ComparePane #compare-status { padding: 0 1; color: $text-muted; }
    ComparePane .compare-title { padding: 1 1 0 1; text-style: bold; }
    ComparePane .compare-table { height: auto; max-height: 16; }
    ComparePane .compare-note { padding: 0 1; color: $text-muted; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: The tables shown, by section (empty: nothing to compare).
        self.tables: dict[str, TextTable] = {}
        self.loaded = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="compare-body"):
            yield Static("", id="compare-status")
            for key in SECTIONS:
                yield Static("", id=f"compare-{key}-title", classes="compare-title")
                yield DataTable(
                    id=f"compare-{key}",
                    classes="compare-table",
                    cursor_type="row",
                    zebra_stripes=True,
                )
                yield Static("", id=f"compare-{key}-note", classes="compare-note")

    def show(self, comparison: SessionComparison | None) -> None:
        """Show the session's comparison, or why there is none."""
        self.loaded = True
        self.tables = tables(comparison) if comparison is not None else {}
        status = self.query_one("#compare-status", Static)
        if not self.tables:
            status.update(
                "Nothing to compare yet: this session has fewer than two configurations with "
                "valid benchmark runs. `tuneledger compare diff A B` compares server runs or "
                "configurations of any session."
            )
        else:
            names = ", ".join(item.name for item in comparison.diff.items)  # type: ignore[union-attr]
            status.update(f"The session's configurations: {names}")
        for key in SECTIONS:
            table = self.query_one(f"#compare-{key}", DataTable)
            title = self.query_one(f"#compare-{key}-title", Static)
            note = self.query_one(f"#compare-{key}-note", Static)
            shown = self.tables.get(key)
            for widget in (table, title, note):
                widget.display = shown is not None and bool(shown.rows or key == "differs")
            table.clear(columns=True)
            if shown is None:
                continue
            title.update(shown.title)
            note.update(shown.note)
            table.add_columns(*(header or "what" for header in shown.headers))
            for row in shown.rows:
                table.add_row(
                    *(self._cell(key, text, n) for text, n in zip(row, shown.numeric, strict=True))
                )

    @staticmethod
    def _cell(section: str, text: str, numeric: bool) -> Text:
        if section == "pareto" and text == "yes":
            return Text(text, style="bold green")
        if section == "pareto" and text.startswith("no ("):
            return Text(text, style="dim")
        return Text(text, justify="right" if numeric else "left")
