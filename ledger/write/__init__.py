"""The write layer: every write to a ledger goes through it (``commands`` and its rules, the
bulk import, replicated rows, JSON lines, the checks of user input).

The store keeps the derived tables current inside its transactions, loading them itself
(``ledger.store.derived``); the package stays light: parsing input needs no DuckDB, and the
CLI's start-up does not pay for it.
"""
