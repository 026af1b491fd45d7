"""The ledger's memory put to use: a run that sets a flag already known to do nothing gets a finding.

When a server run's flags include one that ``flag_verdicts`` already holds a no-effect verdict
for (dead-code, no-op, not-activated, no-measurable-change) on the same engine, arch (and engine
version, when the run's is known), ``known_no_effect_findings`` says so, citing the earlier
verdict's event. A verdict ``tuneledger research`` read from the source (basis ``source``) holds
for its engine version only; its dead code holds on every arch. The query is ``known_no_effect`` (over the ``flag_verdicts`` view); the importer and the server
runner both call ``remembered_findings``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemas import Evidence, FindingRecorded, ServerStarted

if TYPE_CHECKING:
    from ledger.store import LedgerStore


def set_flags(flags: dict[str, Any]) -> dict[str, Any]:
    """The flags a run really sets, from its ``ServerStarted.flags``.

    An imported log lists every server arg, defaults included, so a value counts as set
    when it is not off or empty (None, False, "", [], {}) and, for a number, is not 0 or 1
    (the defaults of SGLang's counts and steps, e.g. ``num_continuous_decode_steps=1``).
    """
    chosen = {}
    for flag, value in flags.items():
        if value is None or value is False or value in ("", "None") or value == [] or value == {}:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value in (0, 1):
            continue
        chosen[flag] = value
    return chosen


def known_no_effect_findings(
    started: ServerStarted, verdicts: list[dict[str, Any]]
) -> list[FindingRecorded]:
    """One ``known-no-effect`` finding per flag of ``started`` with a verdict in ``verdicts``
    (rows of ``known_no_effect``), citing the verdict's event (evidence kind ``event``)."""
    flags = set_flags(started.flags)
    out = []
    for row in verdicts:
        flag = row["flag"]
        if flag not in flags:
            continue
        if row.get("value") is not None and str(flags[flag]) != row["value"]:
            continue  # a verdict on another value of the flag (another attention backend)
        version = (
            f"{row['engine']} {row['engine_version']}"
            if row.get("engine_version")
            else row.get("engine") or "?"
        )
        run_version = started.host.engine_version if started.host else None
        if row.get("engine_version") and not run_version:
            version += " (this run's engine version is not known)"
        where = (
            "every arch"
            if row.get("basis") == "source" and row["verdict"] == "dead-code"
            else row["arch"]
        )
        summary = f": {row['summary']}" if row.get("summary") else ""
        out.append(
            FindingRecorded(
                kind="known-no-effect",
                flag=flag,
                basis="log",
                server_run_id=started.run_id,
                session_id=started.session_id,
                engine=started.engine,
                message=f"--{flag} {flags[flag]!r} is set, but the ledger already holds '{row['verdict']}' "
                f"({row['basis']}) for it on {where}, {version}{summary}",
                evidence=[
                    Evidence(
                        kind="event",
                        ref=row["evidence_event_id"],
                        text=f"{row['verdict']} ({row['basis']})",
                    )
                ],
            )
        )
    return out


#: The no-effect verdicts (``flag_verdicts.no_effect``: no-op, dead-code, not-activated,
#: no-measurable-change) already held for some flags on one engine and arch. Parameters:
#: flags (CLI spelling), engine, arch, engine version (NULL: any version), the run's own
#: ``server_started`` event id (verdicts recorded after it, or its own findings, do not count).
KNOWN_NO_EFFECT_SQL = """
SELECT flag, value, verdict, basis, engine, engine_version, arch, summary,
       CAST(evidence_event_id AS VARCHAR) AS evidence_event_id, seq
FROM flag_verdicts
WHERE no_effect AND list_contains(?::VARCHAR[], flag)
  AND engine IS NOT DISTINCT FROM ?
  -- dead code read from the source is dead on every arch; anything else holds for its arch
  AND (arch = ?::VARCHAR OR (basis = 'source' AND verdict = 'dead-code'))
  -- a verdict read from one version's source never stands for another version
  AND (?::VARCHAR IS NULL OR engine_version IS NULL OR engine_version = ?::VARCHAR)
  AND seq < coalesce((SELECT min(seq) FROM events WHERE event_id = ?::UUID), 9223372036854775807)
ORDER BY flag, seq"""


def known_no_effect(
    store: LedgerStore,
    flags: list[str],
    *,
    engine: str | None,
    engine_version: str | None,
    arch: str | None,
    before_event_id: str | None = None,
) -> list[dict[str, Any]]:
    """The ledger's no-effect verdicts for ``flags`` on ``engine`` / ``arch`` and ``engine_version``
    (a verdict or a run without a version matches any version): one dict per flag with the ``flag_verdicts`` columns
    ``flag, value, verdict, basis, engine, engine_version, arch, summary, evidence_event_id, seq``.

    ``before_event_id``: when that event (the run's ``server_started``) is already stored, only
    verdicts recorded before it count, so that re-importing a run adds nothing.
    ``store`` is a ``LedgerStore`` (its ``query_arrow``). No flags or no ledger file: ``[]``; no
    arch: only the verdicts that hold on every arch (dead code read from the source).
    """
    if not flags or not store.path.exists():
        return []
    table = store.query_arrow(
        KNOWN_NO_EFFECT_SQL,
        [sorted(set(flags)), engine, arch, engine_version, engine_version, before_event_id],
    )
    return list(table.to_pylist())


def remembered_findings(store: Any, started: ServerStarted) -> list[FindingRecorded]:
    """``known_no_effect_findings`` for ``started`` against the verdicts in ``store`` (a
    ``LedgerStore``) for its engine, arch and engine version."""
    host = started.host
    arch = host.compute_capability if host else None
    verdicts = known_no_effect(
        store,
        list(set_flags(started.flags)),
        engine=started.engine,
        engine_version=host.engine_version if host else None,
        arch=arch,
        before_event_id=str(started.event_id),
    )
    return known_no_effect_findings(started, verdicts)
