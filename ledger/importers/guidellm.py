"""GuideLLM benchmark reports (``guidellm benchmark ... --output-path X.json|.yaml``) -> one
``BenchmarkCompleted`` per benchmark (one per strategy of a sweep: synchronous,
throughput, constant, poisson, concurrent).

Format (``GenerativeBenchmarksReport``): ``{"benchmarks": [...]}`` (0.8 adds
``metadata.guidellm_version`` and the run's ``config.spec``), each benchmark with its
strategy (``type_``, ``rate`` or ``streams``; 0.3: ``args.strategy``, 0.8:
``config.strategy``), ``duration`` (s), ``request_totals`` (0.8: under ``metrics``;
``successful``/``errored``/``incomplete``), ``metrics`` — each a
``StatusDistributionSummary`` (``successful``/``errored``/``incomplete``/``total``, each
``mean``, ``median``, ``std_dev``, ``count``, ``total_sum``, ``percentiles.pNN``) of
``request_latency`` (s), ``time_to_first_token_ms``, ``inter_token_latency_ms``,
``time_per_output_token_ms``, ``prompt_token_count``, ``output_token_count``,
``requests_per_second``, ``output_tokens_per_second``, ``tokens_per_second``,
``request_concurrency`` — and the sampled ``requests`` (per-request records with
``request_latency`` (s), ``time_to_first_token_ms``, token counts).

How its definitions meet ours (GuideLLM's ``benchmark/benchmark.py`` and the per-request
``GenerativeTextResponseStats``; checked on the fixture's sampled request):

- TTFT (request start -> first token) and E2E (``request_latency``) are ours.
- GuideLLM's per-request ITL is (last token - first token) / (output tokens - 1): our
  TPOT (which ends at the end of the stream, a fraction of a ms later). 0.3 summarises it
  per request (its ``count`` is the number of requests): recorded as ``tpot``. 0.8
  weights it by tokens (``count`` = the number of gaps), which is not our mean over
  requests: then it stays in ``tool_metrics``. GuideLLM's TPOT divides by all output
  tokens, the first included: ``tool_metrics`` only. Our ITL (every gap) is not in the file.
- Where the file keeps every successful request (0.8 does unless ``--sample-size``),
  TTFT, TPOT and E2E are recomputed from them, exactly as ours.
- Throughputs and request rate are ours, computed from the totals over ``duration``;
  GuideLLM's ``*_per_second`` means are means of a rate series over the run, kept in
  ``tool_metrics``. Achieved concurrency is ours: sum(E2E) / duration.
- ``incomplete`` requests (cut at the run's end) are not failures; ``errored`` are.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidInput
from schemas import Workload

from ..derive.streaming import from_requests
from .detect import ImportContext, Importer, InputFile, Pairing, ReadResult, Sniffed, load_yaml
from .fields import FieldReader
from .results import OutputLengths, bench_event, distribution_from_samples, samples_table, tpot_ms

if TYPE_CHECKING:
    import pyarrow as pa

    from schemas import BenchmarkCompleted

TOOL = "guidellm"

METRIC_NOTES = [
    "guidellm inter_token_latency_ms ((last - first token) / (output tokens - 1)) recorded as TPOT "
    "where summarised per request (0.3); token-weighted (0.8): tool_metrics only",
    "guidellm time_per_output_token_ms divides by every output token, the first included: tool_metrics only",
    "throughputs are totals / duration; guidellm's *_per_second means (of a rate series) in tool_metrics",
    "guidellm percentiles are not interpolated as numpy's: TTFT, TPOT, E2E recomputed from the requests when the file keeps all",
    "no pooled ITL: guidellm keeps no per-gap times",
]

_PCT = {"p90": "p90", "p95": "p95", "p99": "p99"}
_DATA_RE = re.compile(r"(prompt_tokens|output_tokens)=(\d+)")


def _benchmarks(doc: Any) -> list[Any] | None:
    if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
        benchmarks = doc["benchmarks"]
        if benchmarks and all(isinstance(b, dict) and "metrics" in b for b in benchmarks):
            return list(benchmarks)
    return None


def _sniff(sniffed: Sniffed) -> float:
    doc = sniffed.json if sniffed.claims_json else sniffed.yaml
    benchmarks = _benchmarks(doc)
    if benchmarks and any(
        isinstance(b["metrics"], dict) and "time_to_first_token_ms" in b["metrics"]
        for b in benchmarks
    ):
        return 0.9
    return 0.0


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    doc = file.json if file.text.lstrip().startswith("{") else load_yaml(file)
    benchmarks = _benchmarks(doc)
    if benchmarks is None:
        raise InvalidInput(
            f"{file.label}: field 'benchmarks': expected a list of GuideLLM benchmarks"
        )
    version = _version(doc)
    data_description = _data_description(doc)
    facts = _run_facts(doc)
    events = []
    samples = {}
    for index, raw in enumerate(benchmarks):
        where = f"{file.label}: benchmarks[{index}]"
        event, table = _benchmark(
            file, ctx, FieldReader(raw, where), index, version, data_description, facts
        )
        events.append(event)
        if table is not None:
            samples[event.event_id] = table
    return events, samples


def _version(doc: dict[str, Any]) -> str | None:
    for holder in (doc, doc.get("metadata") or {}):
        for key in ("guidellm_version", "version"):
            value = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(value, str):
                return value
    return None


def _stats(r: FieldReader, key: str, *, status: str = "successful") -> FieldReader:
    return r.sub("metrics").sub(key).sub(status)


def _distribution(stats: FieldReader, ours: str, *, scale: float = 1.0) -> dict[str, float | None]:
    def value(v: float | None) -> float | None:
        return None if v is None else v * scale

    out = {
        f"mean_{ours}_ms": value(stats.number("mean")),
        f"median_{ours}_ms": value(stats.number("median")),
        f"std_{ours}_ms": value(stats.number("std_dev")),
    }
    percentiles = stats.sub("percentiles")
    for pct in _PCT:
        out[f"{pct}_{ours}_ms"] = value(percentiles.number(pct))
    return out


def _data_description(doc: dict[str, Any]) -> str | None:
    """0.8: the run's ``config.spec.data`` as ``kind key=value ...`` (paths and prompt settings)."""
    spec = (doc.get("config") or {}).get("spec") if isinstance(doc.get("config"), dict) else None
    data = spec.get("data") if isinstance(spec, dict) else None
    if not isinstance(data, list):
        return None
    parts = []
    for item in data:
        if isinstance(item, dict):
            parts.append(
                ",".join(
                    f"{k}={v}"
                    for k, v in item.items()
                    if v not in (None, {}, []) and k != "load_kwargs"
                )
            )
    return "; ".join(parts) or None


def _run_facts(doc: dict[str, Any]) -> dict[str, Any]:
    """0.8's run settings kept as workload facts: ``seed`` (``config.spec.seed.value``) and
    ``endpoint`` (the backend's ``request_format``)."""
    config = doc.get("config")
    found = config.get("spec") if isinstance(config, dict) else None
    spec: dict[str, Any] = found if isinstance(found, dict) else {}
    seed: dict[str, Any] = spec["seed"] if isinstance(spec.get("seed"), dict) else {}
    backend: dict[str, Any] = spec["backend"] if isinstance(spec.get("backend"), dict) else {}
    value = seed.get("value")
    return {
        "seed": value if isinstance(value, int) and not isinstance(value, bool) else None,
        "endpoint": _ENDPOINTS.get(str(backend.get("request_format"))),
    }


#: GuideLLM's request formats (0.8 ``request_format``, 0.3 per-request ``request_type``) -> ours.
_ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "chat_completions": "chat",
    "text_completions": "completions",
}


def _metrics(
    r: FieldReader,
) -> tuple[dict[str, Any], dict[str, Any], tuple[int | None, int | None, int | None]]:
    """A benchmark's metrics as ours, GuideLLM's own beside them (``tool_metrics``), and its
    request counts (completed, errored, incomplete).

    Raises:
        InvalidInput: a duration that is not above 0 (names the field).
    """
    totals = (
        r.sub("request_totals")
        if "request_totals" in r.obj
        else r.sub("metrics").sub("request_totals")
    )
    completed = totals.number("successful", integer=True)
    errored = totals.number("errored", integer=True)
    incomplete = totals.number("incomplete", integer=True)
    duration = r.number("duration")
    if duration is None:
        start, end = r.number("start_time"), r.number("end_time")
        duration = end - start if start is not None and end is not None else None
    if duration is not None and duration <= 0:
        raise r.error("duration", f"expected > 0 seconds, got {duration}")
    latency = _stats(r, "request_latency")
    prompt = _stats(r, "prompt_token_count")
    output = _stats(r, "output_token_count")
    total_in = prompt.number("total_sum")
    total_out = output.number("total_sum")
    metrics: dict[str, Any] = {
        "completed": completed,
        "failed": errored,
        "duration_s": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
    }
    if duration:
        metrics["request_throughput"] = completed / duration if completed is not None else None
        metrics["input_throughput"] = total_in / duration if total_in is not None else None
        metrics["output_throughput"] = total_out / duration if total_out is not None else None
        if total_in is not None and total_out is not None:
            metrics["total_throughput"] = (total_in + total_out) / duration
        latency_sum = latency.number("total_sum")
        metrics["achieved_concurrency"] = (
            latency_sum / duration if latency_sum is not None else None
        )
    metrics.update(_distribution(_stats(r, "time_to_first_token_ms"), "ttft"))
    metrics.update(_distribution(latency, "e2e_latency", scale=1000.0))
    itl = _stats(r, "inter_token_latency_ms")
    per_request_itl = itl.number("count") is not None and itl.number("count") == completed
    if per_request_itl:
        metrics.update(_distribution(itl, "tpot"))
    tool_metrics = {
        "time_per_output_token_ms_mean": _stats(r, "time_per_output_token_ms").number("mean"),
        "time_per_output_token_ms_median": _stats(r, "time_per_output_token_ms").number("median"),
        "requests_per_second_mean": _stats(r, "requests_per_second").number("mean"),
        "output_tokens_per_second_mean": _stats(r, "output_tokens_per_second").number("mean"),
        "tokens_per_second_mean": _stats(r, "tokens_per_second").number("mean"),
        "request_concurrency_mean": _stats(r, "request_concurrency").number("mean"),
        "incomplete_requests": incomplete,
    }
    if not per_request_itl:
        tool_metrics["inter_token_latency_ms_mean"] = itl.number("mean")
        tool_metrics["inter_token_latency_ms_median"] = itl.number("median")
    return metrics, tool_metrics, (completed, errored, incomplete)


def _benchmark(
    file: InputFile,
    ctx: ImportContext,
    r: FieldReader,
    index: int,
    version: str | None,
    data_description: str | None = None,
    facts: dict[str, Any] | None = None,
) -> tuple[BenchmarkCompleted, pa.Table | None]:
    metrics, tool_metrics, (completed, errored, incomplete) = _metrics(r)
    table, chunks, request_type = _samples(r, r.number("start_time") if "config" in r.obj else None)
    if table is not None and completed and sum(table.column("ok").to_pylist()) == completed:
        # every successful request is in the file: our statistics from them, exactly as ours
        metrics.update(distribution_from_samples(table))
    strategy = r.sub("args").sub("strategy") if "args" in r.obj else r.sub("config").sub("strategy")
    kind = strategy.text("type_") or "unknown"
    rate = strategy.number("rate")
    streams = strategy.number("streams", integer=True)
    concurrency = 1 if kind == "synchronous" else streams
    open_loop = kind in ("constant", "poisson") and rate is not None and rate > 0
    data = r.sub("request_loader").text("data") or data_description or ""
    lengths = dict((k, int(v)) for k, v in _DATA_RE.findall(data)) if isinstance(data, str) else {}
    facts = facts or {}
    # GuideLLM sends ignore_eos exactly when the data gives output_tokens (0.8's
    # ``backends/openai/request_handlers.py``); without it max_tokens only caps the output.
    ignore_eos = ("output_tokens" in lengths) if "config" in r.obj else None
    workload = Workload(
        dataset=data[:200] or None,
        input_len=lengths.get("prompt_tokens"),
        output_len=lengths.get("output_tokens"),
        num_prompts=sum(x for x in (completed, errored, incomplete) if x is not None) or None,
        load="open-loop" if open_loop else ("closed-loop" if concurrency else None),
        request_rate=rate if open_loop else None,
        seed=facts.get("seed")
        if facts.get("seed") is not None
        else r.sub("args").sub("profile").number("random_seed", integer=True),
        ignore_eos=ignore_eos,
        endpoint=facts.get("endpoint") or _ENDPOINTS.get(request_type or ""),
    )
    ok_counts = (
        [row["output_tokens"] for row in table.to_pylist() if row["ok"]]
        if table is not None
        else []
    )
    streaming: Any = from_requests(chunks)
    if streaming is None:
        streaming = (
            "no kept request streamed 2+ output tokens"
            if chunks
            else "the report keeps no per-request chunk counts (GuideLLM 0.8's token_iterations)"
        )
    label = (
        f"{index}-{kind}"
        + (f"-{rate:g}" if open_loop else "")
        + (f"-c{streams}" if streams else "")
    )
    model = r.sub("worker").text("backend_model") or r.sub("config").sub("backend").text("model")
    notes = (
        f"guidellm strategy {kind}"
        + (f" at {rate:g} req/s" if open_loop else "")
        + (f", model {model}" if model else "")
    )
    event = bench_event(
        file,
        ctx,
        label=label,
        line=None,
        tool=TOOL,
        tool_version=version,
        metrics=metrics,
        workload=workload,
        concurrency=concurrency,
        tool_metrics=tool_metrics,
        metric_notes=METRIC_NOTES,
        notes=notes,
        config_name=None,
        streaming=streaming,
        lengths=OutputLengths(ok_counts, asked=lengths.get("output_tokens"), ignore_eos=ignore_eos)
        if table is not None
        else None,
    )
    event = event.model_copy(update={"source": f"{file.name}:benchmarks[{index}]"})
    return event, table


def _samples(
    r: FieldReader, measured_from: float | None
) -> tuple[Any, list[tuple[int | None, int | None]], str | None]:
    """Per-request rows of the sampled ``requests`` (successful, then errored; ``None`` without
    any), the (content chunks, output tokens) of each successful one that says (0.8's
    ``info.timings.token_iterations``), and the request type (0.3's ``request_type``).

    0.8 keeps its warmup requests in the list: those started before the benchmark's
    ``start_time`` (``measured_from``, the end of the warmup) are not part of the run."""
    requests = r.mapping("requests")
    if not requests:
        return None, [], None
    rows = []
    chunks: list[tuple[int | None, int | None]] = []
    request_type = None
    for status in ("successful", "errored"):
        for i, raw in enumerate(requests.get(status) or []):
            if not isinstance(raw, dict):
                raise r.error(f"requests.{status}[{i}]", "expected an object")
            q = FieldReader(raw, f"{r.where}.requests.{status}[{i}]")
            started = q.number("request_start_time")
            if measured_from is not None and started is not None and started < measured_from:
                continue  # a warmup request
            request_type = request_type or q.text("request_type")
            latency = q.number("request_latency")
            e2e = latency * 1000.0 if latency is not None else None
            ttft = q.number("time_to_first_token_ms")
            out = q.number("output_tokens", integer=True)
            if status == "successful" and "info" in raw:
                timings = q.sub("info").sub("timings")
                chunks.append((timings.number("token_iterations", integer=True), out))
            rows.append(
                {
                    "ok": status == "successful",
                    "ttft_ms": ttft,
                    "e2e_ms": e2e,
                    "tpot_ms": tpot_ms(ttft, e2e, out),
                    "prompt_tokens": q.number("prompt_tokens", integer=True),
                    "output_tokens": out,
                    "error": None if status == "successful" else (q.text("error") or "errored"),
                }
            )
    return (samples_table(rows) if rows else None), chunks, request_type


def _benchmark_ids(file: InputFile) -> list[Any]:
    """The ids of a report's benchmarks (0.8: ``config.id_``; 0.3: ``id_``) with its run ids."""
    doc = file.json if file.text.lstrip().startswith("{") else load_yaml(file)
    ids = []
    for bench in _benchmarks(doc) or []:
        config = bench.get("config") if isinstance(bench.get("config"), dict) else bench
        ids.append((config.get("id_"), config.get("run_id")))
    return ids


def _same_report(this: InputFile, other: InputFile) -> bool:
    """The same report in two formats (``--output`` json and yaml): the same benchmark ids."""
    ids = _benchmark_ids(this)
    return bool(ids) and all(i[0] for i in ids) and ids == _benchmark_ids(other)


IMPORTER = Importer(
    kind="guidellm-benchmarks",
    description="GuideLLM benchmarks JSON/YAML",
    sniff=_sniff,
    read=_read,
    pairings=(Pairing("guidellm-benchmarks", _same_report),),
)
