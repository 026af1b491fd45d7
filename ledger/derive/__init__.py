"""What is derived from the log: projections (tables caught up from a stored position), the
views over them and the log (one module per view family), and what a reader's connection gets
(``reader``: this code's views, never the file's SQL).

``DERIVATION`` is what the store keeps current inside its own transactions without knowing
what they are (``ledger.store.derived``: the store loads it by name when it first needs it;
importing this package installs nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from ledger.derive import projections, reader, views


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
        reader.prepare(
            con,
            current=current,
            projected=projected,
            head=head,
            has_occurred_at=has_occurred_at,
            wanted=wanted,
            made=made,
        )


#: This project's derived tables (``ledger.store.derived.DEFAULT`` names it).
DERIVATION = _Derivation()
