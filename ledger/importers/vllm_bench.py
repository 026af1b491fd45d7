"""vLLM benchmark results -> ``BenchmarkCompleted`` events.

Two formats:

- ``vllm bench serve --save-result`` JSON (and ``benchmarks/benchmark_serving.py``
  before it; ``--append-result`` writes one object per line): ``duration`` (s),
  ``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``,
  ``request_throughput``, ``output_throughput``, ``total_token_throughput``,
  ``max_output_tokens_per_s``, ``max_concurrent_requests`` and
  ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`` (percentiles as
  ``--metric-percentiles`` asked, ``p99`` by default); ``--save-detailed`` adds
  ``input_lens``, ``output_lens``, ``ttfts`` (s), ``itls`` (s per gap), ``errors``.
  sglang's bench_serving descends from this script and defines TTFT, TPOT
  (excluding the first token), ITL (every gap, pooled) and E2E the same way, so
  they map one to one (``e2el`` -> ``e2e_latency``, ``total_token_throughput``
  -> ``total_throughput``). Percentiles other than p90/p95/p99 and
  ``request_goodput`` are kept in ``tool_metrics``.
- The nightly-benchmark summary JSON (``.buildkite/nightly-benchmarks``): a list of
  rows ``{"Test name", "GPU", "Successful req.", "Tput (req/s)", "Mean TTFT (ms)",
  "Std TTFT (ms)", ..., "Engine": "vllm_055"}``, one run per row; the test name
  carries the model, ``tpN``, the dataset and ``qps_R`` (``inf``: all at once).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ledger.engines.gpu_arch import compute_capability_for
from ledger.errors import InvalidInput
from schemas import Host, Workload

from ..derive.streaming import from_means, from_requests
from .bench_serving import samples_from_details
from .detect import (
    ImportContext,
    Importer,
    InputFile,
    ReadResult,
    Sniffed,
    json_lines,
    looks_like_bench,
)
from .fields import FieldReader
from .results import OutputLengths, bench_event, chunks_from_gaps, distribution_from_samples

TOOL = "vllm.bench_serve"
NIGHTLY_TOOL = "vllm.nightly_benchmarks"

#: Keys only vLLM's result has (sglang's spells E2E ``e2e_latency`` and total throughput ``total_throughput``).
VLLM_KEYS = frozenset(
    {
        "mean_e2el_ms",
        "median_e2el_ms",
        "total_token_throughput",
        "endpoint_type",
        "burstiness",
        "model_id",
        "tokenizer_id",
        "request_goodput",
        "request_goodput:",
        "best_of",
        "use_beam_search",
    }
)
_RENAMED = {
    "duration": "duration_s",
    "total_token_throughput": "total_throughput",
    "input_throughput": "input_throughput",
}
_INT_KEYS = {
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrent_requests",
}
_PLAIN = {
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
}
_STAT_RE = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")
_OUR_PERCENTILES = {"90", "95", "99"}


def _is_vllm(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and looks_like_bench(obj)
        or (
            isinstance(obj, dict)
            and bool({"completed", "duration"} & obj.keys())
            and bool(VLLM_KEYS & obj.keys())
        )
    )


def _sniff(sniffed: Sniffed) -> float:
    obj = sniffed.json if sniffed.json is not None else sniffed.first_json_line
    if isinstance(obj, dict) and VLLM_KEYS & obj.keys() and _is_vllm(obj):
        return 0.8
    return 0.0


def _objects(file: InputFile, sniffed_whole: Any) -> list[tuple[int, dict[str, Any]]]:
    """(line, object) of each result: the one document, or each non-blank JSON line."""
    if isinstance(sniffed_whole, dict):
        return [(1, sniffed_whole)]
    out = []
    for number, obj in json_lines(file):
        if not isinstance(obj, dict) or not _is_vllm(obj):
            raise InvalidInput(f"{file.label}:{number}: not a vLLM bench serve result object")
        out.append((number, obj))
    return out


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    try:
        whole = file.json
    except json.JSONDecodeError:
        whole = None
    events = []
    samples = {}
    for number, obj in _objects(file, whole):
        reader = FieldReader(obj, f"{file.label}:{number}")
        table = samples_from_details(reader)
        event = _event(file, ctx, reader, number, table)
        events.append(event)
        if table is not None:
            samples[event.event_id] = table
    return events, samples


def _event(file: InputFile, ctx: ImportContext, r: FieldReader, number: int, table: Any) -> Any:
    metrics: dict[str, Any] = {}
    tool_metrics: dict[str, float | None] = {}
    for key in r.obj:
        if key in _PLAIN:
            metrics[key] = r.number(key, integer=key in _INT_KEYS)
        elif key in _RENAMED:
            metrics[_RENAMED[key]] = r.number(key)
        elif key in ("request_goodput", "request_goodput:"):
            tool_metrics["request_goodput"] = r.number(key)
        else:
            m = _STAT_RE.match(key)
            if not m:
                continue
            stat, pct, name = m.group(1), m.group(2), m.group(3)
            ours = "e2e_latency" if name == "e2el" else name
            if pct is None or pct in _OUR_PERCENTILES:
                metrics[f"{stat}_{ours}_ms"] = r.number(key)
            else:
                tool_metrics[key] = r.number(key)
    duration = metrics.get("duration_s")
    completed = metrics.get("completed")
    if table is not None:
        failed = table.num_rows - sum(table.column("ok").to_pylist())
        metrics["failed"] = failed
        for key, value in distribution_from_samples(table).items():
            metrics.setdefault(key, value)
    if (
        duration
        and metrics.get("total_input_tokens") is not None
        and "input_throughput" not in metrics
    ):
        metrics["input_throughput"] = metrics["total_input_tokens"] / duration
    if duration and completed and metrics.get("mean_e2e_latency_ms") is not None:
        # sglang's achieved concurrency: sum(E2E) / duration.
        metrics["achieved_concurrency"] = (
            metrics["mean_e2e_latency_ms"] * completed / 1000.0 / duration
        )
    max_concurrency = r.number("max_concurrency", integer=True)
    if max_concurrency is not None and max_concurrency < 1:
        raise r.error("max_concurrency", f"expected >= 1, got {max_concurrency}")
    rate = _rate(r)
    failed = metrics.get("failed")
    num_prompts = r.number("num_prompts", integer=True)
    if num_prompts is None and completed is not None and failed is not None:
        num_prompts = completed + failed
    workload = Workload(
        seed=_seed(r),
        dataset=r.text("dataset_name"),
        num_prompts=num_prompts,
        load="open-loop"
        if rate is not None
        else ("closed-loop" if max_concurrency is not None else None),
        request_rate=rate,
        endpoint=endpoint_of_backend(r.text("backend") or r.text("endpoint_type")),
    )
    first_error = None
    streaming: Any = None
    lengths = None
    rows: list[dict[str, Any]] = []
    if table is not None:
        rows = [row for row in table.to_pylist() if row["ok"]]
        first_error = next((e for e in table.column("error").to_pylist() if e), None)
        streaming = from_requests(
            (chunks_from_gaps(row["itl_ms"]), row["output_tokens"]) for row in rows
        )
        lengths = OutputLengths([row["output_tokens"] for row in rows])
    if streaming is None and completed and metrics.get("total_output_tokens") is not None:
        streaming = from_means(
            metrics.get("mean_e2e_latency_ms"),
            metrics.get("mean_ttft_ms"),
            metrics.get("mean_itl_ms"),
            metrics["total_output_tokens"] / completed,
        )
    if streaming is None:
        streaming = (
            "the file keeps no per-request chunks (--save-detailed) and no mean E2E, TTFT "
            "and ITL to estimate them from"
        )
    model = r.text("model_id")
    return bench_event(
        file,
        ctx,
        label=str(number),
        line=number,
        tool=TOOL,
        metrics=metrics,
        workload=workload,
        concurrency=max_concurrency,
        tool_metrics=tool_metrics,
        notes=", ".join(
            x
            for x in (
                f"model {model}" if model else "",
                f"date {r.text('date')}" if r.text("date") else "",
            )
            if x
        )
        or None,
        first_error=first_error,
        streaming=streaming,
        lengths=lengths,
        ok_rows=rows,
    )


def _seed(r: FieldReader) -> int | None:
    """The run's seed where the line records one: vLLM's result keeps none of its own, but
    ``--metadata seed=N`` (``run bench --tool vllm`` passes it) writes it as a key."""
    value = r.obj.get("seed")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise r.error("seed", f"expected an integer, got {str(value)[:40]!r}") from None


#: ``vllm bench serve --backend`` -> the endpoint it measures (``ASYNC_REQUEST_FUNCS`` of
#: vLLM's ``benchmarks/lib/endpoint_request_func.py``: ``vllm`` and ``openai`` post to
#: /v1/completions, ``openai-chat`` to /v1/chat/completions; the older script's ``sglang``,
#: ``lmdeploy``, ``scalellm`` and ``llama.cpp`` used the completions client too); other
#: backends (responses, audio, embeddings, pooling) are no text endpoint of ours.
_BACKEND_ENDPOINTS = {
    "vllm": "completions",
    "openai": "completions",
    "sglang": "completions",
    "lmdeploy": "completions",
    "scalellm": "completions",
    "llama.cpp": "completions",
    "openai-chat": "chat",
}


def endpoint_of_backend(backend: str | None) -> str | None:
    """The endpoint (``chat``, ``completions``) a vLLM benchmark backend measures; None when
    the backend is not one of the OpenAI text ones (the backend name is not an endpoint)."""
    return _BACKEND_ENDPOINTS.get(backend or "")


def _rate(r: FieldReader) -> float | None:
    value = r.obj.get("request_rate")
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return None
    rate = r.number("request_rate")
    return rate if rate is not None and rate > 0 else None


# --- nightly summary ---------------------------------------------------------------

_NIGHTLY_PLAIN = {
    "Successful req.": "completed",
    "Tput (req/s)": "request_throughput",
    "Input Tput (tok/s)": "input_throughput",
    "Output Tput (tok/s)": "output_throughput",
    "Total Tput (tok/s)": "total_throughput",
    "Total input tokens": "total_input_tokens",
    "Total output tokens": "total_output_tokens",
}
_NIGHTLY_STAT_RE = re.compile(r"^(Mean|Median|Std|P(\d+)) (TTFT|TPOT|ITL|E2EL) \(ms\)$")
_TEST_RE = re.compile(r"_tp(?P<tp>\d+)_(?P<dataset>[a-z]+)_qps_(?P<qps>inf|\d+(?:\.\d+)?)$")
_ENGINE_RE = re.compile(r"^(?P<engine>[a-z]+)_(?P<digits>\d+)$")


def _sniff_nightly(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if isinstance(obj, list) and obj and all(isinstance(row, dict) for row in obj):
        if all("Test name" in row for row in obj) and any(
            "Tput (req/s)" in row or "Mean TTFT (ms)" in row for row in obj
        ):
            return 0.9
    return 0.0


def _engine_version(engine: str | None) -> tuple[str | None, str | None]:
    """``vllm_055`` -> (``vllm``, ``0.5.5``): the nightly's engine tag, one digit per version part."""
    if not engine:
        return None, None
    m = _ENGINE_RE.match(engine)
    if not m:
        return engine, None
    return m.group("engine"), ".".join(m.group("digits"))


def _read_nightly(file: InputFile, ctx: ImportContext) -> ReadResult:
    rows = file.json
    events = []
    for index, row in enumerate(rows):
        r = FieldReader(row, f"{file.label}: row {index + 1}")
        name = r.text("Test name")
        if not name:
            raise r.error("Test name", "required")
        metrics: dict[str, Any] = {}
        for key in row:
            if key in _NIGHTLY_PLAIN:
                metrics[_NIGHTLY_PLAIN[key]] = r.number(key)
                continue
            m = _NIGHTLY_STAT_RE.match(key)
            if m:
                stat = m.group(1).lower()
                metric = "e2e_latency" if m.group(3) == "E2EL" else m.group(3).lower()
                if m.group(2) and m.group(2) not in _OUR_PERCENTILES:
                    continue
                metrics[f"{stat}_{metric}_ms"] = r.number(key)
        test = _TEST_RE.search(name)
        engine, version = _engine_version(r.text("Engine"))
        gpu = r.text("GPU")
        seen = Host(
            gpu_name=gpu,
            compute_capability=compute_capability_for(gpu),
            gpu_count=int(test.group("tp")) if test else None,
            engine=engine,
            engine_version=version,
        )
        given = {
            k: v for k, v in (ctx.host.model_dump() if ctx.host else {}).items() if v is not None
        }
        host = seen.model_copy(update=given)
        rate = None
        if test and test.group("qps") != "inf":
            rate = float(test.group("qps"))
        workload = Workload(
            dataset=test.group("dataset") if test else None,
            load="open-loop" if rate is not None else None,
            request_rate=rate,
        )
        event = bench_event(
            file,
            ctx,
            label=name,
            line=None,
            tool=NIGHTLY_TOOL,
            metrics=metrics,
            workload=workload,
            config_name=name,
            notes=f"nightly test {name}",
            streaming="the nightly summary has no ITL or E2E to tell the streaming granularity",
        )
        events.append(event.model_copy(update={"host": host, "source": f"{file.name}:{name}"}))
    return events, {}


IMPORTER = Importer(
    kind="vllm-bench-serve", description="vLLM bench serve result JSON", sniff=_sniff, read=_read
)
NIGHTLY_IMPORTER = Importer(
    kind="vllm-nightly-results",
    description="vLLM nightly benchmark summary JSON",
    sniff=_sniff_nightly,
    read=_read_nightly,
)
