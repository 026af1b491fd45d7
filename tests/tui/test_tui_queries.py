"""The TUI's data access and writes without a terminal: the board's delta link rule, what a
refresh rereads, the flag matrix, event links, and the events each write appends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.cli.demo import DEMO_SESSION
from ledger.errors import ConcurrencyConflict
from ledger.store import LedgerStore
from schemas.envelope import Actor
from schemas.events import NoteAdded
from tests.tui.pilot import make_demo
from tui import panes, queries, writes
from tui.parts import stale_parts

AUTHOR = writes.Author(Actor(kind="agent", name="test"), DEMO_SESSION)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> LedgerStore:
    return make_demo(tmp_path_factory.mktemp("demo"))


def _runs(session: str, config: str, concurrency: int, value: float, **extra: Any) -> list[Any]:
    """Three benchmark runs of ``config`` at ``concurrency`` (enough for a verdict)."""
    from schemas.events import BenchmarkCompleted, Workload

    return [
        BenchmarkCompleted(
            session_id=session,
            run_id=f"{config}-c{concurrency}-{i}-{value}",
            config_name=config,
            is_baseline=config == "baseline",
            concurrency=concurrency,
            workload=Workload(dataset="random", input_len=64, output_len=32),
            metrics={"output_throughput": value},
            **extra,
        )
        for i in range(3)
    ]


def _board_deltas(store: LedgerStore, session: str | None) -> dict[str, tuple[Any, ...]]:
    return {
        r["candidate_id"]: (r["delta_config"], r["delta_concurrency"], r["delta_pct"])
        for r in panes.snapshot(store, session)["board"]
    }


def _proposal(session: str, cid: str, flag: str | None) -> Any:
    from schemas.events import CandidateProposed

    kind = cid.split(":", 1)[0]
    return CandidateProposed(session_id=session, candidate_id=cid, kind=kind, flag=flag, title=cid)


def _server(session: str, config: str, flags: list[str]) -> Any:
    from schemas.events import ServerStarted

    return ServerStarted(
        session_id=session,
        run_id=f"{session}-{config}",
        engine="sglang",
        config_name=config,
        flags=dict.fromkeys(flags, True),
    )


def test_link_rule_name_or_flag_latest_config_highest_concurrency(tmp_path: Path) -> None:
    """``board_deltas``: a configuration relates to a candidate by name (with or without its
    ``kind:``) or by a server run started with the candidate's flag; the one measured last wins,
    shown at its highest concurrency; another session's configurations never relate."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    events: list[Any] = [
        _proposal("s", "flag:enable-x", "enable-x"),
        _proposal("s", "config:tuned-moe", None),
        _proposal("s", "flag:enable-y", "enable-y"),
        _proposal("other", "flag:enable-x-elsewhere", "enable-x"),
        _server("s", "with-x", ["tp", "enable-x"]),
        _server("s", "with-x-later", ["enable-x"]),
    ]
    for c in (1, 8, 16, 64):
        events += _runs("s", "baseline", c, 100.0)
    events += _runs("s", "tuned-moe", 8, 95.0)
    events += _runs("s", "with-x", 1, 101.0) + _runs("s", "with-x", 64, 102.0)
    events += _runs("s", "with-x-later", 1, 103.0) + _runs("s", "with-x-later", 16, 104.0)
    store.append(events)
    deltas = _board_deltas(store, None)
    assert deltas["flag:enable-x"] == ("with-x-later", 16, pytest.approx(4.0))
    assert deltas["config:tuned-moe"] == ("tuned-moe", 8, pytest.approx(-5.0))  # name sans kind:
    assert deltas["flag:enable-y"] == (None, None, None)  # no configuration ran with the flag
    assert deltas["flag:enable-x-elsewhere"] == (None, None, None)  # other session


def test_link_rule_prefers_the_candidate_a_run_was_recorded_for(tmp_path: Path) -> None:
    """A regression: a configuration inheriting a flag was linked to that flag's candidate, not to the
    candidate its runs were made for."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    events: list[Any] = [
        _proposal("s", "flag:enable-x", "enable-x"),
        _proposal("s", "kernel-tune:moe", None),
        _server("s", "b200-config", ["enable-x"]),
        *_runs("s", "baseline", 64, 100.0),
        *_runs("s", "b200-config", 64, 99.0, candidate_id="kernel-tune:moe"),
    ]
    store.append(events)
    deltas = _board_deltas(store, "s")
    assert deltas["flag:enable-x"] == (None, None, None)
    assert deltas["kernel-tune:moe"] == ("b200-config", 64, pytest.approx(-1.0))


def _stale(con, since_seq: int) -> set[str]:
    stale, _ = stale_parts(panes.PARTS, con, since_seq)
    return {p.name for p in stale}


def test_stale_parts_follow_the_new_event_types(tmp_path: Path) -> None:
    store = make_demo(tmp_path)
    head = store.head()
    every = {p.NAME for p in panes.PANES if p.PART is not None}
    with store.connect() as con:
        assert _stale(con, head) == set()
        assert _stale(con, 0) == every == {"board", "bench", "timeline", "flags", "compare"}
    store.append(NoteAdded(text="plain", session_id=DEMO_SESSION))
    with store.connect() as con:
        assert _stale(con, head) == {"timeline"}
    store.append(
        NoteAdded(text="about one", candidate_id="flag:cuda-graph-max-bs", session_id=DEMO_SESSION)
    )
    with store.connect() as con:
        assert _stale(con, head + 1) == {"timeline", "board"}
        # the timeline is read first on a refresh: that is where a new event shows up
        assert [p.name for p in stale_parts(panes.PARTS, con, head)[0]] == ["timeline", "board"]


def test_incremental_snapshot_reads_only_new_timeline_rows(tmp_path: Path) -> None:
    store = make_demo(tmp_path)
    head = store.head()
    full = panes.snapshot(store, DEMO_SESSION)
    assert set(full) == {"head", *(p.name for p in panes.PARTS)}
    assert len(full["timeline"].rows) == head and full["timeline"].reset is True
    assert DEMO_SESSION in full["timeline"].sessions and "note_added" in full["timeline"].types
    store.append(NoteAdded(text="one more", session_id=DEMO_SESSION))
    part = panes.snapshot(store, DEMO_SESSION, since_seq=head)
    assert set(part) == {"head", "timeline"}
    timeline = part["timeline"]
    assert not timeline.reset and [r["seq"] for r in timeline.rows] == [head + 1]
    assert timeline.rows[0]["summary"] == "note: one more"


def test_a_refresh_binds_only_the_views_its_parts_declare_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Each part reads through the views its ``Part`` declares, made from this code on the
    reader's own connection: with the views stored in the file dropped, every part still
    reads, and one that leaves a view off fails loudly (with the stored views there it would
    have read SQL stored in the file). A refresh leaves the file byte for byte."""
    import dataclasses
    import hashlib

    import duckdb

    store = make_demo(tmp_path)
    with duckdb.connect(str(store.path)) as con:
        stored = [
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
            ).fetchall()
        ]
        assert {"board", "board_deltas", "timeline", "benchmark_summary", "flag_verdicts"} <= set(
            stored
        )
        for name in stored:
            con.execute(f'DROP VIEW IF EXISTS "{name}" CASCADE')
    digest = hashlib.sha256(store.path.read_bytes()).hexdigest()
    for part in panes.PARTS:
        assert part.views, part.name
        assert set(queries.load_snapshot(store, DEMO_SESSION, [part])) == {"head", part.name}
    assert hashlib.sha256(store.path.read_bytes()).hexdigest() == digest
    board = next(p for p in panes.PARTS if p.name == "board")
    with pytest.raises(duckdb.CatalogException, match="board"):
        queries.load_snapshot(store, DEMO_SESSION, [dataclasses.replace(board, views=())])


def test_a_new_pane_is_one_class_and_one_line() -> None:
    """Every pane declares what the app builds from it, and names its part after itself."""
    names = [p.NAME for p in panes.PANES]
    assert len(set(names)) == len(names)
    keys = [k for p in panes.PANES for k in p.KEYS.split(",")]
    assert len(set(keys)) == len(keys)
    for pane in panes.PANES:
        assert pane.TITLE and pane.FOCUS and pane.SUMMARY
        assert pane.PART is None or pane.PART.name == pane.NAME


def test_timeline_tail_and_filters(demo: LedgerStore) -> None:
    tail = queries.load_timeline(demo, queries.EventFilter(), tail=10)
    assert [r["seq"] for r in tail] == list(range(72, 82))  # the demo's 81 events
    decisions = queries.load_timeline(demo, queries.EventFilter(types=("decision_recorded",)))
    assert len(decisions) == 5
    assert queries.load_timeline(demo, queries.EventFilter(session_id="nope")) == []
    # the core's summary is NULL for a proposal without priority: the TUI falls back to the type
    assert all(r["summary"] for r in queries.load_timeline(demo, queries.EventFilter()))


def test_flag_matrix_columns_and_latest_cell(demo: LedgerStore) -> None:
    flags = panes.snapshot(demo, DEMO_SESSION)["flags"]
    assert queries.flag_columns(flags) == [("sm120", None)]
    matrix = queries.flag_matrix(flags)
    assert matrix["triton-attention-reduce-in-fp32"][("sm120", None)]["verdict"] == "no-op"
    assert list(matrix) == sorted(matrix)


def test_event_detail_links_both_ways(demo: LedgerStore) -> None:
    decision = demo.read(types=["decision_recorded"])[0]
    detail = queries.load_event_detail(demo, str(decision.event_id))
    assert '"type": "decision_recorded"' in detail.json
    cited = {link["event_id"] for link in detail.links if link["relation"].startswith("cited")}
    assert cited == {str(e) for e in decision.evidence_event_ids}
    caused = [link for link in detail.links if link["relation"] == "caused by this"]
    assert caused and all(
        demo.get(link["event_id"]).causation_id == decision.event_id for link in caused
    )
    # from a cited event, the decision shows as "cites this"
    back = queries.load_event_detail(demo, str(decision.evidence_event_ids[0]))
    assert any(
        link["event_id"] == str(decision.event_id) and link["relation"] == "cites this"
        for link in back.links
    )


def test_writes_append_one_event_each(tmp_path: Path) -> None:
    store = make_demo(tmp_path)
    board = {r["candidate_id"]: r for r in panes.snapshot(store, DEMO_SESSION)["board"]}
    row = board["flag:cuda-graph-max-bs"]
    result = writes.triage(store, AUTHOR, row, "accepted", "try again")
    assert (
        result.stream == "candidate:flag:cuda-graph-max-bs"
        and result.stream_version == row["stream_version"] + 1
    )
    with pytest.raises(ConcurrencyConflict):  # the same stale row again
        writes.triage(store, AUTHOR, row, "rejected", "stale")
    note = writes.add_note(store, AUTHOR, "hi", refs=[str(store.read()[0].event_id)])
    proposal = writes.propose(
        store, AUTHOR, {"title": "Tune the --Chunked Prefill size!", "kind": "config"}
    )
    assert store.get(proposal.event_id).candidate_id == "config:tune-the-chunked-prefill-size"
    with pytest.raises(ValueError):
        writes.record_decision(store, AUTHOR, {"decision": "x", "evidence_event_ids": "not-a-uuid"})
    decision = writes.record_decision(
        store, AUTHOR, {"decision": "keep", "alternatives": "a; b\nc"}
    )
    assert store.get(decision.event_id).alternatives == ["a", "b", "c"]
    assert [e.type for e in store.read(after_seq=81)] == [
        "candidate_triaged",
        "note_added",
        "candidate_proposed",
        "decision_recorded",
    ]
    assert note.seq == 83


def test_core_stays_free_of_textual_and_tui() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ledger.cli.main, ledger.store, ledger.derive.views, ledger.read.sql_sandbox, schemas, tui.queries, "
        "tui.writes; print(sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", (
        out.stderr
    )  # the data layer of the TUI needs no Textual either


def test_benchmarks_pane_shows_the_values_its_changes_are_computed_from(demo: LedgerStore) -> None:
    """Each compared cell shows benchmark_deltas' value, and a baseline row the baseline value."""
    snap = panes.snapshot(demo, DEMO_SESSION)
    arm = ("config_name", "dataset", "input_len", "output_len", "concurrency", "request_rate")
    view = {
        (*(r[k] for k in arm), r["metric"]): r
        for r in demo.query_arrow(
            "SELECT * FROM benchmark_deltas WHERE session_id = ?", [DEMO_SESSION]
        ).to_pylist()
    }
    compared = 0
    for row in snap["bench"]:
        for metric, _ in queries.BENCH_METRICS:
            delta = view.get((*(row[k] for k in arm), metric))
            if delta is not None:
                compared += 1
                assert row[metric] == pytest.approx(delta["value"])
                assert row[f"{metric}_change_pct"] == pytest.approx(delta["change_pct"])
            elif row["is_baseline"]:
                uses = [
                    d
                    for d in view.values()
                    if d["baseline_config"] == row["config_name"]
                    and all(d[k] == row[k] for k in arm[1:])
                    and d["metric"] == metric
                ]
                if uses:
                    assert row[metric] == pytest.approx(uses[0]["baseline_value"])
    assert compared > 0


def test_benchmarks_pane_agrees_with_the_view_when_a_config_ran_two_workloads(
    tmp_path: Path,
) -> None:
    """The baseline also ran a 1024-token workload that nothing is compared against: averaging it in
    (as the pane once did) would show 200 tok/s beside a +100% computed from 100; the pane shows 100."""
    from schemas.events import BenchmarkCompleted, Workload

    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    for run_id, config, input_len, value in (
        ("b64", "baseline", 64, 100.0),
        ("b1024", "baseline", 1024, 300.0),
        ("t64", "tuned", 64, 200.0),
    ):
        store.append(
            BenchmarkCompleted(
                session_id="s",
                run_id=run_id,
                config_name=config,
                is_baseline=config == "baseline",
                concurrency=1,
                workload=Workload(dataset="random", input_len=input_len, output_len=32),
                metrics={"output_throughput": value},
            )
        )
    view = store.query_arrow(
        "SELECT baseline_value, value, change_pct FROM benchmark_deltas "
        "WHERE metric = 'output_throughput'"
    ).to_pylist()
    assert view == [{"baseline_value": 100.0, "value": 200.0, "change_pct": 100.0}]
    rows = {(r["config_name"], r["input_len"]): r for r in panes.snapshot(store, "s")["bench"]}
    assert rows["tuned", 64]["output_throughput"] == pytest.approx(200.0)
    assert rows["baseline", 64]["output_throughput"] == pytest.approx(100.0)
    # the other workload is a row of its own (the pane once merged workloads)
    assert rows["baseline", 1024]["output_throughput"] == pytest.approx(300.0)
    assert set(rows) == {("tuned", 64), ("baseline", 64), ("baseline", 1024)}


def test_the_flags_pane_says_only_what_was_recorded() -> None:
    """No ``None`` or ``?`` on screen: a missing arch, engine or version is left out (a dash
    when nothing is known)."""
    from tui.flags import cell_title, column_label

    assert column_label("sm120", None) == "sm120"
    assert column_label("sm120", "0.5.5") == "sm120 · 0.5.5"
    assert column_label(None, None) == "—"
    cell = {"flag": "enable-x", "arch": None, "engine": None, "engine_version": None}
    assert cell_title(cell) == "--enable-x"
    cell |= {"arch": "sm120", "engine": "sglang"}
    assert cell_title(cell) == "--enable-x on sm120 / sglang"
    assert cell_title(cell | {"engine_version": "0.5.5"}) == "--enable-x on sm120 / sglang 0.5.5"
