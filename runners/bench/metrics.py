"""Serving-benchmark metric math, defined exactly as sglang bench_serving does (docs/metrics.md).

Per request (``RequestResult``), times in seconds from ``time.perf_counter``:

- ``start``: taken after the concurrency slot is acquired, just before the request is sent;
- TTFT = first non-empty streamed chunk - start;
- E2E (``latency``) = last streamed line (the usage chunk or ``[DONE]`` included) - start,
  as sglang's ``latency`` is the time of the last non-empty line it read;
- ITL: every gap between consecutive content chunks (a native ``/generate`` chunk that
  carried k tokens contributes k entries of gap/k);
- TPOT = (E2E - TTFT) / (output_tokens - 1), only when output_tokens > 1.

Per run (``summarize``): ITLs are pooled over requests; ``duration`` runs from the first
dispatch after warmup until every request is done; throughputs are tokens (or requests) per
duration; achieved concurrency = sum(E2E) / duration. Statistics are numpy's: ``np.mean``,
``np.median``, ``np.std`` (population, ddof=0) and ``np.percentile`` (linear interpolation),
as sglang's ``calculate_metrics`` uses them; failed requests count in ``failed`` only.
Output tokens come from the server (``usage.completion_tokens`` /
``meta_info.completion_tokens``), never from tokenizing inside the timing loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ledger.derive.distribution import distribution_ms
from ledger.derive.streaming import (
    PER_TOKEN_METRICS,
    Granularity,
    burst_note,
    from_requests,
    request_streamed,
)
from ledger.store import BENCH_SAMPLES_SCHEMA as SAMPLES_SCHEMA
from schemas.metrics import tpot
from schemas.parts import BenchMetrics


@dataclass
class RequestResult:
    """One request's outcome; times in seconds (perf_counter), tokens as the server counted them.

    ``output_tokens`` is None when the server reported no count (then the run's output
    length check cannot be made for this request).
    """

    ok: bool = False
    start: float = 0.0
    ttft: float | None = None
    latency: float | None = None
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int | None = None
    error: str = ""
    #: Streamed chunks that carried content (for the streaming-granularity check).
    chunks: int = 0

    @property
    def tpot(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1) in seconds, only when output_tokens > 1."""
        return tpot(self.ttft, self.latency, self.output_tokens) if self.ok else None


def summarize(results: Sequence[RequestResult], duration_s: float) -> BenchMetrics:
    """The run's summary metrics from its per-request results (see the module docstring).

    Raises:
        ValueError: ``duration_s`` is not positive.
    """
    if duration_s <= 0:
        raise ValueError(f"duration must be positive, got {duration_s!r} s")
    ok = [r for r in results if r.ok]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    e2es = [r.latency for r in ok if r.latency is not None]
    tpots = [t for t in (r.tpot for r in ok) if t is not None]
    itls = [gap for r in ok for gap in r.itl]
    total_in = sum(r.prompt_tokens for r in ok)
    total_out = sum(r.output_tokens or 0 for r in ok)
    data: dict[str, float | int | None] = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration_s": duration_s,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration_s,
        "input_throughput": total_in / duration_s,
        "output_throughput": total_out / duration_s,
        "total_throughput": (total_in + total_out) / duration_s,
        "achieved_concurrency": float(np.sum(e2es)) / duration_s if e2es else 0.0,
        "max_itl_ms": float(np.max(itls)) * 1000.0 if itls else None,
    }
    data.update(distribution_ms(ttfts, "ttft"))
    data.update(distribution_ms(tpots, "tpot"))
    data.update(distribution_ms(itls, "itl"))
    data.update(distribution_ms(e2es, "e2e_latency"))
    return BenchMetrics(**data)


def _granularity(results: Sequence[RequestResult]) -> Granularity | None:
    return from_requests((r.chunks, r.output_tokens) for r in results if r.ok)


def mask_coarse_streaming(
    results: Sequence[RequestResult], metrics: BenchMetrics, *, speculative: bool = False
) -> tuple[BenchMetrics, str | None]:
    """TPOT and ITL set to None (not measurable) when the stream is coarse, with the note saying
    why: the rule of ``ledger.derive.streaming``, the one every import applies too.

    Throughputs, TTFT and E2E stay (they do not depend on the chunking). ``speculative``: the
    engine's counters show accepted draft tokens in this run, so several tokens per chunk are its
    real decode steps, not a server buffering its stream: TPOT ((E2E - TTFT) / (tokens - 1) per
    request) stays, only the ITLs (one gap per chunk, not per token) go. Returns the metrics and
    the note (None: fine).
    """
    found = _granularity(results)
    if found is None or not found.coarse:
        return _without_bursts(results, metrics, speculative=speculative)
    if speculative:
        itl = [name for name in PER_TOKEN_METRICS if name.endswith("_itl_ms")]
        note = found.note().replace(
            "TPOT and ITL not measurable",
            "speculative decoding accepted drafts (engine counters): TPOT kept, ITL not measurable",
        )
        return metrics.model_copy(update={name: None for name in itl}), note
    return metrics.model_copy(update={name: None for name in PER_TOKEN_METRICS}), found.note()


def _without_bursts(
    results: Sequence[RequestResult], metrics: BenchMetrics, *, speculative: bool
) -> tuple[BenchMetrics, str | None]:
    """A run fine as a whole whose requests include bursts (``request_streamed`` false): TPOT
    and ITL over the other requests only, and the note counting the bursts. A speculative run
    keeps its TPOT (several tokens per chunk are its decode steps) and loses the bursts' ITL."""
    ok = [r for r in results if r.ok]
    bursts = [r for r in ok if request_streamed(r.chunks, r.output_tokens) is False]
    if not bursts:
        return metrics, None
    kept = [r for r in ok if request_streamed(r.chunks, r.output_tokens) is not False]
    update: dict[str, float | None] = {name: None for name in PER_TOKEN_METRICS}
    itls = [gap for r in kept for gap in r.itl]
    update.update(distribution_ms(itls, "itl"))
    update["max_itl_ms"] = float(np.max(itls)) * 1000.0 if itls else None
    if speculative:
        update = {k: v for k, v in update.items() if "_tpot_" not in k}
    else:
        update.update(distribution_ms([t for t in (r.tpot for r in kept) if t is not None], "tpot"))
    return metrics.model_copy(update=update), burst_note(len(bursts), len(ok))


#: Closed-loop runs want at least this many requests per concurrency slot (num_prompts / c): the
#: run ends with a tail in which fewer than c requests are in flight, and with a few requests per
#: slot that tail pulls achieved concurrency (sum E2E / duration) under the gate's 0.9 c
#: (16 prompts at c=4 failed it in 2 of 3 runs; 128 at c=16, 8 per slot, passed every run of the
#: H200 plan of docs/campaigns.md with 15.2-15.8).
MIN_PROMPTS_PER_SLOT = 8


def min_prompts(concurrency: int) -> int:
    """The fewest prompts for a closed-loop run at ``concurrency`` to pass the gate reliably."""
    return MIN_PROMPTS_PER_SLOT * concurrency


def prompts_warning(num_prompts: int, concurrencies: Sequence[int | None]) -> str | None:
    """A warning when ``num_prompts`` is too small for the highest closed-loop concurrency, else None."""
    top = max((c for c in concurrencies if c), default=None)
    if top is None or num_prompts >= min_prompts(top):
        return None
    return (
        f"warning: {num_prompts} prompts at concurrency {top} is {num_prompts / top:.1f} per slot: the run's "
        f"tail will likely pull achieved concurrency under 0.9 x {top} and fail the validity gate; "
        f"use at least {min_prompts(top)} prompts ({MIN_PROMPTS_PER_SLOT} x the concurrency)"
    )


def samples_table(results: Sequence[RequestResult]) -> pa.Table:
    """Per-request samples as the ledger's ``bench_samples`` columns (times in ms)."""

    def ms(x: float | None) -> float | None:
        return None if x is None else x * 1000.0

    rows = [
        {
            "request_index": i,
            "ok": r.ok,
            "ttft_ms": ms(r.ttft),
            "e2e_ms": ms(r.latency),
            "tpot_ms": ms(r.tpot),
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "itl_ms": [g * 1000.0 for g in r.itl],
            "error": r.error or None,
        }
        for i, r in enumerate(results)
    ]
    return pa.Table.from_pylist(rows, schema=SAMPLES_SCHEMA)


def validity(
    results: Sequence[RequestResult],
    metrics: BenchMetrics,
    *,
    concurrency: int | None,
    output_len: int,
    length_enforced: bool,
) -> tuple[bool, list[str]]:
    """The run's validity gate (docs/comparison.md, rule 1) and notes on what failed or was waived.

    Fails on: any failed request; achieved concurrency < 0.9 c (closed loop only);
    a request whose reported output token count differs from ``output_len`` — unless
    ``length_enforced`` is false (the engine could not be told to ignore EOS), in
    which case the shortfall is noted but does not fail the gate.
    """
    notes: list[str] = []
    valid = True
    failed = [r for r in results if not r.ok]
    if failed:
        valid = False
        first = failed[0].error.strip().splitlines()[-1:] or ["?"]
        notes.append(f"{len(failed)} of {len(results)} requests failed (first: {first[0][:200]})")
    if not results:
        valid = False
        notes.append("no requests were sent")
    if concurrency is not None and metrics.achieved_concurrency is not None:
        if metrics.achieved_concurrency < 0.9 * concurrency:
            valid = False
            notes.append(
                f"achieved concurrency {metrics.achieved_concurrency:.2f} < 0.9 x {concurrency}: "
                "too few prompts for this concurrency (use several times c), or a client bottleneck"
            )
    ok = [r for r in results if r.ok]
    unknown = [r for r in ok if r.output_tokens is None]
    if unknown:
        notes.append(f"{len(unknown)} requests: the server reported no output token count")
        if length_enforced:
            valid = False
    wrong = [r for r in ok if r.output_tokens is not None and r.output_tokens != output_len]
    if wrong:
        counts = sorted({r.output_tokens for r in wrong if r.output_tokens is not None})
        text = f"{len(wrong)} requests returned {counts[:5]} output tokens, not {output_len}"
        if length_enforced:
            valid = False
            notes.append(text)
        else:
            notes.append(text + " (not gated: this engine cannot ignore EOS)")
    if not length_enforced:
        notes.append("ignore_eos not honoured by this engine: output lengths are not enforced")
    return valid, notes
