"""How values look in the TUI: colours of statuses and verdicts, numbers, changes in %.

One place for the colour rules so every pane agrees: a benchmark change is
green when improved, red when regressed, dim when no-measurable-change, yellow
when inconclusive or insufficient-data (``schemas.vocab.ComparisonVerdict``); a flag verdict is dim (and marked ``∅``)
when it had no effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from schemas.vocab import NO_EFFECT_VERDICTS

STATUS_STYLE = {
    "proposed": "bold",
    "accepted": "green",
    "rejected": "red",
    "deferred": "yellow",
    "done": "blue",
    "conflicting": "bold magenta",
}

DELTA_STYLE = {
    "improved": "bold green",
    "regressed": "bold red",
    "no-measurable-change": "dim",
    "inconclusive": "yellow",
    "insufficient-data": "yellow",
    "invalid": "red dim",
    "too-noisy": "magenta",
}

VERDICT_STYLE = {
    "effective": "bold green",
    "harmful": "bold red",
    "incompatible": "red",
    "already-default": "cyan",
    "unknown": "yellow",
}

#: Marks a verdict meaning "changed nothing here" (no-op, dead code, not activated, no-measurable-change).
NO_EFFECT_MARK = "∅"


def status_text(status: str | None) -> Text:
    """A triage status, coloured."""
    return Text(status or "", style=STATUS_STYLE.get(status or "", ""))


def verdict_text(verdict: str | None) -> Text:
    """A flag/candidate verdict, coloured; no-effect verdicts dim and marked ``∅``."""
    if not verdict:
        return Text("")
    if verdict in NO_EFFECT_VERDICTS:
        return Text(f"{NO_EFFECT_MARK} {verdict}", style="dim")
    return Text(verdict, style=VERDICT_STYLE.get(verdict, ""))


def pct_text(change_pct: float | None, verdict: str | None, *, with_verdict: bool = False) -> Text:
    """A change in % (``+1.2%``) coloured by the delta's verdict."""
    if change_pct is None:
        return Text(
            "—" if verdict is None else verdict, style=DELTA_STYLE.get(verdict or "", "dim")
        )
    label = f"{change_pct:+.1f}%"
    if with_verdict and verdict:
        label += f" {short_delta_verdict(verdict)}"
    return Text(label, style=DELTA_STYLE.get(verdict or "", ""))


def short_delta_verdict(verdict: str) -> str:
    """Short spelling of a delta verdict for narrow cells."""
    return {
        "no-measurable-change": "≈ noise",
        "insufficient-data": "n<3",
        "inconclusive": "?",
        "too-noisy": "noisy",
    }.get(verdict, verdict)


def number(value: Any, digits: int = 1) -> str:
    """A metric value with ``digits`` decimals, or an empty string."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def clip(text: Any, width: int) -> str:
    """One line of at most ``width`` characters (an ellipsis marks the cut)."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass(frozen=True)
class Columns:
    """A table's columns in one declaration: each name in order with the terminal width below
    which it is dropped (0: never), instead of a name list, a width table and the row's keys
    written apart (``tests/tui/test_tui_columns.py``)."""

    widths: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Every column, in order."""
        return tuple(name for name, _ in self.widths)

    def fitting(self, width: int) -> tuple[str, ...]:
        """The columns shown at ``width`` terminal cells, in order."""
        return tuple(name for name, below in self.widths if width >= below)

    def row(self, cells: Mapping[str, Any], shown: tuple[str, ...]) -> list[Any]:
        """The cells of ``shown`` in order; ValueError when ``cells`` holds other columns than
        the declared ones (a column added in one place only)."""
        if set(cells) != set(self.names):
            raise ValueError(f"cells {sorted(cells)} are not the columns {list(self.names)}")
        return [cells[name] for name in shown]
