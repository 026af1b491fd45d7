"""The log as views: every event (upcast), the live ones, the control events the other views
read, and the timeline with one-line summaries."""

from __future__ import annotations

from schemas.upcasting import sql_upcast_expression


def all_events() -> str:
    """Every event, payload upcast to the current version, with its ``retracted`` flag."""
    return f"""
SELECT e.seq, e.event_id, e.type, e.stream, e.stream_version, e.recorded_at, e.occurred_at,
       e.actor_kind, e.actor_name, e.session_id, e.causation_id, e.correlation_id, e.source, e.host,
       (e.host->>'compute_capability') AS arch,
       (e.host->>'engine') AS host_engine,
       (e.host->>'engine_version') AS host_engine_version,
       {sql_upcast_expression("e.payload")} AS payload,
       r.event_id IS NOT NULL AS retracted
FROM events e LEFT JOIN retractions r ON r.event_id = e.event_id"""


def live_events() -> str:
    """``all_events`` without retracted events."""
    return """
SELECT * EXCLUDE (retracted) FROM all_events WHERE NOT retracted"""


def live_control() -> str:
    """The projection ``control_events`` without retracted events, in sync order: what the
    views read."""
    return """
SELECT c.*,
       -- "latest" means latest in sync order: the hub position where the event has one, else
       -- after every synced event in local seq order; hosts synced to one hub position agree
       coalesce(so.position, 4611686018427387904 + c.seq) AS sync_order
FROM control_events c LEFT JOIN sync_events so ON so.event_id = c.event_id
ANTI JOIN retractions r ON r.event_id = c.event_id"""


def event_log() -> str:
    """Every event with a one-line ``summary`` and its ``retracted`` flag."""
    return """
SELECT s.seq, s.recorded_at, s.session_id, s.type, s.stream, s.actor_kind, s.actor_name, s.arch,
       s.summary, s.event_id, s.causation_id, s.correlation_id, s.source,
       r.event_id IS NOT NULL AS retracted, s.occurred_at
FROM event_summaries s LEFT JOIN retractions r ON r.event_id = s.event_id"""


def timeline() -> str:
    """``event_log`` without retracted events."""
    return """
SELECT * EXCLUDE (retracted) FROM event_log WHERE NOT retracted"""
