"""The SQL pane: a read-only console over the ledger and its views.

Enter runs the query (through ``ledger.read.sql_sandbox.run_readonly``, in a
worker); the result goes to textual-fastdatatable with its Arrow backend,
which renders only the visible window and stays fast on large results (the
built-in DataTable slows down past ~10k rows). Up/Down in the input walk the
query history; errors (``Refused``, ``InvalidInput``) show inline, in red.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, Static

from ledger.errors import LedgerError

from .messages import SqlFinished
from .pane import Pane

#: The query the console starts with: the question users ask most.
DEFAULT_QUERY = (
    "SELECT flag, arch, verdict, basis FROM flag_verdicts WHERE no_effect ORDER BY arch, flag"
)

#: Rows fetched at most per query (the result is capped, and says so).
MAX_ROWS = 100_000


class SqlInput(Input):
    """The query line: Up/Down recall earlier queries."""

    BINDINGS = [
        Binding("up", "history(-1)", "Older query", show=False, id="sql.history_back"),
        Binding("down", "history(1)", "Newer query", show=False, id="sql.history_forward"),
        Binding("escape", "leave", "Leave the query line", show=False, id="sql.leave"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.history: list[str] = []
        self.position = 0

    def remember(self, sql: str) -> None:
        """Add a query to the history (a repeat of the last one is not added twice)."""
        if not self.history or self.history[-1] != sql:
            self.history.append(sql)
        self.position = len(self.history)

    def action_leave(self) -> None:
        """Escape: move to the result table, so the pane keys (1-5, q) work again."""
        self.screen.focus_next()

    def action_history(self, step: int) -> None:
        """Show the older (-1) or newer (+1) query of the history."""
        if not self.history:
            return
        self.position = max(0, min(len(self.history), self.position + step))
        self.value = self.history[self.position] if self.position < len(self.history) else ""
        self.cursor_position = len(self.value)


class SqlPane(Pane):
    """Query line, status line (row count, time, or the error), result table."""

    NAME = "sql"
    TITLE = "SQL"
    KEYS = "5,f6"
    FOCUS = "#sql-input"
    SUMMARY = "read-only"
    HELP_KEYS = (
        ("Enter", "SQL", "run the query"),
        (
            "Escape",
            "SQL input",
            "leave the query line (then 1-5 and q work again; F2-F6 always switch panes)",
        ),
        ("↑ ↓", "SQL input", "query history"),
    )

    DEFAULT_CSS = """
    SqlPane #sql-input { margin: 0 0; }
    SqlPane #sql-status { height: auto; padding: 0 1; color: $text-muted; }
    SqlPane #sql-status.error { color: $error; text-style: bold; }
    SqlPane #sql-result { height: 1fr; }
    """

    #: Show how long a query took (snapshot tests turn it off: it varies run to run).
    show_timings = True

    def compose(self) -> ComposeResult:
        yield SqlInput(
            value=DEFAULT_QUERY,
            placeholder="SELECT ... FROM board | flag_verdicts | benchmark_deltas | timeline ...",
            id="sql-input",
        )
        yield Static(
            "Enter runs the query (read-only; views: board, flag_verdicts, flag_verdict_history, "
            "server_runs, benchmarks, benchmark_deltas, decisions, timeline, event_log). Up/Down: history.",
            id="sql-status",
        )
        # the result table (textual-fastdatatable) is mounted with the first result: it is not
        # imported before then, so the board's first paint does not pay for it
        yield Static("", id="sql-result")

    @property
    def history(self) -> list[str]:
        """The queries run so far, oldest first."""
        return self.query_one(SqlInput).history

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: run the query."""
        event.stop()
        sql = event.value.strip()
        if sql:
            self.query_one(SqlInput).remember(sql)
            self.query_one(
                SqlInput
            ).value = ""  # a new query is typed fresh; Up brings this one back
            self.query_one("#sql-status", Static).update("running…")
            self._run(sql)

    @work(thread=True, exclusive=True, group="sql", exit_on_error=False)
    def _run(self, sql: str) -> None:
        from ledger.read.sql_sandbox import run_readonly

        started = time.perf_counter()
        try:
            table = run_readonly(self.app.store, sql, max_rows=MAX_ROWS)  # type: ignore[attr-defined]
        except LedgerError as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.post_message(SqlFinished(sql, None, error, time.perf_counter() - started))
            return
        self.post_message(SqlFinished(sql, table, None, time.perf_counter() - started))

    async def on_sql_finished(self, message: SqlFinished) -> None:
        """Show the query's result or its error."""
        if not self.closing:
            await self.show_result(message.sql, message.table, message.error, message.elapsed_s)

    async def show_result(
        self, sql: str, table: pa.Table | None, error: str | None, elapsed_s: float
    ) -> None:
        """Show a result (a new table widget: the Arrow backend is immutable) or the error inline."""
        status = self.query_one("#sql-status", Static)
        if error is not None:
            status.set_class(True, "error")
            status.update(Text(error))
            return
        assert table is not None
        from textual_fastdatatable import ArrowBackend, DataTable

        await self.query_one("#sql-result").remove()
        await self.mount(
            DataTable(
                backend=ArrowBackend(_displayable(table)),
                id="sql-result",
                max_column_content_width=60,
            )
        )
        # the status last: once it says "rows", the table is there (tests wait on it)
        status.set_class(False, "error")
        capped = " (capped)" if table.num_rows >= MAX_ROWS else ""
        took = f" in {elapsed_s * 1000:.0f} ms" if self.show_timings else ""
        status.update(f"{table.num_rows:,} rows{capped}, {table.num_columns} columns{took}")


def _displayable(table: pa.Table) -> pa.Table:
    """Cast types the Arrow backend cannot draw (UUIDs, JSON, nested) to strings."""
    columns, names = [], []
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if (
            pa.types.is_nested(kind)
            or isinstance(kind, pa.ExtensionType)
            or pa.types.is_fixed_size_binary(kind)
        ):
            column = pa.array(
                [None if v is None else str(v) for v in column.to_pylist()], pa.string()
            )
        columns.append(column)
        names.append(name or "?")
    return pa.table(columns, names=names) if columns else pa.table({"(no columns)": []})
