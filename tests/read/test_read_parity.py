"""One read model: every TUI screen's rows are the views' rows, for the demo, the H200
campaign and randomised ledgers; the CLI's ``show`` and ``events`` read through the same functions.

The first three tests are the disagreements the issue found between front ends (each failed on
main before the read model): the board's engine version, the benchmarks pane merging workloads,
``show`` not listing the comparison that cites a benchmark.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.demo import CAMPAIGNS, build_demo
from ledger.cli.main import cli
from ledger.derive.projections import ARM_KEY
from ledger.read import model as read_model
from ledger.store import LedgerStore
from schemas.envelope import Host
from schemas.events import (
    BenchmarkCompleted,
    CandidateProposed,
    CandidateTriaged,
    ComparisonCompleted,
    EventRetracted,
    FlagResearched,
    ServerStarted,
    SessionStarted,
    Workload,
)
from tui import panes, queries


def _ledger(path: Path, events: list[Any]) -> LedgerStore:
    store = LedgerStore(path)
    store.init()
    store.append(events)
    return store


def _bench(
    session: str,
    config: str,
    value: float,
    *,
    input_len: int = 64,
    concurrency: int | None = 1,
    **extra: Any,
) -> BenchmarkCompleted:
    return BenchmarkCompleted(
        session_id=session,
        run_id=str(uuid.uuid4()),
        config_name=config,
        is_baseline=extra.pop("is_baseline", config == "baseline"),
        concurrency=concurrency,
        workload=Workload(dataset="random", input_len=input_len, output_len=32),
        metrics={"output_throughput": value},
        **extra,
    )


# --- the three disagreements ----------------------------------------------------------


def test_board_engine_version_is_the_views_in_the_tui(tmp_path: Path) -> None:
    """A candidate proposed without a host, its flag researched at SGLang 0.5.9: ``board`` said
    NULL while the TUI's board (recomputing it) said 0.5.9. Both say 0.5.9 now."""
    store = _ledger(
        tmp_path / "l.duckdb",
        [
            CandidateProposed(
                session_id="s",
                candidate_id="flag:enable-x",
                kind="flag",
                flag="enable-x",
                title="x",
            ),
            FlagResearched(
                session_id="s", flag="enable-x", engine="sglang", engine_version="0.5.9"
            ),
        ],
    )
    view = store.query_arrow("SELECT engine_version FROM board").to_pylist()
    assert view == [{"engine_version": "0.5.9"}]
    (tui_row,) = panes.snapshot(store, "s")["board"]
    assert tui_row["engine_version"] == "0.5.9"


def test_benchmarks_pane_keeps_two_workloads_apart(tmp_path: Path) -> None:
    """64 and 1024 input tokens at concurrency 1: +10% improved for one, -20% regressed for the
    other (``benchmark_deltas``); the pane once showed a single row, +10%."""
    events = []
    for input_len, tuned in ((64, 110.0), (1024, 80.0)):
        for _ in range(3):
            events += [
                _bench("s", "baseline", 100.0, input_len=input_len),
                _bench("s", "tuned", tuned, input_len=input_len),
            ]
    store = _ledger(tmp_path / "l.duckdb", events)
    view = {
        r["input_len"]: (round(r["change_pct"], 6), r["verdict"])
        for r in store.query_arrow(
            "SELECT * FROM benchmark_deltas WHERE metric = 'output_throughput'"
        ).to_pylist()
    }
    assert view == {64: (10.0, "improved"), 1024: (-20.0, "regressed")}
    pane = [r for r in panes.snapshot(store, "s")["bench"] if r["config_name"] == "tuned"]
    assert {
        r["input_len"]: (
            round(r["output_throughput_change_pct"], 6),
            r["output_throughput_verdict"],
            round(r["output_throughput"], 6),  # a geometric mean: exp(mean(ln x))
        )
        for r in pane
    } == {64: (10.0, "improved", 110.0), 1024: (-20.0, "regressed", 80.0)}
    assert len(pane) == 2


def test_show_lists_the_comparison_citing_a_benchmark(tmp_path: Path) -> None:
    """``tuneledger show <benchmark id>`` lists the ``comparison_completed`` naming it in
    ``benchmark_event_ids``, as the TUI's event detail does (one ``linked_events``)."""
    base, tuned = _bench("s", "baseline", 100.0), _bench("s", "tuned", 110.0)
    comparison = ComparisonCompleted(
        session_id="s",
        baseline_config="baseline",
        config_name="tuned",
        metric="output_throughput",
        concurrency=1,
        baseline_runs=1,
        runs=1,
        noise_threshold=0.02,
        verdict="inconclusive",
        benchmark_event_ids=[base.event_id, tuned.event_id],
    )
    store = _ledger(tmp_path / "l.duckdb", [base, tuned, comparison])
    out = CliRunner().invoke(cli, ["--ledger", str(store.path), "show", str(tuned.event_id)])
    assert out.exit_code == 0, out.output
    listed = out.output.split("linked events", 1)[1]
    assert str(comparison.event_id) in listed and "comparison_completed" in listed
    assert "cites this" in listed
    detail = queries.load_event_detail(store, str(tuned.event_id))
    assert [(link["event_id"], link["relation"]) for link in detail.links] == [
        (str(comparison.event_id), "cites this")
    ]
    # and the other way: the comparison's detail names both runs it cites
    with store.connect() as con:
        links = read_model.linked_events(con, store.get(str(comparison.event_id)))
    assert {link["event_id"] for link in links} == {str(base.event_id), str(tuned.event_id)}


# --- parity: every screen's rows are the views' rows ----------------------------------


def _board_view(store: LedgerStore) -> dict[str, dict[str, Any]]:
    """``board`` rows by candidate, each with its ``board_deltas`` columns (None: no delta)."""
    board = {r["candidate_id"]: r for r in store.query_arrow("SELECT * FROM board").to_pylist()}
    deltas = store.query_arrow("SELECT * FROM board_deltas")
    for row in board.values():
        row.update({name: None for name in deltas.column_names if name != "candidate_id"})
    for row in deltas.to_pylist():
        board[row.pop("candidate_id")].update(row)
    return board


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with ids as text (DuckDB's Python rows give UUIDs, its Arrow tables text)."""
    return {k: str(v) if isinstance(v, uuid.UUID) else v for k, v in row.items()}


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(repr(row.get(k)) for k in ARM_KEY)


def assert_screens_equal_views(store: LedgerStore) -> None:
    """For every session (and all of them): the TUI's board, benchmarks, flags and timeline rows
    equal the rows a user gets from the views with SQL."""
    sessions = store.query_arrow(
        "SELECT DISTINCT session_id FROM events WHERE session_id IS NOT NULL"
    ).column("session_id")
    board_view = _board_view(store)
    summary_view = store.query_arrow("SELECT * FROM benchmark_summary").to_pylist()
    deltas_view = store.query_arrow("SELECT * FROM benchmark_deltas").to_pylist()
    for session in [None, *sessions.to_pylist()]:
        snap = panes.snapshot(store, session)
        # board: each row is the view's row, column for column
        expected = {k: r for k, r in board_view.items() if session in (None, r["session_id"])}
        assert {r["candidate_id"] for r in snap["board"]} == set(expected)
        for row in snap["board"]:
            assert _plain(row) == expected[row["candidate_id"]]
        # benchmarks: the benchmark_summary rows, one per arm (no two rows with one arm key)
        expected_bench = [r for r in summary_view if session in (None, r["session_id"])]
        assert sorted(map(_key, snap["bench"])) == sorted(map(_key, expected_bench))
        assert len(set(map(_key, snap["bench"]))) == len(snap["bench"])
        by_key = {_key(r): r for r in expected_bench}
        for row in snap["bench"]:
            assert _plain(row) == by_key[_key(row)]
            # a compared cell shows benchmark_deltas' value and change for exactly this arm
            for metric, _ in queries.BENCH_METRICS:
                compared = [
                    d
                    for d in deltas_view
                    if _key(d) == _key(row) and d["metric"] == metric and not row["is_baseline"]
                ]
                if compared:
                    latest = max(compared, key=lambda d: d["seq"])
                    assert row[metric] == latest["value"]
                    assert row[f"{metric}_change_pct"] == latest["change_pct"]
                    assert row[f"{metric}_verdict"] == latest["verdict"]
        # flags: the flag_verdicts rows
        flags = store.query_arrow(
            "SELECT flag, value, setting, engine, engine_version, arch, verdict, basis, no_effect, "
            "summary, evidence, findings, seq FROM flag_verdicts"
        ).to_pylist()
        assert sorted(snap["flags"], key=repr) == sorted(flags, key=repr)
    # timeline: the timeline view's tail, unfiltered and by session and by type
    filters = [read_model.EventFilter()]
    filters += [read_model.EventFilter(session_id=s) for s in sessions.to_pylist()[:2]]
    filters += [read_model.EventFilter(types=("benchmark_completed",))]
    for flt in filters:
        where, params = flt.where()
        view = store.query_arrow(
            f"SELECT seq, type, session_id, coalesce(summary, type) AS summary, "
            f"event_id::VARCHAR AS event_id FROM timeline WHERE {where} ORDER BY seq DESC LIMIT 50",
            params,
        ).to_pylist()[::-1]
        tui = queries.load_timeline(store, flt, tail=50)
        assert [{k: r[k] for k in view[0]} for r in tui] == view if view else tui == []


@pytest.mark.parametrize("campaign", sorted(CAMPAIGNS))
def test_demo_ledgers_screens_equal_views(tmp_path: Path, campaign: str) -> None:
    """The seeds demo and the H200 campaign (``demo --campaign h200``: data/h200_*.jsonl)."""
    store = build_demo(tmp_path / "demo.duckdb", campaign=campaign)
    assert_screens_equal_views(store)


# --- randomised ledgers ---------------------------------------------------------------

FLAGS = ("enable-x", "enable-y", "cuda-graph-max-bs", "disable-z")


def random_ledger(path: Path, seed: int) -> LedgerStore:
    """A ledger of 2 sessions with candidates, server runs with flag sets, benchmark runs over
    two workloads, three concurrencies and an occasional request rate (some invalid, some made
    for a candidate), statistical comparisons, flag verdicts, triages and retractions, drawn
    from ``random.Random(seed)``."""
    rng = random.Random(seed)
    events: list[Any] = []
    benches: list[BenchmarkCompleted] = []
    for session in ("s1", "s2"):
        arch = rng.choice([None, "sm90", "sm120"])
        host = Host(compute_capability=arch) if arch else None
        events.append(SessionStarted(session_id=session, title=session))
        candidates = []
        for flag in rng.sample(FLAGS, rng.randint(1, len(FLAGS))):
            proposal_host = rng.choice(
                [None, host, Host(compute_capability=arch, engine_version="0.5.8")]
            )
            cid = f"flag:{flag}" if rng.random() < 0.7 else f"flag:{flag}-{session}"
            candidates.append(cid)
            events.append(
                CandidateProposed(
                    session_id=session,
                    candidate_id=cid,
                    kind="flag",
                    flag=flag,
                    title=flag,
                    priority=rng.choice([None, "high", "low"]),
                    host=proposal_host,
                )
            )
        events.append(
            CandidateProposed(
                session_id=session, candidate_id="config:tuned-a", kind="config", title="tuned"
            )
        )
        candidates.append("config:tuned-a")
        configs = ["baseline", "tuned-a", "with-x", "combo", *rng.sample(FLAGS, 1)]
        for config in configs:
            flags = {f: True for f in rng.sample(FLAGS, rng.randint(0, 2))}
            events.append(
                ServerStarted(
                    session_id=session,
                    run_id=f"{session}-{config}",
                    engine="sglang",
                    config_name=config,
                    flags=flags,
                    host=host,
                )
            )
            made_for = rng.choice(candidates) if rng.random() < 0.3 else None
            for input_len in rng.sample([64, 1024], rng.randint(1, 2)):
                for concurrency in rng.sample([1, 8, 64], rng.randint(1, 3)):
                    rate = rng.choice([None, None, 4.0])
                    for _ in range(rng.randint(1, 4)):
                        bench = BenchmarkCompleted(
                            session_id=session,
                            run_id=str(uuid.UUID(int=rng.getrandbits(128))),
                            config_name=config,
                            is_baseline=config == "baseline",
                            concurrency=concurrency,
                            workload=Workload(
                                dataset="random",
                                input_len=input_len,
                                output_len=32,
                                request_rate=rate,
                            ),
                            metrics={
                                "output_throughput": rng.uniform(80, 120),
                                "median_ttft_ms": rng.uniform(10, 20),
                                "p99_tpot_ms": rng.uniform(5, 9),
                            },
                            valid=rng.random() > 0.1,
                            candidate_id=made_for,
                            host=host,
                        )
                        benches.append(bench)
                        events.append(bench)
                    if config != "baseline" and rng.random() < 0.3:
                        events.append(
                            ComparisonCompleted(
                                session_id=session,
                                baseline_config="baseline",
                                config_name=config,
                                metric=rng.choice(["output_throughput", "median_ttft_ms"]),
                                concurrency=concurrency,
                                request_rate=rate,
                                dataset="random",
                                input_len=input_len,
                                output_len=32,
                                baseline_runs=3,
                                runs=3,
                                baseline_mean=100.0,
                                mean=rng.uniform(80, 120),
                                change=rng.uniform(-0.2, 0.2),
                                noise_threshold=0.02,
                                verdict=rng.choice(["improved", "regressed", "inconclusive"]),
                                benchmark_event_ids=[benches[-1].event_id],
                            )
                        )
        for flag in rng.sample(FLAGS, 2):
            events.append(
                FlagResearched(
                    session_id=session,
                    flag=flag,
                    engine="sglang",
                    engine_version=rng.choice(["0.5.9", "0.5.10", None]),
                    verdict=rng.choice(["no-op", "effective"]),
                    host=host,
                )
            )
        for cid in rng.sample(candidates, 2):
            events.append(
                CandidateTriaged(
                    session_id=session,
                    candidate_id=cid,
                    status=rng.choice(["accepted", "rejected", "deferred"]),
                    reason="r",
                )
            )
    store = _ledger(path, events)
    retract = rng.sample(benches, 3) + [e for e in events if isinstance(e, CandidateTriaged)][:1]
    store.append([EventRetracted(retracted_event_id=e.event_id, reason="test") for e in retract])
    return store


def link_rule_oracle(store: LedgerStore) -> dict[str, tuple[Any, ...]]:
    """The board's candidate <-> configuration link rule as the TUI computed it in Python before
    it became the ``board_deltas`` view (a reference to check the SQL against):

    a configuration whose runs were recorded for a candidate relates to that candidate only;
    any other relates to a candidate of its session when its name is the candidate id or the
    id without its ``kind:`` prefix, or when a server run of it started with the candidate's
    flag. Of the related configurations with an output_throughput delta, the one measured last
    wins, shown at its highest concurrency (the latest delta there).
    """
    board = store.query_arrow("SELECT candidate_id, session_id, flag FROM board").to_pylist()
    runs = store.query_arrow(
        "SELECT config_name, session_id, coalesce(json_keys(flags), []) AS flag_names, "
        "NULL AS candidate_id FROM server_runs WHERE config_name IS NOT NULL UNION ALL "
        "SELECT DISTINCT config_name, session_id, [], candidate_id FROM benchmarks "
        "WHERE candidate_id IS NOT NULL"
    ).to_pylist()
    deltas = store.query_arrow(
        "SELECT * FROM benchmark_deltas WHERE metric = 'output_throughput' "
        "ORDER BY config_name, coalesce(concurrency, 0), seq DESC"
    ).to_pylist()
    flags_by_config: dict[tuple[Any, str], set[str]] = {}
    made_for: dict[tuple[Any, str], set[str]] = {}
    for run in runs:
        key = (run["session_id"], run["config_name"])
        flags_by_config.setdefault(key, set()).update(run["flag_names"] or [])
        if run["candidate_id"]:
            made_for.setdefault(key, set()).add(run["candidate_id"])
    latest: dict[tuple[Any, str], dict[str, Any]] = {}
    last_seq: dict[tuple[Any, str], int] = {}
    for delta in deltas:
        key = (delta["session_id"], delta["config_name"])
        last_seq[key] = max(last_seq.get(key, 0), delta["seq"] or 0)
        best = latest.get(key)
        if best is None or (delta["concurrency"] or 0) > (best["concurrency"] or 0):
            latest[key] = delta
    out = {}
    for row in board:
        names = {row["candidate_id"], row["candidate_id"].split(":", 1)[-1]}
        related = [
            key
            for key in latest
            if key[0] == row["session_id"]
            and (
                row["candidate_id"] in made_for[key]
                if key in made_for
                else key[1] in names
                or bool(row["flag"] and row["flag"] in flags_by_config.get(key, set()))
            )
        ]
        chosen = max(related, key=lambda key: last_seq[key], default=None)
        if chosen is not None:
            d = latest[chosen]
            out[row["candidate_id"]] = (
                d["config_name"],
                d["concurrency"],
                d["change_pct"],
                d["verdict"],
            )
    return out


@pytest.mark.parametrize("seed", range(6))
def test_random_ledger_screens_equal_views(tmp_path: Path, seed: int) -> None:
    store = random_ledger(tmp_path / "r.duckdb", seed)
    assert_screens_equal_views(store)
    view = {
        r["candidate_id"]: (
            r["delta_config"],
            r["delta_concurrency"],
            r["delta_pct"],
            r["delta_verdict"],
        )
        for r in store.query_arrow("SELECT * FROM board_deltas").to_pylist()
    }
    assert view == link_rule_oracle(store)


def test_cli_events_and_the_tui_timeline_share_one_filter(tmp_path: Path) -> None:
    """``tuneledger events --session --type --actor --since`` lists what the timeline shows for
    the same filter (plus retracted events, marked)."""
    store = random_ledger(tmp_path / "r.duckdb", 1)
    flt = read_model.EventFilter(
        types=("benchmark_completed", "event_retracted"), session_id="s1", actor="person:unknown"
    )
    out = CliRunner().invoke(
        cli,
        [
            "--ledger",
            str(store.path),
            "events",
            "--session",
            "s1",
            "--type",
            "benchmark_completed",
            "--type",
            "event_retracted",
            "--actor",
            "person:unknown",
            "--since",
            "2000-01-01",
            "--format",
            "csv",
        ],
    )
    assert out.exit_code == 0, out.output
    listed = out.output.strip().splitlines()[1:]
    timeline = queries.load_timeline(store, flt, tail=10_000)
    retracted = store.query_arrow(
        "SELECT count(*) AS n FROM event_log WHERE retracted AND session_id = 's1' "
        "AND type = 'benchmark_completed'"
    ).to_pylist()[0]["n"]
    assert timeline and len(listed) == len(timeline) + retracted
    seqs = {int(line.split(",", 1)[0]) for line in listed}
    assert {r["seq"] for r in timeline} <= seqs


@pytest.mark.parametrize("seed", range(12))
def test_runs_no_comparison_covers_get_the_runners_verdict(tmp_path: Path, seed: int) -> None:
    """benchmark_deltas judges imported or appended runs by runners.compare's rule (the default
    threshold as tau), runs needed and too-noisy included:
    noisy runs are not "improved" because their means differ, and the CI and spreads are filled."""
    from runners.compare import compare

    rng = random.Random(seed)
    n_base, n_cand = rng.choice([(2, 3), (3, 3), (4, 5), (5, 5)])
    cv = rng.choice([0.005, 0.03, 0.12, 0.3])
    shift = rng.choice([0.0, 0.05, 0.2, -0.67])
    base = [100.0 * rng.lognormvariate(0, cv) for _ in range(n_base)]
    cand = [100.0 * (1 + shift) * rng.lognormvariate(0, cv) for _ in range(n_cand)]
    store = _ledger(
        tmp_path / f"noisy-{seed}.duckdb",
        [_bench("s", "baseline", v) for v in base] + [_bench("s", "tuned", v) for v in cand],
    )
    (row,) = store.query_arrow(
        "SELECT * FROM benchmark_deltas WHERE metric = 'output_throughput'"
    ).to_pylist()
    expected = compare("output_throughput", base, cand)
    assert row["verdict"] == expected.verdict, (base, cand)
    assert (row["baseline_runs"], row["runs"]) == (n_base, n_cand)
    assert row["value"] == pytest.approx(expected.mean)
    assert row["change_pct"] == pytest.approx(100 * expected.change)
    assert row["ci_low_pct"] == pytest.approx(100 * expected.ci_low, rel=0.05, abs=0.05)
    assert row["ci_high_pct"] == pytest.approx(100 * expected.ci_high, rel=0.05, abs=0.05)
    assert row["cv_pct"] == pytest.approx(100 * expected.cv)
    assert row["baseline_cv_pct"] == pytest.approx(100 * expected.baseline_cv)
    assert row["runs_needed"] == expected.runs_needed


def test_noisy_runs_with_a_large_mean_change_are_not_improved(tmp_path: Path) -> None:
    """The case a fixed rule got wrong: +20% between means of runs that spread over +-40%
    (too noisy: even no change would need more than 30 runs per arm to be told from 5%)."""
    store = _ledger(
        tmp_path / "noisy.duckdb",
        [_bench("s", "baseline", v) for v in (60.0, 100.0, 140.0)]
        + [_bench("s", "tuned", v) for v in (80.0, 120.0, 160.0)],
    )
    (row,) = store.query_arrow(
        "SELECT verdict, runs_needed, ci_low_pct, ci_high_pct FROM benchmark_deltas "
        "WHERE metric = 'output_throughput'"
    ).to_pylist()
    assert row["verdict"] == "too-noisy" and row["runs_needed"] > 3
    assert row["ci_low_pct"] < 0 < row["ci_high_pct"]


def test_a_run_after_the_comparison_makes_the_view_judge_all_runs(tmp_path: Path) -> None:
    """A comparison event stands for its runs only: one more run later, and runs and value
    describe the same runs (the arm's four, not the comparison's three)."""
    from runners.compare import compare

    base, cand = [100.0, 101.0, 99.0], [110.0, 111.0, 109.0]
    outcome = compare("output_throughput", base, cand)
    comparison = ComparisonCompleted(
        session_id="s",
        config_name="tuned",
        baseline_config="baseline",
        metric="output_throughput",
        concurrency=1,
        dataset="random",
        input_len=64,
        output_len=32,
        baseline_runs=3,
        runs=3,
        baseline_mean=outcome.baseline_mean,
        mean=outcome.mean,
        change=outcome.change,
        ci_low=outcome.ci_low,
        ci_high=outcome.ci_high,
        better_direction=1,
        noise_threshold=0.02,
        verdict=outcome.verdict,
    )
    events = [_bench("s", "baseline", v) for v in base] + [_bench("s", "tuned", v) for v in cand]
    store = _ledger(tmp_path / "late.duckdb", [*events, comparison])

    def row() -> dict[str, Any]:
        (got,) = store.query_arrow(
            "SELECT runs, value, verdict, verdict_rule FROM benchmark_deltas "
            "WHERE metric = 'output_throughput' AND baseline_config = 'baseline'"
        ).to_pylist()
        return got

    assert row()["runs"] == 3 and row()["verdict_rule"].startswith("statistical:")
    # A later part of the session with a baseline of its own leaves the comparison standing
    # (the h200 campaign: part 2's `cb` baseline came after part 1's comparisons).
    store.append([_bench("s", "cb", v, is_baseline=True) for v in (50.0, 51.0)])
    (standing,) = store.query_arrow(
        "SELECT verdict_rule FROM benchmark_deltas WHERE metric = 'output_throughput'"
    ).to_pylist()  # one row: a current comparison hides the rule's rows against other baselines
    assert standing["verdict_rule"].startswith("statistical:")
    store.append(_bench("s", "tuned", 140.0))
    late = row()
    summary = store.query_arrow(
        "SELECT runs, output_throughput FROM benchmark_summary WHERE config_name = 'tuned'"
    ).to_pylist()
    assert late["runs"] == 4 and late["verdict_rule"].startswith("statistical, here")
    assert late["value"] == pytest.approx((110.0 * 111.0 * 109.0 * 140.0) ** 0.25)
    assert summary == [{"runs": 4, "output_throughput": pytest.approx(late["value"])}]
