"""Latency distributions as sglang's bench_serving computes them (docs/metrics.md).

One function, used by the benchmark client (``runners.bench.metrics.summarize``) and by the
importers that recompute statistics from per-request values
(``ledger.importers.results.distribution_from_samples``): it lives in the core so that the
importers need nothing from ``runners/`` (import-linter's layers contract).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The percentiles reported next to mean/median/std (sglang reports p90/p95/p99 in newer builds).
PERCENTILES = (90, 95, 99)


def distribution_ms(values_s: Sequence[float], name: str) -> dict[str, float | None]:
    """``mean/median/std/p90/p95/p99_{name}_ms`` of values given in seconds (numpy, as sglang:
    ``np.mean``, ``np.median``, ``np.std`` with ddof=0, ``np.percentile`` linear).

    An empty list gives None for every field (sglang's ``np.mean(xs or 0)`` reports 0 there;
    None says "not measured" instead of inventing a zero latency).
    """
    if len(values_s) == 0:
        return {
            f"{k}_{name}_ms": None
            for k in ("mean", "median", "std", *(f"p{p}" for p in PERCENTILES))
        }
    arr = np.asarray(values_s, dtype=float) * 1000.0
    out: dict[str, float | None] = {
        f"mean_{name}_ms": float(np.mean(arr)),
        f"median_{name}_ms": float(np.median(arr)),
        f"std_{name}_ms": float(np.std(arr)),
    }
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = float(np.percentile(arr, p))
    return out
