"""The write layer: every write to a ledger goes through it (``commands`` and its rules, the
bulk import, JSON lines, the checks of user input).

The store keeps the derived tables current inside its transactions: importing this layer
installs them into the store (``ledger.derive``).
"""

import ledger.derive  # noqa: F401
