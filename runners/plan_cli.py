"""Shim: ``runners.cli`` looks for ``plan_command`` here; it lives in ``runners.cli_measure``."""

from .cli_measure import plan_command

__all__ = ["plan_command"]
