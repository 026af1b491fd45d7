"""``export``: ``tuneledger export markdown`` as an MCP tool (``ledger.app.export``, the CLI's
use case). The decision log comes back as text (capped in bytes, as ``sql``'s rows), and is
written to ``output`` when the call names a file that does not exist yet (relative paths are
the server's folder's), with the Pareto plot beside it. Long-running (a large ledger's report
and its plot take a while): ``start_job`` runs it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models

#: The Markdown returned by default, and at most, in bytes (``sql``'s caps).
DEFAULT_MAX_BYTES, MAX_BYTES = 256 * 1024, 4 * 1024 * 1024


class ExportArgs(Arguments):
    session_id: str | None = Field(
        None, description="Only this session (default: the server's, else all)."
    )
    output: str | None = Field(
        None,
        description="Also write it to this new file (with the Pareto plot beside it).",
    )
    max_bytes: int = Field(
        DEFAULT_MAX_BYTES,
        ge=1,
        le=MAX_BYTES,
        description="The most Markdown returned, in bytes.",
    )


class ExportOut(BaseModel):
    markdown: str
    bytes: int = Field(description="The whole log's size.")
    truncated: bool
    written: list[str] = Field(description="The files written.")


def _export(args: ExportArgs, call: Call) -> dict[str, Any]:
    from ledger.app.export import Export, export_markdown

    session = args.session_id or call.seat.session_id
    output = Path(args.output) if args.output is not None else None
    call.progress("reading the report", None, None)
    done = export_markdown(call.seat.store(), Export(session, output, replace=False))
    data = done.markdown.encode("utf-8")
    shown = data[: args.max_bytes].decode("utf-8", errors="ignore")  # a cut character dropped
    return {
        "markdown": shown,
        "bytes": len(data),
        "truncated": len(data) > args.max_bytes,
        "written": [str(p) for p in done.written],
    }


def add_export_tool(toolbox: Toolbox) -> None:
    """``export``."""
    toolbox.add(
        tool_from_models(
            "export",
            "The decision log as Markdown (`tuneledger export markdown`): decisions, "
            "verdicts, triage, what differs, the Pareto front.",
            ExportArgs,
            ExportOut,
            _export,
            idempotent=True,
            long_running=True,
        )
    )
