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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas import BenchmarkCompleted, BenchMetrics, Workload
from schemas.metrics import INTEGER_METRICS, tpot

from ..derive.streaming import (
    PER_TOKEN_METRICS,
    SAME_READ_MS,
    Granularity,
    burst_note,
    request_streamed,
)
from .detect import ImportContext, InputFile

if TYPE_CHECKING:
    import pyarrow as pa

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
    streaming: Granularity | str | None = None,
    lengths: OutputLengths | None = None,
    partner: InputFile | None = None,
    ok_rows: Sequence[dict[str, Any]] = (),
) -> BenchmarkCompleted:
    """One imported run; ``label`` makes its id (unique within the file), ``line`` its source.

    ``metrics`` are our ``BenchMetrics`` fields (``None`` values dropped; integer fields
    rounded from floats such as ``20.0``); ``tool_metrics`` drops ``None`` values.
    ``config_name``: the caller's ``--config-name``, else this, else the file stem.

    The run's validity gate, as far as the file shows it: no request failed, at least one
    completed, and (``lengths``) the output lengths as asked. ``streaming`` applies the
    streaming-granularity rule (``ledger.streaming``): a coarse ``Granularity`` leaves TPOT
    and ITL empty with the runner's note; a string is why the file cannot tell, and TPOT and
    ITL are not measurable for that reason. Either way the tool's own figures stay in
    ``tool_metrics``. ``ok_rows``: the successful requests' samples rows, where the file keeps
    each request's gaps: in a run fine as a whole, a burst request's TPOT and ITL are left out
    (``without_bursts``). ``partner``: the other file of the run imported with this one (its
    per-request half): the id and run id then name both files' contents.
    """
    values = {k: v for k, v in metrics.items() if v is not None}
    unknown = set(values) - _METRIC_FIELDS
    if unknown:  # a programming error of an importer, not of the file
        raise ValueError(f"not BenchMetrics fields: {sorted(unknown)}")
    for key in _INT_METRICS & values.keys():
        values[key] = int(round(values[key]))
    kept = {k: float(v) for k, v in (tool_metrics or {}).items() if v is not None}
    notes_of_metrics = list(metric_notes)
    validity: list[str] = []
    valid = True
    moved, coarse_note, unmeasurable = apply_streaming(values, streaming)
    for name, value in moved.items():
        kept.setdefault(name, value)
    validity.extend([coarse_note] if coarse_note else [])
    if isinstance(streaming, Granularity) and not streaming.coarse:
        replaced, bursts = without_bursts(values, ok_rows)
        values = {k: v for k, v in values.items() if v is not None}
        for name, value in replaced.items():
            kept.setdefault(name, value)
        validity.extend([bursts] if bursts else [])
    notes_of_metrics.extend([unmeasurable] if unmeasurable else [])
    bench = BenchMetrics(**values)
    if bench.failed:
        valid = False
        validity.append(
            f"{bench.failed} request(s) failed" + (f": {first_error[:200]}" if first_error else "")
        )
    if bench.completed == 0:
        valid = False
        validity.append("no request completed")
    if lengths is not None:
        fails, length_notes = lengths.check()
        valid = valid and not fails
        validity.extend(length_notes)
    pair = f":with:{partner.sha256}" if partner is not None else ""
    return BenchmarkCompleted(
        event_id=file.event_id(f"bench:{label}{pair}"),
        source=(f"{file.name}:{line}" if line else file.name)
        + (f" + {partner.name}" if partner is not None else ""),
        session_id=ctx.session_id,
        host=ctx.host,
        actor=ctx.actor,
        run_id=f"{tool.split('.')[0]}-{file.sha256[:12]}"
        + (f"-{partner.sha256[:8]}" if partner is not None else "")
        + f"-{slug(label)}",
        config_name=ctx.config_name or config_name or file.path.stem,
        tool=tool,
        tool_version=tool_version,
        workload=workload or Workload(),
        concurrency=concurrency if concurrency is None or concurrency >= 1 else None,
        metrics=bench,
        valid=valid,
        validity_notes=validity,
        notes=notes,
        tool_metrics=kept,
        metric_notes=notes_of_metrics,
    )


def apply_streaming(
    values: dict[str, Any], streaming: Granularity | str | None
) -> tuple[dict[str, float], str | None, str | None]:
    """The streaming-granularity rule on a run's metric ``values`` (changed in place): when the
    stream is coarse, or the file cannot tell (``streaming`` is the reason), TPOT and ITL are
    taken out. Returns (what was taken out, the validity note of a coarse stream, the metric
    note of a file that cannot tell)."""
    if streaming is None or (isinstance(streaming, Granularity) and not streaming.coarse):
        return {}, None, None
    moved = {
        name: float(values.pop(name)) for name in PER_TOKEN_METRICS if values.get(name) is not None
    }
    for name in PER_TOKEN_METRICS:
        values.pop(name, None)
    if isinstance(streaming, str):
        return moved, None, f"TPOT and ITL not measurable: {streaming}"
    return moved, streaming.note(), None


@dataclass(frozen=True)
class OutputLengths:
    """The output lengths of a run's successful requests, for the gate's "output lengths as
    asked" (the runner's rule, ``runners/bench/metrics.py``'s ``validity``).

    ``counts``: each successful request's output tokens (None: not counted); ``asked``: the
    length every request asked for (None: the file does not say, or it varied); ``ignore_eos``:
    whether the tool asked the server to ignore EOS (None: the file does not say); ``exact``:
    the counts are the server's (``usage``), not the tool's re-tokenizing of the text.

    A request that returned no token fails the gate whatever was asked (every request asks for
    at least one). A count other than ``asked`` fails it when the length was enforced
    (``ignore_eos``) and the counts are the server's; otherwise it is noted, not gated.
    """

    counts: Sequence[int | None]
    asked: int | None = None
    ignore_eos: bool | None = None
    exact: bool = True

    def check(self) -> tuple[bool, list[str]]:
        """(fails the gate, notes)."""
        counted = [c for c in self.counts if c is not None]
        notes: list[str] = []
        fails = False
        empty = sum(1 for c in counted if c == 0)
        if empty:
            fails = True
            notes.append(
                f"{empty} of {len(self.counts)} successful requests returned 0 output tokens"
            )
        if self.asked is None:
            return fails, notes
        wrong = [c for c in counted if c not in (0, self.asked)]
        if not wrong:
            return fails, notes
        text = f"{len(wrong)} requests returned {sorted(set(wrong))[:5]} output tokens, not {self.asked}"
        if self.ignore_eos and self.exact:
            fails = True
        elif not self.exact:
            text += (
                " (not gated: the counts are the tool's tokenizing of the text, not the server's)"
            )
        elif self.ignore_eos is False:
            text += " (not gated: ignore_eos was not sent, so a request may stop at EOS)"
        else:
            text += " (not gated: the file does not say whether ignore_eos was sent)"
        notes.append(text)
        return fails, notes


def slug(text: str) -> str:
    """``text`` with every run of characters other than letters, digits, ``.`` and ``-`` as one ``-``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-") or "run"


def samples_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    """The ``bench_samples`` table (without the event id) of per-request rows.

    Each row may give ``ok``, ``ttft_ms``, ``e2e_ms``, ``tpot_ms``, ``prompt_tokens``,
    ``output_tokens``, ``itl_ms`` (a list) and ``error``; ``request_index`` is the row's
    position. Missing values are null (``itl_ms``: an empty list).
    """
    import pyarrow as pa  # only a file with per-request rows needs it (not the import of a log)

    from ..store import BENCH_SAMPLES_SCHEMA as SAMPLES_SCHEMA

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


def chunks_from_gaps(gaps: Sequence[float] | None) -> int:
    """A request's streamed chunks (network reads that carried content) from its list of gaps
    in ms: the first token's chunk, and one more for each gap that starts a new read. A gap
    under ``SAME_READ_MS`` does not (the events came in one read: vLLM's client stamps each
    event of a burst microseconds apart), nor does a gap equal to the one before it (sglang's
    native ``/generate`` client splits a chunk's gap evenly over the chunk's tokens; two
    chunks never arrive with bit-identical gaps)."""
    if not gaps:
        return 1
    starts = sum(
        1 for i, gap in enumerate(gaps) if gap >= SAME_READ_MS and (i == 0 or gap != gaps[i - 1])
    )
    return 1 + starts


def without_bursts(
    values: dict[str, Any], ok_rows: Sequence[dict[str, Any]]
) -> tuple[dict[str, float], str | None]:
    """The per-request half of the streaming rule on an import (as ``runners.bench.metrics``
    does on our runs): in a run fine as a whole, a successful request whose tokens came in
    fewer than ``MIN_CHUNKS_PER_TOKEN`` chunks per token (a burst) gives no TPOT and no ITL.

    ``values``: the run's metrics (changed in place: TPOT and ITL recomputed over the other
    requests, None when none is left); ``ok_rows``: the successful requests' samples rows
    (``itl_ms`` gaps, ``output_tokens``, ``tpot_ms``). Returns the tool's own figures that were
    replaced (for ``tool_metrics``) and the run's note counting the bursts (None: no burst,
    nothing changed)."""
    from ledger.derive.distribution import distribution_ms

    flags = [request_streamed(chunks_from_gaps(r["itl_ms"]), r["output_tokens"]) for r in ok_rows]
    bursts = sum(1 for f in flags if f is False)
    if not bursts:
        return {}, None
    kept = [r for r, f in zip(ok_rows, flags, strict=True) if f is not False]
    moved = {
        name: float(values[name]) for name in PER_TOKEN_METRICS if values.get(name) is not None
    }
    update: dict[str, float | None] = {name: None for name in PER_TOKEN_METRICS}
    gaps = [g / 1000.0 for r in kept for g in r["itl_ms"] or []]
    update.update(distribution_ms(gaps, "itl"))
    update["max_itl_ms"] = max(gaps) * 1000.0 if gaps else None
    tpots = [r["tpot_ms"] / 1000.0 for r in kept if r["tpot_ms"] is not None]
    update.update(distribution_ms(tpots, "tpot"))
    values.update(update)
    return moved, burst_note(bursts, len(ok_rows))
