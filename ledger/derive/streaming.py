"""The streaming-granularity rule: whether a run's TPOT and ITL time tokens or chunks.

A client can only time what the server streams. When many tokens come in one chunk (a CPU
``transformers serve`` sends a whole answer in one, speculative decoding several accepted tokens
at once, a proxy buffers), TPOT collapses to the gap between the last chunks and ITL to the
chunks' gaps: neither times tokens. One rule for tuneledger's own runner
(``runners/bench/metrics.py``) and for every import (``ledger/importers``):

- per request, chunks per token = (content chunks - 1) / (output tokens - 1), the gaps after the
  first token; the run's figure is the median over successful requests with 2+ output tokens;
- below ``MIN_CHUNKS_PER_TOKEN`` the stream is coarse: TPOT and ITL are not measurable and are
  left empty, with a note saying so (TTFT, E2E and throughputs do not depend on the chunking);
- the same threshold per request (``request_streamed``): in a run that is not coarse as a whole,
  a request whose tokens came in fewer chunks than that (a burst: one read carrying the whole
  answer) gives no TPOT and no ITL, and the run's note counts them.

A result file that keeps no per-request chunk counts may still tell the figure from its means
(``from_means``); one that tells nothing leaves TPOT and ITL not measurable, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median

from schemas.metrics import METRICS

#: Below this many streamed chunks per output token the stream is too coarse for per-token
#: timing: with a few chunks per completion TPOT collapses to the gap between the last chunks
#: (0.01 ms) and ITL to the chunks'.
MIN_CHUNKS_PER_TOKEN = 0.5

#: A gap between two streamed events shorter than this (ms) is one network read: the events came
#: together, and a client that stamps each event after parsing the one before it (vLLM's
#: ``vllm bench serve`` does) records microseconds between them. Measured on 19,344 gaps of
#: ``vllm bench serve`` (vLLM 0.32.0 CPU, docs/vllm-cpu.md): 11,530 under 0.01 ms, 14 more
#: under 0.1 ms, 45 between 0.1 and 0.5 ms, the decode steps 2-10 ms. Our own runner stamps the
#: events of one read with one time (gap 0), so the rule is the same for both.
SAME_READ_MS = 0.1

#: The metrics that time the gaps between tokens (empty when streaming is coarse).
PER_TOKEN_METRICS = tuple(m.name for m in METRICS if m.name.endswith(("_tpot_ms", "_itl_ms")))


@dataclass(frozen=True)
class Granularity:
    """How finely one run was streamed: ``ratio`` chunks per output token (after the first),
    ``chunks`` and ``tokens`` per request (medians, or means for an estimate); ``basis`` says
    how they were obtained (``per request (median)``, ``estimated from the means``...)."""

    ratio: float
    chunks: float
    tokens: float
    basis: str = "median"

    @property
    def coarse(self) -> bool:
        """Below the rule's threshold: TPOT and ITL are not measurable."""
        return self.ratio < MIN_CHUNKS_PER_TOKEN

    def note(self) -> str:
        """The note of a coarse run (the runner's wording, with the basis of the figures)."""
        # two decimals as the runner prints them, three where two would round up to the threshold
        ratio = (
            f"{self.ratio:.2f}"
            if round(self.ratio, 2) < MIN_CHUNKS_PER_TOKEN
            else f"{self.ratio:.3f}"
        )
        return (
            f"coarse streaming: {self.chunks:.3g} chunks for {self.tokens:.3g} output tokens per "
            # the ratio is of the gaps after the first token, as its words say: 1 chunk for 8
            # tokens is 0 gaps for 7, not 1/8
            f"request ({self.basis}), {ratio} chunks per token after the first "
            f"((chunks - 1) / (tokens - 1)) < {MIN_CHUNKS_PER_TOKEN}: "
            "TPOT and ITL not measurable (left empty)"
        )


def request_streamed(chunks: float | None, tokens: int | None) -> bool | None:
    """Whether one request's tokens came in enough chunks to time them, (chunks - 1) /
    (tokens - 1) >= ``MIN_CHUNKS_PER_TOKEN``; None when it cannot tell (no count, or fewer
    than 2 output tokens: no gap to time)."""
    if chunks is None or tokens is None or tokens < 2 or chunks <= 0:
        return None
    return (chunks - 1) / (tokens - 1) >= MIN_CHUNKS_PER_TOKEN


def burst_note(bursts: int, requests: int) -> str:
    """The run's note when ``bursts`` of its ``requests`` had their TPOT and ITL left out."""
    return (
        f"{bursts} of {requests} requests streamed in fewer than {MIN_CHUNKS_PER_TOKEN} chunks "
        "per token (a burst): their TPOT and ITL not measured (left out of the run's)"
    )


def from_requests(
    requests: Iterable[tuple[float | None, int | None]], *, basis: str = "median"
) -> Granularity | None:
    """The rule over ``(content chunks, output tokens)`` of each successful request; None when no
    request had 2+ output tokens and a chunk count."""
    pairs = [
        (float(c), int(t))
        for c, t in requests
        if c is not None and t is not None and t > 1 and c > 0
    ]
    if not pairs:
        return None
    ratio = median((c - 1) / (t - 1) for c, t in pairs)
    return Granularity(
        ratio=float(ratio),
        chunks=float(median(c for c, _ in pairs)),
        tokens=float(median(t for _, t in pairs)),
        basis=basis,
    )


def from_means(
    mean_e2e_ms: float | None,
    mean_ttft_ms: float | None,
    mean_itl_ms: float | None,
    tokens_per_request: float | None,
) -> Granularity | None:
    """The rule estimated from a summary's means, for a file that keeps no per-request chunks:
    ITL is pooled over every gap between chunks, so (mean E2E - mean TTFT) / mean ITL is the
    mean number of gaps per request (a little over it: E2E runs past the last chunk to the
    stream's end, so the estimate leans to "fine"). None when a figure is missing."""
    if None in (mean_e2e_ms, mean_ttft_ms, mean_itl_ms, tokens_per_request):
        return None
    assert mean_e2e_ms is not None and mean_ttft_ms is not None and mean_itl_ms is not None
    assert tokens_per_request is not None
    if tokens_per_request <= 1:
        return None
    gaps = max(0.0, (mean_e2e_ms - mean_ttft_ms) / mean_itl_ms) if mean_itl_ms > 0 else 0.0
    return Granularity(
        ratio=gaps / (tokens_per_request - 1),
        chunks=gaps + 1,
        tokens=tokens_per_request,
        basis="estimated from mean E2E, TTFT and ITL",
    )
