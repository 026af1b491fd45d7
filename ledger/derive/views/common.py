"""SQL fragments more than one view family uses."""

from __future__ import annotations

#: Every candidate as last proposed (a re-proposal replaces the first): the board's rows.
PROPOSED = """
    SELECT (payload->>'candidate_id') AS candidate_id, session_id, seq AS proposed_seq,
           recorded_at AS proposed_at, (payload->>'kind') AS kind, (payload->>'title') AS title,
           (payload->>'flag') AS flag, (payload->>'priority') AS priority,
           (payload->>'hypothesis') AS hypothesis, arch, host_engine_version AS engine_version
    FROM live_control WHERE type = 'candidate_proposed'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'candidate_id') ORDER BY sync_order DESC) = 1
"""


def sql_list(values: tuple[str, ...]) -> str:
    """``values`` as the items of an SQL list of strings (``'a', 'b'``)."""
    return ", ".join(f"'{v}'" for v in values)
