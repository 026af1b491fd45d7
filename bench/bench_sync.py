"""Benchmark sync with a PostgreSQL hub: push and pull throughput, time to sync 100,000 events.

Numbers for docs/performance.md, not a test. Run::

    .venv/bin/python bench/bench_sync.py                 # 100,000 events, 3 repetitions
    .venv/bin/python bench/bench_sync.py --events 20000 --reps 1

It starts a throwaway PostgreSQL cluster (``tests/support/pg_cluster.py``: initdb + pg_ctl in a
temp dir, as the ``postgres`` user when run as root) with the server's durable defaults
(fsync and synchronous_commit on), builds one ledger of ``--events`` events (a mix like a
campaign's control events: notes, flag research on SM120, candidates and triages,
decisions; about 500 bytes an event; not timed), then per repetition, on a fresh hub schema:

1. ``push``: ``ledger.sync.replicate.sync`` of that ledger to the empty hub (one COPY, one hub
   transaction, then the positions recorded locally);
2. ``pull``: ``sync`` of a fresh, empty ledger from that hub (batches of 50,000 events,
   each one local transaction through ``LedgerStore.append_replicated``);
3. ``noop``: ``sync`` again with nothing to do either way.

It prints wall time, events/s, this process's CPU time and the server's (postmaster and its
backends, from /proc), the median over repetitions, and the load average before and after. On
a shared, loaded machine the wall time waits for CPU; events per CPU second (this process and
the server together) is the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pg_cluster  # noqa: E402
import psycopg  # noqa: E402

from ledger.store import LedgerStore  # noqa: E402
from ledger.sync import hub
from ledger.sync import replicate as sync  # noqa: E402
from ledger.sync.remote import Remote, add_remote, parse_remote  # noqa: E402
from schemas import Host  # noqa: E402
from schemas.events import (
    CandidateProposed,
    CandidateTriaged,
    DecisionRecorded,
    FlagResearched,
    NoteAdded,
)  # noqa: E402

SM120 = Host(
    gpu_name="RTX PRO 6000 Blackwell",
    compute_capability="sm120",
    engine="sglang",
    engine_version="0.5.6",
)


def campaign(n: int) -> list:
    events = []
    for i in range(n):
        kind = i % 10
        if kind < 5:
            events.append(
                NoteAdded(
                    text=f"note {i}: observed throughput plateau at concurrency 64 with piecewise graphs"
                )
            )
        elif kind < 7:
            events.append(
                FlagResearched(
                    flag=f"flag-{i % 300}",
                    verdict="no-op",
                    host=SM120,
                    what_it_does="fuses the MoE sum with the all-reduce",
                    notes=f"read at {i}",
                )
            )
        elif kind == 7:
            events.append(
                CandidateProposed(
                    candidate_id=f"flag:c{i}",
                    kind="flag",
                    title=f"try c{i}",
                    flag=f"c{i}",
                    hypothesis="fewer kernel launches per decode step",
                )
            )
        elif kind == 8:
            events.append(
                CandidateTriaged(
                    candidate_id=f"flag:c{i - 1}", status="rejected", reason="no measurable change"
                )
            )
        else:
            events.append(
                DecisionRecorded(
                    decision=f"keep the baseline for c{i - 2}", rationale="within noise"
                )
            )
    return events


def timed(fn, cluster):
    wall, cpu, server = time.perf_counter(), time.process_time(), cluster.server_cpu_s()
    result = fn()
    return (
        result,
        time.perf_counter() - wall,
        time.process_time() - cpu,
        cluster.server_cpu_s() - server,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()
    cluster = pg_cluster.start(durable=True)
    work = Path(tempfile.mkdtemp(prefix="tuneledger-bench-sync-"))
    try:
        with psycopg.connect(cluster.superuser_dsn, autocommit=True) as con:
            con.execute(f"CREATE ROLE writer LOGIN PASSWORD '{pg_cluster.WRITER_PASSWORD}'")
        os.environ["PGPASSWORD"] = pg_cluster.WRITER_PASSWORD
        source = LedgerStore(work / "source.duckdb")
        events = campaign(args.events)
        t0 = time.perf_counter()
        for start in range(0, len(events), 10_000):
            source.append(events[start : start + 10_000])
        print(
            f"built a ledger of {source.head():,} events in {time.perf_counter() - t0:.1f} s "
            f"({source.path.stat().st_size / 1e6:.0f} MB)"
        )
        results: dict[str, list[tuple[float, float, float]]] = {"push": [], "pull": [], "noop": []}
        for rep in range(args.reps):
            schema = f"bench_{rep}"
            hub.init_schema(
                Remote(
                    "admin",
                    f"postgresql://{cluster.user}@/postgres?host={cluster.socket_dir}"
                    f"&port={cluster.port}",
                    schema,
                ),
                grant=["writer"],
            )
            remote = parse_remote("hub", cluster.url("writer"), schema)
            pusher = LedgerStore(work / f"push-{rep}.duckdb")
            pusher.path.write_bytes(
                source.path.read_bytes()
            )  # a fresh copy: nothing of it synced yet
            add_remote(pusher, remote)
            report, *sample = timed(lambda: sync.sync(pusher, remote), cluster)
            assert report.stored == args.events, report
            results["push"].append(tuple(sample))
            puller = LedgerStore(work / f"pull-{rep}.duckdb")
            sync.ensure_tables(puller)
            add_remote(puller, remote)
            report, *sample = timed(lambda: sync.sync(puller, remote), cluster)
            assert report.applied == args.events, report
            results["pull"].append(tuple(sample))
            report, *sample = timed(lambda: sync.sync(puller, remote), cluster)
            assert report.pulled == report.pushed == 0, report
            results["noop"].append(tuple(sample))
            for what in ("push", "pull", "noop"):
                w, c, s = results[what][-1]
                rate = f"{args.events / w:>9,.0f} events/s" if what != "noop" else " " * 18
                print(
                    f"rep {rep + 1} {what}: {w:6.2f} s wall, {c:6.2f} s CPU here + {s:5.2f} s server  {rate}"
                )
        print(f"\nmedian of {args.reps} ({args.events:,} events):")
        for what, samples in results.items():
            wall = statistics.median(w for w, _, _ in samples)
            cpu = statistics.median(c for _, c, _ in samples)
            server = statistics.median(s for _, _, s in samples)
            rate = (
                (
                    f", {args.events / wall:,.0f} events/s; per CPU second (here + server): "
                    f"{args.events / (cpu + server):,.0f} events/s"
                )
                if what != "noop"
                else ""
            )
            print(
                f"  {what}: {wall:.2f} s wall, {cpu:.2f} s CPU here + {server:.2f} s server CPU{rate}"
            )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak RSS {peak:.0f} MB; load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}"
        )
    finally:
        cluster.stop()
        for path in work.iterdir():
            path.unlink()
        work.rmdir()


if __name__ == "__main__":
    main()
