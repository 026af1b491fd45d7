"""Printing query results: a terminal table (rich), CSV, or JSON.

Results are Arrow tables (what the store and the read-only console return).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import pyarrow as pa
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "csv", "json")


def _plain(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def to_json(table: pa.Table) -> str:
    """The rows as a JSON array of objects (timestamps ISO 8601, UUIDs as strings)."""
    rows = [{k: _plain(v) for k, v in row.items()} for row in table.to_pylist()]
    return json.dumps(rows, indent=2, default=str)


def to_csv(table: pa.Table) -> str:
    """The rows as CSV with a header line; lists and objects as JSON text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow([
            json.dumps(v, default=str) if isinstance(v, (list, dict)) else ("" if v is None else _plain(v))
            for v in row.values()
        ])
    return out.getvalue()


def print_table(table: pa.Table, fmt: str = "table", *, title: str | None = None, console: Console | None = None) -> None:
    """Print ``table`` to standard output in ``fmt`` (``table``, ``csv`` or ``json``).

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "json":
        print(to_json(table))
        return
    if fmt == "csv":
        print(to_csv(table), end="")
        return
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    if console is None:
        # Piped output (an agent, a file) gets full rows instead of 80-column folding.
        width = None if sys.stdout.isatty() else 240
        console = Console(soft_wrap=False, width=width)
    rich_table = Table(title=title, show_lines=False, header_style="bold")
    for name in table.column_names:
        rich_table.add_column(name, overflow="fold")
    for row in table.to_pylist():
        rich_table.add_row(*(_cell(v) for v in row.values()))
    console.print(rich_table)
    if table.num_rows == 0:
        console.print("(no rows)")
