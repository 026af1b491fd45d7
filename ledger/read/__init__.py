"""The read layer: the read model (every query a front end asks), the SQL console's sandbox,
the ledger's memory of flag verdicts and the event types' reference.

It reads the derived tables and views: importing it installs them into the store
(``ledger.derive``).
"""

import ledger.derive  # noqa: F401
