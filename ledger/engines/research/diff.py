"""Two versions of an engine side by side: flags added, removed, and whose verdict changed, each
with the evidence from the version it holds for (never one version's verdict for another)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from .analysis import Research
from .reports import FlagReport


@dataclass
class VersionDiff:
    engine: str
    old: str
    new: str
    added: list[FlagReport] = field(default_factory=list)
    removed: list[tuple[FlagReport, list[str]]] = field(default_factory=list)  # with likely renames
    changed: list[tuple[FlagReport, FlagReport]] = field(default_factory=list)


def diff(old: Research, new: Research) -> VersionDiff:
    """``old`` and ``new`` researched with every flag (``research(..., everything=True)``)."""
    before = {r.flag: r for r in old.reports}
    after = {r.flag: r for r in new.reports}
    result = VersionDiff(new.index.engine, old.index.version, new.index.version)
    added_names = sorted(set(after) - set(before))
    result.added = [after[name] for name in added_names]
    for name in sorted(set(before) - set(after)):
        renamed = difflib.get_close_matches(name, added_names, n=2, cutoff=0.7)
        result.removed.append((before[name], renamed))
    for name in sorted(set(before) & set(after)):
        if before[name].verdict != after[name].verdict:
            result.changed.append((before[name], after[name]))
    return result


def to_json(d: VersionDiff) -> dict[str, Any]:
    def brief(report: FlagReport) -> dict[str, Any]:
        return {
            "version": report.version,
            "verdict": report.verdict,
            "confidence": report.confidence,
            "reason": report.reason,
            "evidence": [{"ref": e.ref, "text": e.text} for e in report.evidence],
        }

    return {
        "engine": d.engine,
        "old": d.old,
        "new": d.new,
        "added": [{"flag": r.flag, **brief(r)} for r in d.added],
        "removed": [
            {"flag": r.flag, "renamed_to": renamed, **brief(r)} for r, renamed in d.removed
        ],
        "changed": [{"flag": a.flag, "old": brief(a), "new": brief(b)} for a, b in d.changed],
    }


def to_text(d: VersionDiff) -> str:
    lines = [
        f"{d.engine} {d.old} -> {d.new}: {len(d.added)} added, {len(d.removed)} removed, "
        f"{len(d.changed)} with another verdict"
    ]
    for report in d.added:
        lines.append(
            f"+ --{report.flag}  {report.verdict} ({report.confidence}) in {d.new}: {report.reason}"
        )
    for report, renamed in d.removed:
        hint = f" (renamed to {', '.join('--' + n for n in renamed)}?)" if renamed else ""
        lines.append(f"- --{report.flag}{hint}")
    for a, b in d.changed:
        lines.append(
            f"~ --{a.flag}  {a.verdict} ({a.confidence}) in {d.old} -> "
            f"{b.verdict} ({b.confidence}) in {d.new}"
        )
        lines.append(f"    {d.old}: {a.reason}")
        if a.evidence:
            lines.append(f"      {a.evidence[-1].ref}  {a.evidence[-1].text}")
        lines.append(f"    {d.new}: {b.reason}")
        if b.evidence:
            lines.append(f"      {b.evidence[-1].ref}  {b.evidence[-1].text}")
    return "\n".join(lines)
