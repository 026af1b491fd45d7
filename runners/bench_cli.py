"""Shim: ``runners.cli`` looks for ``bench_command`` here; it lives in ``runners.cli_measure``."""

from .cli_measure import bench_command

__all__ = ["bench_command"]
