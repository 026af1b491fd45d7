"""``export markdown``: the decision log a person reads, rendered from the ledger's views.

It reads as a pull request's description: one document per session, leading with
what was decided and what the measurements say, then the detail. In this order: a header (model,
dtype, tensor parallel, hardware, engine), ``## Decisions``, ``## Verdicts`` (each configuration
against the baseline; metrics carrying one change in one row), ``## Triage``, ``## Flag
verdicts``, ``## Comparing the configurations`` (what differs between them, repeats with their
noise band, the Pareto front and its plot; only with two configurations or more), ``## Server
runs``, the GPU sections where a session has them, and ``## Timeline`` (events counted per type).
Every other section is present; an empty one says "None recorded.". Internals stay out:
no runner fingerprints or event provenance in the header, no cells cut mid-word, no rows of
unknowns.

Everything is read by ``ledger.read.model.read_report`` from the derived views
(``decisions``, ``board``, ``flag_verdicts``, ``server_runs``,
``benchmark_deltas``, ``benchmarks``, ``timeline``, ``event_log``, ``live_events``,
``kernel_tunes``, ``spec_trials``) in one connection, so the sections agree with each other;
nothing is written. ``render_report`` turns that report into text and reads nothing: the output
is a pure function of the ledger, the same ledger renders to the same bytes (no
wall-clock time, every query ordered).

Tables are GitHub-flavoured Markdown (``ledger.export.text``): ``|`` in a cell is escaped as
``\\|`` and newlines in a cell are folded to spaces.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ledger.export.measurements import render_server_runs, render_verdicts
from ledger.export.text import (
    CELL_MAX_CHARS,
    NONE_RECORDED,
    TEXT_MAX_CHARS,
    ShortIds,
    clip,
    code,
    escape_cell,
    format_change,
    format_metric,
    load_json,
    markdown_table,
    one_line,
    quote,
    utc,
)
from ledger.read.model import Report, SessionReport, read_report
from ledger.read.shown_text import escape_controls

if TYPE_CHECKING:
    from ledger.store import LedgerStore

__all__ = [
    "CELL_MAX_CHARS",
    "NONE_RECORDED",
    "TEXT_MAX_CHARS",
    "TIMELINE_MAX_ROWS",
    "ShortIds",
    "escape_cell",
    "format_change",
    "format_metric",
    "markdown_table",
    "render_markdown",
    "render_report",
]

#: Timelines up to this many events are listed event by event; longer ones are counted per
#: type. 0: always counted (a decision log is not an event dump).
TIMELINE_MAX_ROWS = 0

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


# --- sections ----------------------------------------------------------------------


def _host_text(host: dict[str, Any]) -> str:
    parts = []
    gpu = host.get("gpu_name")
    count = host.get("gpu_count")
    if count == 0 and not gpu:
        parts.append("CPU (no GPU)")  # a CPU host: the fingerprint records gpu_count 0, no GPU
    elif gpu or count is not None:
        parts.append(f"{gpu or 'GPU'}" + (f" x{count}" if count is not None else ""))
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


def _hardware(observations: list[dict[str, Any]]) -> str:
    """The hardware the observations agree on; a field they disagree on is left out and named,
    with its values (the write-ups of one campaign said 4 and 8 GPUs: neither is stated)."""
    merged: dict[str, Any] = {}
    differ: list[str] = []
    for key, label in _HOST_FIELDS:
        values = list(
            dict.fromkeys(json.dumps(h[key]) for h in observations if h.get(key) is not None)
        )
        if len(values) == 1:
            merged[key] = json.loads(values[0])
        elif values:
            differ.append(f"{label} ({', '.join(str(json.loads(v)) for v in values)})")
    text = _host_text(merged)
    return text + (f"; the observations differ on {', '.join(differ)}" if differ else "")


def _render_header(report: SessionReport, short: ShortIds) -> list[str]:
    session_id = report.session_id
    rows = report.header
    started = next((r for r in reversed(rows) if r["type"] == "session_started"), None)
    ended = next((r for r in reversed(rows) if r["type"] == "session_ended"), None)
    payload = load_json(started["payload"]) if started else {}
    title = one_line(payload.get("title")) or f"Session {session_id}"

    lines = [f"# {title}", "", f"- Session: {code(session_id)}"]
    model_parts = [
        part
        for part in (
            one_line(payload.get("model")) or None,
            f"dtype {payload['dtype']}" if payload.get("dtype") else None,
            f"tensor parallel {payload['tensor_parallel']}"
            if payload.get("tensor_parallel")
            else None,
        )
        if part
    ]
    lines.append(f"- Model: {', '.join(model_parts) if model_parts else 'not recorded'}")
    if payload.get("goal"):
        lines.append(f"- Goal: {one_line(payload['goal'])}")
    observations = [
        host
        for row in rows
        if row["type"] in ("session_started", "host_observed")
        for host in [load_json(row["host"]) or {}]
        if any(host.get(key) is not None for key, _ in _HOST_FIELDS)
    ]
    lines.append(f"- Hardware: {_hardware(observations) if observations else 'not recorded'}")
    software: list[str] = []
    for row in rows:
        if row["type"] != "host_observed":
            continue
        data = load_json(row["payload"]) or {}
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
        software += [v for v in versions if v not in software]
    if software:
        lines.append(f"- Software: {', '.join(software)}")
    if ended:
        summary = one_line((load_json(ended["payload"]) or {}).get("summary"))
        lines.append(f"- Ended: {summary or 'yes'}")
    return lines


def _render_decisions(report: SessionReport, short: ShortIds) -> list[str]:
    decisions = report.decisions
    lines = ["## Decisions", ""]
    if not decisions:
        return lines + [NONE_RECORDED]
    resolved = report.evidence

    for number, d in enumerate(decisions, start=1):
        lines.append(f"### {number}. {one_line(d['decision'])}")
        lines.append("")
        meta = [
            f"{code(short(d['event_id']))}",
            f"seq {d['seq']}",
            f"by {d['actor_kind']}:{d['actor_name']}",
        ]
        if d.get("candidate_id"):
            meta.append(f"candidate {code(d['candidate_id'])}")
        lines.append(f"*{' · '.join(meta)}*")
        lines.append("")
        lines.append("**Rationale:**")
        lines.append("")
        lines.append(quote(d["rationale"]) if d.get("rationale") else NONE_RECORDED)
        lines.append("")
        lines.append("**Alternatives:**")
        lines.append("")
        alternatives = d.get("alternatives") or []
        lines += [f"- {one_line(a)}" for a in alternatives] if alternatives else [NONE_RECORDED]
        lines.append("")
        lines.append("**Evidence:**")
        lines.append("")
        evidence = d.get("evidence_event_ids") or []
        if not evidence:
            lines.append(NONE_RECORDED)
        for event_id in evidence:
            cited = resolved.get(str(event_id).lower())
            if cited is None:
                lines.append(f"- {code(short(event_id))} — not in this ledger")
                continue
            summary = one_line(cited["summary"]) or cited["type"]
            flag = " — retracted" if cited["retracted"] else ""
            lines.append(
                f"- {code(short(event_id))} {cited['type']} (seq {cited['seq']}): {summary}{flag}"
            )
        lines.append("")
    return lines[:-1]


def _render_triage(report: SessionReport, short: ShortIds) -> list[str]:
    rows = report.triage
    table = markdown_table(
        ["Candidate", "Kind", "Priority", "Status", "Verdict", "Reason", "Latest evidence"],
        [
            [
                f"{code(r['candidate_id'])} {one_line(r['title'])}".strip(),
                r["kind"],
                r["priority"] or "—",
                r["status"],
                r["verdict"] or "—",
                clip(r["reason"]) or "—",
                _latest_evidence(r, short),
            ]
            for r in rows
        ],
    )
    return ["## Triage", "", table]


def _latest_evidence(row: dict[str, Any], short: ShortIds) -> str:
    if not row["latest_evidence_event_id"]:
        return "—"
    ref = code(short(row["latest_evidence_event_id"]))
    summary = one_line(row["latest_evidence"])
    if not summary or (
        row["latest_evidence_type"] == "candidate_triaged" and summary == one_line(row["reason"])
    ):
        return f"{row['latest_evidence_type']} ({ref})"  # the triage itself: its reason is in the Reason column
    return f"{row['latest_evidence_type']}: {clip(summary)} ({ref})"


def _render_flag_verdicts(report: SessionReport, short: ShortIds) -> list[str]:
    archs, rows = report.archs, report.flag_verdicts
    lines = ["## Flag verdicts", ""]
    if archs:
        lines += [f"The session's flags, on {', '.join(archs)} or on no arch in particular.", ""]
    else:
        lines += ["The session's flags; it records no arch: verdicts without an arch.", ""]
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
                code(r["setting"]),
                r["engine"] or "—",
                r["engine_version"] or "—",
                r["arch"] or "—",
                r["verdict"],
                r["basis"],
                " → ".join(r["history"] or []),
                f"{clip(r['summary']) or '—'} ({code(short(r['evidence_event_id']))})",
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
    items = load_json(evidence) if isinstance(evidence, str) else evidence
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
    return ", ".join(code(ref) for ref in refs[:_EVIDENCE_REFS]) + more


def _render_timeline(report: SessionReport, short: ShortIds, max_rows: int) -> list[str]:
    rows = report.timeline
    lines = ["## Timeline", ""]
    if not rows:
        return lines + [NONE_RECORDED]
    if len(rows) <= max_rows:
        occurred = any(r["occurred_at"] for r in rows)
        table = markdown_table(
            ["Seq", "Type", "Summary", "Event"] + (["Occurred (UTC)"] if occurred else []),
            [
                [
                    r["seq"],
                    r["type"],
                    one_line(r["summary"]) or f"({r['stream']})",
                    code(short(r["event_id"])),
                ]
                + ([utc(r["occurred_at"])] if occurred else [])
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
        f"{len(rows)} events (seq {rows[0]['seq']} to {rows[-1]['seq']}); counts per type "
        "(`tuneledger events --session SESSION` lists them):",
        "",
        table,
    ]


def _render_session(
    report: SessionReport, short: ShortIds, timeline_max_rows: int, plot: str | None
) -> str:
    from ledger.export.comparison import render_comparison
    from ledger.export.gpu import render_kernel_tunes, render_spec_trials

    parts = [
        _render_header(report, short),
        _render_decisions(report, short),
        render_verdicts(report),
        _render_triage(report, short),
        _render_flag_verdicts(report, short),
        render_comparison(report, plot),
        render_server_runs(report),
    ]
    # the GPU sections only where a session has them
    parts += [
        render_kernel_tunes(report.kernel_tunes, markdown_table),
        render_spec_trials(report.spec_trials, markdown_table),
    ]
    parts.append(_render_timeline(report, short, timeline_max_rows))
    return "\n\n".join("\n".join(part) for part in parts if part) + "\n"


# --- public API -------------------------------------------------------------------


def render_markdown(
    store: LedgerStore,
    *,
    session_id: str | None = None,
    timeline_max_rows: int = TIMELINE_MAX_ROWS,
    plot: str | None = None,
) -> str:
    """Render the decision log of one session (or of every session) as Markdown.

    The sections are the module docstring's. Throughput in tok/s with 1 decimal, latencies
    in ms with 2, changes as signed percents such as ``+0.33%``; event ids as prefixes of one
    length (``ShortIds``). Sessions appear in the order of their first event, separated by
    ``---``. A ledger without sessions renders a single "None recorded." document.

    Read-only and deterministic: the same ledger gives the same string.

    Args:
        store: the ledger to read.
        session_id: one session; ``None`` for all.
        timeline_max_rows: longest timeline listed event by event (default: always counted).
        plot: the file name the Pareto plot is (or will be) written to, linked from the
            document (``plot_file`` draws it); ``None``: no picture, the table only.

    Returns:
        The Markdown text, ending with a newline.

    Raises:
        NotFound: no ledger file at ``store.path``, or no (live) event carries
            ``session_id`` (the message names it).
        LedgerBusy: the file stayed locked by a writer.
    """
    return render_report(
        read_report(store, session_id), timeline_max_rows=timeline_max_rows, plot=plot
    )


def render_report(
    report: Report, *, timeline_max_rows: int = TIMELINE_MAX_ROWS, plot: str | None = None
) -> str:
    """Render a report (``ledger.read.model.read_report``) as Markdown: a pure function of the
    report, reading nothing (see ``render_markdown`` for the document's layout)."""
    if not report.sessions:
        return f"# tuneledger decision log\n\n{NONE_RECORDED}\n"
    short = ShortIds(report.event_ids)
    # one session's plot: with several sessions each front is a table (one file, one picture)
    plot = plot if len(report.sessions) == 1 else None
    text = "\n---\n\n".join(
        _render_session(session, short, timeline_max_rows, plot) for session in report.sessions
    )
    # Stored text is shown, never acted on: a note's ESC sequences would retitle or clear the
    # terminal that shows the export (cat, less -R) and hide in a rendered page.
    return escape_controls(text)
