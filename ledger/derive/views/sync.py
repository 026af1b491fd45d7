"""Concurrent decisions on two hosts of a sync hub, until a later one that saw both."""

from __future__ import annotations


def sync_conflicts() -> str:
    """Candidates triaged (or decided, or given a flag verdict) concurrently on two hosts,
    until a later triage that saw both (``ledger.sync.replicate``)."""
    return """
WITH me AS (
    SELECT coalesce(max(value) FILTER (WHERE key = 'ledger_id'), '') AS id,
           coalesce(max(value) FILTER (WHERE key = 'ledger_name'), 'this ledger') AS name
    FROM ledger_meta
),
pulled AS (SELECT seq, position FROM sync_events WHERE origin_ledger::VARCHAR <> (SELECT id FROM me)),
flag_candidates AS (
    SELECT DISTINCT (payload->>'candidate_id') AS candidate_id, (payload->>'flag') AS flag, arch
    FROM live_control WHERE type = 'candidate_proposed' AND (payload->>'flag') IS NOT NULL
),
acts AS (
    SELECT (payload->>'candidate_id') AS candidate_id, seq, event_id, type,
           coalesce(payload->>'status', 'decision') AS what, (payload->>'verdict') AS verdict
    FROM live_control
    WHERE type IN ('candidate_triaged', 'decision_recorded') AND (payload->>'candidate_id') IS NOT NULL
    UNION ALL
    SELECT f.candidate_id, h.seq, h.evidence_event_id, 'flag_verdict', 'flag verdict ' || h.verdict, h.verdict
    FROM flag_verdict_history h JOIN flag_candidates f ON f.flag = h.flag AND h.arch IS NOT DISTINCT FROM f.arch
),
placed AS (
    -- an event's origin and what it saw: its own ledger's earlier events, and the hub up to seen
    SELECT a.*, s.position,
           coalesce(s.origin_ledger::VARCHAR, me.id) AS origin,
           coalesce(s.origin_name, me.name) AS origin_name,
           coalesce(s.origin_seq, a.seq) AS origin_seq,
           CASE WHEN s.origin_ledger IS NULL OR s.origin_ledger::VARCHAR = me.id
                THEN coalesce(p.position, 0) ELSE s.seen_position END AS seen
    FROM acts a CROSS JOIN me
    LEFT JOIN sync_events s ON s.event_id = a.event_id
    ASOF LEFT JOIN pulled p ON a.seq > p.seq
),
frontier AS (
    SELECT x.* FROM placed x
    WHERE NOT EXISTS (
        SELECT 1 FROM placed y
        WHERE y.candidate_id = x.candidate_id AND y.event_id <> x.event_id
          AND ((y.origin = x.origin AND y.origin_seq > x.origin_seq) OR x.position <= y.seen)
    )
)
SELECT candidate_id, count(*) AS heads,
       string_agg(what || ' by ' || origin_name || ' (' || event_id::VARCHAR || ')', ' vs '
                  ORDER BY position NULLS LAST, seq) AS conflict,
       list(event_id ORDER BY position NULLS LAST, seq) AS event_ids
FROM frontier
GROUP BY candidate_id
HAVING count(DISTINCT origin) >= 2
   AND (count(DISTINCT origin) FILTER (WHERE type <> 'flag_verdict') >= 2
        OR count(DISTINCT verdict) >= 2
        OR (bool_or(type = 'decision_recorded') AND bool_or(type = 'flag_verdict')))"""
