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
from dataclasses import dataclass
from typing import Any

from ledger.errors import InvalidInput
from schemas import Workload

from ..derive.streaming import Granularity, from_requests
from .detect import ImportContext, Importer, InputFile, Pairing, ReadResult, Sniffed, json_lines
from .fields import FieldReader
from .results import (
    OutputLengths,
    bench_event,
    chunks_from_gaps,
    distribution_from_samples,
    samples_table,
    tpot_ms,
)

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
    records: Records | None = None,
    extra_notes: tuple[str, ...] = (),
) -> Any:
    """One run from ``tag -> {stat: value}`` (JSON or CSV), with its per-request ``records``
    when they were imported with it: our TPOT (and ITL) from them, the streaming-granularity
    rule and the output-length gate on them, and the requests as the run's samples."""
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
        **{
            "input_len": _int(r.sub("input_sequence_length").number("avg")),
            "output_len": _int(r.sub("output_sequence_length").number("avg")),
            "num_prompts": count,
            "load": "open-loop" if rate else ("closed-loop" if concurrency else None),
            "request_rate": rate,
            **workload_extra,
        }
    )
    streaming: Granularity | str = (
        "AIPerf's summary keeps no per-request chunk counts (import profile_export.jsonl with it)"
    )
    lengths = None
    notes = list(METRIC_NOTES)
    if records is not None:
        for key, value in records.per_token_metrics().items():
            metrics.setdefault(key, value)
        streaming = records.streaming()
        lengths = records.lengths(workload.output_len, workload.ignore_eos)
        notes.append("TPOT (and ITL) ours from the per-request records imported with this summary")
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
        metric_notes=[*notes, *extra_notes],
        first_error=first_error,
        streaming=streaming,
        lengths=lengths,
        partner=records.file if records is not None else None,
        ok_rows=[row for row in records.rows if row["ok"]] if records is not None else (),
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
    return _json_run(file, ctx, None)


def _dataset_facts(config: dict[str, Any]) -> dict[str, Any]:
    """What ``input_config`` says was sent: the synthetic dataset's ``random_seed`` and asked
    output length (``prompts.osl.mean`` without a stddev), and ``endpoint.extra``'s ignore_eos."""
    datasets = config.get("datasets") if isinstance(config.get("datasets"), list) else []
    main = datasets[0] if datasets and isinstance(datasets[0], dict) else {}
    seed = main.get("random_seed")
    osl = _mapping(_mapping(main.get("prompts")).get("osl"))
    mean, stddev = osl.get("mean"), osl.get("stddev")
    out: dict[str, Any] = {}
    if isinstance(seed, int) and not isinstance(seed, bool):
        out["seed"] = seed
    if isinstance(mean, (int, float)) and not isinstance(mean, bool) and not stddev:
        out["output_len"] = int(round(mean))
    extra = _mapping(_mapping(config.get("endpoint")).get("extra"))
    if isinstance(extra.get("ignore_eos"), bool):
        out["ignore_eos"] = extra["ignore_eos"]
    return out


def _json_run(file: InputFile, ctx: ImportContext, records: Records | None) -> ReadResult:
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
            "endpoint": endpoint.get("type")
            if endpoint.get("type") in ("chat", "completions")
            else None,
            **_dataset_facts(config),
        },
        records=records,
    )
    model = models[0].get("name") if models and isinstance(models[0], dict) else None
    event = event.model_copy(update={"notes": f"model {model}" if model else None})
    disagreement = _count_disagrees(doc, config, event.workload.num_prompts)
    if disagreement:
        event = event.model_copy(
            update={"valid": False, "validity_notes": [*event.validity_notes, disagreement]}
        )
    return [event], ({event.event_id: records.table} if records is not None else {})


def _count_disagrees(doc: dict[str, Any], config: dict[str, Any], count: int | None) -> str | None:
    """Why the run is not the one the tool was asked for, or None: a file of another phase than
    profiling (a warm-up's), or a request count other than the profiling phase's own
    ``requests`` (AIPerf's command line, as its ``input_config`` records it)."""
    phase = doc.get("benchmark_phase") or doc.get("phase")
    if isinstance(phase, str) and phase != "profiling":
        return f"a {phase} phase, not the profiling run"
    listed = config.get("phases")
    phases: list[Any] = listed if isinstance(listed, list) else []
    asked = next(
        (
            p.get("requests")
            for p in phases
            if isinstance(p, dict) and p.get("kind", "profiling") == "profiling"
        ),
        None,
    )
    if (
        isinstance(asked, int)
        and not isinstance(asked, bool)
        and count is not None
        and count != asked
    ):
        return (
            f"{count} request(s) in the file, {asked} in the tool's own profiling phase "
            "(input_config.phases): a warm-up phase or a cut-short run, not the run asked for"
        )
    return None


# --- CSV ------------------------------------------------------------------------------


def _sniff_csv(sniffed: Sniffed) -> float:
    rows = sniffed.csv_rows
    names = {row[0] for row in rows if row}
    if rows and rows[0][:2] == ["Metric", "avg"] and "Time to First Token (ms)" in names:
        return 0.9
    return 0.0


def _read_csv(file: InputFile, ctx: ImportContext) -> ReadResult:
    return _csv_run(file, ctx, None)


def _csv_run(file: InputFile, ctx: ImportContext, records: Records | None) -> ReadResult:
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
        records=records,
        extra_notes=("the CSV rounds to 2 decimals and has no load settings (concurrency)",),
    )
    return [event], ({event.event_id: records.table} if records is not None else {})


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


@dataclass
class Records:
    """The per-request records of one run (``profile_export.jsonl``, profiling phase only):
    the samples ``table``, each successful request's streamed chunks (``inter_chunk_latency``
    lists one gap per chunk after the first: a request with a TTFT and no list came in one
    chunk), its gaps (ms), and the first start and last end (ns)."""

    file: InputFile
    rows: list[dict[str, Any]]
    chunks: list[tuple[int | None, int | None]]
    gaps: list[float]
    starts: list[int]
    ends: list[int]
    exact_counts: bool

    @property
    def table(self) -> Any:
        return samples_table(self.rows)

    def per_token_metrics(self) -> dict[str, float | None]:
        """Our TPOT from the requests and ITL pooled over their chunk gaps (as sglang pools them)."""
        out = {k: v for k, v in distribution_from_samples(self.table).items() if "_tpot_" in k}
        if self.gaps:
            from ..derive.distribution import distribution_ms

            out.update(distribution_ms([g / 1000.0 for g in self.gaps], "itl"))
        return out

    def streaming(self) -> Granularity | str:
        found = from_requests(self.chunks)
        return (
            found if found is not None else "no successful streamed request with 2+ output tokens"
        )

    def lengths(self, asked: int | None, ignore_eos: bool | None) -> OutputLengths:
        return OutputLengths(
            [row["output_tokens"] for row in self.rows if row["ok"]],
            asked=asked,
            ignore_eos=ignore_eos,
            exact=self.exact_counts,
        )


def read_records(file: InputFile) -> Records:
    """The records of ``file``.

    Raises:
        InvalidInput: a line that is not JSON, a mistyped field, or no profiling record.
    """
    rows: list[dict[str, Any]] = []
    chunks: list[tuple[int | None, int | None]] = []
    gaps: list[float] = []
    starts: list[int] = []
    ends: list[int] = []
    exact = True
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
            exact = exact and out is None
        chunk_gaps: list[float] = []
        if ok and ttft is not None:
            raw_gaps = values.array("inter_chunk_latency") or []
            chunk_gaps = [float(g) for g in raw_gaps if isinstance(g, (int, float))]
            gaps.extend(chunk_gaps)
            # events of one read are one chunk (SAME_READ_MS), as for every other tool
            chunks.append((chunks_from_gaps(chunk_gaps), out))
        rows.append(
            {
                "ok": ok,
                "ttft_ms": ttft if ok else None,
                "e2e_ms": e2e if ok else None,
                "tpot_ms": tpot_ms(ttft, e2e, out) if ok else None,
                "prompt_tokens": values.number("usage_prompt_tokens", integer=True)
                or values.number("input_sequence_length", integer=True),
                "output_tokens": out,
                "itl_ms": chunk_gaps,
                "error": None
                if ok
                else (json.dumps(error)[:300] if not isinstance(error, str) else error[:300]),
            }
        )
    if not rows:
        raise InvalidInput(f"{file.label}: no AIPerf profiling records")
    return Records(file, rows, chunks, gaps, starts, ends, exact)


def _read_records(file: InputFile, ctx: ImportContext) -> ReadResult:
    records = read_records(file)
    rows = records.rows
    table = records.table
    completed = sum(row["ok"] for row in rows)
    metrics: dict[str, Any] = {"completed": completed, "failed": len(rows) - completed}
    metrics.update(distribution_from_samples(table))
    metrics.update(records.per_token_metrics())
    ok_rows = [row for row in rows if row["ok"]]
    total_out = sum(row["output_tokens"] or 0 for row in ok_rows)
    total_in = sum(row["prompt_tokens"] or 0 for row in ok_rows)
    metrics.update(total_output_tokens=total_out, total_input_tokens=total_in)
    if records.starts:
        duration = (max(records.ends) - min(records.starts)) / 1e9
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
        streaming=records.streaming(),
        lengths=records.lengths(None, None),
        ok_rows=[row for row in rows if row["ok"]],
    )
    return [event], {event.event_id: table}


# --- one run's files imported together ---------------------------------------------------


def same_run(summary: InputFile, records: Records) -> bool:
    """Whether ``records`` are the requests of the run ``summary`` (JSON or CSV) sums up: the
    same request count and the same mean TTFT (the CSV rounds it to 2 decimals)."""
    rows = records.rows
    ttfts = [row["ttft_ms"] for row in rows if row["ok"] and row["ttft_ms"] is not None]
    if not ttfts:
        return False
    mean = sum(ttfts) / len(ttfts)
    if summary.path.suffix.lower() == ".csv":
        text = summary.text
        for line in text.splitlines():
            if line.startswith("Time to First Token (ms),"):
                try:
                    return bool(abs(float(line.split(",")[1]) - mean) <= 0.006)
                except (ValueError, IndexError):
                    return False
        return False
    doc = summary.json
    if not isinstance(doc, dict):
        return False
    avg = _mapping(doc.get("time_to_first_token")).get("avg")
    count = _mapping(doc.get("request_count")).get("avg")
    return bool(
        isinstance(avg, (int, float))
        and abs(avg - mean) <= 1e-9 * max(1.0, abs(mean))
        and count in (None, len(rows))
    )


def read_with_records(
    summary: InputFile, records_file: InputFile, ctx: ImportContext
) -> ReadResult:
    """The one run of an AIPerf summary (JSON or CSV) and its records, imported together."""
    records = read_records(records_file)
    if summary.path.suffix.lower() == ".csv":
        return _csv_run(summary, ctx, records)
    return _json_run(summary, ctx, records)


def _same_records(summary: InputFile, records_file: InputFile) -> bool:
    return same_run(summary, read_records(records_file))


def _same_summary(json_file: InputFile, csv_file: InputFile) -> bool:
    """The CSV beside the JSON of one run: the same mean TTFT at the CSV's 2 decimals."""
    doc = json_file.json
    avg = _mapping(doc.get("time_to_first_token")).get("avg") if isinstance(doc, dict) else None
    for line in csv_file.text.splitlines():
        if line.startswith("Time to First Token (ms),") and isinstance(avg, (int, float)):
            try:
                return abs(float(line.split(",")[1]) - avg) <= 0.006
            except (ValueError, IndexError):
                return False
    return False


_RECORDS = Pairing("aiperf-records", _same_records, read_with_records)


JSON_IMPORTER = Importer(
    kind="aiperf-json",
    description="AIPerf profile_export_aiperf.json",
    sniff=_sniff_json,
    read=_read_json,
    pairings=(_RECORDS, Pairing("aiperf-csv", _same_summary)),
)
CSV_IMPORTER = Importer(
    kind="aiperf-csv",
    description="AIPerf profile_export_aiperf.csv",
    sniff=_sniff_csv,
    read=_read_csv,
    pairings=(_RECORDS,),
)
RECORDS_IMPORTER = Importer(
    kind="aiperf-records",
    description="AIPerf profile_export.jsonl",
    sniff=_sniff_records,
    read=_read_records,
)
