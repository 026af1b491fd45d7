"""llmperf results (ray-project/llmperf ``token_benchmark_ray.py``) -> ``BenchmarkCompleted`` events.

Files:

- ``<name>_summary.json``: ``num_concurrent_requests``, the requested
  ``mean_input_tokens``/``mean_output_tokens``, and ``results_<metric>_{mean,min,max,
  stddev,quantiles_pNN}`` of ``ttft_s``, ``end_to_end_latency_s``,
  ``inter_token_latency_s``, ``request_output_throughput_token_per_s``,
  ``number_input_tokens``/``number_output_tokens``, plus
  ``results_mean_output_throughput_token_per_s``,
  ``results_num_completed_requests(_per_min)``, ``results_number_errors``. One run.
- ``<name>_individual_responses.json``: a list of per-request records (``ttft_s``,
  ``end_to_end_latency_s``, ``inter_token_latency_s``, ``number_output_tokens``,
  ``error_code``, ``error_msg``). One run, its requests in ``bench_samples``; the file
  has no timestamps, so no duration or throughput.
- Sweep tables people make from the summaries: a JSON object of
  ``time_to_first_token_in_ms_(ttft)_pNN``, ``latency_ms_per_token_(inter_token_latency)_pNN``,
  ``requests_per_minute_(qpm)``… at one ``concurrency``, and a CSV with one row per
  metric and one column per concurrency (``first-time-to-token_mean_in_ms_(ttft)``,
  ``throughput_token_per_s_(token/sec)``, ``latency_ms_per_token_(inter_token_latency)``,
  ``requests_per_minute_(qpm)``). One run per concurrency.

Definitions (llmperf's ``openai_chat_completions_client.py`` and ``token_benchmark_ray.py``;
the ITL one checked on the fixture: ``inter_token_latency_s`` = time to the last token / output tokens, within 1e-4 of E2E / output tokens):

- TTFT (first streamed chunk) and E2E are ours; mean and quantiles (pandas, linear
  interpolation) are too, but ``stddev`` is pandas' sample std (ddof 1), ours is the
  population std: kept in ``tool_metrics``.
- llmperf's ITL is the sum of a request's gaps up to its last content chunk (TTFT included)
  divided by the SSE lines it received (``openai_chat_completions_client.py`` counts every
  ``data:`` line but ``[DONE]``; ``token_benchmark_ray.py`` divides by that count before it
  replaces the count with its tokenizer's), not our pooled gaps nor our TPOT:
  ``tool_metrics`` only. E2E / ITL is therefore an upper bound of a request's SSE lines, and
  so of its content chunks: the streaming-granularity rule uses it. Our TPOT is computed per request where the
  file has TTFT, E2E and the output count (individual responses).
- Output tokens are counted by llmperf's tokenizer over the streamed text, not by the server.
- ``results_mean_output_throughput_token_per_s`` (all output tokens / run time) is our
  output throughput; ``results_num_completed_requests_per_min`` / 60 our request
  throughput; the per-request ``request_output_throughput_token_per_s`` is in ``tool_metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.errors import InvalidInput
from schemas import Workload

from ..derive.streaming import from_requests
from .detect import ImportContext, Importer, InputFile, Pairing, ReadResult, Sniffed
from .fields import FieldReader
from .results import OutputLengths, bench_event, distribution_from_samples, samples_table, tpot_ms

TOOL = "llmperf"

METRIC_NOTES = [
    "llmperf inter_token_latency = the sum of the gaps up to the last content chunk (TTFT included) / "
    "the SSE lines received (current ray-project llmperf): tool_metrics only, not ITL or TPOT",
    "llmperf stddev is the sample std (ddof 1): tool_metrics only",
    "output tokens counted by llmperf's tokenizer over the streamed text, not by the server",
]

_QUANTILES = {"p50": "median", "p90": "p90", "p95": "p95", "p99": "p99"}


# --- summary -------------------------------------------------------------------------


def _sniff_summary(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if (
        isinstance(obj, dict)
        and "num_concurrent_requests" in obj
        and any(k.startswith("results_ttft_s") for k in obj)
    ):
        return 0.9
    return 0.0


def _read_summary(file: InputFile, ctx: ImportContext) -> ReadResult:
    return _summary_run(file, ctx, None)


def _summary_run(file: InputFile, ctx: ImportContext, responses: Responses | None) -> ReadResult:
    r = FieldReader(file.json, file.label)
    metrics: dict[str, Any] = {}
    tool_metrics: dict[str, float | None] = {}
    for llmperf, ours in (("ttft_s", "ttft"), ("end_to_end_latency_s", "e2e_latency")):
        metrics[f"mean_{ours}_ms"] = _ms(r.number(f"results_{llmperf}_mean"))
        for q, stat in _QUANTILES.items():
            metrics[f"{stat}_{ours}_ms"] = _ms(r.number(f"results_{llmperf}_quantiles_{q}"))
        tool_metrics[f"{llmperf}_stddev"] = r.number(f"results_{llmperf}_stddev")
    for key in ("inter_token_latency_s", "request_output_throughput_token_per_s"):
        tool_metrics[f"{key}_mean"] = r.number(f"results_{key}_mean")
        tool_metrics[f"{key}_p50"] = r.number(f"results_{key}_quantiles_p50")
        tool_metrics[f"{key}_p99"] = r.number(f"results_{key}_quantiles_p99")
    completed = r.number("results_num_completed_requests", integer=True)
    per_min = r.number("results_num_completed_requests_per_min")
    metrics.update(
        completed=completed,
        failed=r.number("results_number_errors", integer=True),
        output_throughput=r.number("results_mean_output_throughput_token_per_s"),
        request_throughput=per_min / 60.0 if per_min is not None else None,
    )
    if completed and per_min:
        metrics["duration_s"] = completed / per_min * 60.0
    # the means are over the completed requests: mean x count is each total, exactly
    for key, ours in (
        ("results_number_input_tokens_mean", "total_input_tokens"),
        ("results_number_output_tokens_mean", "total_output_tokens"),
    ):
        mean = r.number(key)
        if mean is not None and completed is not None:
            metrics[ours] = mean * completed
    concurrency = r.number("num_concurrent_requests", integer=True)
    ignore_eos = r.obj.get("additional_sampling_params_ignore_eos")
    workload = Workload(
        input_len=r.number("mean_input_tokens", integer=True),
        output_len=r.number("mean_output_tokens", integer=True),
        num_prompts=r.number("results_num_requests_started", integer=True),
        load="closed-loop" if concurrency else None,
        ignore_eos=ignore_eos if isinstance(ignore_eos, bool) else None,
        endpoint="chat",  # llmperf's OpenAI client posts to chat/completions only
    )
    model = r.text("model")
    # ``version`` is llmperf's results-format date (utils.RESULTS_VERSION), not a tool version
    fmt = r.text("version")
    notes = ", ".join(
        x
        for x in (f"model {model}" if model else "", f"llmperf results format {fmt}" if fmt else "")
        if x
    )
    streaming: Any = (
        "llmperf's summary keeps no per-request figures (import its individual responses with it)"
    )
    lengths = None
    metric_notes = list(METRIC_NOTES)
    if responses is not None:
        for key, value in distribution_from_samples(responses.table).items():
            if key.startswith(
                ("std_", "mean_tpot", "median_tpot", "std_tpot", "p90_tpot", "p95_tpot", "p99_tpot")
            ):
                metrics.setdefault(key, value)
        streaming = responses.streaming()
        stddev = r.number("stddev_output_tokens")
        lengths = responses.lengths(
            workload.output_len if not stddev else None, workload.ignore_eos
        )
        metric_notes.append(
            "TPOT and std ours from the individual responses imported with this summary"
        )
    event = bench_event(
        file,
        ctx,
        label="summary",
        line=None,
        tool=TOOL,
        metrics=metrics,
        workload=workload,
        concurrency=concurrency,
        tool_metrics=tool_metrics,
        metric_notes=metric_notes,
        notes=notes or None,
        streaming=streaming,
        lengths=lengths,
        partner=responses.file if responses is not None else None,
    )
    return [event], ({event.event_id: responses.table} if responses is not None else {})


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


# --- individual responses -------------------------------------------------------------


def _sniff_responses(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        if all("end_to_end_latency_s" in x or "error_code" in x for x in obj) and any(
            "ttft_s" in x for x in obj
        ):
            return 0.9
    return 0.0


@dataclass
class Responses:
    """One run's ``individual_responses``: the samples rows, each successful request's
    (SSE lines, output tokens) and llmperf's per-request ITLs (s)."""

    file: InputFile
    rows: list[dict[str, Any]]
    lines: list[tuple[float | None, int | None]]
    itl: list[float]

    @property
    def table(self) -> Any:
        return samples_table(self.rows)

    def streaming(self) -> Any:
        found = from_requests(
            self.lines, basis="median; SSE lines = E2E / llmperf's ITL, an upper bound"
        )
        return (
            found if found is not None else "no successful request with 2+ output tokens and an ITL"
        )

    def lengths(self, asked: int | None, ignore_eos: bool | None) -> OutputLengths:
        return OutputLengths(
            [row["output_tokens"] for row in self.rows if row["ok"]],
            asked=asked,
            ignore_eos=ignore_eos,
            exact=False,
        )


def read_responses(file: InputFile) -> Responses:
    """The requests of an ``individual_responses`` file.

    Raises:
        InvalidInput: a mistyped field (named with the entry's index).
    """
    rows: list[dict[str, Any]] = []
    lines: list[tuple[float | None, int | None]] = []
    itl: list[float] = []
    for index, raw in enumerate(file.json):
        q = FieldReader(raw, f"{file.label}: [{index}]")
        error = q.obj.get("error_code")
        ok = error is None
        ttft = _ms(q.number("ttft_s"))
        e2e = _ms(q.number("end_to_end_latency_s"))
        out = q.number("number_output_tokens", integer=True)
        gap = q.number("inter_token_latency_s")
        if ok and gap is not None:
            itl.append(gap)
            if gap > 0 and e2e is not None:
                lines.append((e2e / 1000.0 / gap, out))
        rows.append(
            {
                "ok": ok,
                "ttft_ms": ttft if ok else None,
                "e2e_ms": e2e if ok else None,
                "tpot_ms": tpot_ms(ttft, e2e, out) if ok else None,
                "prompt_tokens": q.number("number_input_tokens", integer=True),
                "output_tokens": out,
                "error": None if ok else f"{error}: {q.text('error_msg') or ''}".strip(": "),
            }
        )
    return Responses(file, rows, lines, itl)


def _read_responses(file: InputFile, ctx: ImportContext) -> ReadResult:
    responses = read_responses(file)
    rows = responses.rows
    table = responses.table
    completed = sum(row["ok"] for row in rows)
    metrics: dict[str, Any] = {"completed": completed, "failed": len(rows) - completed}
    metrics.update(distribution_from_samples(table))
    outputs = [
        row["output_tokens"] for row in rows if row["ok"] and row["output_tokens"] is not None
    ]
    inputs = [
        row["prompt_tokens"] for row in rows if row["ok"] and row["prompt_tokens"] is not None
    ]
    metrics["total_output_tokens"] = sum(outputs) if outputs else None
    metrics["total_input_tokens"] = sum(inputs) if inputs else None
    first_error = next((row["error"] for row in rows if row["error"]), None)
    itl = responses.itl
    event = bench_event(
        file,
        ctx,
        label="responses",
        line=None,
        tool=TOOL,
        metrics=metrics,
        workload=Workload(num_prompts=len(rows), endpoint="chat"),
        tool_metrics={"inter_token_latency_s_mean": sum(itl) / len(itl) if itl else None},
        metric_notes=[*METRIC_NOTES, "per-request records only: no run duration, so no throughput"],
        first_error=first_error,
        streaming=responses.streaming(),
        lengths=responses.lengths(None, None),
    )
    return [event], {event.event_id: table}


def _same_run(summary: InputFile, responses_file: InputFile) -> bool:
    """A summary and the individual responses of its run: the same request count and the same
    mean TTFT (llmperf's summary is pandas' mean over the completed requests)."""
    doc = summary.json
    responses = read_responses(responses_file)
    ttfts = [row["ttft_ms"] for row in responses.rows if row["ok"] and row["ttft_ms"] is not None]
    mean = doc.get("results_ttft_s_mean") if isinstance(doc, dict) else None
    started = doc.get("results_num_requests_started") if isinstance(doc, dict) else None
    if not ttfts or not isinstance(mean, (int, float)):
        return False
    ours = sum(ttfts) / len(ttfts) / 1000.0
    return started in (None, len(responses.rows)) and abs(ours - mean) <= 1e-9 * max(1.0, mean)


def _read_pair(summary: InputFile, responses_file: InputFile, ctx: ImportContext) -> ReadResult:
    return _summary_run(summary, ctx, read_responses(responses_file))


# --- sweep tables -----------------------------------------------------------------------

#: Why a sweep table cannot tell the streaming granularity (``ledger.derive.streaming``).
_SWEEP = "a sweep table keeps no per-request figures"

_AGG_TTFT = "time_to_first_token_in_ms_(ttft)_"
_AGG_ITL = "latency_ms_per_token_(inter_token_latency)_"
_AGG_TPUT = "throughput_token_per_s_(token/sec)_"


def _sniff_aggregate(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if (
        isinstance(obj, dict)
        and "concurrency" in obj
        and any(k.startswith((_AGG_TTFT, _AGG_ITL)) for k in obj)
    ):
        return 0.8
    return 0.0


def _read_aggregate(file: InputFile, ctx: ImportContext) -> ReadResult:
    r = FieldReader(file.json, file.label)
    metrics: dict[str, Any] = {}
    tool_metrics: dict[str, float | None] = {}
    for key in r.obj:
        if key.startswith(_AGG_TTFT):
            q = key[len(_AGG_TTFT) :]
            if q in _QUANTILES:
                metrics[f"{_QUANTILES[q]}_ttft_ms"] = r.number(key)
            else:
                tool_metrics[f"ttft_ms_{q}"] = r.number(key)
        elif key.startswith(_AGG_ITL):
            tool_metrics[f"inter_token_latency_ms_{key[len(_AGG_ITL) :]}"] = r.number(key)
        elif key.startswith(_AGG_TPUT):
            tool_metrics[f"request_output_throughput_token_per_s_{key[len(_AGG_TPUT) :]}"] = (
                r.number(key)
            )
    qpm = r.number("requests_per_minute_(qpm)")
    metrics.update(
        completed=r.number("results_num_completed_requests", integer=True),
        failed=r.number("results_number_errors", integer=True),
        request_throughput=qpm / 60.0 if qpm is not None else None,
    )
    concurrency = r.number("concurrency", integer=True)
    event = bench_event(
        file,
        ctx,
        label="aggregate",
        line=None,
        tool=TOOL,
        metrics=metrics,
        concurrency=concurrency,
        workload=_workload(r, concurrency),
        tool_metrics=tool_metrics,
        metric_notes=[
            *METRIC_NOTES[:1],
            "throughput_token_per_s quantiles are per request (tool_metrics)",
        ],
        streaming=_SWEEP,
    )
    return [event], {}


def _workload(r: FieldReader, concurrency: int | None) -> Workload:
    mean_in = r.number("mean_input_token_length")
    return Workload(
        input_len=int(round(mean_in)) if mean_in is not None else None,
        load="closed-loop" if concurrency else None,
    )


_CSV_ROWS = {
    "first-time-to-token_mean_in_ms_(ttft)": "mean_ttft_ms",
    # qpm / 60 x mean output length reproduces this row to the digit: a run throughput.
    "throughput_token_per_s_(token/sec)": "output_throughput",
    "requests_per_minute_(qpm)": "request_throughput",
}


def _sniff_csv(sniffed: Sniffed) -> float:
    names = {row[0].strip() for row in sniffed.csv_rows if row}
    if "concurrency" in names and names & (
        set(_CSV_ROWS) | {"latency_ms_per_token_(inter_token_latency)"}
    ):
        return 0.8
    return 0.0


def _read_csv(file: InputFile, ctx: ImportContext) -> ReadResult:
    rows = Sniffed(file).csv_rows
    table: dict[str, tuple[int, list[str]]] = {}
    for number, row in enumerate(rows, start=1):
        if row and row[0].strip():
            table[row[0].strip()] = (number, row[1:])
    if "concurrency" not in table:
        raise InvalidInput(f"{file.label}: no 'concurrency' row")
    width = len(table["concurrency"][1])
    events = []
    for column in range(width):
        values: dict[str, Any] = {}
        for name, (number, cells) in table.items():
            if column >= len(cells) or not cells[column].strip():
                continue
            try:
                values[name] = float(cells[column])
            except ValueError:
                raise InvalidInput(
                    f"{file.label}:{number}: field '{name}' column {column + 2}: expected a number, got {cells[column][:40]!r}"
                ) from None
        concurrency = values.get("concurrency")
        if concurrency is None or not float(concurrency).is_integer() or concurrency < 1:
            raise InvalidInput(
                f"{file.label}:{table['concurrency'][0]}: field 'concurrency' column {column + 2}: expected an integer >= 1"
            )
        metrics = {ours: values.get(name) for name, ours in _CSV_ROWS.items()}
        if metrics["request_throughput"] is not None:
            metrics["request_throughput"] /= 60.0
        itl = values.get("latency_ms_per_token_(inter_token_latency)")
        r = FieldReader(values, file.label)
        events.append(
            bench_event(
                file,
                ctx,
                label=f"c{int(concurrency)}",
                line=None,
                tool=TOOL,
                metrics=metrics,
                concurrency=int(concurrency),
                workload=_workload(r, int(concurrency)),
                tool_metrics={
                    "inter_token_latency_ms_mean": itl,
                    "mean_output_token_length": values.get("mean_output_token_length"),
                },
                metric_notes=METRIC_NOTES[:1],
                streaming=_SWEEP,
            ).model_copy(update={"source": f"{file.name}:column {column + 2}"})
        )
    return events, {}


SUMMARY_IMPORTER = Importer(
    kind="llmperf-summary",
    description="llmperf *_summary.json",
    sniff=_sniff_summary,
    read=_read_summary,
    pairings=(Pairing("llmperf-individual-responses", _same_run, _read_pair),),
)
RESPONSES_IMPORTER = Importer(
    kind="llmperf-individual-responses",
    description="llmperf *_individual_responses.json",
    sniff=_sniff_responses,
    read=_read_responses,
)
AGGREGATE_IMPORTER = Importer(
    kind="llmperf-aggregate",
    description="llmperf quantiles JSON at one concurrency",
    sniff=_sniff_aggregate,
    read=_read_aggregate,
)
CSV_IMPORTER = Importer(
    kind="llmperf-sweep-csv",
    description="llmperf sweep CSV (a column per concurrency)",
    sniff=_sniff_csv,
    read=_read_csv,
)
