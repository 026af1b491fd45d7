"""The decision log."""

from __future__ import annotations


def decisions() -> str:
    """The decision log."""
    return """
SELECT seq, event_id, session_id, recorded_at, actor_kind, actor_name,
       (payload->>'decision') AS decision, (payload->>'rationale') AS rationale,
       CAST(payload->'alternatives' AS VARCHAR[]) AS alternatives,
       CAST(payload->'evidence_event_ids' AS VARCHAR[]) AS evidence_event_ids,
       (payload->>'candidate_id') AS candidate_id, source
FROM live_control WHERE type = 'decision_recorded'"""
