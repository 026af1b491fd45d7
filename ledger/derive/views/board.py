"""The board: every candidate with its status, evidence and benchmark delta."""

from __future__ import annotations

from ledger.derive.projections import MEASUREMENT_TYPES
from ledger.derive.views.common import PROPOSED, sql_list
from schemas import EVENT_TYPES

#: The metric of the board's benchmark column (``board_deltas``).
BOARD_DELTA_METRIC = "output_throughput"


#: The board's evidence: every registered type naming its candidate by candidate_id (the
#: proposal itself and the measurements, kept out of live_control, aside). One of these events
#: changes the board only when it names a candidate (``ledger.read.view_sources``).
LINKED_TYPES: tuple[str, ...] = tuple(
    name
    for name, cls in EVENT_TYPES.items()
    if "candidate_id" in cls.candidate_link
    and name != "candidate_proposed"
    and name not in MEASUREMENT_TYPES
)


def board() -> str:
    """Every candidate's current status, verdict, priority, reason, latest evidence and
    engine version (the proposal's, else that of its flag's latest verdict). The verdict of a
    candidate whose flag has one on its arch is ``flag_verdicts``' (what ``flag_verdicts``
    says, the board says); else its latest triage's."""
    linked_types = sql_list(LINKED_TYPES)
    return f"""
WITH proposed AS ({PROPOSED}),
stream_heads AS (
    -- the candidate stream's version (retracted events count: they are still in the stream),
    -- what a triage passes as expected_version
    SELECT stream, max(stream_version) AS stream_version FROM control_events
    WHERE stream LIKE 'candidate:%' GROUP BY stream
),
triage AS (
    SELECT (payload->>'candidate_id') AS candidate_id, (payload->>'status') AS status,
           (payload->>'reason') AS reason, (payload->>'verdict') AS verdict, seq AS triaged_seq
    FROM live_control WHERE type = 'candidate_triaged'
    QUALIFY row_number() OVER (PARTITION BY (payload->>'candidate_id') ORDER BY sync_order DESC) = 1
),
links AS (
    SELECT (payload->>'candidate_id') AS candidate_id, seq, sync_order, event_id, type,
           coalesce(payload->>'text', (payload->>'decision'), (payload->>'what_it_does'),
                    (payload->>'description'), (payload->>'message'), (payload->>'reason'),
                    (payload->>'summary'), (payload->>'outcome'), (payload->>'title')) AS summary
    FROM live_control
    WHERE type IN ({linked_types})
      AND (payload->>'candidate_id') IS NOT NULL
    UNION ALL
    SELECT p.candidate_id, h.seq, h.sync_order, h.evidence_event_id, 'flag verdict (' || h.basis || ')',
           h.verdict || coalesce(': ' || h.summary, '')
    FROM flag_verdict_history h JOIN proposed p ON p.flag = h.flag AND h.arch IS NOT DISTINCT FROM p.arch
),
latest_link AS (
    SELECT * FROM links
    -- a flag_researched naming its candidate is linked twice with one seq: break the tie
    QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY sync_order DESC, type DESC) = 1
)
SELECT p.candidate_id, p.session_id, p.kind, p.title, p.flag, p.priority,
       CASE WHEN k.candidate_id IS NOT NULL THEN 'conflicting' ELSE coalesce(t.status, 'proposed') END AS status,
       -- one derivation of a flag's verdict: a candidate whose flag has a verdict on its arch
       -- shows flag_verdicts' (a later measured finding is not hidden behind an earlier
       -- triage's verdict, nor the reverse); the triage's verdict only where there is none
       CASE WHEN fv.flag IS NOT NULL THEN fv.verdict ELSE t.verdict END AS verdict,
       t.reason, p.hypothesis, p.arch,
       -- no engine version on the proposal (no host): the one the flag's verdict was given at
       coalesce(p.engine_version, fv.engine_version) AS engine_version, h.stream_version,
       l.type AS latest_evidence_type, l.summary AS latest_evidence,
       l.event_id AS latest_evidence_event_id,
       greatest(p.proposed_seq, coalesce(t.triaged_seq, 0), coalesce(l.seq, 0)) AS updated_seq,
       p.proposed_seq, p.proposed_at, k.conflict
FROM proposed p
LEFT JOIN sync_conflicts k USING (candidate_id)
LEFT JOIN triage t USING (candidate_id)
LEFT JOIN latest_link l USING (candidate_id)
LEFT JOIN stream_heads h ON h.stream = 'candidate:' || p.candidate_id
LEFT JOIN (
    -- the flag's latest verdict on the candidate's arch, and the engine version it was given at
    SELECT flag, arch, verdict, engine_version FROM flag_verdicts
    QUALIFY row_number() OVER (PARTITION BY flag, arch ORDER BY sync_order DESC) = 1
) fv ON fv.flag = p.flag AND fv.arch IS NOT DISTINCT FROM p.arch"""


def board_deltas() -> str:
    """The board's benchmark column: per candidate, the output_throughput change of its
    latest related configuration at that configuration's highest concurrency (the link rule
    below)."""
    return f"""
WITH candidates AS ({PROPOSED}),
made_for AS (
    -- runs recorded for a candidate (plans, run bench --candidate): their configuration is that
    -- candidate's alone
    SELECT DISTINCT session_id, config_name, candidate_id FROM benchmarks
    WHERE candidate_id IS NOT NULL AND config_name IS NOT NULL
),
config_flags AS (
    -- the flags each configuration's server runs started with (server_runs.flags, read from the
    -- server_started events directly: the view's other columns are not needed here)
    SELECT DISTINCT session_id, (payload->>'config_name') AS config_name,
           unnest(coalesce(json_keys(payload->'flags'), [])) AS flag
    FROM live_control WHERE type = 'server_started' AND (payload->>'config_name') IS NOT NULL
),
deltas AS (
    SELECT session_id, config_name, concurrency, change_pct, verdict,
           max(seq) OVER (PARTITION BY session_id, config_name) AS last_seq
    FROM benchmark_deltas WHERE metric = '{BOARD_DELTA_METRIC}'
    QUALIFY row_number() OVER (PARTITION BY session_id, config_name
                               ORDER BY coalesce(concurrency, 0) DESC, seq DESC) = 1
),
related AS (
    SELECT c.candidate_id, d.*
    FROM candidates c JOIN deltas d ON d.session_id IS NOT DISTINCT FROM c.session_id
    WHERE CASE
        WHEN EXISTS (SELECT 1 FROM made_for m WHERE m.session_id IS NOT DISTINCT FROM d.session_id
                                                AND m.config_name = d.config_name)
        THEN EXISTS (SELECT 1 FROM made_for m WHERE m.session_id IS NOT DISTINCT FROM d.session_id
                                                AND m.config_name = d.config_name
                                                AND m.candidate_id = c.candidate_id)
        ELSE d.config_name = c.candidate_id
             OR d.config_name = substr(c.candidate_id, strpos(c.candidate_id, ':') + 1)
             OR (coalesce(c.flag, '') <> '' AND EXISTS (
                    SELECT 1 FROM config_flags f WHERE f.session_id IS NOT DISTINCT FROM d.session_id
                                                   AND f.config_name = d.config_name AND f.flag = c.flag))
    END
)
SELECT candidate_id, config_name AS delta_config, concurrency AS delta_concurrency,
       change_pct AS delta_pct, verdict AS delta_verdict, last_seq AS delta_seq
FROM related
QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY last_seq DESC, config_name) = 1"""
