"""``export markdown``: the decision log a person reads, rendered from the ledger's views.

One document per session, in this order: a header (model, dtype, tensor parallel,
hardware, engine), then ``## Decisions``, ``## Triage``, ``## Flag verdicts``,
``## Server runs``, ``## Benchmark deltas`` and ``## Timeline``. Every section is
present; an empty one says "None recorded.".

Everything is read by ``ledger.read.model.read_report`` from the derived views
(``decisions``, ``board``, ``flag_verdicts``, ``server_runs``,
``benchmark_deltas``, ``timeline``, ``event_log``, ``live_events``, ``kernel_tunes``,
``spec_trials``) in one connection, so the sections agree with each other; nothing is
written. ``render_report`` turns that report into text and reads nothing: the output
is a pure function of the ledger, the same ledger renders to the same bytes (no
wall-clock time, every query ordered).

Tables are GitHub-flavoured Markdown: ``|`` in a cell is escaped as ``\\|`` and
newlines in a cell are folded to spaces. They are built here rather than with a
table library: escaping is the only subtle part and a library would not do it
for us (``tabulate``'s ``github`` format, for one, leaves ``|`` unescaped).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from ledger.derive.views import DELTA_METRICS
from ledger.read.model import Report, SessionReport, read_report
from ledger.read.shown_text import escape_controls
from schemas.metrics import unit_of

if TYPE_CHECKING:
    from ledger.store import LedgerStore

NONE_RECORDED = "None recorded."

#: Timelines longer than this are summarised as counts per event type.
TIMELINE_MAX_ROWS = 60

#: Free text in a table cell (a summary, a reason) is cut to this many characters.
TEXT_MAX_CHARS = 200

#: Whole table cells longer than this are cut with an ellipsis (a last resort).
CELL_MAX_CHARS = 400

_HOST_FIELDS: tuple[tuple[str, str], ...] = (
    ("gpu_name", "GPU"),
    ("gpu_count", "GPU count"),
    ("compute_capability", "compute capability"),
    ("gpu_memory_mib", "GPU memory"),
    ("driver", "driver"),
    ("cuda", "CUDA"),
    ("engine", "engine"),
    ("engine_version", "engine version"),
)

#: Decimals shown per unit of the metric table.
_UNIT_DECIMALS = {"ms": 2, "tok/s": 1, "req/s": 3}

_METRIC_ORDER = {name: index for index, (name, _, _) in enumerate(DELTA_METRICS)}


# --- text helpers ------------------------------------------------------------------


class ShortIds:
    """Short event ids: the shortest prefix of the canonical id, 8 characters at least,
    that no other event of the ledger shares (as git abbreviates hashes).

    UUIDv7 ids begin with their millisecond time stamp, so the first 8 hex digits
    are the same for every event appended within about 65 s: a fixed 8-digit
    prefix would be ambiguous. The prefix keeps the dashes, so ``tuneledger show``
    (``LedgerStore.get``) accepts it as it is.
    """

    MIN_CHARS = 8

    def __init__(self, event_ids: Iterable[Any]) -> None:
        self._ids = sorted({str(event_id).lower() for event_id in event_ids})

    def __call__(self, event_id: Any) -> str:
        if event_id is None:
            return "?"
        text = str(event_id).lower()
        index = bisect_left(self._ids, text)
        present = index < len(self._ids) and self._ids[index] == text
        neighbours = [
            self._ids[j]
            for j in (index - 1, index + 1 if present else index)
            if 0 <= j < len(self._ids)
        ]
        shared = max((_common_prefix(text, other) for other in neighbours), default=0)
        length = max(self.MIN_CHARS, shared + 1)
        if length < len(text) and text[length - 1] == "-":
            length += 1
        return text[:length]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _one_line(value: Any) -> str:
    """Fold any value to a single line of text (``None`` -> empty)."""
    if value is None:
        return ""
    return " ".join(str(value).split())


def _clip(value: Any, max_chars: int = TEXT_MAX_CHARS) -> str:
    """One line of free text, cut with an ellipsis past ``max_chars``."""
    text = _one_line(value)
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def escape_cell(value: Any, *, max_chars: int | None = CELL_MAX_CHARS) -> str:
    """One GFM table cell: single line, ``|`` escaped as ``\\|``, cut at ``max_chars``.

    A backslash already in the text is kept as is except before ``|``, where it
    is doubled so that ``a\\|b`` in the source does not unescape the pipe.
    """
    text = _clip(value, max_chars) if max_chars is not None else _one_line(value)
    return text.replace("\\|", "\\\\|").replace("|", "\\|")


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, align: Sequence[str] | None = None
) -> str:
    """A GitHub-flavoured Markdown table; ``align`` holds ``l``/``r`` per column.

    Returns ``None recorded.`` when there are no rows.
    """
    body = [[escape_cell(cell) for cell in row] for row in rows]
    if not body:
        return NONE_RECORDED
    align = align or ["l"] * len(headers)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = [
        "| " + " | ".join(escape_cell(h) for h in headers) + " |",
        "| " + " | ".join(rule) + " |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _code(text: Any) -> str:
    """Inline code for an identifier (backticks inside are replaced)."""
    return "`" + _one_line(text).replace("`", "'") + "`"


def _quote(text: str) -> str:
    """A block quote keeping the text's own lines (so headings inside stay harmless)."""
    lines = str(text).strip().splitlines() or [""]
    return "\n".join(("> " + line).rstrip() for line in lines)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _flag_value(value: Any) -> str:
    if value is True:
        return ""
    if isinstance(value, (dict, list)):
        return "=" + json.dumps(value, separators=(",", ":"), sort_keys=True)
    if value is False:
        return "=false"
    return f"={value}"


def format_metric(metric: str, value: float | None) -> str:
    """A metric value with its unit from the metric table (``schemas.metrics``): tok/s with 1
    decimal, ms with 2, req/s with 3; a metric not in the table without a unit.

    ``None`` renders as ``n/a``.
    """
    if value is None:
        return "n/a"
    unit = unit_of(metric)
    decimals = _UNIT_DECIMALS.get(unit or "")
    if decimals is None:
        return f"{value:,.4g}" + (f" {unit}" if unit else "")
    return f"{value:,.{decimals}f} {unit}"


def format_change(change_pct: float | None) -> str:
    """A signed percent with 2 decimals (``+0.33%``, ``-1.25%``); ``None`` -> ``n/a``."""
    if change_pct is None:
        return "n/a"
    text = f"{change_pct:+.2f}%"
    return "+0.00%" if text == "-0.00%" else text


# --- sections ----------------------------------------------------------------------


def _host_text(host: dict[str, Any]) -> str:
    parts = []
    gpu = host.get("gpu_name")
    count = host.get("gpu_count")
    if count == 0 and not gpu:
        parts.append(
            "CPU (no GPU)"
        )  # a CPU host: the fingerprint records gpu_count 0 and no GPU name
    elif gpu or count is not None:
        parts.append(f"{gpu or 'GPU ?'} x{count if count is not None else '?'}")
    if host.get("compute_capability"):
        parts.append(str(host["compute_capability"]))
    if host.get("gpu_memory_mib") is not None:
        parts.append(f"{host['gpu_memory_mib']} MiB per GPU")
    if host.get("driver"):
        parts.append(f"driver {host['driver']}")
    if host.get("cuda"):
        parts.append(f"CUDA {host['cuda']}")
    hardware = ", ".join(parts) or "unknown hardware"
    engine = " ".join(str(host[k]) for k in ("engine", "engine_version") if host.get(k))
    return f"{hardware}; engine {engine}" if engine else hardware


def _observation_source(row: dict[str, Any], short: ShortIds) -> str:
    where = f"{row['type']} {_code(short(row['event_id']))}, seq {row['seq']}"
    return f"{where}, source {_code(row['source'])}" if row.get("source") else where


def _render_header(report: SessionReport, short: ShortIds) -> list[str]:
    session_id = report.session_id
    rows = report.header
    started = next((r for r in reversed(rows) if r["type"] == "session_started"), None)
    ended = next((r for r in reversed(rows) if r["type"] == "session_ended"), None)
    payload = _json(started["payload"]) if started else {}
    title = _one_line(payload.get("title")) or f"Session {session_id}"

    lines = [f"# {title}", "", f"- Session: {_code(session_id)}"]
    model_parts = [
        part
        for part in (
            _one_line(payload.get("model")) or None,
            f"dtype {payload['dtype']}" if payload.get("dtype") else None,
            f"tensor parallel {payload['tensor_parallel']}"
            if payload.get("tensor_parallel")
            else None,
        )
        if part
    ]
    lines.append(f"- Model: {', '.join(model_parts) if model_parts else 'not recorded'}")
    if payload.get("goal"):
        lines.append(f"- Goal: {_one_line(payload['goal'])}")

    observations = []
    for row in rows:
        if row["type"] not in ("session_started", "host_observed"):
            continue
        host = _json(row["host"]) or {}
        if any(host.get(key) is not None for key, _ in _HOST_FIELDS):
            observations.append((row, host))
    conflicts = [
        label
        for key, label in _HOST_FIELDS
        if len({json.dumps(h.get(key)) for _, h in observations if h.get(key) is not None}) > 1
    ]
    if not observations:
        lines.append("- Hardware: not recorded")
    elif not conflicts:
        merged: dict[str, Any] = {}
        for _, host in observations:
            merged.update({k: v for k, v in host.items() if v is not None})
        sources = "; ".join(_observation_source(row, short) for row, _ in observations)
        lines.append(f"- Hardware: {_host_text(merged)} (from {sources})")
    else:
        lines.append(f"- Hardware: host observations disagree on {', '.join(conflicts)}:")
        grouped: dict[str, list[dict[str, Any]]] = {}
        for (
            row,
            host,
        ) in observations:  # identical observations share one line, in order of first seq
            grouped.setdefault(_host_text(host), []).append(row)
        for text, group in grouped.items():
            sources = "; ".join(_observation_source(row, short) for row in group)
            lines.append(f"  - {text} (from {sources})")

    for row in rows:
        if row["type"] != "host_observed":
            continue
        data = _json(row["payload"]) or {}
        versions = [
            f"{name} {data[key]}"
            for key, name in (
                ("torch_version", "torch"),
                ("triton_version", "triton"),
                ("python_version", "Python"),
            )
            if data.get(key)
        ]
        versions += [f"{k} {v}" for k, v in sorted((data.get("other_versions") or {}).items())]
        if data.get("cpu_only"):
            versions.insert(0, "CPU only")
        if versions:
            lines.append(f"- Software ({_code(short(row['event_id']))}): {', '.join(versions)}")
    if ended:
        summary = _one_line((_json(ended["payload"]) or {}).get("summary"))
        lines.append(f"- Ended: {summary or 'yes'}")
    return lines


def _render_decisions(report: SessionReport, short: ShortIds) -> list[str]:
    decisions = report.decisions
    lines = ["## Decisions", ""]
    if not decisions:
        return lines + [NONE_RECORDED]
    resolved = report.evidence

    for number, d in enumerate(decisions, start=1):
        lines.append(f"### {number}. {_one_line(d['decision'])}")
        lines.append("")
        meta = [
            f"{_code(short(d['event_id']))}",
            f"seq {d['seq']}",
            f"by {d['actor_kind']}:{d['actor_name']}",
        ]
        if d.get("candidate_id"):
            meta.append(f"candidate {_code(d['candidate_id'])}")
        lines.append(f"*{' · '.join(meta)}*")
        lines.append("")
        lines.append("**Rationale:**")
        lines.append("")
        lines.append(_quote(d["rationale"]) if d.get("rationale") else NONE_RECORDED)
        lines.append("")
        lines.append("**Alternatives:**")
        lines.append("")
        alternatives = d.get("alternatives") or []
        lines += [f"- {_one_line(a)}" for a in alternatives] if alternatives else [NONE_RECORDED]
        lines.append("")
        lines.append("**Evidence:**")
        lines.append("")
        evidence = d.get("evidence_event_ids") or []
        if not evidence:
            lines.append(NONE_RECORDED)
        for event_id in evidence:
            cited = resolved.get(str(event_id).lower())
            if cited is None:
                lines.append(f"- {_code(short(event_id))} — not in this ledger")
                continue
            summary = _one_line(cited["summary"]) or cited["type"]
            flag = " — retracted" if cited["retracted"] else ""
            lines.append(
                f"- {_code(short(event_id))} {cited['type']} (seq {cited['seq']}): {summary}{flag}"
            )
        lines.append("")
    return lines[:-1]


def _render_triage(report: SessionReport, short: ShortIds) -> list[str]:
    rows = report.triage
    table = markdown_table(
        ["Candidate", "Kind", "Priority", "Status", "Verdict", "Reason", "Latest evidence"],
        [
            [
                f"{_code(r['candidate_id'])} {_one_line(r['title'])}".strip(),
                r["kind"],
                r["priority"] or "—",
                r["status"],
                r["verdict"] or "—",
                _clip(r["reason"]) or "—",
                _latest_evidence(r, short),
            ]
            for r in rows
        ],
    )
    return ["## Triage", "", table]


def _latest_evidence(row: dict[str, Any], short: ShortIds) -> str:
    if not row["latest_evidence_event_id"]:
        return "—"
    ref = _code(short(row["latest_evidence_event_id"]))
    summary = _one_line(row["latest_evidence"])
    if not summary or (
        row["latest_evidence_type"] == "candidate_triaged" and summary == _one_line(row["reason"])
    ):
        return f"{row['latest_evidence_type']} ({ref})"  # the triage itself: its reason is in the Reason column
    return f"{row['latest_evidence_type']}: {_clip(summary)} ({ref})"


def _render_flag_verdicts(report: SessionReport, short: ShortIds) -> list[str]:
    archs, rows = report.archs, report.flag_verdicts
    lines = ["## Flag verdicts", ""]
    if archs:
        lines += [f"For {', '.join(archs)}.", ""]
    else:
        lines += ["The session records no arch: verdicts without an arch.", ""]
    table = markdown_table(
        [
            "Flag",
            "Engine",
            "Engine version",
            "Arch",
            "Verdict",
            "Basis",
            "History",
            "Summary",
            "Evidence",
        ],
        [
            [
                _code(r["setting"]),
                r["engine"] or "—",
                r["engine_version"] or "—",
                r["arch"] or "—",
                r["verdict"],
                r["basis"],
                " → ".join(r["history"] or []),
                f"{_clip(r['summary']) or '—'} ({_code(short(r['evidence_event_id']))})",
                _source_refs(r.get("evidence")),
            ]
            for r in rows
        ],
    )
    return lines + [table]


#: Source pointers shown per verdict (the event holds them all: ``tuneledger show ID``).
_EVIDENCE_REFS = 3


def _source_refs(evidence: Any) -> str:
    """A verdict's evidence as ``file:line`` pointers (what research read), else "—"."""
    items = _json(evidence) if isinstance(evidence, str) else evidence
    refs = [
        item["ref"]
        for item in items or []
        if isinstance(item, dict)
        and item.get("ref")
        and item.get("kind") in ("source", "log", "file")
    ]
    if not refs:
        return "—"
    more = f" (+{len(refs) - _EVIDENCE_REFS})" if len(refs) > _EVIDENCE_REFS else ""
    return ", ".join(_code(ref) for ref in refs[:_EVIDENCE_REFS]) + more


def _flag_changes(run: dict[str, Any]) -> list[str]:
    flags = _json(run["flags"]) or {}
    changes = [f"+{name}{_flag_value(flags.get(name, True))}" for name in run["flags_added"] or []]
    changes += [f"-{name}" for name in run["flags_removed"] or []]
    changes += [
        f"~{name}{_flag_value(flags.get(name, True))}" for name in run["flags_changed"] or []
    ]
    return changes


def _run_label(run: dict[str, Any]) -> str:
    name = _one_line(run["config_name"])
    if not name or name == run["run_id"]:
        return _code(run["run_id"])
    return f"{name} ({_code(run['run_id'])})"


def _render_server_runs(report: SessionReport, short: ShortIds) -> list[str]:
    rows = report.server_runs

    def status(r: dict[str, Any]) -> str:
        if r["status"] == "failed":
            return (
                f"failed ({r['failure_cause'] or '?'}): {_one_line(r['failure_message'])}".rstrip(
                    ": "
                )
            )
        return str(r["status"])

    def piecewise(r: dict[str, Any]) -> str:
        if r["piecewise_cuda_graph"] is None:
            return "?"
        if r["piecewise_cuda_graph"]:
            return "on"
        return (
            f"off ({_one_line(r['piecewise_disabled_reason'])})"
            if r["piecewise_disabled_reason"]
            else "off"
        )

    def changes(r: dict[str, Any]) -> str:
        if r["previous_run_id"] is None:
            return "first run"
        parts = _flag_changes(r)
        if r["changes_vs_previous"]:
            parts.append(r["changes_vs_previous"])
        return f"vs {_code(r['previous_run_id'])}: " + ("; ".join(parts) if parts else "no change")

    def number(value: Any) -> str:
        return "?" if value is None else str(value)

    # The capacity and CUDA-graph columns are facts of SGLang's startup log: shown only when a
    # run of the session is SGLang (for other engines they would be a column of "?").
    sglang = any(r["engine"] == "sglang" for r in rows)
    # When the fact happened (an imported log's own time), only where some run has it.
    occurred = any(r.get("occurred_at") for r in rows)
    headers = ["Config", "Engine", "Status"]
    if sglang:
        headers += [
            "max_running_requests",
            "max_total_num_tokens",
            "CUDA graph max bs",
            "Piecewise CUDA graph",
            "MoE kernel config",
        ]
    headers.append("Changes vs previous")
    if occurred:
        headers.append("Started (log time, UTC)")

    def cells(r: dict[str, Any]) -> list[Any]:
        row = [_run_label(r), r["engine"] or "?", status(r)]
        if sglang:
            row += [
                number(r["max_running_requests"]),
                number(r["max_total_num_tokens"]),
                number(r["cuda_graph_max_bs"]),
                piecewise(r),
                r["moe_kernel_config"] or "?",
            ]
        return row + [changes(r)] + ([_utc(r.get("occurred_at"))] if occurred else [])

    table = markdown_table(
        headers,
        [cells(r) for r in rows],
        align=[
            "l",
            "l",
            "l",
            *(["r", "r", "r", "l", "l"] if sglang else []),
            "l",
            *(["l"] if occurred else []),
        ],
    )
    return ["## Server runs", "", table]


def _utc(value: Any) -> str:
    """A timestamp as ``YYYY-mm-dd HH:MM:SS`` in UTC, or an empty cell."""
    if value is None:
        return ""
    if hasattr(value, "astimezone"):
        return str(value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"))
    return str(value)


def _render_benchmark_deltas(report: SessionReport, short: ShortIds) -> list[str]:
    rows = list(report.deltas)
    rows.sort(
        key=lambda r: (
            r["config_seq"],
            r["config_name"] or "",
            r["dataset"] or "",
            r["input_len"] if r["input_len"] is not None else -1,
            r["output_len"] if r["output_len"] is not None else -1,
            r["request_rate"] if r["request_rate"] is not None else -1.0,
            r["concurrency"] if r["concurrency"] is not None else -1,
            _METRIC_ORDER.get(r["metric"], len(_METRIC_ORDER)),
            r["metric"],
        )
    )
    lines = ["## Benchmark deltas", ""]
    baselines = sorted({r["baseline_config"] for r in rows if r["baseline_config"]})
    if baselines:
        lines += [
            f"Against baseline {', '.join(_code(b) for b in baselines)}. Baseline and Value are the central "
            "values the change is computed from (the geometric mean of the runs for a statistical verdict, "
            "else the mean), with the spread over the runs (CV) beside them; Change is value / baseline - 1 "
            "(a latency that drops shows as negative); the verdict knows which way is better for each "
            f"metric ({rows[0]['verdict_rule']}). *too-noisy*: the noise threshold is above 25%, so no "
            "verdict of no change is given. Reproduce gives the command or plan that made the runs.",
            "",
        ]
    sources = report.sources

    def reproduce(r: dict[str, Any]) -> str:
        source = sources.get((r["config_name"], r["concurrency"], r["request_rate"]))
        if not source:
            return "—"
        if source.endswith(".toml"):
            return f"{_code('tuneledger run plan ' + source)} (configuration {_code(r['config_name'])})"
        return _code(source)

    def with_cv(metric: str, value: Any, cv_pct: Any) -> str:
        text = format_metric(metric, value)
        return text if cv_pct is None or value is None else f"{text} (CV {cv_pct:.1f}%)"

    def load(r: dict[str, Any]) -> str:
        parts = []
        if r["concurrency"] is not None:
            parts.append(f"c={r['concurrency']}")
        if r["request_rate"] is not None:
            parts.append(f"{r['request_rate']:g} req/s")
        if r["input_len"] is not None or r["output_len"] is not None:
            parts.append(f"{number(r['input_len'])}/{number(r['output_len'])} tok")
        return " ".join(parts) or "—"

    def number(value: Any) -> str:
        return "?" if value is None else str(value)

    table = markdown_table(
        [
            "Config",
            "Load",
            "Metric",
            "Baseline",
            "Value",
            "Change",
            "Runs (base/this)",
            "Verdict",
            "Reproduce",
        ],
        [
            [
                r["config_name"],
                load(r),
                r["metric"],
                with_cv(r["metric"], r["baseline_value"], r["baseline_cv_pct"]),
                with_cv(r["metric"], r["value"], r["cv_pct"]),
                format_change(r["change_pct"]),
                f"{number(r['baseline_runs'])}/{number(r['runs'])}",
                r["verdict"]
                + (f" (~{r['runs_needed']} runs/arm needed)" if r["runs_needed"] else ""),
                reproduce(r),
            ]
            for r in rows
        ],
        align=["l", "l", "l", "r", "r", "r", "r", "l", "l"],
    )
    return lines + [table]


def _render_timeline(report: SessionReport, short: ShortIds, max_rows: int) -> list[str]:
    rows = report.timeline
    lines = ["## Timeline", ""]
    if len(rows) <= max_rows:
        occurred = any(r["occurred_at"] for r in rows)
        table = markdown_table(
            ["Seq", "Type", "Summary", "Event"] + (["Occurred (UTC)"] if occurred else []),
            [
                [
                    r["seq"],
                    r["type"],
                    _one_line(r["summary"]) or f"({r['stream']})",
                    _code(short(r["event_id"])),
                ]
                + ([_utc(r["occurred_at"])] if occurred else [])
                for r in rows
            ],
            align=["r", "l", "l", "l"] + (["l"] if occurred else []),
        )
        return lines + [table]
    counts: dict[str, list[int]] = {}
    for r in rows:
        counts.setdefault(r["type"], []).append(r["seq"])
    table = markdown_table(
        ["Type", "Events", "First seq", "Last seq"],
        [[t, len(s), s[0], s[-1]] for t, s in sorted(counts.items(), key=lambda item: item[1][0])],
        align=["l", "r", "r", "r"],
    )
    return lines + [
        f"{len(rows)} events (seq {rows[0]['seq']} to {rows[-1]['seq']}); counts per type:",
        "",
        table,
    ]


def _render_session(report: SessionReport, short: ShortIds, timeline_max_rows: int) -> str:
    from ledger.export.gpu import render_kernel_tunes, render_spec_trials

    parts = [
        _render_header(report, short),
        _render_decisions(report, short),
        _render_triage(report, short),
        _render_flag_verdicts(report, short),
        _render_server_runs(report, short),
        _render_benchmark_deltas(report, short),
    ]
    # the GPU sections only where a session has them
    parts += [
        p
        for p in (
            render_kernel_tunes(report.kernel_tunes, markdown_table),
            render_spec_trials(report.spec_trials, markdown_table),
        )
        if p
    ]
    parts.append(_render_timeline(report, short, timeline_max_rows))
    return "\n\n".join("\n".join(part) for part in parts) + "\n"


# --- public API -------------------------------------------------------------------


def render_markdown(
    store: LedgerStore,
    *,
    session_id: str | None = None,
    timeline_max_rows: int = TIMELINE_MAX_ROWS,
) -> str:
    """Render the decision log of one session (or of every session) as Markdown.

    Per session, in this order: ``# <title>`` with session id, model, dtype,
    tensor parallel, hardware (GPU name x count, compute capability ``smNN``,
    driver, CUDA; engine and version — from ``session_started`` and
    ``host_observed``, each conflicting observation listed with its source),
    then ``## Decisions`` (rationale, alternatives, evidence resolved to
    one-line summaries and short ids, see ``ShortIds``), ``## Triage`` (the board),
    ``## Flag verdicts`` (for the session's archs), ``## Server runs``,
    ``## Benchmark deltas`` (throughput in tok/s with 1 decimal, latencies in ms
    with 2, change as a signed percent such as ``+0.33%``) and ``## Timeline``
    (every event, or counts per type past ``timeline_max_rows`` events).
    Sessions appear in the order of their first event, separated by ``---``.
    An empty section reads "None recorded."; a ledger without sessions renders
    a single "None recorded." document.

    Read-only and deterministic: the same ledger gives the same string.

    Args:
        store: the ledger to read.
        session_id: one session; ``None`` for all.
        timeline_max_rows: longest timeline listed event by event.

    Returns:
        The Markdown text, ending with a newline.

    Raises:
        NotFound: no ledger file at ``store.path``, or no (live) event carries
            ``session_id`` (the message names it).
        LedgerBusy: the file stayed locked by a writer.
    """
    return render_report(read_report(store, session_id), timeline_max_rows=timeline_max_rows)


def render_report(report: Report, *, timeline_max_rows: int = TIMELINE_MAX_ROWS) -> str:
    """Render a report (``ledger.read.model.read_report``) as Markdown: a pure function of the
    report, reading nothing (see ``render_markdown`` for the document's layout)."""
    if not report.sessions:
        return f"# tuneledger decision log\n\n{NONE_RECORDED}\n"
    short = ShortIds(report.event_ids)
    text = "\n---\n\n".join(
        _render_session(session, short, timeline_max_rows) for session in report.sessions
    )
    # Stored text is shown, never acted on: a note's ESC sequences would retitle or clear the
    # terminal that shows the export (cat, less -R) and hide in a rendered page.
    return escape_controls(text)
