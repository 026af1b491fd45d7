"""Candidate rewrites of slow views, checked for identical results and timed.

Each rewrite is compared with the current view (from ``ledger.views.view_sql``)
on the benchmark's ledger: the two results must be equal as multisets
(``EXCEPT ALL`` both ways is empty, same row count), then both are timed
(median of ``--reps``, fully fetched as Arrow). Nothing is written to the
ledger: the rewrites run as subqueries in a read-only connection.

    .venv/bin/python bench/view_rewrites.py --ledger /tmp/tuneledger-bench/ledger-1000000-g1.duckdb

Written against the views of VIEWS_VERSION 11 (views over ``events`` only, before
the projection tables); on later views the rewrites may no longer apply (their
asserts say so).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa

from ledger.views import view_sql

VIEWS = view_sql()


def parse_once(select: str, source: str, column: str = "payload", alias: str = "_p") -> str:
    """Rewrite ``select`` so each row's ``column`` JSON is parsed once.

    Every ``column->>'a'`` / ``column->'a'->>'b'`` becomes an element of one
    ``json_extract_string(column, [paths])`` list computed in a subquery over
    ``source``; ``->>`` is ``json_extract_string``, so values are identical.
    """
    pattern = re.compile(rf"\({column}((?:->'\w+')*)->>'(\w+)'\)|{column}((?:->'\w+')*)->>'(\w+)'")
    paths: list[str] = []

    def repl(match: re.Match[str]) -> str:
        prefix, last = (match.group(1), match.group(2)) if match.group(2) else (match.group(3), match.group(4))
        parts = re.findall(r"'(\w+)'", prefix or "") + [last]
        path = "$." + ".".join(parts)
        if path not in paths:
            paths.append(path)
        return f"{alias}[{paths.index(path) + 1}]"

    body = pattern.sub(repl, select)
    path_list = ", ".join(f"'{p}'" for p in paths)
    return body.replace(f"FROM {source}", f"FROM (SELECT *, json_extract_string({column}, [{path_list}]) AS {alias} FROM {source})", 1)


def rewritten() -> dict[str, tuple[str, Any]]:
    """{label: (original query, rewritten query)} — each pair must give the same rows."""
    out: dict[str, tuple[str, str]] = {}

    # event_log / timeline: parse each payload once per row instead of 2-4 times (and host once).
    event_log = parse_once(VIEWS["event_log"], "all_events")
    event_log = parse_once(event_log, "all_events", column="host", alias="_h")
    out["event_log (parse payload once)"] = ("SELECT * FROM event_log", f"SELECT * FROM ({event_log})")
    timeline = f"SELECT * EXCLUDE (retracted) FROM ({event_log}) WHERE NOT retracted"
    out["timeline (parse payload once)"] = ("SELECT * FROM timeline", f"SELECT * FROM ({timeline})")

    # The TUI's newest-200 query. DuckDB computes every row's summary before its Top-N (late
    # materialisation does not cross the retraction join), so: find the floor seq of the 200
    # newest live events first (touches no JSON), then pass it as a constant — the filter reaches
    # the table scan and only ~200 summaries are computed. Two statements, one connection.
    tui = "SELECT * FROM timeline ORDER BY seq DESC LIMIT 200"

    def tui_two_step(con: duckdb.DuckDBPyConnection) -> pa.Table:
        floor = con.sql("SELECT min(seq) FROM (SELECT seq FROM live_events ORDER BY seq DESC LIMIT 200)").fetchall()[0][0]
        return con.sql("SELECT * FROM timeline WHERE seq >= $1 ORDER BY seq DESC LIMIT 200",
                       params=[floor or 0]).to_arrow_table()

    out["timeline TUI top-200 (two-step: floor seq, then constant filter)"] = (tui, tui_two_step)
    out["timeline TUI top-200 (join on the 200 newest seqs)"] = (tui, """
SELECT t.* FROM (SELECT seq FROM live_events ORDER BY seq DESC LIMIT 200) k
JOIN timeline t USING (seq) ORDER BY seq DESC""")

    # board: candidate links only come from event types that have a candidate_id field
    # (the models forbid extra fields), so filter on type before touching the JSON.
    link_types = ("candidate_triaged", "flag_researched", "kernel_tune_started", "spec_decoding_trial_completed",
                  "patch_applied", "decision_recorded", "note_added")
    type_list = ", ".join(f"'{t}'" for t in link_types)
    # The current board is not deterministic: in latest_link, a flag_researched event that names
    # the candidate appears twice with the same seq (as a direct link and as a flag verdict), and
    # row_number() ORDER BY seq DESC picks either. Both sides get the same tie-breaker here.
    tie = ("QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY seq DESC) = 1",
           "QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY seq DESC, type DESC) = 1")
    board_det = VIEWS["board"].replace(*tie)
    assert board_det != VIEWS["board"], "board tie-breaker did not apply"
    board = board_det.replace(
        "WHERE (payload->>'candidate_id') IS NOT NULL AND type <> 'candidate_proposed'",
        f"WHERE type IN ({type_list}) AND (payload->>'candidate_id') IS NOT NULL",
    )
    assert board != board_det, "board rewrite did not apply"
    out["board (links: filter type first; both with seq tie-breaker)"] = (f"SELECT * FROM ({board_det})", f"SELECT * FROM ({board})")

    # all_events: the host JSON parsed once for arch, host_engine, host_engine_version.
    all_events = parse_once(VIEWS["all_events"].replace("e.host->>", "host->>"), "events e", column="host", alias="_h")
    all_events = all_events.replace("AS _h FROM events e)", "AS _h FROM events) e")
    out["all_events (parse host once)"] = ("SELECT * FROM all_events", f"SELECT * FROM ({all_events})")
    return out


def fetch(con: duckdb.DuckDBPyConnection, query: str | Callable[[duckdb.DuckDBPyConnection], pa.Table]) -> pa.Table:
    return query(con) if callable(query) else con.sql(query).to_arrow_table()


def timed(con: duckdb.DuckDBPyConnection, sql: Any, reps: int) -> tuple[float, int]:
    times, rows = [], 0
    fetch(con, sql)  # warm-up
    for _ in range(reps):
        t0 = time.perf_counter()
        rows = fetch(con, sql).num_rows
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def same_rows(con: duckdb.DuckDBPyConnection, a: str, b: Any) -> bool:
    """Equal as multisets; ORDER BY ... LIMIT queries must give equal tables, in order."""
    if "LIMIT" in a or callable(b):
        return fetch(con, a).equals(fetch(con, b))
    diff = con.sql(f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b})) UNION ALL SELECT count(*) FROM (({b}) EXCEPT ALL ({a}))").fetchall()
    counts = con.sql(f"SELECT (SELECT count(*) FROM ({a})), (SELECT count(*) FROM ({b}))").fetchall()[0]
    return diff == [(0,), (0,)] and counts[0] == counts[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", default="/tmp/tuneledger-bench/ledger-1000000-g1.duckdb")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", help="substring of the rewrite labels to run")
    parser.add_argument("--show-sql", action="store_true")
    args = parser.parse_args()
    con = duckdb.connect(args.ledger, read_only=True)
    # Compare against the views of this checkout (the file may hold an older VIEWS_VERSION):
    # temporary views shadow the stored ones for the session and write nothing.
    for name, select in VIEWS.items():
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {select}")
    print("| rewrite | identical | current ms | rewritten ms | rows |\n|---|---|---|---|---|")
    for label, (old, new) in rewritten().items():
        if args.only and args.only not in label:
            continue
        if args.show_sql and isinstance(new, str):
            print(f"\n-- {label}\n{new}\n")
        ok = same_rows(con, old, new)
        t_old, rows = timed(con, old, args.reps)
        t_new, _ = timed(con, new, args.reps)
        print(f"| {label} | {ok} | {t_old * 1000:.0f} | {t_new * 1000:.0f} | {rows:,} |", flush=True)


if __name__ == "__main__":
    main()
