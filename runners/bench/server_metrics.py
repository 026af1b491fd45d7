"""The server's own Prometheus ``/metrics`` around a benchmark run: what the engine counted.

vLLM (and SGLang with ``--enable-metrics``) export counters and gauges in Prometheus' text
format. Scraped right before a timed run, every ``interval_s`` during it and right after, they
give per run (``BenchmarkCompleted.server_metrics``):

- each counter's increase over the run (``vllm:num_preemptions``, ``vllm:prompt_tokens``,
  ``vllm:prefix_cache_hits`` / ``_queries``, the speculative decoding counters
  ``vllm:spec_decode_num_drafts`` / ``_num_draft_tokens`` / ``_num_accepted_tokens`` and
  ``vllm:spec_decode_num_accepted_tokens_per_pos{position=N}``), summed over engines;
- each gauge's maximum over the samples (``vllm:num_requests_running:max``,
  ``vllm:num_requests_waiting:max``, ``vllm:kv_cache_usage_perc:max``);
- derived: ``spec_accept_length`` = 1 + accepted tokens / drafts (the tokens one verification
  step yields: the accepted drafts plus the token the target model adds, vLLM's "mean acceptance
  length"), ``spec_draft_acceptance_rate`` = accepted / draft tokens, ``prefix_cache_hit_rate``
  = hits / queries, each only where its denominator moved.

Only the families in ``COUNTERS`` and ``GAUGES`` are kept. A server without ``/metrics``
(``transformers serve``) gives an empty result: nothing is made up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import httpx
from prometheus_client.parser import text_string_to_metric_families

#: Counter families kept (Prometheus family names: the ``_total`` sample suffix dropped).
COUNTERS = (
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
)
#: Gauge families kept (their maximum over the run's samples).
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")
#: Labels that split a family into kept series (others, e.g. ``engine``, are summed over).
_KEPT_LABELS = ("position", "reason")

Snapshot = dict[str, float]


def parse_metrics(text: str) -> Snapshot:
    """The kept series of a Prometheus text exposition: ``name`` or ``name{label=value}`` ->
    value, summed over the labels not kept (engines, models).

    Raises:
        ValueError: the text is not Prometheus' format.
    """
    out: Snapshot = {}
    for family in text_string_to_metric_families(text):
        kind = "counter" if family.name in COUNTERS else "gauge" if family.name in GAUGES else None
        if kind is None:
            continue
        for sample in family.samples:
            if kind == "counter" and not sample.name.endswith("_total"):
                continue  # the _created timestamps
            kept = ",".join(f"{k}={sample.labels[k]}" for k in _KEPT_LABELS if k in sample.labels)
            key = f"{family.name}{{{kept}}}" if kept else family.name
            out[key] = out.get(key, 0.0) + float(sample.value)
    return out


async def scrape(client: httpx.AsyncClient, base_url: str) -> Snapshot | None:
    """One scrape of ``base_url/metrics``; None when the server has none or it does not parse."""
    try:
        response = await client.get(base_url.rstrip("/") + "/metrics")
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        return parse_metrics(response.text)
    except ValueError:
        return None


def _family(key: str) -> str:
    return key.split("{", 1)[0]


def run_metrics(before: Snapshot, after: Snapshot, samples: Iterable[Snapshot]) -> Snapshot:
    """Counters' increase from ``before`` to ``after``, gauges' maxima over ``samples`` (and the
    two scrapes), and the derived rates (module doc)."""
    out: Snapshot = {}
    for key, value in after.items():
        if _family(key) in COUNTERS and key in before:
            out[key] = round(value - before[key], 6)
    for snap in (before, *samples, after):
        for key, value in snap.items():
            if _family(key) in GAUGES:
                name = f"{key}:max"
                out[name] = max(out.get(name, value), value)
    drafts = out.get("vllm:spec_decode_num_drafts", 0.0)
    draft_tokens = out.get("vllm:spec_decode_num_draft_tokens", 0.0)
    accepted = out.get("vllm:spec_decode_num_accepted_tokens")
    if drafts > 0 and accepted is not None:
        out["spec_accept_length"] = round(1.0 + accepted / drafts, 4)
    if draft_tokens > 0 and accepted is not None:
        out["spec_draft_acceptance_rate"] = round(accepted / draft_tokens, 4)
    queries = out.get("vllm:prefix_cache_queries", 0.0)
    if queries > 0 and "vllm:prefix_cache_hits" in out:
        out["prefix_cache_hit_rate"] = round(out["vllm:prefix_cache_hits"] / queries, 4)
    return out


class MetricsWatch:
    """Scrapes ``/metrics`` before a run (``start``), every ``interval_s`` while it runs, and after
    (``stop``, which returns ``run_metrics``; empty when the server has no ``/metrics``)."""

    def __init__(self, base_url: str, *, interval_s: float = 1.0, timeout_s: float = 5.0) -> None:
        self.base_url = base_url
        self.interval_s = interval_s
        self._client = httpx.AsyncClient(timeout=timeout_s, trust_env=False)
        self._before: Snapshot | None = None
        self._samples: list[Snapshot] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._before = await scrape(self._client, self.base_url)
        if self._before is not None:
            self._task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            snap = await scrape(self._client, self.base_url)
            if snap is not None:
                self._samples.append(snap)

    async def stop(self) -> Snapshot:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        after = await scrape(self._client, self.base_url) if self._before is not None else None
        await self._client.aclose()
        if self._before is None or after is None:
            return {}
        return run_metrics(self._before, after, self._samples)
