"""What is derived from the log: projections (tables caught up from a stored position) and the
views over them and the log, one module per view family.

Importing this package installs the derivation into the store (``ledger.store.derived``): the
store keeps these tables current inside its own transactions without knowing what they are.
"""

from __future__ import annotations

import duckdb

from ledger.derive import projections, views
from ledger.store import derived


class _Derivation:
    """``ledger.store.derived.Derivation``: this code's projections and views."""

    @property
    def version(self) -> str:
        return views.VIEWS_VERSION

    def create(self, con: duckdb.DuckDBPyConnection) -> None:
        projections.create(con)

    def rebuild(self, con: duckdb.DuckDBPyConnection) -> None:
        projections.rebuild(con)
        views.create_views(con)

    def catch_up(
        self, con: duckdb.DuckDBPyConnection, after: int | None = None, *, source: str = "events"
    ) -> int:
        return projections.catch_up(con, after, source=source)


derived.install(_Derivation())
