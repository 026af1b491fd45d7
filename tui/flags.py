"""The flags pane: the ``flag_verdicts`` view as a matrix, flag by (arch, engine version).

Each cell is the latest verdict on that flag there (a verdict read from one engine version's
source is that version's column, never another's), coloured; verdicts that
mean "changed nothing here" (no-op, dead code, not activated, no measurable
change) are dim and marked ``∅``. The line above the matrix answers the
question users ask most: which flags were no-ops on each arch.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from ledger.read import model as read_model

from .pane import Pane
from .parts import Part, Reading
from .queries import evidence_refs, flag_columns, flag_matrix
from .render import NO_EFFECT_MARK, clip, verdict_text


def column_label(arch: str | None, version: str | None) -> str:
    """A column's heading: what is known of its arch and engine version; a dash when neither
    is (never ``None`` or ``?`` on screen)."""
    return " · ".join(part for part in (arch, version) if part) or "—"


def cell_title(cell: dict[str, Any]) -> str:
    """``--flag on ARCH / ENGINE VERSION``, saying only what was recorded."""
    engine = " ".join(part for part in (cell["engine"], cell["engine_version"]) if part)
    where = " / ".join(part for part in (cell["arch"], engine) if part)
    return f"--{cell['flag']}" + (f" on {where}" if where else "")


def _read(reading: Reading) -> list[dict[str, Any]]:
    return read_model.flag_verdicts(reading.con)


class FlagsPane(Pane):
    """Which flags did what, where."""

    NAME = "flags"
    TITLE = "Flags"
    KEYS = "4,f5"
    FOCUS = "#flags-table"
    PART = Part(
        "flags",
        _read,
        ("flag_verdicts",),
    )
    SUMMARY = "verdict matrix"

    DEFAULT_CSS = """
    FlagsPane #flags-summary { height: auto; padding: 0 1 1 1; }
    FlagsPane #flags-table { height: 1fr; }
    FlagsPane #flags-detail { height: auto; max-height: 6; padding: 0 1; border-top: solid $primary-darken-2; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flags: list[dict[str, Any]] = []
        self.matrix: dict[str, dict[tuple[str | None, str | None], dict[str, Any]]] = {}
        self.columns: list[tuple[str | None, str | None]] = []

    def compose(self) -> ComposeResult:
        yield Static("No flag verdicts yet.", id="flags-summary")
        yield DataTable(id="flags-table", cursor_type="cell", zebra_stripes=True)
        yield Static("", id="flags-detail")

    def show(self, flags: list[dict[str, Any]]) -> None:
        """Show freshly read ``flag_verdicts`` rows."""
        self.flags = flags
        self.matrix = flag_matrix(flags)
        self.columns = flag_columns(flags)
        table = self.query_one("#flags-table", DataTable)
        cursor = table.cursor_coordinate
        table.clear(columns=True)
        table.add_column("flag", key="flag")
        for arch, version in self.columns:
            table.add_column(column_label(arch, version))
        for flag, cells in self.matrix.items():
            row: list[Any] = [Text(f"--{flag}", style="cyan")]
            for key in self.columns:
                cell = cells.get(key)
                row.append(verdict_text(cell["verdict"]) if cell else Text("·", style="dim"))
            table.add_row(*row, key=flag)
        if self.matrix:
            table.cursor_coordinate = cursor
        self._summary()

    def _summary(self) -> None:
        by_arch: dict[str, list[str]] = {}
        for flag, cells in self.matrix.items():
            for (arch, _), cell in cells.items():
                if cell["no_effect"]:
                    names = by_arch.setdefault(f"on {arch.upper()}" if arch else "(no arch)", [])
                    if flag not in names:
                        names.append(flag)
        text = Text()
        if not by_arch:
            text.append(
                "No flag was found to be a no-op yet." if self.matrix else "No flag verdicts yet.",
                style="dim",
            )
        for arch, names in sorted(by_arch.items()):
            text.append(f"{NO_EFFECT_MARK} no effect {arch}: ", style="bold")
            text.append(", ".join(f"--{n}" for n in sorted(names)) + "\n")
        text.rstrip()
        self.query_one("#flags-summary", Static).update(text)

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        """Show the highlighted cell's verdict, basis, summary and evidence (``file:line``)."""
        event.stop()
        detail = self.query_one("#flags-detail", Static)
        flags = list(self.matrix)
        row, col = event.coordinate.row, event.coordinate.column
        if not 0 <= row < len(flags):
            detail.update("")
            return
        cells = self.matrix[flags[row]]
        keys = [self.columns[col - 1]] if col >= 1 else list(cells)
        text = Text()
        for key in keys:
            cell = cells.get(key)
            if not cell:
                continue
            text.append(f"{cell_title(cell)}: ", style="bold")
            text.append_text(verdict_text(cell["verdict"]))
            text.append(f" ({cell['basis']}, {cell['findings']} finding(s)) ", style="dim")
            text.append(clip(cell["summary"], 220) + "\n")
            refs = evidence_refs(cell.get("evidence"))
            if refs:
                text.append("  " + ", ".join(refs) + "\n", style="dim")
        text.rstrip()
        detail.update(text)
