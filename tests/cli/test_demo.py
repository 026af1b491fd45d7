"""The demo campaign (data/demo_campaign.jsonl): it parses, builds a real DuckDB ledger, and the
views answer the seeds' questions (which flags were no-ops on SM120, what the flashinfer fusion
cost, whether the B200 MoE config changed anything)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest

from ledger.cli.demo import DEMO_FILE, DEMO_SESSION, build_demo, demo_event_id
from ledger.errors import WouldLoseData
from ledger.read import demo_tables
from ledger.store import LedgerStore
from ledger.write.jsonl import read_jsonl
from schemas import NoteAdded
from tests.support.cli_inprocess import invoke

FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
EVENT_COUNT = 81

#: Board status and verdict per candidate at the end of the campaign.
BOARD = {
    "flag:enable-fused-moe-sum-all-reduce": ("done", "no-measurable-change", "high"),
    "flag:enable-flashinfer-allreduce-fusion": ("done", "not-activated", "high"),
    "flag:triton-attention-reduce-in-fp32": ("rejected", "no-op", None),
    "flag:num-continuous-decode-steps": ("rejected", "dead-code", None),
    "flag:cuda-graph-max-bs": ("rejected", "already-default", None),
    "config:remove-allreduce-fusion-restore": ("done", None, "high"),
    "kernel-tune:fused-moe-triton-sm120": ("deferred", "no-measurable-change", "high"),
    "spec-decoding:tune-speculative-params": ("accepted", None, None),
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> LedgerStore:
    """The demo ledger in a real DuckDB file, stamped with a fixed clock."""
    return build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb", clock=lambda: FIXED_NOW)


def rows(store: LedgerStore, sql: str, params: list | None = None) -> list[dict]:
    return store.query_arrow(sql, params).to_pylist()


# --- the file ----------------------------------------------------------------------------


def test_demo_file_is_the_repos_data_file() -> None:
    """Package data (``ledger/demo_data``) that is the repository's ``data/`` file, not a copy."""
    assert DEMO_FILE.name == "demo_campaign.jsonl"
    repo_file = Path(__file__).resolve().parents[2] / "data" / "demo_campaign.jsonl"
    assert DEMO_FILE.resolve() == repo_file


def test_file_parses_into_unique_fixed_ids_without_recorded_at() -> None:
    events = read_jsonl(DEMO_FILE)
    assert len(events) == EVENT_COUNT
    ids = [e.event_id for e in events]
    assert len(set(ids)) == len(ids)
    raw = [
        json.loads(line)
        for line in DEMO_FILE.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert all(
        "event_id" in obj and UUID(obj["event_id"]) for obj in raw
    )  # fixed, not generated on read
    assert all("recorded_at" not in obj and "seq" not in obj for obj in raw)
    assert [str(e.event_id) for e in read_jsonl(DEMO_FILE)] == [str(i) for i in ids]  # stable


def test_every_event_has_source_session_and_agent_actor() -> None:
    for event in read_jsonl(DEMO_FILE):
        assert event.source and (
            event.source.startswith("seeds/") or event.source.startswith("fixtures/")
        ), event
        assert event.session_id == DEMO_SESSION
        assert event.actor.kind == "agent"
        assert event.actor.name in {"opencode-assistant", "opencode-subagent"}
        assert event.host is not None and event.host.engine == "sglang"
        assert event.host.engine_version is None  # the seeds never give one


def test_hosts_follow_their_seed() -> None:
    events = read_jsonl(DEMO_FILE)
    hosts = [e for e in events if e.type == "host_observed"]
    assert len(hosts) == 3
    counts = [h.host.gpu_count for h in hosts]
    assert counts == [4, 8, None]  # seeds 000/001/004, seed 002, seed 003 (two DGX Spark nodes)
    assert hosts[1].host.driver == "590.48.01" and hosts[1].host.cuda == "13.1"
    assert hosts[1].torch_version == "2.9.1"
    assert "DGX Spark" in hosts[2].notes
    assert all(h.notes and "onflict" in h.notes for h in hosts)
    for event in events:
        if event.source.startswith("seeds/002 segment 42"):
            assert event.host.gpu_count == 8, event
        elif event.source.startswith(("seeds/000", "seeds/001", "seeds/004")):
            assert event.host.gpu_count == 4, event
        elif event.source.startswith("seeds/003"):
            assert event.host.gpu_count is None and event.host.compute_capability == "sm120", event


#: Key events of the session in the order of its messages (ids made by ``demo_event_id``).
CHRONOLOGY = [
    "bench:baseline-c1",  # 6436 baseline benchmark
    "note:6438-dispatch",  # 6438 research subagent (its sub-session: seeds/002)
    "fr:002:fused-moe",
    "note:6439-config",  # 6439 config.json read
    "fr:6440:fused-moe",  # 6440 (seeds/000): topk 8 > 2, will activate
    "note:6440-dispatch",
    "fr:6440:triton-fp32",  # 6440's research, reported in 6441
    "decision:6441",  # 6441 triage (seeds/001)
    "server:fusion:started",  # restart with both flags
    "finding:fusion:capacity-reduced",
    "fr:6449:flashinfer-fusion",  # 6449 flashinfer investigation
    "decision:6451",  # 6451 remove the flag, restart
    "server:fused-moe:started",
    "decision:6453",  # 6453 MoE tuning research (seeds/004)
    "tune:1:completed",  # the common_utils.py crash
    "patch:6478:common-utils",  # 6478
    "tune:2:completed",  # the 10-minute timeout
    "decision:b200-copy",
    "bench:b200-c1",  # 6491
    "note:6493-default-config",  # 6493
    "decision:6494",  # 6494 pivot (seeds/003)
]


def test_events_follow_the_message_order() -> None:
    position = {e.event_id: i for i, e in enumerate(read_jsonl(DEMO_FILE))}
    ids = [demo_event_id(key) for key in CHRONOLOGY]
    assert all(i in position for i in ids)
    assert [position[i] for i in ids] == sorted(position[i] for i in ids)


def test_no_invented_numbers() -> None:
    events = read_jsonl(DEMO_FILE)
    benches = [e for e in events if e.type == "benchmark_completed"]
    numbers = {
        (b.config_name, b.concurrency): b.metrics.model_dump(exclude_none=True) for b in benches
    }
    assert numbers == {
        ("baseline", 1): {"output_throughput": 121.6},
        ("baseline", 64): {"output_throughput": 1582.5},
        ("moe-config-b200", 1): {"output_throughput": 122.0},
        ("moe-config-b200", 64): {"output_throughput": 1566.0},
    }
    for bench in benches:
        assert bench.workload.model_dump(exclude_none=True) == {}
    proposed = [e for e in events if e.type == "candidate_proposed"]
    assert {p.candidate_id for p in proposed if p.priority} == {
        "flag:enable-fused-moe-sum-all-reduce",
        "flag:enable-flashinfer-allreduce-fusion",
        "config:remove-allreduce-fusion-restore",
        "kernel-tune:fused-moe-triton-sm120",
    }  # the four "high" items of seed 003's todowrite, nothing else


# --- building ----------------------------------------------------------------------------


def test_build_appends_every_event_with_the_clock(demo: LedgerStore) -> None:
    assert demo.head() == EVENT_COUNT
    stamps = rows(demo, "SELECT DISTINCT recorded_at FROM events")
    assert [r["recorded_at"] for r in stamps] == [FIXED_NOW]
    assert rows(demo, "SELECT count(*) AS n FROM events WHERE source IS NULL")[0]["n"] == 0
    assert rows(demo, "SELECT count(DISTINCT session_id) AS n FROM events")[0]["n"] == 1


def test_rebuilding_the_demo_appends_idempotently(tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    build_demo(path)
    store = build_demo(path)  # same ids: nothing stored twice, nothing deleted
    assert store.head() == EVENT_COUNT


def test_demo_refuses_a_ledger_holding_a_users_events(tmp_path: Path) -> None:
    """A regression: `demo --ledger L` on a user's ledger once replaced their events with the
    demo's. The refusal's advice names a path that works when followed."""
    path = tmp_path / "mine.duckdb"
    cli = ["--ledger", str(path)]
    assert invoke([*cli, "init"]).returncode == 0
    for i in range(18):
        LedgerStore(path).append(NoteAdded(text=f"my finding {i}", session_id="mine"))
    before = path.read_bytes()
    out = invoke([*cli, "demo", "--no-tui"])
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and str(path) in out.stderr and "--ledger" in out.stderr
    assert "Traceback" not in out.stderr
    assert path.read_bytes() == before
    assert LedgerStore(path).head() == 18
    # the advice: a path beside it that does not exist yet, and following it works
    advised = re.search(r"`tuneledger demo --ledger (\S+)`", out.stderr).group(1)
    assert advised == str(tmp_path / "demo.duckdb") and f"make demo LEDGER={advised}" in out.stderr
    assert invoke(["--ledger", advised, "demo", "--no-tui"]).returncode == 0
    # the refused file is never advised, nor a file that exists (the demo's name taken: -2)
    (tmp_path / "demo.duckdb").rename(tmp_path / "elsewhere.duckdb")
    LedgerStore(tmp_path / "demo.duckdb").init()
    LedgerStore(tmp_path / "demo.duckdb").append(NoteAdded(text="mine", session_id="s"))
    out = invoke(["--ledger", str(tmp_path / "demo.duckdb"), "demo", "--no-tui"])
    assert out.returncode == 2 and f"--ledger {tmp_path / 'demo-2.duckdb'}`" in out.stderr


def test_a_demo_ledger_played_in_still_opens_with_make_demo(tmp_path: Path) -> None:
    """After a write from the TUI (a triage, a decision) `make demo` exited 2 for good.
    The demo plus the user's own events is still the demo's ledger: it opens, their events kept."""
    demo_path = tmp_path / "demo.duckdb"
    build_demo(demo_path)
    LedgerStore(demo_path).append(NoteAdded(text="my triage note", session_id=DEMO_SESSION))
    store = build_demo(demo_path)  # no refusal, nothing stored twice, nothing lost
    assert store.head() == EVENT_COUNT + 1
    assert rows(
        store,
        "SELECT count(*) AS n FROM events WHERE type = 'note_added' "
        "AND payload->>'text' = 'my triage note'",
    ) == [{"n": 1}]
    # `make demo` runs exactly this command line
    out = invoke(["--ledger", str(demo_path), "demo", "--no-tui"])
    assert out.returncode == 0, out.stderr
    assert f"{EVENT_COUNT + 1} events (1 of them your own, kept)" in out.stdout


def test_the_summary_tables_are_named_reads(demo: LedgerStore) -> None:
    """What `demo --no-tui` prints comes from ledger/read/demo_tables.py, columns as shown."""
    board = demo_tables.board(demo)
    assert board.column_names == ["candidate_id", "status", "verdict", "priority", "reason"]
    assert board.num_rows == len(rows(demo, "SELECT 1 FROM board"))
    deltas = demo_tables.throughput_deltas(demo).to_pylist()
    assert deltas and {d["metric"] for d in deltas} == {"output_throughput"}
    assert demo_tables.sm120_no_ops(demo).column("flag").to_pylist() == [
        r["flag"]
        for r in rows(
            demo, "SELECT flag FROM flag_verdicts WHERE arch = 'sm120' AND no_effect ORDER BY flag"
        )
    ]
    assert demo_tables.spec_trials(demo, accept_source=True).column_names == [
        "trial_id",
        "accept_length",
        "accept_length_source",
        "throughput_pct",
        "tpot_pct",
        "verdict",
    ]


# --- the views answer the seeds' questions ------------------------------------------------


def test_sm120_no_effect_flags(demo: LedgerStore) -> None:
    got = rows(
        demo, "SELECT flag FROM flag_verdicts WHERE arch = 'sm120' AND no_effect ORDER BY flag"
    )
    assert [r["flag"] for r in got] == [
        "enable-flashinfer-allreduce-fusion",
        "enable-fused-moe-sum-all-reduce",
        "num-continuous-decode-steps",
        "triton-attention-reduce-in-fp32",
    ]
    verdicts = {
        r["flag"]: (r["verdict"], r["basis"]) for r in rows(demo, "SELECT * FROM flag_verdicts")
    }
    assert verdicts["enable-flashinfer-allreduce-fusion"] == ("not-activated", "researched")
    assert verdicts["enable-fused-moe-sum-all-reduce"] == ("no-measurable-change", "measured")
    assert verdicts["num-continuous-decode-steps"] == ("dead-code", "researched")
    assert verdicts["triton-attention-reduce-in-fp32"] == ("no-op", "researched")
    assert verdicts["cuda-graph-max-bs"] == ("already-default", "log")
    assert verdicts["enable-mixed-chunk"] == ("incompatible", "researched")


def test_cuda_graph_max_bs_is_already_default_not_no_effect(demo: LedgerStore) -> None:
    (row,) = rows(
        demo,
        "SELECT verdict, no_effect, history FROM flag_verdicts WHERE flag = 'cuda-graph-max-bs'",
    )
    assert row["verdict"] == "already-default"
    assert row["no_effect"] is False


def test_cuda_graph_max_bs_says_the_servers_own_batch_sizes(demo: LedgerStore) -> None:
    """flag_verdicts said SGLang 'auto-sets the CUDA graph max batch size to 512' where
    server_runs show 48 and 24: the logs' finding (data/demo_campaign.jsonl) says both."""
    (row,) = rows(
        demo,
        "SELECT verdict, basis, summary, history FROM flag_verdicts WHERE flag = 'cuda-graph-max-bs'",
    )
    assert (row["verdict"], row["basis"]) == ("already-default", "log")
    assert row["history"] == [
        "unknown (researched)",
        "already-default (researched)",
        "already-default (log)",
    ]
    facts = rows(
        demo,
        "SELECT config_name, cuda_graph_max_bs FROM server_runs WHERE cuda_graph_max_bs IS NOT NULL",
    )
    assert {(r["config_name"], r["cuda_graph_max_bs"]) for r in facts} == {
        ("baseline", 48),
        ("fused-moe+flashinfer-fusion", 24),
    }
    assert "captured up to batch 48" in row["summary"] and "up to 24 with" in row["summary"]


def test_triton_fp32_history_recommended_then_no_op(demo: LedgerStore) -> None:
    history = rows(
        demo,
        "SELECT verdict, basis, summary, evidence_event_id FROM flag_verdict_history "
        "WHERE flag = 'triton-attention-reduce-in-fp32' ORDER BY seq",
    )
    assert [(r["verdict"], r["basis"]) for r in history] == [
        ("effective", "researched"),
        ("no-op", "researched"),
    ]
    assert "Recommended for stability" in history[0]["summary"]
    first = demo.get(history[0]["evidence_event_id"])
    assert first.actor.name == "opencode-subagent" and first.source.startswith("seeds/002")
    (latest,) = rows(
        demo, "SELECT history FROM flag_verdicts WHERE flag = 'triton-attention-reduce-in-fp32'"
    )
    assert latest["history"] == ["effective (researched)", "no-op (researched)"]


def test_flashinfer_history_ends_not_activated(demo: LedgerStore) -> None:
    (row,) = rows(
        demo, "SELECT history FROM flag_verdicts WHERE flag = 'enable-flashinfer-allreduce-fusion'"
    )
    assert row["history"][-3:] == ["harmful (log)", "harmful (log)", "not-activated (researched)"]


def test_server_runs_show_the_flashinfer_cost(demo: LedgerStore) -> None:
    runs = rows(
        demo,
        "SELECT r.* FROM server_runs r JOIN live_events e ON e.type = 'server_started' "
        "AND (e.payload->>'run_id') = r.run_id ORDER BY e.seq",
    )
    assert [r["run_id"] for r in runs] == [
        "baseline",
        "fused-moe+flashinfer-fusion",
        "fused-moe",
        "moe-config-b200",
    ]
    base, fusion, restored, b200 = runs
    assert base["max_running_requests"] == 48 and base["piecewise_cuda_graph"] is True
    assert base["cuda_graph_max_bs"] == 48 and base["moe_kernel_config"] == "default"
    assert fusion["max_running_requests"] == 26 and fusion["piecewise_cuda_graph"] is False
    assert "max_running_requests 48 -> 26" in fusion["changes_vs_previous"]
    assert "piecewise CUDA graph on -> off" in fusion["changes_vs_previous"]
    assert sorted(fusion["flags_added"]) == [
        "enable-flashinfer-allreduce-fusion",
        "enable-fused-moe-sum-all-reduce",
    ]
    assert restored["flags_removed"] == ["enable-flashinfer-allreduce-fusion"]
    assert restored["max_running_requests"] is None  # the seeds give no startup facts for it
    assert [r["status"] for r in runs] == ["stopped", "stopped", "stopped", "ready"]
    assert b200["config_name"] == "moe-config-b200"


def test_b200_config_is_insufficient_data_one_run_each(demo: LedgerStore) -> None:
    """The seeds' "no measurable improvement" came from one run per arm: the view says so."""
    got = rows(
        demo,
        "SELECT concurrency, baseline_value, value, change_pct, verdict FROM benchmark_deltas "
        "WHERE config_name = 'moe-config-b200' AND metric = 'output_throughput' ORDER BY concurrency",
    )
    assert [(r["concurrency"], r["baseline_value"], r["value"]) for r in got] == [
        (1, 121.6, 122.0),
        (64, 1582.5, 1566.0),
    ]
    assert round(got[0]["change_pct"], 2) == 0.33
    assert round(got[1]["change_pct"], 2) == -1.04
    assert {r["verdict"] for r in got} == {"insufficient-data"}


def test_board_statuses(demo: LedgerStore) -> None:
    board = {
        r["candidate_id"]: (r["status"], r["verdict"], r["priority"])
        for r in rows(demo, "SELECT candidate_id, status, verdict, priority FROM board")
    }
    assert board == BOARD


def test_decisions_cite_existing_events(demo: LedgerStore) -> None:
    decisions = rows(demo, "SELECT * FROM decisions ORDER BY seq")
    assert len(decisions) == 5
    ids = {r["event_id"] for r in rows(demo, "SELECT event_id::VARCHAR AS event_id FROM events")}
    for decision in decisions:
        assert decision["evidence_event_ids"], decision["decision"]
        assert decision["rationale"]
        assert set(decision["evidence_event_ids"]) <= ids
    assert "speculative decoding" in decisions[-1]["decision"]
    assert any("B200" in alt for alt in decisions[-1]["alternatives"])


def test_references_resolve(demo: LedgerStore) -> None:
    events = demo.read()
    ids = {e.event_id for e in events}
    seq = {e.event_id: e.seq for e in events}
    for event in events:
        if event.causation_id is not None:
            assert event.causation_id in ids and seq[event.causation_id] < event.seq
        for ref in getattr(event, "refs", []):
            assert ref in ids
        for evidence in getattr(event, "evidence", []):
            if evidence.kind == "event":
                assert UUID(evidence.ref) in ids


def test_kernel_tuning_story(demo: LedgerStore) -> None:
    tl = rows(
        demo,
        "SELECT type, payload FROM live_events WHERE type LIKE 'kernel_tune%' OR type = 'patch_applied' ORDER BY seq",
    )
    steps = [(r["type"], json.loads(r["payload"]).get("outcome")) for r in tl]
    assert steps == [
        ("kernel_tune_started", None),
        ("kernel_tune_completed", "failed"),
        ("patch_applied", None),
        ("kernel_tune_started", None),
        ("kernel_tune_completed", "timed-out"),
        ("patch_applied", None),
    ]
    started = json.loads(tl[3]["payload"])
    assert (started["E"], started["N"], started["search_space"], started["timeout_s"]) == (
        256,
        256,
        1920,
        600,
    )
    assert (
        json.loads(tl[2]["payload"])["target"]
        == "benchmark/kernels/fused_moe_triton/common_utils.py"
    )


def test_a_second_campaign_loads_beside_the_first(tmp_path: Path) -> None:
    """Both demo campaigns in one ledger: the seeds' events are the demo's, not a user's."""
    path = tmp_path / "demo.duckdb"
    build_demo(path)
    store = build_demo(path, campaign="h200")
    sessions = {
        r["session_id"]
        for r in store.query_arrow("SELECT DISTINCT session_id FROM events").to_pylist()
    }
    assert DEMO_SESSION in sessions and "h200-flags" in sessions
    store.append(NoteAdded(text="mine", session_id="s"))
    assert build_demo(path, campaign="h200").head() == store.head()  # played in: still the demo's
    mine = tmp_path / "mine.duckdb"
    LedgerStore(mine).init()
    LedgerStore(mine).append(NoteAdded(text="mine", session_id="s"))
    with pytest.raises(WouldLoseData):
        build_demo(mine, campaign="h200")


def test_the_docs_state_the_h200_campaigns_event_count(tmp_path: Path) -> None:
    """Docs tested against the code: docs/campaigns.md's figure is what `demo --campaign h200` loads."""
    store = build_demo(tmp_path / "h200.duckdb", campaign="h200")
    n = store.query_arrow("SELECT count(*) AS n FROM events").to_pylist()[0]["n"]
    campaigns = (Path(__file__).resolve().parents[2] / "docs" / "campaigns.md").read_text()
    assert f"`data/h200_moe_tune.jsonl`: {n:,} events" in campaigns


def test_the_h200_campaigns_part_1_verdicts_are_the_runners(tmp_path: Path) -> None:
    """docs/campaigns.md: every c=64 comparison of part 1 is invalid, c=1 too-noisy; part 2's baseline
    (cb), benchmarked later in the same session, does not replace them. The comparisons were
    recorded under the earlier rule (tau = 2 x CV): benchmark_deltas judges their runs again by
    today's (ledger/derive/verdict_rule.py), so c=8 is inconclusive, not too-noisy."""
    store = build_demo(tmp_path / "h200.duckdb", campaign="h200")
    rows = store.query_arrow(
        "SELECT concurrency, baseline_config, verdict, verdict_rule FROM benchmark_deltas "
        "WHERE config_name = 'dtype-bf16' AND metric = 'output_throughput' ORDER BY concurrency"
    ).to_pylist()
    assert [(r["concurrency"], r["baseline_config"], r["verdict"]) for r in rows] == [
        (1, "baseline", "too-noisy"),
        (8, "baseline", "inconclusive"),
        (64, "baseline", "invalid"),
    ]
    assert [r["verdict_rule"].split(":")[0] for r in rows] == [
        "statistical, here",
        "statistical, here",
        "statistical",  # an invalid comparison stands as recorded
    ]


def test_the_vllm_cpu_campaign_loads_with_its_verdicts(tmp_path: Path) -> None:
    """`demo --campaign vllm-cpu`: the real vLLM CPU campaign (docs/vllm-cpu.md): every flag
    researched and triaged, the ngram trials' accept length from vLLM's own counters, and the
    verdicts the measurements support on two shared cores (load 2-9): two decided (max-num-seqs 1
    regressed throughput and TTFT; ngram with 5 draft tokens improved throughput), the rest too
    noisy (the baseline's own runs varied by 25% at c=8, 32% at c=1)."""
    store = build_demo(tmp_path / "vllm.duckdb", campaign="vllm-cpu")
    researched = {e.flag for e in store.read(types=["flag_researched"])}
    assert researched == {
        "max-num-seqs",
        "no-enable-prefix-caching",
        "max-num-batched-tokens",
        "no-enable-chunked-prefill",
        "enforce-eager",
        "speculative-config",
    }
    throughput: dict[str, str] = {}
    for c in store.read(types=["comparison_completed"]):
        if c.metric == "output_throughput":
            throughput[c.config_name] = c.verdict  # the last comparison of each (5 runs per arm)
    assert throughput == {
        "max-num-seqs-1": "regressed",
        "no-prefix-caching": "too-noisy",
        "batched-tokens-128": "too-noisy",
        "no-chunked-prefill": "too-noisy",
        "compiled": "too-noisy",
        "ngram-1": "too-noisy",
        "ngram-3": "too-noisy",
        "ngram-5": "improved",
    }
    measured = store.query_arrow(
        "SELECT flag, verdict FROM flag_verdicts WHERE basis = 'measured'"
    ).to_pylist()
    assert measured == [{"flag": "max-num-seqs", "verdict": "harmful"}]
    trials = store.query_arrow(
        "SELECT trial_id, accept_length, accept_length_source, verdict, runs FROM spec_trials "
        "ORDER BY seq"
    ).to_pylist()
    # the spec was resumed from 3 to 5 repeats: each trial recorded twice, the view shows the
    # last (over all five runs), events keep both
    last = {t["trial_id"]: t for t in trials}
    assert list(last) == ["vllm-cpu:ngram-1", "vllm-cpu:ngram-3", "vllm-cpu:ngram-5"]
    assert len(trials) == 3 and all(t["runs"] == 5 for t in trials), trials
    recorded = store.query_arrow(
        "SELECT count(*) AS n FROM events WHERE type = 'spec_decoding_trial_completed'"
    ).to_pylist()
    assert recorded == [{"n": 6}]
    assert all(t["accept_length_source"] == "metrics" for t in trials)
    # accept length = 1 + accepted / drafts: above 1, at most num_speculative_tokens + 1
    for t, k in zip(last.values(), (1, 3, 5), strict=True):
        assert k < t["accept_length"] <= k + 1
    assert [t["verdict"] for t in last.values()] == ["unknown", "unknown", "effective"]
    board = {
        b["candidate_id"]: b
        for b in store.query_arrow("SELECT candidate_id, status, reason FROM board").to_pylist()
    }
    assert len(board) == 8 and all(b["reason"] for b in board.values())
    assert {c for c, b in board.items() if b["status"] != "deferred"} == {"config:ngram-5"}
    assert board["config:ngram-5"]["status"] == "accepted"
    # max-num-seqs 1: throughput and TTFT regressed, but its tokens reached the client in one
    # burst (median TPOT 0.01 ms): TPOT "improved", so the triage rule calls it mixed
    assert "(mixed)" in board["flag:max-num-seqs"]["reason"]
    decisions = store.read(types=["decision_recorded"])
    assert [d.candidate_id for d in decisions] == ["config:ngram-5"]
    ready = store.read(types=["server_ready"])
    assert ready and all(r.startup.kv_cache_tokens == 1_048_576 for r in ready)


def test_a_demo_built_today_reads_on_the_campaigns_clock(tmp_path: Path) -> None:
    """The demo's events all showed the minute of the build: they are stamped with the
    campaign's own times (a server log line's, else the last one before it in the campaign)."""
    store = build_demo(tmp_path / "demo.duckdb")
    times = rows(
        store,
        "SELECT min(recorded_at) AS first, max(recorded_at) AS last, "
        "bool_and(recorded_at >= occurred_at OR occurred_at IS NULL) AS after FROM events",
    )[0]
    assert times["first"].astimezone(UTC) == datetime(2026, 11, 20, 14, 2, 11, tzinfo=UTC)
    assert times["last"].astimezone(UTC) == datetime(2026, 11, 20, 15, 12, 10, tzinfo=UTC)
    logged = rows(
        store, "SELECT recorded_at, occurred_at FROM events WHERE occurred_at IS NOT NULL"
    )
    assert all(r["recorded_at"] == r["occurred_at"] for r in logged)
    in_order = [
        r["recorded_at"] for r in rows(store, "SELECT recorded_at FROM events ORDER BY seq")
    ]
    assert in_order[0] == times["first"] and in_order[-1] == times["last"]
