"""Result JSON of benchmark scripts kept in the sglang repository (A/B and run-to-run studies)
-> ``BenchmarkCompleted`` events. Three shapes:

- A/B results (``double_sparsity_*.json``): ``{"concurrencies": [...], "results": [{"config",
  "model", "context_len", "output_len", "n_requests", "concurrency", "ttft_ms_p50",
  "ttft_ms_p95", "tbt_ms_p50", "tbt_ms_p95", "decode_tok_per_s", "aggregate_tok_per_s",
  "e2e_latency_s", ...}]}``: one run per result. Only the TTFT percentiles are ours; the
  script's TBT, decode/aggregate rates and its ``e2e_latency_s`` (which statistic is not
  said) are kept in ``tool_metrics``.
- One run with its requests (``*_e2e_*.json``): ``{"input_len", "output_len", "requests",
  "concurrency", "seed", "wall_seconds", "output_tokens", "throughput", "per_request":
  [{"ttft_ms", "total_ms", "tpot_ms", "output_tokens"}]}``: its per-request TPOT is
  (total - TTFT) / (output tokens - 1), ours (checked on the fixture), so TTFT, TPOT and E2E
  are computed from the requests; throughput = output tokens / wall seconds, ours.
- A run-to-run summary (``*serving-summary.json``): a list of ``{"input_len",
  "independent_runs", "configurations": {NAME: {METRIC: {"median", "run_values": [...]}}}}``
  with METRIC ``throughput``, ``ttft_ms_median``, ``tpot_ms_median``, ``total_ms_median``:
  one run per configuration and run value (``repeat`` = its index), as the medians of that run.
"""

from __future__ import annotations

from typing import Any

from ledger.errors import InvalidInput
from schemas import Workload

from .detect import ImportContext, Importer, InputFile, ReadResult, Sniffed
from .fields import FieldReader
from .results import bench_event, distribution_from_samples, samples_table, tpot_ms

TOOL = "sglang.benchmark_script"


def _sniff_ab(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if (
        isinstance(obj, dict)
        and isinstance(obj.get("results"), list)
        and obj["results"]
        and all(
            isinstance(r, dict) and "concurrency" in r and any(k.startswith("ttft_ms_") for k in r)
            for r in obj["results"]
        )
    ):
        return 0.7
    return 0.0


def _read_ab(file: InputFile, ctx: ImportContext) -> ReadResult:
    events = []
    for index, raw in enumerate(file.json["results"]):
        r = FieldReader(raw, f"{file.label}: results[{index}]")
        concurrency = r.number("concurrency", integer=True)
        config = r.text("config") or file.path.stem
        metrics = {
            "median_ttft_ms": r.number("ttft_ms_p50"),
            "p90_ttft_ms": r.number("ttft_ms_p90"),
            "p95_ttft_ms": r.number("ttft_ms_p95"),
            "p99_ttft_ms": r.number("ttft_ms_p99"),
        }
        kept = {
            k: r.number(k)
            for k in raw
            if k.startswith(("tbt_ms_", "decode_tok", "aggregate_tok", "e2e_latency", "niah"))
            and not isinstance(raw[k], (dict, list))
        }
        workload = Workload(
            input_len=r.number("context_len", integer=True),
            output_len=r.number("output_len", integer=True),
            num_prompts=r.number("n_requests", integer=True),
            load="closed-loop" if concurrency else None,
        )
        model = r.text("model")
        events.append(
            bench_event(
                file,
                ctx,
                label=f"{index}-{config}-c{concurrency}",
                line=None,
                tool=TOOL,
                metrics=metrics,
                workload=workload,
                concurrency=concurrency,
                tool_metrics=kept,
                config_name=config,
                metric_notes=[
                    "script's TBT, decode/aggregate tok/s and e2e_latency_s (statistic unstated): tool_metrics only"
                ],
                notes=f"model {model}" if model else None,
                streaming=_NO_CHUNKS,
            ).model_copy(update={"source": f"{file.name}:results[{index}]"})
        )
    return events, {}


#: Why these scripts' results cannot tell the streaming granularity (``ledger.streaming``).
_NO_CHUNKS = "the script's result keeps no per-request chunk counts or ITL"


def _sniff_run(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if isinstance(obj, dict) and isinstance(obj.get("per_request"), list) and "wall_seconds" in obj:
        return 0.7
    return 0.0


def _read_run(file: InputFile, ctx: ImportContext) -> ReadResult:
    r = FieldReader(file.json, file.label)
    rows = []
    for index, raw in enumerate(r.array("per_request") or []):
        q = FieldReader(raw if isinstance(raw, dict) else {}, f"{file.label}: per_request[{index}]")
        ttft, e2e, out = (
            q.number("ttft_ms"),
            q.number("total_ms"),
            q.number("output_tokens", integer=True),
        )
        rows.append(
            {
                "ok": True,
                "ttft_ms": ttft,
                "e2e_ms": e2e,
                "tpot_ms": tpot_ms(ttft, e2e, out),
                "output_tokens": out,
            }
        )
    if not rows:
        raise r.error("per_request", "expected a non-empty list of requests")
    table = samples_table(rows)
    wall = r.number("wall_seconds")
    total_out = r.number("output_tokens", integer=True)
    metrics: dict[str, Any] = {
        "completed": len(rows),
        "failed": 0,
        "duration_s": wall,
        "total_output_tokens": total_out,
    }
    if wall:
        metrics["output_throughput"] = total_out / wall if total_out is not None else None
        metrics["request_throughput"] = len(rows) / wall
        metrics["achieved_concurrency"] = sum(row["e2e_ms"] or 0 for row in rows) / 1000.0 / wall
    metrics.update(distribution_from_samples(table))
    concurrency = r.number("concurrency", integer=True)
    workload = Workload(
        input_len=r.number("input_len", integer=True),
        output_len=r.number("output_len", integer=True),
        num_prompts=r.number("requests", integer=True),
        seed=r.number("seed", integer=True),
        load="closed-loop" if concurrency else None,
    )
    event = bench_event(
        file,
        ctx,
        label="run",
        line=None,
        tool=TOOL,
        metrics=metrics,
        workload=workload,
        concurrency=concurrency,
        metric_notes=["TTFT, TPOT, E2E computed from per_request as ours"],
        streaming=_NO_CHUNKS,
    )
    return [event], {event.event_id: table}


_SUMMARY_METRICS = {
    "throughput": "output_throughput",
    "ttft_ms_median": "median_ttft_ms",
    "tpot_ms_median": "median_tpot_ms",
    "total_ms_median": "median_e2e_latency_ms",
}


def _sniff_summary(sniffed: Sniffed) -> float:
    obj = sniffed.json
    if (
        isinstance(obj, list)
        and obj
        and all(isinstance(x, dict) and isinstance(x.get("configurations"), dict) for x in obj)
    ):
        return 0.7
    return 0.0


def _read_summary(file: InputFile, ctx: ImportContext) -> ReadResult:
    events = []
    for index, group in enumerate(file.json):
        g = FieldReader(group, f"{file.label}: [{index}]")
        input_len = g.number("input_len", integer=True)
        for config, metrics_by_name in (g.mapping("configurations") or {}).items():
            if not isinstance(metrics_by_name, dict):
                raise g.error(f"configurations.{config}", "expected an object of metrics")
            runs: dict[int, dict[str, Any]] = {}
            for name, ours in _SUMMARY_METRICS.items():
                stat = FieldReader(metrics_by_name, g.where).sub(name)
                for i, value in enumerate(stat.array("run_values") or []):
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise InvalidInput(
                            f"{g.where}: field 'configurations.{config}.{name}.run_values[{i}]': expected a number"
                        )
                    runs.setdefault(i, {})[ours] = float(value)
            for i, metrics in sorted(runs.items()):
                event = bench_event(
                    file,
                    ctx,
                    label=f"{index}-in{input_len}-{config}-r{i}",
                    line=None,
                    tool=TOOL,
                    metrics=metrics,
                    workload=Workload(input_len=input_len),
                    config_name=config,
                    metric_notes=[
                        "each run's medians as the study recorded them; no request counts in the file"
                    ],
                    streaming=_NO_CHUNKS,
                )
                events.append(
                    event.model_copy(
                        update={"repeat": i, "source": f"{file.name}:[{index}].{config}"}
                    )
                )
    if not events:
        raise InvalidInput(f"{file.label}: no run values in any configuration")
    return events, {}


AB_IMPORTER = Importer(
    kind="sglang-script-ab",
    description="sglang repo A/B script results JSON",
    sniff=_sniff_ab,
    read=_read_ab,
)
RUN_IMPORTER = Importer(
    kind="sglang-script-run",
    description="sglang repo per-request run JSON",
    sniff=_sniff_run,
    read=_read_run,
)
SUMMARY_IMPORTER = Importer(
    kind="sglang-script-summary",
    description="sglang repo run-to-run summary JSON",
    sniff=_sniff_summary,
    read=_read_summary,
)
