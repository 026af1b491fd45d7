"""``python -m ledger.cli``: the command line run in this process (no resident forwarding)."""

from ledger.cli.main import run

run()
