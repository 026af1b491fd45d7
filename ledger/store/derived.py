"""The store's hook for what is derived from the log: the projection tables and the views.

The store keeps them current inside its own transactions (a one-shot append projects its
events before it commits; a kept-open writer catches up in batches and before it lets go;
a file made by other code is rebuilt when it is opened for writing), but what they are is not
the store's business: ``ledger.derive`` defines them (``ledger.derive.DERIVATION``), and the
store loads that by name (``DEFAULT``) the first time it needs one, unless the program
installed another (``install``). So ``LedgerStore(path).init()`` works from the store's own
import (a script, a notebook), and no module imports ``ledger.derive`` for a side effect. By
name, not by an import statement: the store is the layer below ``ledger.derive``
(pyproject.toml's import contracts), and the dependency runs through the ``Derivation``
protocol. Readers get this code's views through it too (``prepare_read``): never the SQL
stored in the file.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Protocol

import duckdb


class Derivation(Protocol):
    """What the store asks of the derived tables."""

    @property
    def version(self) -> str:
        """A digest of the SQL that derives them (stored in ``ledger_meta.views_version``): a
        file whose digest differs was derived by other code and is rebuilt."""
        ...

    def create(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create the projection tables that do not exist yet (inside the caller's transaction)."""
        ...

    def rebuild(self, con: duckdb.DuckDBPyConnection) -> None:
        """Drop, recreate and refill every projection from the whole log, recreate the views
        (inside the caller's transaction; the position moves to the head)."""
        ...

    def catch_up(
        self, con: duckdb.DuckDBPyConnection, after: int | None = None, *, source: str = "events"
    ) -> int:
        """Project the events after the stored position (``after``: that position when the
        caller knows it), read from ``source`` (``events``, or a relation holding exactly the
        rows just inserted after the position); move the position; return it."""
        ...

    def prepare_read(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        current: bool,
        projected: int,
        head: int,
        has_occurred_at: bool,
        wanted: Iterable[str] | str | None,
        made: set[str],
    ) -> None:
        """Make a reader's connection read the file through this code's views, writing nothing
        to the file (temporary objects only): ``current`` says whether the file's derived tables
        are this code's, ``projected``/``head`` where they stand against the log,
        ``has_occurred_at`` whether the log has that column (layout 2 and later); ``wanted``:
        the views the reader reads (names, or the SQL text about to run; None: all); ``made``:
        the views already made on ``con`` (updated)."""
        ...


#: The module whose ``DERIVATION`` a store keeps current when the program installed none.
DEFAULT = "ledger.derive"

_installed: list[Derivation] = []


def install(derivation: Derivation) -> None:
    """Make ``derivation`` what every store of this process keeps current."""
    _installed[:] = [derivation]


def installed() -> Derivation:
    """The installed derivation: ``DEFAULT``'s, loaded now, when the program installed none."""
    if not _installed:
        derivation: Derivation = importlib.import_module(DEFAULT).DERIVATION
        install(derivation)
    return _installed[0]
