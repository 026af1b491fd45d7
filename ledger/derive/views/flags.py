"""Flag verdicts: every verdict given on a flag (researched, or a finding), and the latest one."""

from __future__ import annotations

from ledger.derive.views.common import sql_list
from schemas.vocab import NO_EFFECT_VERDICTS


def flag_verdict_history() -> str:
    """Every verdict ever given on a flag, with its basis."""
    no_effect = sql_list(NO_EFFECT_VERDICTS)
    return f"""
WITH v AS (
    SELECT (payload->>'flag') AS flag, NULL::VARCHAR AS value,
           coalesce(payload->>'engine', host_engine) AS engine,
           coalesce(payload->>'engine_version', host_engine_version) AS engine_version,
           coalesce(payload->>'arch', arch) AS arch, (payload->>'verdict') AS verdict,
           coalesce(payload->>'basis', 'researched') AS basis,
           -- how far research trusts its verdict (flag_researched v4): proven, likely, unknown
           (payload->>'verdict_confidence') AS confidence,
           -- research read from the source says why in notes; a person's reading says what it does
           CASE WHEN payload->>'basis' = 'source' THEN payload->>'notes'
                ELSE coalesce(payload->>'what_it_does', (payload->>'notes')) END AS summary,
           (payload->'evidence') AS evidence,
           seq, event_id, session_id, recorded_at, sync_order
    FROM live_control WHERE type = 'flag_researched'
    UNION ALL
    SELECT (payload->>'flag'), (payload->>'value'), coalesce(payload->>'engine', host_engine),
           coalesce(payload->>'engine_version', host_engine_version),
           arch, (payload->>'verdict'), (payload->>'basis'), NULL::VARCHAR, (payload->>'message'),
           (payload->'evidence'), seq, event_id, session_id, recorded_at, sync_order
    FROM live_control
    WHERE type = 'finding_recorded' AND (payload->>'flag') IS NOT NULL AND (payload->>'verdict') IS NOT NULL
)
SELECT flag, value, engine, engine_version, arch, verdict, basis, confidence,
       verdict IN ({no_effect}) AS no_effect, summary, evidence,
       event_id AS evidence_event_id, seq, session_id, recorded_at, sync_order
FROM v"""


def flag_verdicts() -> str:
    """The latest verdict per flag (and value, for a verdict on one value), engine,
    engine_version and arch."""
    return """
SELECT flag, value, flag || coalesce('=' || value, '') AS setting,
       engine, engine_version, arch, verdict, basis, confidence, no_effect, summary, evidence,
       evidence_event_id, seq, session_id, recorded_at,
       count(*) OVER w AS findings, sync_order,
       list(verdict || ' (' || basis || ')' ORDER BY sync_order) OVER w AS history
FROM flag_verdict_history
WINDOW w AS (PARTITION BY flag, value, engine, engine_version, arch)
QUALIFY row_number() OVER (PARTITION BY flag, value, engine, engine_version, arch ORDER BY sync_order DESC) = 1"""
