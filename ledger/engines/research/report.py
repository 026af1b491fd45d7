"""A research result for people (text) and for agents (JSON): the same facts in both."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .analysis import Research
from .reports import FlagReport
from .values import Unknown, show

#: Evidence lines shown per flag in text (the JSON has them all).
TEXT_EVIDENCE = 4


def _value(value: Any) -> Any:
    if isinstance(value, Unknown):
        return {"unknown": value.why}
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    return show(value)


def flag_json(report: FlagReport) -> dict[str, Any]:
    definition = report.definition
    return {
        "flag": report.flag,
        "field": report.field,
        "verdict": report.verdict,
        "confidence": report.confidence,
        "reason": report.reason,
        "given": report.is_given,
        "value_given": _value(report.given) if report.is_given else None,
        "value_resolved": _value(report.resolved),
        "conditions": list(report.conditions),
        "default": definition.default_text,
        "type": definition.type_text,
        "help": definition.help,
        "deprecated": definition.deprecated,
        "namespace": definition.namespace,
        "options": list(definition.options),
        "evidence": [{"ref": e.ref, "text": e.text} for e in report.evidence],
        "unresolved": list(report.unresolved),
        "overrides": [
            {
                "ref": str(o.site),
                "value": o.value,
                "conditions": o.conditions,
                "warning": o.warning,
                "applies": o.applies,
            }
            for o in report.overrides
        ],
        "couplings": [
            {
                "ref": str(c.site),
                "sets": c.value,
                "conditions": c.conditions,
                "warning": c.warning,
                "applies": c.applies,
            }
            for c in report.couplings
        ],
    }


def to_json(result: Research) -> dict[str, Any]:
    index, target = result.index, result.target
    return {
        "engine": index.engine,
        "version": index.version,
        "source_sha256": index.key,
        "target": {
            "arch": target.arch,
            "cuda": target.cuda,
            "model_architecture": target.model.architecture if target.model else None,
            "model_config": target.model.source if target.model else None,
            "top_k": target.model.top_k if target.model else None,
            "num_experts": target.model.num_experts if target.model else None,
            "tp_size": target.tp,
            "env": dict(target.env),
        },
        "resolution": {
            "walked": result.resolution.entry,
            "complete": result.resolution.complete,
        },
        "flags_defined": len(index.cli_flags()),
        "counts": dict(Counter(r.verdict for r in result.reports)),
        "confidence_counts": dict(Counter(r.confidence for r in result.reports)),
        "flags": [flag_json(r) for r in result.reports],
        "unknown_flags": [{"flag": g.spelling, "nearest": g.nearest} for g in result.unknown_flags],
        "unparsed_files": sorted(index.errors),
        "notes": list(result.notes),  # what could not be checked (a found wheel's hash offline)
    }


def to_text(result: Research, evidence: int = TEXT_EVIDENCE) -> str:
    index, target = result.index, result.target
    lines = [
        f"{index.engine} {index.version} (sha256 {index.key[:12]}) on {target.describe()}",
        f"{len(index.cli_flags())} flags defined; "
        + ", ".join(
            f"{n} {v}" for v, n in sorted(Counter(r.verdict for r in result.reports).items())
        ),
    ]
    if not result.resolution.complete:
        lines.append("note: the argument resolution was too long to follow to its end")
    lines.extend(f"note: {note}" for note in result.notes)
    ordered = sorted(result.reports, key=lambda r: (not r.is_given, r.verdict, r.flag))
    for report in ordered:
        given = f" (given {show(report.given)})" if report.is_given else ""
        deprecated = " [deprecated]" if report.definition.deprecated else ""
        lines.append("")
        lines.append(f"--{report.flag}  {report.verdict} ({report.confidence}){given}{deprecated}")
        lines.append(f"    {report.reason}")
        if report.unresolved:
            more = f" (+{len(report.unresolved) - 1} more)" if len(report.unresolved) > 1 else ""
            lines.append(f"    not followed: {report.unresolved[0]}{more}")
        for item in report.evidence[:evidence]:
            lines.append(f"    {item.ref}  {item.text}")
        if len(report.evidence) > evidence:
            lines.append(f"    … {len(report.evidence) - evidence} more (--json)")
    if result.unknown_flags:
        lines.append("")
        for flag in result.unknown_flags:
            near = (
                f" (nearest: {', '.join('--' + n for n in flag.nearest)})" if flag.nearest else ""
            )
            lines.append(f"--{flag.spelling}  not defined in {index.engine} {index.version}{near}")
    return "\n".join(lines)
