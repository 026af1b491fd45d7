"""Why views are slow through short-lived connections, and what a different layout gives.

Every ``LedgerStore`` operation opens the file anew, so every query starts with
an empty DuckDB buffer pool and reads its blocks again. A view over a sparse
event type (flag research, findings, retractions) then reads almost every block
of the ``payload`` column, because those events are interleaved in ``seq``
order with ~88% large ``benchmark_completed`` payloads.

This script copies the benchmark ledger into two experimental files and times
each query on a fresh connection (as ``store.query_arrow`` does):

- ``clustered``: the same rows, physically ordered by ``(type, seq)`` (what a
  compaction step, or sorting each import batch by type, would give);
- ``clustered+typed``: additionally a ``bench_runs`` table holding the
  ``benchmarks`` view's rows typed (what the store could write in the append
  transaction, as it does for ``bench_samples``), with ``benchmarks`` and
  ``benchmark_deltas`` reading it.

It checks that every view gives the same rows in all files (multiset equality).

    .venv/bin/python bench/layout_experiment.py --ledger /tmp/tuneledger-bench/ledger-1000000-g1.duckdb

Written against the views of VIEWS_VERSION 11 (views over ``events`` only, before
the projection tables); on later views the rewrites may no longer apply (their
asserts say so).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import duckdb

from ledger.views import VIEW_NAMES, view_sql


def build(src: Path, dst: Path, typed: bool) -> float:
    t0 = time.perf_counter()
    for p in (dst, Path(str(dst) + ".wal")):
        p.unlink(missing_ok=True)
    con = duckdb.connect(str(dst))
    con.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
    con.execute("CREATE TABLE events AS SELECT * FROM src.events ORDER BY type, seq")
    con.execute("CREATE TABLE ledger_meta AS SELECT * FROM src.ledger_meta")
    con.execute("CREATE TABLE bench_samples AS SELECT * FROM src.bench_samples")
    con.execute("DETACH src")
    views = view_sql()
    for name, select in views.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
    if typed:
        con.execute("CREATE TABLE bench_runs AS SELECT * FROM benchmarks ORDER BY seq")
        con.execute("CREATE OR REPLACE VIEW benchmarks AS SELECT * FROM bench_runs")
        con.execute(f"CREATE OR REPLACE VIEW benchmark_deltas AS {views['benchmark_deltas']}")
    con.close()
    return time.perf_counter() - t0


def cold(path: Path, sql: str, reps: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(reps):
        t0 = time.perf_counter()
        con = duckdb.connect(str(path), read_only=True)
        rows = con.sql(sql).to_arrow_table().num_rows
        con.close()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def same(a: Path, b: Path, view: str) -> bool:
    con = duckdb.connect(str(b), read_only=True)
    con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    # the board view has a tie in latest_link (see view_rewrites.py): compare without its latest_* columns
    cols = "* EXCLUDE (latest_evidence_type, latest_evidence, latest_evidence_event_id)" if view == "board" else "*"
    q = (f"SELECT count(*) FROM ((SELECT {cols} FROM a.{view}) EXCEPT ALL (SELECT {cols} FROM {view})) "
         f"UNION ALL SELECT count(*) FROM ((SELECT {cols} FROM {view}) EXCEPT ALL (SELECT {cols} FROM a.{view}))")
    try:
        return con.sql(q).fetchall() == [(0,), (0,)]
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", default="/tmp/tuneledger-bench/ledger-1000000-g1.duckdb")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="also check identical results (slow)")
    args = parser.parse_args()
    src = Path(args.ledger)
    clustered = src.with_name(src.stem + "-clustered.duckdb")
    typed = src.with_name(src.stem + "-clustered-typed.duckdb")
    if not clustered.exists():
        print(f"built {clustered.name} in {build(src, clustered, typed=False):.1f} s")
    if not typed.exists():
        print(f"built {typed.name} in {build(src, typed, typed=True):.1f} s")
    # refresh the original file's views to this checkout's SQL
    con = duckdb.connect(str(src))
    for name, select in view_sql().items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
    con.close()
    files = {"as appended": src, "clustered by type": clustered, "clustered + typed bench_runs": typed}
    print("\nFresh connection per query (as store.query_arrow), median of", args.reps, "\n")
    print("| query | " + " | ".join(files) + " | rows |")
    print("|---|" + "---|" * len(files) + "---|")
    # full fetches of the ~1M-row views (all_events, live_events, event_log, timeline) are left out:
    # they move ~2 GB into Arrow whatever the layout
    big = {"all_events", "live_events", "event_log", "timeline"}
    queries = [f"SELECT * FROM {v}" for v in VIEW_NAMES if v not in big] + [f"SELECT count(*) FROM {v}" for v in VIEW_NAMES]
    queries.append("SELECT * FROM timeline ORDER BY seq DESC LIMIT 200")
    for sql in queries:
        cells, rows = [], 0
        for path in files.values():
            t, rows = cold(path, sql, args.reps)
            cells.append(f"{t * 1000:.0f} ms")
        print(f"| `{sql}` | " + " | ".join(cells) + f" | {rows:,} |", flush=True)
    if args.check:
        print("\nidentical results:")
        for view in VIEW_NAMES:
            print(f"  {view}: clustered {same(src, clustered, view)}, typed {same(src, typed, view)}", flush=True)


if __name__ == "__main__":
    main()
