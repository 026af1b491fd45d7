"""GuideLLM 0.3's console report (what ``guidellm benchmark`` prints) -> one
``BenchmarkCompleted`` per benchmark row.

Two tables, pipe-separated, each row a benchmark (``synchronous``, ``throughput``,
``constant@1.55``, ``poisson@2.00``, ``concurrent@4``):

- ``Benchmarks Info:`` columns ``Benchmark | Start Time | End Time | Duration (s) |
  Requests Made Comp Inc Err | Prompt Tok/Req ×3 | Output Tok/Req ×3 | Prompt Tok Total ×3 |
  Output Tok Total ×3``;
- ``Benchmarks Stats:`` columns ``Benchmark | Per Second | Concurrency | Out Tok/sec mean |
  Tot Tok/sec mean | Req Latency (sec) mean median p99 | TTFT (ms) mean median p99 |
  ITL (ms) mean median p99 | TPOT (ms) mean median p99``.

The same definitions as the JSON report (``guidellm.py``: ITL is our TPOT, throughputs are
recomputed as totals / duration), at the console's rounding (one or two decimals).
Other console layouts (GuideLLM 0.4+) are not read: import their JSON/YAML.
"""

from __future__ import annotations

import re
from typing import Any

from ledger.errors import InvalidInput
from schemas import Workload

from .detect import ImportContext, Importer, InputFile, ReadResult, Sniffed
from .guidellm import TOOL
from .results import bench_event

_INFO_COLUMNS = [
    "Benchmark",
    "Start Time",
    "End Time",
    "Duration (s)",
    *(["Comp", "Inc", "Err"] * 5),
]
_STATS_COLUMNS = [
    "Benchmark",
    "Per Second",
    "Concurrency",
    "mean",
    "mean",
    *(["mean", "median", "p99"] * 4),
]
_NAME_RE = re.compile(r"^(?P<kind>[a-z_]+)(?:@(?P<value>[\d.]+))?$")

METRIC_NOTES = [
    "guidellm console: values at its rounding; ITL (per request) recorded as TPOT; throughputs = totals / duration",
    "guidellm per-second means, concurrency and its own TPOT in tool_metrics",
]


def _sniff(sniffed: Sniffed) -> float:
    text = sniffed.text
    if (
        not sniffed.claims_json
        and "Benchmarks Info:" in text
        and "Benchmarks Stats:" in text
        and "TTFT (ms)" in text
    ):
        return 0.8
    return 0.0


def _table(file: InputFile, title: str, columns: list[str]) -> dict[str, tuple[int, list[str]]]:
    """Rows of the table after ``title``: benchmark name -> (line, cells); the column line is checked."""
    lines = file.lines()
    start = next((i for i, line in enumerate(lines) if line.strip() == title), None)
    if start is None:
        raise InvalidInput(f"{file.label}: no '{title}' table")
    rows: dict[str, tuple[int, list[str]]] = {}
    header_seen = False
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if not line.strip() or (line.startswith("=") and rows):
            if rows:
                break
            continue
        if line.startswith(("=", "-")) or "|||" in line or line.startswith("Metadata"):
            continue
        cells = [c.strip() for c in line.split("|")]
        if not header_seen:
            if cells != columns:
                raise InvalidInput(
                    f"{file.label}:{index + 1}: '{title}' columns are not GuideLLM 0.3's: {line.strip()[:80]}"
                )
            header_seen = True
            continue
        if len(cells) != len(columns):
            raise InvalidInput(
                f"{file.label}:{index + 1}: expected {len(columns)} columns, got {len(cells)}"
            )
        rows[cells[0]] = (index + 1, cells)
    return rows


def _number(file: InputFile, line: int, column: str, cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise InvalidInput(
            f"{file.label}:{line}: field '{column}': expected a number, got {cell[:40]!r}"
        ) from None


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    info = _table(file, "Benchmarks Info:", _INFO_COLUMNS)
    stats = _table(file, "Benchmarks Stats:", _STATS_COLUMNS)
    events = []
    for index, (name, (line, cells)) in enumerate(info.items()):
        if name not in stats:
            raise InvalidInput(
                f"{file.label}:{line}: benchmark '{name}' has no row in 'Benchmarks Stats:'"
            )
        sline, scells = stats[name]
        i = [
            _number(file, line, f"Benchmarks Info.{_INFO_COLUMNS[k]}", c)
            for k, c in enumerate(cells)
            if k >= 3
        ]
        s = [
            _number(file, sline, f"Benchmarks Stats.{_STATS_COLUMNS[k]}", c)
            for k, c in enumerate(scells)
            if k >= 1
        ]
        duration, comp, _inc, err = i[0], i[1], i[2], i[3]
        total_in, total_out = i[10], i[13]
        metrics: dict[str, Any] = {
            "completed": comp,
            "failed": err,
            "duration_s": duration,
            "total_input_tokens": total_in,
            "total_output_tokens": total_out,
            "mean_e2e_latency_ms": s[4] * 1000,
            "median_e2e_latency_ms": s[5] * 1000,
            "p99_e2e_latency_ms": s[6] * 1000,
            "mean_ttft_ms": s[7],
            "median_ttft_ms": s[8],
            "p99_ttft_ms": s[9],
            "mean_tpot_ms": s[10],
            "median_tpot_ms": s[11],
            "p99_tpot_ms": s[12],
        }
        if duration > 0:
            metrics.update(
                request_throughput=comp / duration,
                input_throughput=total_in / duration,
                output_throughput=total_out / duration,
                total_throughput=(total_in + total_out) / duration,
            )
        m = _NAME_RE.match(name)
        kind = m.group("kind") if m else name
        value = float(m.group("value")) if m and m.group("value") else None
        concurrency = (
            1 if kind == "synchronous" else (int(value) if kind == "concurrent" and value else None)
        )
        rate = value if kind in ("constant", "poisson") else None
        event = bench_event(
            file,
            ctx,
            label=f"{index}-{name}",
            line=line,
            tool=TOOL,
            metrics=metrics,
            concurrency=concurrency,
            workload=Workload(
                load="open-loop" if rate else ("closed-loop" if concurrency else None),
                request_rate=rate,
                num_prompts=int(comp + err + i[2]),
            ),
            tool_metrics={
                "requests_per_second_mean": s[0],
                "request_concurrency_mean": s[1],
                "output_tokens_per_second_mean": s[2],
                "tokens_per_second_mean": s[3],
                "time_per_output_token_ms_mean": s[13],
                "time_per_output_token_ms_median": s[14],
                "incomplete_requests": i[2],
            },
            metric_notes=METRIC_NOTES,
            notes=f"guidellm strategy {name} (console report)",
            streaming="GuideLLM's console report keeps no per-request chunk counts",
        )
        events.append(event)
    if not events:
        raise InvalidInput(f"{file.label}: no benchmark rows in 'Benchmarks Info:'")
    return events, {}


IMPORTER = Importer(
    kind="guidellm-console", description="GuideLLM 0.3 console report", sniff=_sniff, read=_read
)
