"""Printing query results: a terminal table (rich), CSV, or JSON.

Results are Arrow tables (what the store and the read-only console return). Stored text is
shown, never acted on: control characters are escaped in tables and CSV
(``ledger.read.shown_text``; JSON escapes them itself) and a table cell is plain text, never
rich markup (a note holding ``[link=…]`` was a live hyperlink, ``[bold]`` vanished).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TextIO
from uuid import UUID

import pyarrow as pa
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ledger.read.shown_text import escape_controls

FORMATS = ("table", "csv", "json")


def _plain(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def _json_value(value: Any) -> Any:
    # JSON has no Infinity or NaN (JSON.parse and jq refuse them): null, as pydantic writes
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return _plain(value)


#: The most characters a terminal table shows of one value (the rest is counted, and csv or
#: json shows it): a ledger written before payloads were bounded may hold a 50 MB note, which
#: rich laid out for minutes.
MAX_CELL_CHARS = 2000


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str)  # ensure_ascii: control characters escaped
    else:
        text = str(value)
    if len(text) > MAX_CELL_CHARS:
        text = f"{text[:MAX_CELL_CHARS]}… (+{len(text) - MAX_CELL_CHARS:,} characters: --format csv or json shows all)"
    return escape_controls(text)


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    if value is None:
        return ""
    if isinstance(value, str):
        return escape_controls(value)  # a quoted CSV field keeps its newlines and tabs
    return _plain(value)


def _json_rows(table: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    return [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]


def _csv_rows(table: pa.Table | pa.RecordBatch) -> list[list[Any]]:
    return [[_csv_value(v) for v in row.values()] for row in table.to_pylist()]


def _header(names: list[str]) -> list[str]:
    return [escape_controls(name, one_line=True) for name in names]


def to_json(table: pa.Table) -> str:
    """The rows as a JSON array of objects (timestamps ISO 8601, UUIDs as strings)."""
    return json.dumps(_json_rows(table), indent=2, default=str)


def to_csv(table: pa.Table) -> str:
    """The rows as CSV with a header line; lists and objects as JSON text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_header(table.column_names))
    writer.writerows(_csv_rows(table))
    return out.getvalue()


def stream_rows(batches: Iterable[pa.RecordBatch], fmt: str, out: TextIO | None = None) -> int:
    """Write batches as CSV or JSON while they arrive; memory stays at one batch. Returns the rows written.

    The output is the same as ``to_csv`` / ``to_json`` of the whole table (JSON: an array of
    objects, one per line group). The header (CSV) comes from the first batch's schema.

    Raises:
        ValueError: ``fmt`` is not ``csv`` or ``json``.
    """
    if fmt not in ("csv", "json"):
        raise ValueError(f"cannot stream format {fmt!r} (csv or json)")
    out = out or sys.stdout
    rows = 0
    writer = csv.writer(out, lineterminator="\n")
    header = False
    for batch in batches:
        if fmt == "csv":
            if not header:
                writer.writerow(_header(batch.schema.names))
                header = True
            writer.writerows(_csv_rows(batch))
            rows += batch.num_rows
            continue
        for row in _json_rows(batch):
            text = json.dumps(row, indent=2, default=str).replace("\n", "\n  ")
            out.write(("[\n  " if rows == 0 else ",\n  ") + text)
            rows += 1
    if fmt == "json":
        out.write("\n]\n" if rows else "[]\n")
    out.flush()
    return rows


def print_table(
    table: pa.Table, fmt: str = "table", *, title: str | None = None, console: Console | None = None
) -> None:
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
    for name in _header(table.column_names):
        rich_table.add_column(Text(name), overflow="fold")
    for row in table.to_pylist():
        rich_table.add_row(*(Text(_cell(v)) for v in row.values()))
    console.print(rich_table)
    if table.num_rows == 0:
        console.print("(no rows)")
