"""``export``: the decision log as Markdown, as ``tuneledger export markdown`` and the MCP
``export`` tool (and the ``decision-log`` resource) make it, once.

The order lives here: the report read from the derived views (``ledger.read.model``), the
Pareto plot drawn only beside a regular file (never beside ``/dev/stdout`` or a descriptor),
the Markdown rendered linking it, the log written first and the plot after it (a log that may
not be written leaves no plot behind; ``ledger.store.safe_files.write_file`` never does more
than ``> FILE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import InvalidInput

if TYPE_CHECKING:
    from ledger.store import LedgerStore


@dataclass(frozen=True)
class Export:
    """One export of the decision log: of one session (None: every session), to ``output``
    (None: only the text); ``replace``: an existing file may be overwritten (the CLI's ``-o``,
    as ``> FILE``); the MCP tool writes new files only."""

    session_id: str | None = None
    output: Path | None = None
    replace: bool = True


@dataclass(frozen=True)
class Exported:
    """The Markdown, and the files written (the log, then its plot), none without ``output``."""

    markdown: str
    written: tuple[Path, ...] = ()


def export_markdown(store: LedgerStore, request: Export) -> Exported:
    """The decision log of ``request``; written to its ``output`` when it names one.

    Raises:
        InvalidInput: ``output`` exists and ``replace`` is off; a directory, a socket (exit 3).
        StorageError: the file could not be written (no space, permission: exit 15).
    """
    from ledger.export.markdown import render_report
    from ledger.read.model import read_report
    from ledger.store.safe_files import descriptor_of, write_file

    output = request.output
    if output is not None and not request.replace and (output.exists() or output.is_symlink()):
        raise InvalidInput(f"output: {output} exists (export writes a new file: name another)")
    report = read_report(store, request.session_id)
    plot = None
    regular = output is not None and (output.is_file() or not output.exists())
    if output is not None and regular and descriptor_of(output) is None:
        from ledger.export.plot import session_plot

        plot = session_plot(report, output)
    markdown = render_report(report, plot=None if plot is None else plot[0].name)
    if output is None:
        return Exported(markdown)
    written = [write_file(output, markdown)]
    if plot is not None:
        written.append(write_file(*plot))
    return Exported(markdown, tuple(written))
