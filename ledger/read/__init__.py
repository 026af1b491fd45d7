"""The read layer: the read model (every query a front end asks), the SQL console's sandbox,
the ledger's memory of flag verdicts and the event types' reference.

The store loads the derived tables and views it reads through by itself
(``ledger.store.derived``); the package stays light: ``event_types`` needs no DuckDB.
"""
