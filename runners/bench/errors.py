"""The benchmark's own refusal: exit 13, a measurement that could not run."""

from __future__ import annotations

from ledger.errors import LedgerError


class BenchFailed(LedgerError):
    """Every warmup request failed, or the server could not be asked which model it serves
    (exit 13: ``run bench``, ``run plan``, ``run spec`` and their MCP tools)."""

    exit_code = 13
