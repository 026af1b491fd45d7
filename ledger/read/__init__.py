"""The read layer: the read model (every query a front end asks), the SQL console's sandbox,
the ledger's memory of flag verdicts and the event types' reference.

Its modules that read a ledger import ``ledger.derive``, which installs the derived tables and
views into the store (the package itself stays light: ``event_types`` needs no DuckDB).
"""
