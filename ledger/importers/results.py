"""Shared pieces of the importers of other tools' benchmark results.

``bench_event`` builds the ``BenchmarkCompleted`` of one run the way the sglang
importer does (deterministic id from the file and a label, ``source`` =
``name:line``, the same validity notes), ``samples_table`` the per-request
``bench_samples`` table, and ``distribution_from_samples`` our TTFT/TPOT/E2E
statistics from per-request values, computed as sglang's bench_serving computes
them (``ledger.derive.distribution.distribution_ms``: numpy mean, median, population
std, linear-interpolated p90/p95/p99).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from schemas import BenchmarkCompleted, BenchMetrics, Workload
from schemas.metrics import INTEGER_METRICS, tpot

from ..store import BENCH_SAMPLES_SCHEMA as SAMPLES_SCHEMA
from .detect import ImportContext, InputFile

_METRIC_FIELDS = frozenset(BenchMetrics.model_fields)
_INT_METRICS = INTEGER_METRICS


def bench_event(
    file: InputFile,
    ctx: ImportContext,
    *,
    label: str,
    line: int | None,
    tool: str,
    metrics: dict[str, Any],
    workload: Workload | None = None,
    concurrency: int | None = None,
    tool_version: str | None = None,
    tool_metrics: dict[str, float | None] | None = None,
    metric_notes: Sequence[str] = (),
    notes: str | None = None,
    config_name: str | None = None,
    first_error: str | None = None,
) -> BenchmarkCompleted:
    """One imported run; ``label`` makes its id (unique within the file), ``line`` its source.

    ``metrics`` are our ``BenchMetrics`` fields (``None`` values dropped; integer fields
    rounded from floats such as ``20.0``); ``tool_metrics`` drops ``None`` values.
    ``config_name``: the caller's ``--config-name``, else this, else the file stem.
    The run is valid when no request failed and at least one completed.
    """
    values = {k: v for k, v in metrics.items() if v is not None}
    unknown = set(values) - _METRIC_FIELDS
    if unknown:  # a programming error of an importer, not of the file
        raise ValueError(f"not BenchMetrics fields: {sorted(unknown)}")
    for key in _INT_METRICS & values.keys():
        values[key] = int(round(values[key]))
    bench = BenchMetrics(**values)
    validity = []
    if bench.failed:
        validity.append(
            f"{bench.failed} request(s) failed" + (f": {first_error[:200]}" if first_error else "")
        )
    if bench.completed == 0:
        validity.append("no request completed")
    return BenchmarkCompleted(
        event_id=file.event_id(f"bench:{label}"),
        source=f"{file.name}:{line}" if line else file.name,
        session_id=ctx.session_id,
        host=ctx.host,
        actor=ctx.actor,
        run_id=f"{tool.split('.')[0]}-{file.sha256[:12]}-{slug(label)}",
        config_name=ctx.config_name or config_name or file.path.stem,
        tool=tool,
        tool_version=tool_version,
        workload=workload or Workload(),
        concurrency=concurrency if concurrency is None or concurrency >= 1 else None,
        metrics=bench,
        valid=not validity,
        validity_notes=validity,
        notes=notes,
        tool_metrics={k: float(v) for k, v in (tool_metrics or {}).items() if v is not None},
        metric_notes=list(metric_notes),
    )


def slug(text: str) -> str:
    """``text`` with every run of characters other than letters, digits, ``.`` and ``-`` as one ``-``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-") or "run"


def samples_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    """The ``bench_samples`` table (without the event id) of per-request rows.

    Each row may give ``ok``, ``ttft_ms``, ``e2e_ms``, ``tpot_ms``, ``prompt_tokens``,
    ``output_tokens``, ``itl_ms`` (a list) and ``error``; ``request_index`` is the row's
    position. Missing values are null (``itl_ms``: an empty list).
    """
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLES_SCHEMA.names}
    for index, row in enumerate(rows):
        for name in SAMPLES_SCHEMA.names:
            if name == "request_index":
                columns[name].append(index)
            elif name == "itl_ms":
                columns[name].append(list(row.get("itl_ms") or []))
            elif name == "ok":
                columns[name].append(bool(row.get("ok", True)))
            else:
                columns[name].append(row.get(name))
    return pa.table(columns, schema=SAMPLES_SCHEMA)


#: Our TPOT of one request in ms: (E2E - TTFT) / (output_tokens - 1) (``schemas.metrics.tpot``).
tpot_ms = tpot


def distribution_from_samples(table: pa.Table) -> dict[str, float | None]:
    """Our mean/median/std/p90/p95/p99 of TTFT, TPOT and E2E (ms) over the successful
    requests of a samples table, plus ITL pooled over every gap where the table has gaps."""
    from ledger.derive.distribution import distribution_ms

    ok = [row for row in table.to_pylist() if row["ok"]]
    out: dict[str, float | None] = {}
    for column, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2e_latency")):
        values = [row[column] / 1000.0 for row in ok if row[column] is not None]
        if values:
            out.update(distribution_ms(values, name))
    gaps = [gap / 1000.0 for row in ok for gap in row["itl_ms"] or []]
    if gaps:
        out.update(distribution_ms(gaps, "itl"))
    return out
