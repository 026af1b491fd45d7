"""Text helpers of the decision log (``ledger.export.markdown`` and its section modules):
GitHub-flavoured Markdown tables, one-line cells, short event ids, metric values with units."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any

from schemas.metrics import unit_of

NONE_RECORDED = "None recorded."

#: Free text in a table cell (a summary, a reason) is cut to this many characters.
TEXT_MAX_CHARS = 200

#: Whole table cells longer than this are cut with an ellipsis (a last resort).
CELL_MAX_CHARS = 400

#: Decimals shown per unit of the metric table.
_UNIT_DECIMALS = {"ms": 2, "tok/s": 1, "req/s": 3}


class ShortIds:
    """Short event ids: one prefix length for the whole document, 8 characters at least, long
    enough that no two events of the ledger share a prefix (as git abbreviates hashes).

    UUIDv7 ids begin with their millisecond time stamp, so the first 8 hex digits
    are the same for every event appended within about 65 s: a fixed 8-digit
    prefix would be ambiguous. One length for every id (prefixes of uneven
    length, each the shortest unique one, looked like typos). The prefix keeps the dashes,
    so ``tuneledger show`` (``LedgerStore.get``) accepts it as it is.
    """

    MIN_CHARS = 8

    def __init__(self, event_ids: Iterable[Any]) -> None:
        ids = sorted({str(event_id).lower() for event_id in event_ids})
        shared = max((_common_prefix(a, b) for a, b in zip(ids, ids[1:], strict=False)), default=0)
        length = max(self.MIN_CHARS, shared + 1)
        if ids and length < len(ids[0]) and ids[0][length - 1] == "-":
            length += 1  # never end on a dash: the dashes sit at the same places in every id
        self.length = length

    def __call__(self, event_id: Any) -> str:
        if event_id is None:
            return "?"
        return str(event_id).lower()[: self.length]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def one_line(value: Any) -> str:
    """Fold any value to a single line of text (``None`` -> empty)."""
    if value is None:
        return ""
    return " ".join(str(value).split())


def clip(value: Any, max_chars: int = TEXT_MAX_CHARS) -> str:
    """One line of free text, cut with an ellipsis past ``max_chars``, at a word's end (a
    word cut in half reads as a typo)."""
    text = one_line(value)
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space > max_chars // 2:  # a word boundary not too far back; else one very long word
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def escape_cell(value: Any, *, max_chars: int | None = CELL_MAX_CHARS) -> str:
    """One GFM table cell: single line, ``|`` escaped as ``\\|``, cut at ``max_chars``.

    A backslash already in the text is kept as is except before ``|``, where it
    is doubled so that ``a\\|b`` in the source does not unescape the pipe.
    """
    text = clip(value, max_chars) if max_chars is not None else one_line(value)
    return text.replace("\\|", "\\\\|").replace("|", "\\|")


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, align: Sequence[str] | None = None
) -> str:
    """A GitHub-flavoured Markdown table; ``align`` holds ``l``/``r`` per column.

    Returns ``None recorded.`` when there are no rows.
    """
    body = [[escape_cell(cell) for cell in row] for row in rows]
    if not body:
        return NONE_RECORDED
    align = align or ["l"] * len(headers)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = [
        "| " + " | ".join(escape_cell(h) for h in headers) + " |",
        "| " + " | ".join(rule) + " |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def code(text: Any) -> str:
    """Inline code for an identifier (backticks inside are replaced)."""
    return "`" + one_line(text).replace("`", "'") + "`"


def quote(text: str) -> str:
    """A block quote keeping the text's own lines (so headings inside stay harmless)."""
    lines = str(text).strip().splitlines() or [""]
    return "\n".join(("> " + line).rstrip() for line in lines)


def load_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def flag_value(value: Any) -> str:
    if value is True:
        return ""
    if isinstance(value, (dict, list)):
        return "=" + json.dumps(value, separators=(",", ":"), sort_keys=True)
    if value is False:
        return "=false"
    return f"={value}"


def format_metric(metric: str, value: float | None) -> str:
    """A metric value with its unit from the metric table (``schemas.metrics``): tok/s with 1
    decimal, ms with 2, req/s with 3; a metric not in the table without a unit.

    ``None`` renders as ``n/a``.
    """
    if value is None:
        return "n/a"
    unit = unit_of(metric)
    decimals = _UNIT_DECIMALS.get(unit or "")
    if decimals is None:
        return f"{value:,.4g}" + (f" {unit}" if unit else "")
    return f"{value:,.{decimals}f} {unit}"


def format_change(change_pct: float | None) -> str:
    """A signed percent with 2 decimals (``+0.33%``, ``-1.25%``); ``None`` -> ``n/a``."""
    if change_pct is None:
        return "n/a"
    text = f"{change_pct:+.2f}%"
    return "+0.00%" if text == "-0.00%" else text


def utc(value: Any) -> str:
    """A timestamp as ``YYYY-mm-dd HH:MM:SS`` in UTC, or an empty cell."""
    if value is None:
        return ""
    if hasattr(value, "astimezone"):
        return str(value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"))
    return str(value)
