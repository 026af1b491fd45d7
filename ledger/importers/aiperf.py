"""AIPerf (NVIDIA's successor of genai-perf) profile exports -> ``BenchmarkCompleted`` events.

Files in an ``aiperf profile --artifact-dir D`` folder (AIPerf 0.13 checked by a real run):

- ``profile_export_aiperf.json``: ``aiperf_version``, one object per metric tag
  (``{"unit", "avg", "p50", "p90", "p95", "p99", "std", "min", "max", "sum", "count"}``:
  ``time_to_first_token``, ``request_latency``, ``inter_token_latency`` (ms),
  ``output_sequence_length``, ``input_sequence_length`` (tokens), ``request_throughput``,
  ``output_token_throughput``, ``benchmark_duration`` (s), ``request_count``…),
  ``error_summary`` and ``input_config`` (the load phase's ``concurrency`` or
  ``request_rate``). One run.
- ``profile_export_aiperf.csv``: the same statistics by display name
  (``Time to First Token (ms)``…), then ``Metric,Value`` rows of run totals. One run.
- ``profile_export.jsonl`` (``--export-level records``): one record per request with
  ``metrics.<tag>.value`` and ``error``. One run, its requests in ``bench_samples``.

Definitions (AIPerf's ``aiperf/metrics/types/``):

- TTFT (first content chunk), request latency (E2E, to the last chunk), request and output
  token throughput (over ``benchmark_duration``) are ours.
- AIPerf's ITL is (request latency - TTFT) / (output tokens - the first chunk's tokens): our
  TPOT only when the first chunk carries one token; kept in ``tool_metrics``. Our TPOT is
  computed per request from the records file; AIPerf's ``inter_chunk_latency`` lists there
  are our ITL gaps only when a chunk carries one token, so they are not used as ITL.
- Output tokens are AIPerf's own tokenizer count unless ``--use-server-token-count``
  (``usage_completion_tokens`` is the server's).
"""

from __future__ import annotations

import json
from typing import Any

from ledger.errors import InvalidInput
from schemas import Workload

from .detect import ImportContext, Importer, InputFile, ReadResult, Sniffed, json_lines
from .fields import FieldReader
from .results import bench_event, distribution_from_samples, samples_table, tpot_ms

TOOL = "aiperf"

METRIC_NOTES = [
    "aiperf inter_token_latency = (E2E - TTFT) / (output tokens - first chunk's tokens): tool_metrics only; "
    "our TPOT from the per-request records where imported",
    "output tokens are aiperf's tokenizer count unless run with --use-server-token-count",
]

#: Distribution tags whose definition is ours -> our metric name (all in ms).
_DISTRIBUTIONS = {"time_to_first_token": "ttft", "request_latency": "e2e_latency"}
_STATS = {"avg": "mean", "p50": "median", "std": "std", "p90": "p90", "p95": "p95", "p99": "p99"}
#: Single-value tags whose definition is ours.
_TOTALS = {
    "request_throughput": "request_throughput",
    "output_token_throughput": "output_throughput",
    "input_token_throughput": "input_throughput",
    "total_token_throughput": "total_throughput",
    "benchmark_duration": "duration_s",
    "total_isl": "total_input_tokens",
    "total_osl": "total_output_tokens",
}
#: Other tags kept in tool_metrics (their avg).
_KEPT = (
    "inter_token_latency",
    "output_sequence_length",
    "input_sequence_length",
    "effective_concurrency",
    "output_token_throughput_per_user",
    "e2e_output_token_throughput",
    "time_to_second_token",
)
#: CSV display names -> tags.
_CSV_NAMES = {
    "Time to First Token (ms)": "time_to_first_token",
    "Request Latency (ms)": "request_latency",
    "Inter Token Latency (ms)": "inter_token_latency",
    "Output Sequence Length (tokens)": "output_sequence_length",
    "Input Sequence Length (tokens)": "input_sequence_length",
    "Benchmark Duration (sec)": "benchmark_duration",
    "Request Throughput (requests/sec)": "request_throughput",
    "Output Token Throughput (tokens/sec)": "output_token_throughput",
    "Input Token Throughput (tokens/sec)": "input_token_throughput",
    "Total Token Throughput (tokens/sec)": "total_token_throughput",
    "Total Input Sequence Length (tokens)": "total_isl",
    "Total Output Sequence Length (tokens)": "total_osl",
    "Request Count": "request_count",
    "Effective Concurrency": "effective_concurrency",
}


def _summary_event(
    file: InputFile,
    ctx: ImportContext,
    tags: dict[str, dict[str, Any]],
    where: str,
    *,
    version: str | None,
    concurrency: int | None,
    rate: float | None,
    errors: int | None,
    first_error: str | None,
    workload_extra: dict[str, Any],
) -> Any:
    """One run from ``tag -> {stat: value}`` (JSON or CSV)."""
    r = FieldReader(tags, where)
    metrics: dict[str, Any] = {}
    for tag, ours in _DISTRIBUTIONS.items():
        stats = r.sub(tag)
        for stat, prefix in _STATS.items():
            metrics[f"{prefix}_{ours}_ms"] = stats.number(stat)
    for tag, ours in _TOTALS.items():
        metrics[ours] = r.sub(tag).number("avg")
    count = r.sub("request_count").number("avg", integer=True)
    if count is None:
        count = r.sub("completed_request_count").number("avg", integer=True)
    failed = errors or 0
    metrics["failed"] = failed
    metrics["completed"] = count - failed if count is not None else None
    latency_sum = r.sub("request_latency").number("sum")
    duration = metrics.get("duration_s")
    if latency_sum is not None and duration:
        metrics["achieved_concurrency"] = latency_sum / 1000.0 / duration
    tool_metrics = {f"{tag}_avg": r.sub(tag).number("avg") for tag in _KEPT}
    tool_metrics["inter_token_latency_p50"] = r.sub("inter_token_latency").number("p50")
    workload = Workload(
        input_len=_int(r.sub("input_sequence_length").number("avg")),
        output_len=_int(r.sub("output_sequence_length").number("avg")),
        num_prompts=count,
        load="open-loop" if rate else ("closed-loop" if concurrency else None),
        request_rate=rate,
        **workload_extra,
    )
    return bench_event(
        file,
        ctx,
        label="run",
        line=None,
        tool=TOOL,
        tool_version=version,
        metrics=metrics,
        workload=workload,
        concurrency=concurrency,
        tool_metrics=tool_metrics,
        metric_notes=METRIC_NOTES,
        first_error=first_error,
    )


def _int(value: float | None) -> int | None:
    return int(round(value)) if value is not None else None


# --- JSON ---------------------------------------------------------------------------


def _sniff_json(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if (
        isinstance(obj, dict)
        and ("aiperf_version" in obj or isinstance(obj.get("time_to_first_token"), dict))
        and (
            isinstance(obj.get("request_latency"), dict)
            or isinstance(obj.get("request_throughput"), dict)
        )
    ):
        return 0.9
    return 0.0


def _load_phase(config: Any) -> tuple[int | None, float | None]:
    """(concurrency, request rate) of the profiling phase of ``input_config`` (0.13:
    ``phases[].concurrency``/``request_rate``; older: ``loadgen``)."""
    phases = []
    if isinstance(config, dict):
        if isinstance(config.get("phases"), list):
            phases = [
                p
                for p in config["phases"]
                if isinstance(p, dict) and p.get("kind", "profiling") == "profiling"
            ]
        if isinstance(config.get("loadgen"), dict):
            phases.append(config["loadgen"])
    for phase in phases:
        concurrency = phase.get("concurrency")
        rate = phase.get("request_rate")
        concurrency = (
            concurrency
            if isinstance(concurrency, int) and not isinstance(concurrency, bool)
            else None
        )
        rate = (
            float(rate)
            if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0
            else None
        )
        if concurrency or rate:
            return concurrency, rate
    return None, None


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (an absent or mistyped section)."""
    return value if isinstance(value, dict) else {}


def _read_json(file: InputFile, ctx: ImportContext) -> ReadResult:
    doc = file.json
    config = doc.get("input_config") if isinstance(doc.get("input_config"), dict) else {}
    concurrency, rate = _load_phase(config)
    errors = 0
    first_error = None
    summary = doc.get("error_summary")
    for item in summary if isinstance(summary, list) else []:
        if isinstance(item, dict) and isinstance(item.get("count"), int):
            errors += item["count"]
            if first_error is None and isinstance(item.get("error_details"), dict):
                first_error = str(
                    item["error_details"].get("message") or item["error_details"].get("type")
                )
    models_holder = _mapping(config.get("models"))
    models = models_holder.get("items") if isinstance(models_holder.get("items"), list) else []
    endpoint = _mapping(config.get("endpoint"))
    event = _summary_event(
        file,
        ctx,
        doc,
        file.label,
        version=doc.get("aiperf_version") if isinstance(doc.get("aiperf_version"), str) else None,
        concurrency=concurrency,
        rate=rate,
        errors=errors,
        first_error=first_error,
        workload_extra={
            "endpoint": endpoint.get("type") if isinstance(endpoint.get("type"), str) else None
        },
    )
    model = models[0].get("name") if models and isinstance(models[0], dict) else None
    return [event.model_copy(update={"notes": f"model {model}" if model else None})], {}


# --- CSV ------------------------------------------------------------------------------


def _sniff_csv(sniffed: Sniffed) -> float:
    rows = sniffed.csv_rows
    names = {row[0] for row in rows if row}
    if rows and rows[0][:2] == ["Metric", "avg"] and "Time to First Token (ms)" in names:
        return 0.9
    return 0.0


def _read_csv(file: InputFile, ctx: ImportContext) -> ReadResult:
    rows = file.text.splitlines()
    import csv

    tags: dict[str, dict[str, Any]] = {}
    header: list[str] = []
    for number, row in enumerate(csv.reader(rows), start=1):
        if not row or not row[0].strip():
            header = []
            continue
        if row[0] in ("Metric", "Endpoint"):
            header = row
            continue
        tag = _CSV_NAMES.get(row[0])
        if tag is None or not header or header[0] != "Metric":
            continue
        stats: dict[str, Any] = {}
        for name, cell in zip(header[1:], row[1:], strict=False):  # a short row: cells missing
            if not cell.strip():
                continue
            try:
                stats["avg" if name == "Value" else name] = float(cell)
            except ValueError:
                raise InvalidInput(
                    f"{file.label}:{number}: field '{row[0]}' column '{name}': expected a number, got {cell[:40]!r}"
                ) from None
        tags[tag] = stats
    if "time_to_first_token" not in tags:
        raise InvalidInput(f"{file.label}: no 'Time to First Token (ms)' row")
    event = _summary_event(
        file,
        ctx,
        tags,
        file.label,
        version=None,
        concurrency=None,
        rate=None,
        errors=None,
        first_error=None,
        workload_extra={},
    )
    return [
        event.model_copy(
            update={
                "metric_notes": [
                    *event.metric_notes,
                    "the CSV rounds to 2 decimals and has no load settings (concurrency)",
                ],
            }
        )
    ], {}


# --- per-request records --------------------------------------------------------------


def _sniff_records(sniffed: Sniffed) -> float:
    obj = sniffed.first_json_line if sniffed.json is None else sniffed.json
    if (
        isinstance(obj, dict)
        and isinstance(obj.get("metadata"), dict)
        and "request_start_ns" in obj["metadata"]
        and "metrics" in obj
    ):
        return 0.9
    return 0.0


def _value(metrics: dict[str, Any], tag: str) -> Any:
    entry = metrics.get(tag)
    return entry.get("value") if isinstance(entry, dict) else None


def _read_records(file: InputFile, ctx: ImportContext) -> ReadResult:
    rows: list[dict[str, Any]] = []
    starts: list[int] = []
    ends: list[int] = []
    for number, record in json_lines(file):
        r = FieldReader(record, f"{file.label}:{number}")
        meta = r.sub("metadata")
        record_metrics = r.mapping("metrics") or {}
        if meta.text("benchmark_phase") not in (None, "profiling"):
            continue  # warmup requests are not part of the run
        error = r.obj.get("error")
        ok = error is None
        start, end = (
            meta.number("request_start_ns", integer=True),
            meta.number("request_end_ns", integer=True),
        )
        if start is not None and end is not None:
            starts.append(start)
            ends.append(end)
        values = FieldReader(
            {k: _value(record_metrics, k) for k in record_metrics},
            f"{file.label}:{number}: metrics",
        )
        ttft = values.number("time_to_first_token")
        e2e = values.number("request_latency")
        out = values.number("usage_completion_tokens", integer=True)
        if out is None:
            out = values.number("output_sequence_length", integer=True)
        rows.append(
            {
                "ok": ok,
                "ttft_ms": ttft if ok else None,
                "e2e_ms": e2e if ok else None,
                "tpot_ms": tpot_ms(ttft, e2e, out) if ok else None,
                "prompt_tokens": values.number("usage_prompt_tokens", integer=True)
                or values.number("input_sequence_length", integer=True),
                "output_tokens": out,
                "error": None
                if ok
                else (json.dumps(error)[:300] if not isinstance(error, str) else error[:300]),
            }
        )
    if not rows:
        raise InvalidInput(f"{file.label}: no AIPerf profiling records")
    table = samples_table(rows)
    completed = sum(row["ok"] for row in rows)
    metrics: dict[str, Any] = {"completed": completed, "failed": len(rows) - completed}
    metrics.update(distribution_from_samples(table))
    ok_rows = [row for row in rows if row["ok"]]
    total_out = sum(row["output_tokens"] or 0 for row in ok_rows)
    total_in = sum(row["prompt_tokens"] or 0 for row in ok_rows)
    metrics.update(total_output_tokens=total_out, total_input_tokens=total_in)
    if starts:
        duration = (max(ends) - min(starts)) / 1e9
        if duration > 0:
            metrics.update(
                duration_s=duration,
                request_throughput=completed / duration,
                output_throughput=total_out / duration,
                input_throughput=total_in / duration,
                total_throughput=(total_in + total_out) / duration,
                achieved_concurrency=sum(row["e2e_ms"] or 0 for row in ok_rows) / 1000.0 / duration,
            )
    first_error = next((row["error"] for row in rows if row["error"]), None)
    event = bench_event(
        file,
        ctx,
        label="records",
        line=None,
        tool=TOOL,
        metrics=metrics,
        workload=Workload(num_prompts=len(rows)),
        metric_notes=[
            "from per-request records: TTFT, TPOT, E2E as ours; output tokens the server's usage count where recorded",
            "duration = first request start to last request end",
        ],
        first_error=first_error,
    )
    return [event], {event.event_id: table}


JSON_IMPORTER = Importer(
    kind="aiperf-json",
    description="AIPerf profile_export_aiperf.json",
    sniff=_sniff_json,
    read=_read_json,
)
CSV_IMPORTER = Importer(
    kind="aiperf-csv",
    description="AIPerf profile_export_aiperf.csv",
    sniff=_sniff_csv,
    read=_read_csv,
)
RECORDS_IMPORTER = Importer(
    kind="aiperf-records",
    description="AIPerf profile_export.jsonl",
    sniff=_sniff_records,
    read=_read_records,
)
