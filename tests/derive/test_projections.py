"""Projections are a cache of the log: kept current in each append, equal to a full replay."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ledger.derive import projections
from ledger.store import LedgerStore
from schemas import BenchMetrics, Host
from schemas.events import (
    BenchmarkCompleted,
    CandidateProposed,
    CandidateTriaged,
    EventRetracted,
    FlagResearched,
    NoteAdded,
    ServerReady,
    ServerStarted,
    StartupFacts,
)

HOST = Host(
    gpu_name="NVIDIA H200",
    compute_capability="9.0",
    gpu_count=1,
    engine="sglang",
    engine_version="0.5.12",
)


def snapshot(store: LedgerStore) -> dict[str, list[dict]]:
    out = {}
    for table in projections.PROJECTION_TABLES:
        order = {"retractions": "event_id", "stream_heads": "stream"}.get(table, "seq")
        sql = f"SELECT * FROM {table} ORDER BY {order}"
        out[table] = store.query_arrow(sql).to_pylist()
    return out


def random_batches(rng: random.Random, n_batches: int) -> list[list]:
    batches, bench_ids = [], []
    for b in range(n_batches):
        batch = []
        for i in range(rng.randint(1, 6)):
            kind = rng.choice(["bench", "bench", "note", "flag", "cand", "server", "retract"])
            if kind == "bench":
                event = BenchmarkCompleted(
                    run_id=f"r{b}-{i}",
                    config_name=rng.choice(["baseline", "x", "y"]),
                    session_id="s",
                    concurrency=rng.choice([1, 64]),
                    host=HOST,
                    valid=rng.random() > 0.1,
                    metrics=BenchMetrics(
                        output_throughput=rng.uniform(100, 200), median_ttft_ms=rng.uniform(10, 20)
                    ),
                )
                bench_ids.append(event.event_id)
            elif kind == "note":
                event = NoteAdded(text=f"note {b}-{i}", session_id="s")
            elif kind == "flag":
                event = FlagResearched(
                    flag=rng.choice(["enable-a", "enable-b"]),
                    verdict=rng.choice(["no-op", "effective"]),
                    host=HOST,
                )
            elif kind == "cand":
                event = CandidateProposed(
                    candidate_id=f"c{b}", kind="flag", title="t", session_id="s"
                )
                batch.append(event)
                event = CandidateTriaged(candidate_id=f"c{b}", status="accepted", session_id="s")
            elif kind == "server":
                batch.append(
                    ServerStarted(run_id=f"srv{b}{i}", engine="sglang", session_id="s", host=HOST)
                )
                event = ServerReady(
                    run_id=f"srv{b}{i}",
                    session_id="s",
                    host=HOST,
                    startup=StartupFacts(max_running_requests=rng.choice([26, 48])),
                )
            elif bench_ids:
                event = EventRetracted(
                    retracted_event_id=rng.choice(bench_ids), reason="bad run", session_id="s"
                )
            else:
                continue
            batch.append(event)
        if batch:
            batches.append(batch)
    return batches


@pytest.mark.parametrize("hold_s", [0.0, 60.0], ids=["one-shot", "kept-open"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_projection_equals_full_replay(
    tmp_path: Path, seed: int, hold_s: float
) -> None:
    # one-shot: projected inside each append; kept open: caught up in batches of several appends
    store = LedgerStore(tmp_path / "p.duckdb", hold_s=hold_s)
    store.init()
    for i, batch in enumerate(random_batches(random.Random(seed), 40)):
        store.append(batch)
        if i % 7 == 6:
            snapshot(store)  # a read in between catches up the appends so far
    incremental = snapshot(store)
    assert incremental["retractions"], "the random log should retract some runs"
    with store.connect(read_only=False) as con:
        con.execute("BEGIN")
        projections.rebuild(con)
        con.execute("COMMIT")
    assert snapshot(store) == incremental
    store.close()


def test_retracting_a_run_removes_it_from_the_arm(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "p.duckdb")
    runs = [
        BenchmarkCompleted(
            run_id=f"b{i}",
            config_name="baseline",
            concurrency=1,
            session_id="s",
            metrics=BenchMetrics(output_throughput=v),
        )
        for i, v in enumerate([100.0, 102.0, 500.0])
    ]
    store.append(runs)
    store.append(
        BenchmarkCompleted(
            run_id="x",
            config_name="x",
            concurrency=1,
            session_id="s",
            metrics=BenchMetrics(output_throughput=101.0),
        )
    )

    def baseline() -> dict:
        return store.query_arrow(
            "SELECT baseline_value, baseline_runs FROM benchmark_deltas WHERE metric = 'output_throughput'"
        ).to_pylist()[0]

    # The arm's central value is its geometric mean, as every comparison's (runners.compare).
    assert baseline() == {
        "baseline_value": pytest.approx((100.0 * 102.0 * 500.0) ** (1 / 3)),
        "baseline_runs": 3,
    }
    store.append(
        EventRetracted(
            retracted_event_id=runs[2].event_id, reason="outlier: GPU was shared", session_id="s"
        )
    )
    assert baseline() == {
        "baseline_value": pytest.approx((100.0 * 102.0) ** 0.5),
        "baseline_runs": 2,
    }
    # retracting twice changes nothing more
    store.append(
        EventRetracted(retracted_event_id=runs[2].event_id, reason="again", session_id="s")
    )
    assert baseline() == {
        "baseline_value": pytest.approx((100.0 * 102.0) ** 0.5),
        "baseline_runs": 2,
    }
    assert store.query_arrow("SELECT count(*) AS n FROM benchmarks").to_pylist() == [{"n": 3}]
    assert store.query_arrow("SELECT count(*) AS n FROM events").to_pylist() == [{"n": 6}]


def test_a_retired_projection_is_dropped_when_older_code_wrote_the_file(tmp_path: Path) -> None:
    """bench_arms (running sums per arm) left with the views that read it: the rebuild that
    follows a views change drops it from a file older code wrote."""
    import duckdb

    path = tmp_path / "old.duckdb"
    store = LedgerStore(path)
    store.append(NoteAdded(text="x"))
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE bench_arms (arm_key VARCHAR PRIMARY KEY)")
    con.execute("UPDATE ledger_meta SET value = 'older' WHERE key = 'views_version'")
    con.close()
    LedgerStore(path).ensure_current()
    tables = {
        row["table_name"]
        for row in LedgerStore(path)
        .query_arrow("SELECT table_name FROM duckdb_tables()")
        .to_pylist()
    }
    assert "bench_arms" not in tables and "bench_runs" in tables


def test_a_batchs_own_summary_statement_gives_the_general_ones_rows(tmp_path: Path) -> None:
    """event_summaries is projected with a statement made for the batch's types; a rebuild
    (every type) gives the same rows."""
    from ledger.derive import projections

    assert "INSERT INTO event_summaries" in projections.apply_sql()[projections._SUMMARIES]
    store = LedgerStore(tmp_path / "s.duckdb")
    store.append([NoteAdded(text="one", session_id="s"), FlagResearched(flag="x", verdict="no-op")])
    store.append(
        BenchmarkCompleted(run_id="r", config_name="c", metrics=BenchMetrics(output_throughput=1))
    )
    query = "SELECT * FROM event_summaries ORDER BY seq"
    appended = store.query_arrow(query).to_pylist()
    with store.connect(read_only=False) as con:
        con.execute("BEGIN")
        projections.rebuild(con)
        con.execute("COMMIT")
    assert store.query_arrow(query).to_pylist() == appended
    assert [r["summary"] for r in appended][0] == "note: one"
