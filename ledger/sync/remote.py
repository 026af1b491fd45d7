"""Remotes: named PostgreSQL hubs a ledger syncs with, and how their credentials are found.

A remote is a name, a ``postgresql://`` URL without a password, and the hub's schema.
They are kept in the ledger file's ``sync_remotes`` table (configuration, not events).
Passwords are never stored or printed: libpq finds them itself, in ``PGPASSWORD``,
the password file (``~/.pgpass`` or ``PGPASSFILE``) or a connection service file
(``?service=NAME``, ``PGSERVICEFILE``). A URL that carries a password is refused, and
every URL tuneledger echoes goes through ``mask_url`` first.

The schema comes from ``--schema``, else from the URL's ``options=-csearch_path=NAME``,
else it is ``tuneledger``: one schema per team or project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from ledger.errors import InvalidInput, NotFound
from ledger.store import LedgerStore

#: The hub schema when neither ``--schema`` nor the URL names one.
DEFAULT_SCHEMA = "tuneledger"

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$")
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([^\s,]+)")

REMOTES_DDL = """
CREATE TABLE IF NOT EXISTS sync_remotes (
    name      VARCHAR PRIMARY KEY,
    url       VARCHAR NOT NULL,
    hub_schema VARCHAR NOT NULL,
    added_at  TIMESTAMPTZ NOT NULL
);
"""


@dataclass(frozen=True)
class Remote:
    """One configured hub: ``name``, password-free ``url``, PostgreSQL ``schema``."""

    name: str
    url: str
    schema: str

    @property
    def display_url(self) -> str:
        """The URL as it may be printed (any password masked)."""
        return mask_url(self.url)


def mask_url(url: str) -> str:
    """Replace the password of a ``postgresql://user:password@host/db`` URL by ``***``.

    Key/value connection strings (``password=...``) are masked too.
    """
    masked = re.sub(r"(://[^:/@?#]*):[^@/?#]*@", r"\1:***@", url)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", masked, flags=re.IGNORECASE)


def _has_password(url: str) -> bool:
    parts = urlsplit(url)
    return (
        parts.password is not None
        or re.search(r"(^|[?&\s])password=", url, re.IGNORECASE) is not None
    )


def parse_remote(name: str, url: str, schema: str | None = None) -> Remote:
    """Validate a remote's name, URL and schema.

    Raises:
        InvalidInput: a bad name, not a ``postgresql://`` URL, a URL with a password
            (names the places libpq reads passwords from instead), or a bad schema name.
    """
    if not _NAME.match(name):
        raise InvalidInput(
            f"remote name {name!r}: want letters, digits, '_', '.', '-' (starting with a letter)"
        )
    if not url.startswith(("postgresql://", "postgres://")):
        raise InvalidInput(f"remote {name}: {mask_url(url)} is not a postgresql:// URL")
    if _has_password(url):
        raise InvalidInput(
            f"remote {name}: {mask_url(url)} carries a password; tuneledger never stores one. "
            "Give it in PGPASSWORD, a password file (~/.pgpass or PGPASSFILE) or a service file (?service=NAME)"
        )
    if schema is None:
        match = _SEARCH_PATH.search(
            urlsplit(url).query.replace("%20", " ").replace("%3D", "=").replace("+", " ")
        )
        schema = match.group(1) if match else DEFAULT_SCHEMA
    if not _SCHEMA.match(schema):
        raise InvalidInput(
            f"remote {name}: schema {schema!r} is not a plain lower-case PostgreSQL name"
        )
    return Remote(name=name, url=url, schema=schema)


def _ensure_table(store: LedgerStore) -> None:
    store.init()
    with store.connect(read_only=False) as con:
        con.execute(REMOTES_DDL)


def add_remote(store: LedgerStore, remote: Remote) -> None:
    """Record ``remote`` in the ledger file.

    A ledger syncs with one hub: hub positions order its views and its conflicts, and
    positions of two hubs do not compare. Re-adding the same name (e.g. with a new URL
    for the same hub, after ``remote remove``) is allowed.

    Raises:
        InvalidInput: a remote is configured already, or the ledger has synced with
            another hub.
    """
    _ensure_table(store)
    with store.connect(read_only=False) as con:
        existing = [row[0] for row in con.execute("SELECT name FROM sync_remotes").fetchall()]
        if existing:
            raise InvalidInput(
                f"remote {remote.name}: this ledger already has remote {existing[0]} "
                "(a ledger syncs with one hub; `tuneledger remote remove` it first to change its URL)"
            )
        synced = con.execute(
            "SELECT DISTINCT remote FROM sync_events WHERE remote <> ? LIMIT 1", [remote.name]
        ).fetchall()
        if synced:
            raise InvalidInput(
                f"remote {remote.name}: this ledger has synced with hub {synced[0][0]}; a ledger syncs with one "
                f"hub (re-add it as {synced[0][0]}, or start a new ledger for another hub)"
            )
        con.execute(
            "INSERT INTO sync_remotes VALUES (?, ?, ?, ?)",
            [remote.name, remote.url, remote.schema, datetime.now(UTC)],
        )


def list_remotes(store: LedgerStore) -> list[Remote]:
    """The configured remotes, by name (none when the ledger has never had one)."""
    if not store.path.exists():
        return []
    with store.connect() as con:
        tables = {
            row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
        if "sync_remotes" not in tables:
            return []
        rows = con.execute(
            "SELECT name, url, hub_schema FROM sync_remotes ORDER BY name"
        ).fetchall()
    return [Remote(*row) for row in rows]


def get_remote(store: LedgerStore, name: str | None) -> Remote:
    """The remote called ``name``, or the only one when ``name`` is None.

    Raises:
        NotFound: no such remote, or none configured.
        InvalidInput: ``name`` is None and several remotes are configured.
    """
    remotes = list_remotes(store)
    if name is None:
        if not remotes:
            raise NotFound(
                f"ledger {store.path} has no remote (add one with `tuneledger remote add NAME URL`)"
            )
        if len(remotes) > 1:
            raise InvalidInput(
                f"several remotes ({', '.join(r.name for r in remotes)}): name the one to sync"
            )
        return remotes[0]
    for remote in remotes:
        if remote.name == name:
            return remote
    raise NotFound(f"no remote {name} (configured: {', '.join(r.name for r in remotes) or 'none'})")


def remove_remote(store: LedgerStore, name: str) -> None:
    """Forget a remote (its configuration only: no event is touched, here or on the hub).

    Raises:
        NotFound: no such remote.
    """
    get_remote(store, name)
    with store.connect(read_only=False) as con:
        con.execute("DELETE FROM sync_remotes WHERE name = ?", [name])
