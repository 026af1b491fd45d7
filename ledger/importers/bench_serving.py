"""sglang ``bench_serving`` result JSONL -> ``BenchmarkCompleted`` events (+ per-request samples).

Format: what ``python -m sglang.bench_serving --output-file F`` appends, one JSON
object per run (docs/metrics.md; checked against the real 0.5.23 outputs in
tests/fixtures/sglang/bench_serving/). Latency keys are in ms; the
``--output-details`` arrays ``ttfts`` and ``itls`` are in seconds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.derive.warmup import cold_first_run
from ledger.errors import InvalidInput
from ledger.write.input_checks import loads
from schemas import Actor, BenchmarkCompleted, BenchMetrics, Host, Workload
from schemas.metrics import INTEGER_METRICS, tpot

from ..derive.streaming import Granularity, from_means, from_requests
from .detect import ImportContext, Importer, InputFile, ReadResult, Sniffed, looks_like_bench
from .fields import FieldReader as _Line
from .results import OutputLengths, apply_streaming, chunks_from_gaps, without_bursts

if TYPE_CHECKING:
    import pyarrow as pa

TOOL = "sglang.bench_serving"


#: sglang key -> BenchMetrics field, where the names differ; a later refactor's
#: spellings (``total_input``, ``total_output``) map to the same fields.
_RENAMED = {
    "duration": "duration_s",
    "concurrency": "achieved_concurrency",
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
}
_INT_METRICS = INTEGER_METRICS
_METRIC_FIELDS = set(BenchMetrics.model_fields)


def import_bench_serving(
    file: InputFile,
    *,
    config_name: str | None,
    session_id: str | None,
    host: Host | None,
    actor: Actor,
) -> tuple[list[BenchmarkCompleted], dict[UUID, pa.Table]]:
    """One ``BenchmarkCompleted`` per non-blank line, and a samples table per line with details.

    ``config_name`` defaults to the file stem. Event ids are deterministic
    (file content + line), ``source`` is ``name:line``.

    Raises:
        InvalidInput: ``file:LINE: not valid JSON ...``, a line that is not a
            bench_serving object, or ``file:LINE: field 'KEY': ...`` for a mistyped value.
    """
    events: list[BenchmarkCompleted] = []
    samples: dict[UUID, pa.Table] = {}
    for number, raw in enumerate(file.lines(), start=1):
        if not raw.strip():
            continue
        where = f"{file.label}:{number}"
        try:
            obj = loads(raw, where)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        if not looks_like_bench(obj):
            raise InvalidInput(f"{where}: not an sglang bench_serving result object")
        line = _Line(obj, where)
        event_id = file.event_id(f"bench:{number}")
        table = samples_from_details(line)
        event = _event(
            line,
            table,
            event_id=event_id,
            run_id=f"bench-{file.sha256[:12]}-{number}",
            config_name=config_name or file.path.stem,
        )
        events.append(
            event.model_copy(
                update={
                    "source": f"{file.name}:{number}",
                    "session_id": session_id,
                    "host": host,
                    "actor": actor,
                }
            )
        )
        if table is not None:
            samples[event_id] = table
    if not events:
        raise InvalidInput(f"{file.label}: no bench_serving result lines")
    return _set_aside_cold_runs(events), samples


def _set_aside_cold_runs(events: list[BenchmarkCompleted]) -> list[BenchmarkCompleted]:
    """Number the repeats of each workload (same dataset, lengths, concurrency, rate) in file order,
    and set a cold first run aside (``valid`` false, a note; ``ledger.derive.warmup`` gives the rule) so
    that it counts in no comparison."""
    series: dict[tuple[Any, ...], list[int]] = {}
    for index, event in enumerate(events):
        w = event.workload
        key = (
            w.dataset,
            w.input_len,
            w.output_len,
            w.range_ratio,
            w.load,
            w.request_rate,
            event.concurrency,
        )
        series.setdefault(key, []).append(index)
    out = list(events)
    for indexes in series.values():
        if len(indexes) < 2:
            continue
        for repeat, index in enumerate(indexes, start=1):
            if out[index].repeat is None:
                out[index] = out[index].model_copy(update={"repeat": repeat})
        valid = [i for i in indexes if out[i].valid is not False]
        if not valid or valid[0] != indexes[0]:
            continue
        cold = cold_first_run([out[i].metrics.output_throughput for i in valid])
        if cold is not None:
            first = out[valid[0]]
            out[valid[0]] = first.model_copy(
                update={"valid": False, "validity_notes": [*first.validity_notes, cold.note()]}
            )
    return out


def _metrics(line: _Line, failed: int | None) -> BenchMetrics:
    values: dict[str, Any] = {}
    for key in line.obj:
        name = _RENAMED.get(key, key)
        if name in _METRIC_FIELDS and name != "failed":
            value = line.number(key, integer=name in _INT_METRICS)
            if value is not None or name not in values:
                values[name] = value
    values["failed"] = failed if failed is not None else line.number("failed", integer=True)
    return BenchMetrics(**values)


def _event(
    line: _Line, table: pa.Table | None, *, event_id: UUID, run_id: str, config_name: str
) -> BenchmarkCompleted:
    max_concurrency = line.number("max_concurrency", integer=True)
    if max_concurrency is not None and max_concurrency < 1:
        raise line.error("max_concurrency", f"expected >= 1, got {max_concurrency}")
    failed = None
    if table is not None:
        failed = table.num_rows - sum(table.column("ok").to_pylist())
    metrics = _metrics(line, failed)
    rate = _request_rate(line)
    if rate is None:
        load = "closed-loop" if max_concurrency is not None else None
    else:
        load = "open-loop"
    num_prompts = None
    if metrics.completed is not None and metrics.failed is not None:
        num_prompts = metrics.completed + metrics.failed
    dataset = line.text("dataset_name")
    input_len, output_len, range_ratio = _lengths(line, dataset)
    workload = Workload(
        dataset=dataset,
        input_len=input_len,
        output_len=output_len,
        range_ratio=range_ratio,
        num_prompts=num_prompts,
        load=load,
        request_rate=rate,
    )
    notes = []
    valid = True
    if metrics.failed:
        first = (
            next((e for e in table.column("error").to_pylist() if e), "")
            if table is not None
            else ""
        )
        notes.append(f"{metrics.failed} request(s) failed" + (f": {first[:200]}" if first else ""))
    if not metrics.completed:
        notes.append("no request completed")
    valid = not notes
    backend = line.text("backend")
    ok_rows = [row for row in table.to_pylist() if row["ok"]] if table is not None else []
    if table is not None:
        fixed = workload.range_ratio == 1.0 and (workload.dataset or "").startswith("random")
        fails, length_notes = OutputLengths(
            [row["output_tokens"] for row in ok_rows],
            asked=workload.output_len if fixed else None,
        ).check()
        valid = valid and not fails
        notes.extend(length_notes)
    values = metrics.model_dump()
    streaming = _granularity(metrics, ok_rows, backend)
    moved, coarse, unmeasurable = apply_streaming(values, streaming)
    notes.extend([coarse] if coarse else [])
    if isinstance(streaming, Granularity) and not streaming.coarse:
        replaced, bursts = without_bursts(values, ok_rows)
        for name, value in replaced.items():
            moved.setdefault(name, value)
        notes.extend([bursts] if bursts else [])
    return BenchmarkCompleted(
        event_id=event_id,
        run_id=run_id,
        config_name=config_name,
        tool=TOOL,
        workload=workload,
        concurrency=max_concurrency,
        metrics=BenchMetrics(**values),
        valid=valid,
        validity_notes=notes,
        notes=f"bench_serving backend {backend}" if backend else None,
        tool_metrics=moved,
        metric_notes=[unmeasurable] if unmeasurable else [],
    )


def _granularity(
    metrics: BenchMetrics, ok_rows: list[dict[str, Any]], backend: str | None
) -> Granularity | str:
    """The streaming-granularity verdict of one line: from the per-request gaps of
    ``--output-details``, else estimated from the means, else why it cannot be told."""
    if ok_rows:
        found = from_requests((chunks_from_gaps(r["itl_ms"]), r["output_tokens"]) for r in ok_rows)
        if found is not None:
            return found
    if backend in ("sglang", "sglang-native"):
        # the native /generate client splits each chunk's gap over its tokens: the pooled ITL
        # counts tokens, not chunks, and the means cannot tell the chunking
        return (
            "sglang's native /generate client splits a chunk's gap over its tokens, so the means "
            "cannot tell the chunking; the per-request gaps of --output-details can"
        )
    if metrics.completed and metrics.total_output_tokens is not None:
        found = from_means(
            metrics.mean_e2e_latency_ms,
            metrics.mean_ttft_ms,
            metrics.mean_itl_ms,
            metrics.total_output_tokens / metrics.completed,
        )
        if found is not None:
            return found
    return "the line keeps no per-request gaps (--output-details) and no mean E2E, TTFT and ITL"


#: Datasets whose prompts bench_serving makes from ``--random-input-len`` /
#: ``--random-output-len`` (and ``--random-range-ratio``): sglang 0.5.23's
#: ``benchmark/datasets/random.py`` and ``image.py``; ``random-ids`` and later ``random-*`` too.
_RANDOM_LENGTH_DATASETS = ("random", "image")
#: Datasets of recorded conversations: their prompts have their own lengths, and the output is
#: ``--sharegpt-output-len`` when given, else each conversation's own.
_RECORDED_DATASETS = frozenset({"sharegpt", "custom", "openai", "longbench_v2", "agentic-trace"})


def _lengths(line: _Line, dataset: str | None) -> tuple[int | None, int | None, float | None]:
    """(input_len, output_len, range_ratio) the run asked for. bench_serving writes
    ``random_input_len``, ``random_output_len`` and ``random_range_ratio`` on every line (their
    defaults when unused), so they are the workload's only for the datasets that read them; a
    ShareGPT run's fixed output length is ``sharegpt_output_len``; else the lengths are unknown."""
    if dataset is not None and dataset.startswith(_RANDOM_LENGTH_DATASETS):
        return (
            line.number("random_input_len", integer=True),
            line.number("random_output_len", integer=True),
            line.number("random_range_ratio"),
        )
    if dataset == "mmmu":  # images and questions from the data set, the output length asked
        return None, line.number("random_output_len", integer=True), None
    if dataset in _RECORDED_DATASETS:
        return None, line.number("sharegpt_output_len", integer=True), None
    return None, None, None


def _request_rate(line: _Line) -> float | None:
    """Requests/s for an open loop; ``None`` for ``Infinity``/``inf`` (all requests at once)."""
    value = line.obj.get("request_rate")
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return None
    rate = line.number("request_rate")
    return rate if rate is not None and rate > 0 else None


def samples_from_details(line: _Line) -> pa.Table | None:
    """The per-request table of an ``--output-details`` line, or ``None`` without details.

    ``ttfts`` and ``itls`` are seconds in sglang's output (converted to ms here);
    if a file's mean TTFT matches ``mean_ttft_ms`` only without the x1000, the
    arrays are taken as ms already. E2E is each request's ``latencies`` entry where the file
    keeps one (vLLM's ``--save-detailed``), else reconstructed as TTFT + sum(ITLs), which
    misses the time after the last chunk (in the fixture ~4% below ``mean_e2e_latency_ms``);
    TPOT follows from it.
    """
    ttfts = line.array("ttfts")
    if ttfts is None:
        return None
    n = len(ttfts)
    itls = line.array("itls") or [[] for _ in range(n)]
    input_lens = line.array("input_lens") or [None] * n
    output_lens = line.array("output_lens") or [None] * n
    errors = line.array("errors") or [""] * n
    texts = line.array("generated_texts") or [None] * n
    # vLLM's --save-detailed keeps each request's own E2E (seconds): used where present
    latencies = line.array("latencies") or [None] * n
    for key, values in (
        ("itls", itls),
        ("input_lens", input_lens),
        ("output_lens", output_lens),
        ("errors", errors),
        ("generated_texts", texts),
        ("latencies", latencies),
    ):
        if len(values) != n:
            raise line.error(key, f"has {len(values)} entries, ttfts has {n}")
    scale = _ttft_scale(line, ttfts, errors)
    import pyarrow as pa  # only a file with per-request details needs it (not the import of a log)

    from ..store import BENCH_SAMPLES_SCHEMA as SAMPLES_SCHEMA

    rows: dict[str, list[Any]] = {name: [] for name in SAMPLES_SCHEMA.names}
    for i in range(n):
        error = errors[i]
        if error is not None and not isinstance(error, str):
            raise line.error(f"errors[{i}]", "expected a string")
        ok = not error
        ttft = _num(line, f"ttfts[{i}]", ttfts[i])
        gaps = itls[i] if isinstance(itls[i], list) else None
        if gaps is None:
            raise line.error(f"itls[{i}]", "expected a list of seconds")
        if ok and no_output(ttft, gaps, texts[i]):
            # sglang counts such a request a success (with the output tokens it asked for),
            # but nothing was streamed: its TTFT of 0.0 is not a measurement
            ok, error = False, NO_OUTPUT
        gaps_ms = [_gap(line, f"itls[{i}][{j}]", g) * scale for j, g in enumerate(gaps)]
        out = _int(line, f"output_lens[{i}]", output_lens[i])
        ttft_ms = ttft * scale if ok and ttft is not None else None
        latency = _num(line, f"latencies[{i}]", latencies[i])
        if ttft_ms is None:
            e2e_ms = None
        elif latency is not None:
            e2e_ms = latency * scale
        else:
            e2e_ms = ttft_ms + sum(gaps_ms)
        tpot_ms = tpot(ttft_ms, e2e_ms, out)
        rows["request_index"].append(i)
        rows["ok"].append(ok)
        rows["ttft_ms"].append(ttft_ms)
        rows["e2e_ms"].append(e2e_ms)
        rows["tpot_ms"].append(tpot_ms)
        rows["prompt_tokens"].append(_int(line, f"input_lens[{i}]", input_lens[i]))
        rows["output_tokens"].append(out)
        rows["itl_ms"].append(gaps_ms)
        rows["error"].append(error or None)
    return pa.table(rows, schema=SAMPLES_SCHEMA)


#: The error a request that streamed nothing gets (``no_output``), as our own runs' failures.
NO_OUTPUT = "no output streamed (TTFT 0.0, no ITL, empty text): not a measurement"


def no_output(ttft: float | None, gaps: list[Any], text: Any) -> bool:
    """Whether a request the tool counted a success streamed nothing: a TTFT of 0 (or none),
    no gap, and an empty text where the file keeps the text (our runner fails such a request:
    "the stream carried no content")."""
    return (ttft is None or ttft == 0) and not gaps and (text is None or text == "")


def _ttft_scale(line: _Line, ttfts: list[Any], errors: list[Any]) -> float:
    """1000 (seconds -> ms), unless the mean TTFT of the successful requests says the arrays are ms."""
    reported = line.number("mean_ttft_ms")
    values = [
        t
        for t, e in zip(ttfts, errors, strict=True)  # lengths checked by the caller
        if not e and isinstance(t, (int, float)) and not isinstance(t, bool)
    ]
    if reported is None or not values:
        return 1000.0
    mean = sum(values) / len(values)
    return 1.0 if abs(mean - reported) < abs(mean * 1000.0 - reported) else 1000.0


def _gap(line: _Line, key: str, value: Any) -> float:
    """One inter-token gap: a number; a null has no meaning inside a request's gaps (refused)."""
    gap = _num(line, key, value)
    if gap is None:
        raise line.error(key, "expected a number of seconds, got null")
    return gap


def _num(line: _Line, key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise line.error(key, f"expected a number, got {json.dumps(value)[:40]}")
    return float(value)


def _int(line: _Line, key: str, value: Any) -> int | None:
    """A per-request token count: an integer that fits ``bench_samples``' INTEGER (32 bits)."""
    number = _num(line, key, value)
    if number is None:
        return None
    if not number.is_integer():
        raise line.error(key, f"expected an integer, got {number}")
    if not 0 <= number < 2**31:
        raise line.error(key, f"expected a token count from 0 to {2**31 - 1}, got {value}")
    return int(number)


def _sniff(sniffed: Sniffed) -> float:
    """0.5 for a JSON object (or a first JSON line) with sglang bench_serving keys: other
    tools with the same key family (vLLM) claim their files more confidently."""
    obj = sniffed.json if sniffed.json is not None else sniffed.first_json_line
    return 0.5 if looks_like_bench(obj) else 0.0


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    events, samples = import_bench_serving(
        file, config_name=ctx.config_name, session_id=ctx.session_id, host=ctx.host, actor=ctx.actor
    )
    return list(events), samples


IMPORTER = Importer(
    kind="sglang-bench-serving", description="sglang bench_serving JSONL", sniff=_sniff, read=_read
)
