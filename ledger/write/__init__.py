"""The write layer: every write to a ledger goes through it (``commands`` and its rules, the
bulk import, replicated rows, JSON lines, the checks of user input).

Its modules that write import ``ledger.derive``, which installs the derived tables into the
store, kept current inside its transactions (the package itself stays light: parsing input
needs no DuckDB, and the CLI's start-up does not pay for it).
"""
