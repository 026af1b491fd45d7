"""The board pane: every candidate of the session by status, with its latest benchmark delta.

Filters (arch, engine version, verdict) narrow the rows; the detail line under
the table shows the selected candidate's hypothesis and latest evidence. The
triage keys live on the app (so the command palette and keymaps reach them);
the pane only says which candidate is selected.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Select, Static

from . import queries
from .pane import Pane
from .parts import Part, Reading
from .queries import STATUSES
from .render import Columns, clip, pct_text, status_text, verdict_text

_FILTERS = (("arch", "arch"), ("engine_version", "engine version"), ("verdict", "verdict"))
_NONE = "(none)"


def _read(reading: Reading) -> list[dict[str, Any]]:
    return queries.board(reading.con, reading.session_id)


def delta_cell(row: dict[str, Any], room: int, most: int) -> Text:
    """The Δ column's cell: the change, then ``c=N`` and the configuration it was measured
    with, each as far as ``room`` cells allow (the detail below has them whole); the
    configuration's name at most ``most`` cells."""
    if not row.get("delta_config"):
        return Text("")
    cell = pct_text(row["delta_pct"], row["delta_verdict"])
    concurrency = f" c={row['delta_concurrency']}"
    if cell.cell_len + len(concurrency) <= room:
        cell.append(concurrency, style="dim")
    left = min(room - cell.cell_len - 1, most)
    if left >= 6:  # fewer cells than that name nothing
        cell.append(" " + clip(row["delta_config"], left), style="dim")
    return cell


class BoardPane(Pane):
    """The triage board of one session."""

    NAME = "board"
    TITLE = "Board"
    KEYS = "1,f2"
    FOCUS = "#board-table"
    PART = Part(
        "board",
        _read,
        # stale on what these views read, and on any event naming a candidate (its evidence)
        ("board", "board_deltas"),
    )
    SUMMARY = "triage"
    #: The triage actions act on the selected candidate: shown (and run) on the board only.
    ACTIONS = frozenset({"accept", "reject", "defer", "decision"})
    COMMANDS = (("Board: clear filters", "Show every candidate of the session", "clear_filters"),)

    DEFAULT_CSS = """
    BoardPane #board-filters { height: 3; }
    BoardPane #board-filters Select { width: 1fr; max-width: 28; }
    BoardPane #board-counts { height: 1; padding: 0 1; color: $text-muted; }
    BoardPane #board-table { height: 1fr; }
    BoardPane #board-detail { height: auto; max-height: 8; padding: 0 1; border-top: solid $primary-darken-2; }
    """

    #: Columns by importance, each with the width below which it is dropped: on a narrow
    #: terminal the reason goes first, then the priority (the detail panel below the table shows
    #: both for the selected candidate anyway).
    COLUMNS = Columns(
        (
            ("status", 0),
            ("candidate", 0),
            ("verdict", 0),
            ("Δ out tok/s", 0),
            ("priority", 110),
            ("reason", 150),
        )
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._columns: tuple[str, ...] = self.COLUMNS.names
        self.rows: list[dict[str, Any]] = []
        self.shown: list[dict[str, Any]] = []
        self.loaded = False
        self._options: dict[str, list[str]] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(id="board-filters"):
            for key, label in _FILTERS:
                yield Select[str]([], prompt=f"{label}: all", id=f"filter-{key}", allow_blank=True)
        # a line of its own: beside the filters it was cut below ~150 columns
        yield Static("", id="board-counts")
        table: DataTable[Any] = DataTable(id="board-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*self._columns)
        yield table
        yield Static("", id="board-detail")

    # --- data ---------------------------------------------------------------------------

    def show(self, rows: list[dict[str, Any]]) -> None:
        """Show freshly read board rows, keeping the filters and the selected candidate."""
        self.rows = rows
        self.loaded = True
        for key, _ in _FILTERS:
            select = self.query_one(f"#filter-{key}", Select)
            values = sorted({str(r[key]) if r[key] is not None else _NONE for r in rows})
            current = select.value
            if values != self._options.get(key):
                self._options[key] = values
                with select.prevent(Select.Changed):
                    select.set_options([(v, v) for v in values])
                    if current in values:
                        select.value = current
        self._render_rows()

    def _filters(self) -> dict[str, str]:
        out = {}
        for key, _ in _FILTERS:
            value = self.query_one(f"#filter-{key}", Select).value
            if isinstance(value, str):
                out[key] = value
        return out

    def _render_rows(self) -> None:
        table = self.query_one("#board-table", DataTable)
        keep = self.selected["candidate_id"] if self.selected else None
        filters = self._filters()
        self.shown = [
            r
            for r in self.rows
            if all((str(r[k]) if r[k] is not None else _NONE) == v for k, v in filters.items())
        ]
        table.clear()
        cursor = 0
        narrow = "priority" not in self._columns
        cells_by_row = []
        for index, row in enumerate(self.shown):
            if row["candidate_id"] == keep:
                cursor = index
            cells_by_row.append(
                {
                    "status": status_text(row["status"]),
                    "candidate": clip(row["candidate_id"], self._candidate_width()),
                    "verdict": verdict_text(row["verdict"]),
                    "priority": row["priority"] or "",
                    "reason": clip(row.get("conflict") or row["reason"], 40),
                }
            )
        room = self._delta_room(cells_by_row)
        for row, cells in zip(self.shown, cells_by_row, strict=True):
            cells["Δ out tok/s"] = delta_cell(row, room, 24 if not narrow else 18)
            table.add_row(*self.COLUMNS.row(cells, self._columns), key=row["candidate_id"])
        if self.shown:
            table.move_cursor(row=cursor)
        counts = {s: sum(r["status"] == s for r in self.shown) for s in STATUSES}
        conflicting = sum(r["status"] == "conflicting" for r in self.shown)
        if conflicting:  # only after a sync found concurrent triages (ledger.sync.replicate)
            counts = {"conflicting": conflicting, **counts}
        self.query_one("#board-counts", Static).update(
            "  ".join(f"{s} {n}" for s, n in counts.items())
            + (f"   (filtered: {len(self.shown)} of {len(self.rows)})" if filters else "")
        )
        self._render_detail()

    def _candidate_width(self) -> int:
        """How much of a candidate id the table shows (the detail below has it whole)."""
        width = self.size.width
        return 44 if "priority" in self._columns else 34 if width >= 100 else 28

    def _delta_room(self, cells_by_row: list[dict[str, Any]]) -> int:
        """The cells the Δ column can take without cutting: the table's width less the other
        columns' (each padded by one cell a side) and a scrollbar."""
        used = 2
        for name in self._columns:
            if name == "Δ out tok/s":
                continue
            widths = [Text.from_markup(name).cell_len] + [
                c[name].cell_len if isinstance(c[name], Text) else len(str(c[name]))
                for c in cells_by_row
            ]
            used += max(widths) + 2
        return max(self.size.width - used - 2, len("Δ out tok/s"))

    @property
    def selected(self) -> dict[str, Any] | None:
        """The candidate under the cursor (a board row), or None."""
        if not self.is_mounted:
            return None
        table = self.query_one("#board-table", DataTable)
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def _render_detail(self) -> None:
        row = self.selected
        detail = self.query_one("#board-detail", Static)
        if row is None:
            detail.update("No candidates yet: press p to propose one." if not self.shown else "")
            return
        text = Text()
        text.append(row["title"] or row["candidate_id"], style="bold")
        text.append(f"  [{row['kind']}]", style="dim")
        if row["flag"]:
            text.append(f"  --{row['flag']}", style="cyan")
        if row["arch"] or row["engine_version"]:  # what was recorded: never None or ? on screen
            where = " / ".join(part for part in (row["arch"], row["engine_version"]) if part)
            text.append(f"  {where}", style="dim")
        if row["hypothesis"]:
            text.append("\nhypothesis: ", style="dim")
            text.append(clip(row["hypothesis"], 300))
        if row["reason"] and row["reason"] != row["latest_evidence"]:
            text.append("\nreason: ", style="dim")
            text.append(clip(row["reason"], 300))
        if row.get("delta_config"):
            text.append("\nΔ out tok/s: ", style="dim")
            text.append_text(pct_text(row["delta_pct"], row["delta_verdict"]))
            text.append(
                f" {row['delta_verdict'] or ''}  {row['delta_config']} at "
                f"c={row['delta_concurrency']} against its baseline",
                style="dim",
            )
        if row["latest_evidence"]:
            text.append(f"\nlatest ({row['latest_evidence_type']}): ", style="dim")
            text.append(clip(row["latest_evidence"], 300))
        detail.update(text)

    # --- events -------------------------------------------------------------------------

    def on_resize(self, event: Any) -> None:
        """Keep the columns that fit: drop the low-value ones first on a narrow terminal."""
        width = event.size.width
        columns = self.COLUMNS.fitting(width)
        if columns != self._columns:
            self._columns = columns
            table = self.query_one("#board-table", DataTable)
            table.clear(columns=True)
            table.add_columns(*columns)
        if self.loaded:  # the Δ column takes what the others leave
            self._render_rows()

    def action_clear_filters(self) -> None:
        """Show every candidate on the board."""
        for key, _ in _FILTERS:
            self.query_one(f"#filter-{key}", Select).clear()
        self.app.action_show_tab(self.NAME)  # type: ignore[attr-defined]

    def on_select_changed(self, event: Select.Changed) -> None:
        """A filter changed: redraw from the rows already read (no query)."""
        event.stop()
        self._render_rows()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor moved: show that candidate's details."""
        event.stop()
        self._render_detail()
