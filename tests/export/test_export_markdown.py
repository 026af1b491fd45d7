"""``export markdown``: the rendered decision log, from a real DuckDB ledger of real schema events."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from uuid import UUID

import pytest

from ledger.errors import NotFound
from ledger.export.markdown import (
    ShortIds,
    escape_cell,
    format_change,
    format_metric,
    markdown_table,
    render_markdown,
)
from ledger.store import LedgerStore
from schemas import BenchMetrics, Evidence, Host, StartupFacts, Workload
from schemas.events import (
    BenchmarkCompleted,
    CandidateProposed,
    CandidateTriaged,
    DecisionRecorded,
    EventRetracted,
    FindingRecorded,
    FlagResearched,
    HostObserved,
    NoteAdded,
    ServerReady,
    ServerStarted,
    SessionEnded,
    SessionStarted,
)

SID = "qwen35-sm120"
HOST = Host(
    gpu_name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    gpu_count=4,
    compute_capability="12.0",
    driver="590.48.01",
    cuda="13.1",
    engine="sglang",
    engine_version="0.5.12",
)
WORKLOAD = Workload(
    dataset="random", input_len=1024, output_len=512, range_ratio=1.0, load="closed-loop"
)

HEADINGS = [
    "## Decisions",
    "## Verdicts",
    "## Triage",
    "## Flag verdicts",
    "## Server runs",
    "## Timeline",
]


def _id(n: int) -> UUID:
    """Fixed event ids, so short ids in the output are predictable."""
    return UUID(f"{n:08x}-0000-7000-8000-000000000000")


def _short(store: LedgerStore, n: int) -> str:
    """The short id of ``_id(n)`` in a document of ``store`` (one length for every id)."""
    ids = store.query_arrow("SELECT event_id::VARCHAR AS event_id FROM events").column(0)
    return ShortIds(ids.to_pylist())(_id(n))


def _bench(
    n: int, config: str, concurrency: int, tok_s: float, ttft: float, server: str
) -> BenchmarkCompleted:
    return BenchmarkCompleted(
        event_id=_id(n),
        session_id=SID,
        host=HOST,
        run_id=f"bench-{n}",
        config_name=config,
        is_baseline=config == "baseline",
        server_run_id=server,
        workload=WORKLOAD,
        concurrency=concurrency,
        metrics=BenchMetrics(
            completed=64,
            failed=0,
            output_throughput=tok_s,
            median_ttft_ms=ttft,
            achieved_concurrency=concurrency,
        ),
        valid=True,
    )


def build_small_ledger(store: LedgerStore) -> None:
    """A miniature of the seeds' campaign: research, triage, two server runs, benchmarks, a decision."""
    fused = "flag:enable-fused-moe-sum-all-reduce"
    fusion = "flag:enable-flashinfer-allreduce-fusion"
    decode_steps = "flag:num-continuous-decode-steps"
    store.append(
        [
            SessionStarted(
                event_id=_id(1),
                session_id=SID,
                host=HOST,
                title="Qwen3.5-122B-A10B on 4x RTX PRO 6000",
                model="Qwen/Qwen3.5-122B-A10B",
                dtype="bfloat16",
                tensor_parallel=4,
                goal="more tok/s at c=1..64",
            ),
            HostObserved(
                event_id=_id(2),
                session_id=SID,
                host=HOST,
                source="nvidia-smi",
                torch_version="2.9.1",
                triton_version="3.5.1",
            ),
            CandidateProposed(
                event_id=_id(3),
                session_id=SID,
                host=HOST,
                candidate_id=fused,
                kind="flag",
                title="Fuse MoE sum into all-reduce",
                flag="enable-fused-moe-sum-all-reduce",
                priority="high",
            ),
            CandidateProposed(
                event_id=_id(4),
                session_id=SID,
                host=HOST,
                candidate_id=fusion,
                kind="flag",
                title="FlashInfer all-reduce fusion",
                flag="enable-flashinfer-allreduce-fusion",
            ),
            CandidateProposed(
                event_id=_id(5),
                session_id=SID,
                host=HOST,
                candidate_id=decode_steps,
                kind="flag",
                title="Continuous decode steps",
                flag="num-continuous-decode-steps",
                priority="low",
            ),
            FlagResearched(
                event_id=_id(6),
                session_id=SID,
                host=HOST,
                flag="num-continuous-decode-steps",
                verdict="dead-code",
                what_it_does="defined in server_args, never read",
                evidence=[Evidence(kind="source", ref="server_args.py:123")],
                candidate_id=decode_steps,
            ),
            CandidateTriaged(
                event_id=_id(7),
                session_id=SID,
                host=HOST,
                candidate_id=decode_steps,
                status="rejected",
                verdict="dead-code",
                reason="never read | grep finds no reader",
            ),
            CandidateTriaged(
                event_id=_id(8),
                session_id=SID,
                host=HOST,
                candidate_id=fused,
                status="accepted",
                reason="topk=8 > 2: will activate",
            ),
            ServerStarted(
                event_id=_id(9),
                session_id=SID,
                host=HOST,
                run_id="srv-base",
                engine="sglang",
                config_name="baseline",
                flags={"tp": 4},
            ),
            ServerReady(
                event_id=_id(10),
                session_id=SID,
                host=HOST,
                run_id="srv-base",
                startup=StartupFacts(
                    max_running_requests=48,
                    max_total_num_tokens=1_200_000,
                    cuda_graph_bs=[1, 2, 4, 8, 512],
                    piecewise_cuda_graph=True,
                    moe_kernel_config="default",
                ),
            ),
            _bench(11, "baseline", 1, 121.6, 95.0, "srv-base"),
            _bench(12, "baseline", 64, 1582.5, 410.0, "srv-base"),
            ServerStarted(
                event_id=_id(13),
                session_id=SID,
                host=HOST,
                run_id="srv-fused",
                engine="sglang",
                config_name="fused",
                flags={
                    "tp": 4,
                    "enable-fused-moe-sum-all-reduce": True,
                    "enable-flashinfer-allreduce-fusion": True,
                },
            ),
            ServerReady(
                event_id=_id(14),
                session_id=SID,
                host=HOST,
                run_id="srv-fused",
                startup=StartupFacts(
                    max_running_requests=26,
                    max_total_num_tokens=650_000,
                    cuda_graph_bs=[1, 2, 4, 8, 512],
                    piecewise_cuda_graph=False,
                    piecewise_disabled_reason="flashinfer allreduce fusion",
                    moe_kernel_config="default",
                ),
            ),
            FindingRecorded(
                event_id=_id(15),
                session_id=SID,
                host=HOST,
                kind="capacity-reduced",
                basis="log",
                flag="enable-flashinfer-allreduce-fusion",
                verdict="harmful",
                server_run_id="srv-fused",
                message="piecewise CUDA graph off; max_running_requests 48 -> 26",
            ),
            _bench(16, "fused", 1, 122.0, 94.0, "srv-fused"),
            _bench(17, "fused", 64, 1566.0, 300.0, "srv-fused"),
            NoteAdded(
                event_id=_id(18), session_id=SID, host=HOST, text="a | b | c table-breaking note"
            ),
            DecisionRecorded(
                event_id=_id(19),
                session_id=SID,
                host=HOST,
                decision="Revert the flags and pivot to speculative decoding",
                rationale="121.6 vs 122.0 tok/s is noise.\nThe fusion flag halved max_running_requests.",
                alternatives=["tune the MoE kernel", "keep both flags"],
                evidence_event_ids=[_id(11), _id(16), _id(15), _id(99)],
            ),
            SessionEnded(
                event_id=_id(20), session_id=SID, host=HOST, summary="flags reverted; next: EAGLE"
            ),
        ]
    )


@pytest.fixture
def small(store: LedgerStore) -> LedgerStore:
    build_small_ledger(store)
    return store


def _section(text: str, heading: str) -> str:
    """The body of one ``## heading`` section (up to the next ``## ``)."""
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    end = rest.find("\n## ")
    return rest if end < 0 else rest[:end]


def _table_rows(section: str) -> list[str]:
    return [line for line in section.splitlines() if line.startswith("| ")]


def _cells(row: str) -> list[str]:
    """Split one GFM row into cells, honouring ``\\|`` escapes."""
    inner = row.strip()[1:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def test_headings_in_order(small: LedgerStore) -> None:
    text = render_markdown(small, session_id=SID)
    assert text.startswith("# Qwen3.5-122B-A10B on 4x RTX PRO 6000\n")
    positions = [text.index(h + "\n") for h in HEADINGS]
    assert positions == sorted(positions)


def test_header_has_model_and_hardware(small: LedgerStore) -> None:
    header = render_markdown(small, session_id=SID).split("## Decisions")[0]
    assert f"- Session: `{SID}`" in header
    assert "- Model: Qwen/Qwen3.5-122B-A10B, dtype bfloat16, tensor parallel 4" in header
    assert (
        "- Hardware: NVIDIA RTX PRO 6000 Blackwell Workstation Edition x4, sm120, driver 590.48.01, "
        "CUDA 13.1; engine sglang 0.5.12" in header
    )
    assert "torch 2.9.1, triton 3.5.1" in header
    assert "- Ended: flags reverted; next: EAGLE" in header


def test_conflicting_host_observations_are_named_without_provenance(small: LedgerStore) -> None:
    """The header listed each observation with its event, seq and source (a runner
    fingerprint, a seed's message ids): internals, not a PR description's. A field the
    observations disagree on is not stated; it is named with its values."""
    small.append(
        HostObserved(
            event_id=_id(30),
            session_id=SID,
            source="server_info",
            host=HOST.model_copy(update={"driver": "580.95.05"}),
        )
    )
    header = render_markdown(small, session_id=SID).split("## Decisions")[0]
    assert (
        "- Hardware: NVIDIA RTX PRO 6000 Blackwell Workstation Edition x4, sm120, CUDA 13.1; "
        "engine sglang 0.5.12; the observations differ on driver (590.48.01, 580.95.05)" in header
    )
    assert "source `" not in header and "seq " not in header and "  - " not in header


def test_long_text_is_clipped_but_keeps_its_event_reference(small: LedgerStore) -> None:
    small.append(
        FindingRecorded(
            event_id=_id(40),
            session_id=SID,
            host=HOST,
            kind="other",
            basis="researched",
            flag="num-continuous-decode-steps",
            verdict="dead-code",
            message="x" * 500,
        )
    )
    section = _section(render_markdown(small, session_id=SID), "## Flag verdicts")
    row = [r for r in _table_rows(section) if "`num-continuous-decode-steps`" in r][0]
    assert _cells(row)[7].endswith(f"… (`{_short(small, 40)}`)")
    assert _cells(row)[7].startswith("x" * 100)  # one long word: cut where it must be


def test_decision_shows_rationale_alternatives_and_resolved_evidence(small: LedgerStore) -> None:
    section = _section(render_markdown(small, session_id=SID), "## Decisions")
    assert "### 1. Revert the flags and pivot to speculative decoding" in section
    assert (
        "> 121.6 vs 122.0 tok/s is noise.\n> The fusion flag halved max_running_requests."
        in section
    )
    assert "- tune the MoE kernel\n- keep both flags" in section
    evidence = [
        line for line in section.split("**Evidence:**")[1].splitlines() if line.startswith("- ")
    ]
    s = lambda n: _short(small, n)  # noqa: E731
    assert evidence == [
        f"- `{s(11)}` benchmark_completed (seq 11): bench baseline c=1: 121.6 tok/s",
        f"- `{s(16)}` benchmark_completed (seq 16): bench fused c=1: 122.0 tok/s",
        f"- `{s(15)}` finding_recorded (seq 15): capacity-reduced enable-flashinfer-allreduce-fusion: "
        "piecewise CUDA graph off; max_running_requests 48 -> 26",
        f"- `{s(99)}` — not in this ledger",
    ]


def test_retracted_evidence_is_marked(small: LedgerStore) -> None:
    small.append(EventRetracted(session_id=SID, retracted_event_id=_id(15), reason="wrong run"))
    section = _section(render_markdown(small, session_id=SID), "## Decisions")
    assert "max_running_requests 48 -> 26 — retracted" in section


def test_triage_row_shows_status_verdict_reason(small: LedgerStore) -> None:
    rows = _table_rows(_section(render_markdown(small, session_id=SID), "## Triage"))
    header, _rule, *body = rows
    assert _cells(header) == [
        "Candidate",
        "Kind",
        "Priority",
        "Status",
        "Verdict",
        "Reason",
        "Latest evidence",
    ]
    assert len(body) == 3  # every candidate, in proposal order
    cells = _cells(body[2])
    assert cells[0] == "`flag:num-continuous-decode-steps` Continuous decode steps"
    assert cells[1:6] == [
        "flag",
        "low",
        "rejected",
        "dead-code",
        "never read \\| grep finds no reader",
    ]
    # the triage itself: its reason is not repeated
    assert cells[6] == f"candidate_triaged (`{_short(small, 7)}`)"
    accepted = _cells(body[0])
    assert accepted[3] == "accepted" and accepted[5] == "topk=8 > 2: will activate"
    unprioritised = _cells(body[1])
    assert unprioritised[2] == "—" and unprioritised[3] == "proposed"
    assert unprioritised[4] == "harmful"  # from the flag verdict found in the log


def test_flag_verdicts_for_the_session_arch(small: LedgerStore) -> None:
    section = _section(render_markdown(small, session_id=SID), "## Flag verdicts")
    assert "The session's flags, on sm120 or on no arch in particular." in section
    rows = {_cells(r)[0]: _cells(r) for r in _table_rows(section)[2:]}
    dead = rows["`num-continuous-decode-steps`"]
    # Engine and Engine version in columns of their own (versions only under "Engine version")
    assert dead[1:7] == [
        "sglang",
        "0.5.12",
        "sm120",
        "dead-code",
        "researched",
        "dead-code (researched)",
    ]
    assert rows["`enable-flashinfer-allreduce-fusion`"][4] == "harmful"


def test_flag_verdicts_are_the_sessions_own_flags(small: LedgerStore) -> None:
    """Another session's flag on the same arch is not this session's; a verdict of this
    session's that names no arch (a CPU run's finding) is, as is a verdict given elsewhere on a
    flag this session's board holds."""
    small.append(
        [
            FlagResearched(
                event_id=_id(41),
                session_id="another-session",
                host=HOST,
                flag="enable-elsewhere",
                verdict="dead-code",
                what_it_does="never read",
            ),
            FindingRecorded(
                event_id=_id(42),
                session_id=SID,
                kind="other",
                basis="measured",
                flag="continuous-batching",
                verdict="effective",
                message="on the CPU: more throughput at c=4",
            ),
            FlagResearched(
                event_id=_id(43),
                session_id="another-session",
                host=HOST,
                flag="num-continuous-decode-steps",
                verdict="dead-code",
                what_it_does="still never read",
            ),
        ]
    )
    section = _section(render_markdown(small, session_id=SID), "## Flag verdicts")
    flags = [_cells(r)[0] for r in _table_rows(section)[2:]]
    assert "`enable-elsewhere`" not in flags
    assert "`continuous-batching`" in flags  # no arch: applies anywhere
    assert "`num-continuous-decode-steps`" in flags  # a candidate of this session


def test_server_runs_show_capacity_change(small: LedgerStore) -> None:
    rows = _table_rows(_section(render_markdown(small, session_id=SID), "## Server runs"))
    assert _cells(rows[0]) == [
        "Config", "Engine", "Status", "Changes vs previous run", "Startup facts",
    ]  # fmt: skip
    base, fused = (_cells(r) for r in rows[2:])
    assert base == [
        "baseline (`srv-base`)",
        "sglang",
        "ready",
        "first run",
        "max_running_requests 48; max_total_num_tokens 1200000; CUDA graph max bs 512; "
        "piecewise CUDA graph on; MoE kernel config default",
    ]
    assert "+enable-fused-moe-sum-all-reduce" in fused[3]
    assert "max_running_requests 48 -> 26" in fused[3]
    assert "piecewise CUDA graph on -> off" in fused[3]
    assert fused[4].startswith(
        "max_running_requests 26; max_total_num_tokens 650000; CUDA graph max bs 512; "
        "piecewise CUDA graph off (flashinfer allreduce fusion)"
    )


def test_a_run_whose_log_showed_nothing_has_no_row_of_unknowns(small: LedgerStore) -> None:
    """`? | ? | ? | ? | ?` rows for runs whose log showed no startup fact."""
    small.append(ServerStarted(run_id="srv-bare", engine="sglang", config_name="bare",
                               session_id=SID, host=HOST))  # fmt: skip
    section = _section(render_markdown(small, session_id=SID), "## Server runs")
    bare = next(_cells(r) for r in _table_rows(section) if "srv-bare" in r)
    assert bare[4] == "—" and "?" not in section


def test_verdicts_lead_and_collapse_the_throughputs_that_carry_one_change(
    store: LedgerStore,
) -> None:
    """Output, request and total throughput repeated one change three times."""
    for config, scale, base in (("baseline", 1.0, True), ("cb", 0.7, False)):
        for repeat in range(2):
            store.append(
                BenchmarkCompleted(
                    run_id=f"{config}-{repeat}", config_name=config, is_baseline=base,
                    workload=WORKLOAD, concurrency=4, repeat=repeat, valid=True, session_id="v",
                    metrics=BenchMetrics(
                        output_throughput=100 * scale + repeat, request_throughput=(100 * scale + repeat) / 512,
                        total_throughput=(100 * scale + repeat) * 3, median_ttft_ms=50 / scale,
                    ),
                )
            )  # fmt: skip
    text = render_markdown(store, session_id="v")
    assert text.index("## Decisions") < text.index("## Verdicts") < text.index("## Triage")
    rows = [_cells(r) for r in _table_rows(_section(text, "## Verdicts"))[2:]]
    assert [r[2] for r in rows] == ["throughput (output, request, total)", "median_ttft_ms"]
    assert rows[0][3] == "100.5 tok/s (CV 0.7%)" and rows[0][7] == "regressed"
    assert "- `append` runs" not in text and "Reproduce: not recorded." in text


def test_pipes_in_a_note_are_escaped(small: LedgerStore) -> None:
    section = _section(render_markdown(small, session_id=SID, timeline_max_rows=100), "## Timeline")
    note = [r for r in _table_rows(section) if "note_added" in r]
    assert len(note) == 1
    assert "note: a \\| b \\| c table-breaking note" in note[0]
    assert len(_cells(note[0])) == 4


def test_every_timeline_row_has_a_summary(small: LedgerStore) -> None:
    # The timeline view gives no summary for a candidate proposed without a priority: fall back to its stream.
    text = render_markdown(small, session_id=SID, timeline_max_rows=100)
    rows = _table_rows(_section(text, "## Timeline"))[2:]
    assert len(rows) == 20
    assert all(_cells(row)[2] for row in rows)
    assert "flag:enable-flashinfer-allreduce-fusion" in rows[3]


def test_every_table_is_well_formed(small: LedgerStore) -> None:
    text = render_markdown(small, session_id=SID)
    for block in re.findall(r"(?:^\| .*\n)+", text, flags=re.M):
        widths = {len(_cells(line)) for line in block.splitlines()}
        assert len(widths) == 1, block


def test_empty_sections_say_none_recorded(store: LedgerStore) -> None:
    store.append(SessionStarted(session_id="empty", title="Nothing yet"))
    text = render_markdown(store, session_id="empty")
    for heading in HEADINGS[:-1]:
        assert _section(text, heading).strip().endswith("None recorded."), heading
    assert "- Hardware: not recorded" in text


def test_unknown_session_raises_not_found(small: LedgerStore) -> None:
    with pytest.raises(NotFound, match="no-such-session"):
        render_markdown(small, session_id="no-such-session")


def test_output_is_deterministic(small: LedgerStore) -> None:
    assert render_markdown(small) == render_markdown(small)
    assert render_markdown(small, session_id=SID) == render_markdown(small, session_id=SID)


def test_all_sessions_in_order_of_first_event(small: LedgerStore) -> None:
    small.append(SessionStarted(session_id="later", title="Second session"))
    text = render_markdown(small)
    assert text.index("# Qwen3.5-122B-A10B") < text.index("# Second session")
    assert "\n---\n" in text


def test_long_timeline_is_counted_per_type(small: LedgerStore) -> None:
    """A 51-row raw timeline followed the log; by default it is counted per type."""
    section = _section(render_markdown(small, session_id=SID), "## Timeline")
    assert "20 events (seq 1 to 20); counts per type" in section
    assert "| benchmark_completed | 4 | 11 | 17 |" in section


def test_short_ids_are_unique_prefixes_usable_by_get(small: LedgerStore) -> None:
    # UUIDv7 ids appended together share their first 8 hex digits (the time stamp):
    # the short id must grow until it is unique, and stay an id prefix that get() accepts.
    results = small.append([NoteAdded(session_id=SID, text=f"note {i}") for i in range(5)])
    ids = [str(r.event_id) for r in results]
    short = ShortIds(
        r["event_id"]
        for r in small.query_arrow("SELECT event_id::VARCHAR AS event_id FROM events").to_pylist()
    )
    shorts = [short(i) for i in ids]
    assert len(set(shorts)) == len(shorts)
    # one length for every id of the document (uneven ones read as typos)
    assert len({len(p) for p in shorts}) == 1 and short(_id(11)) == str(_id(11))[: short.length]
    for full, prefix in zip(ids, shorts, strict=True):
        assert len(prefix) >= 8 and full.startswith(prefix) and not prefix.endswith("-")
        assert str(small.get(prefix).event_id) == full
    timeline = _section(
        render_markdown(small, session_id=SID, timeline_max_rows=100), "## Timeline"
    )
    for prefix in shorts:
        assert f"`{prefix}`" in timeline


def test_helpers() -> None:
    assert escape_cell("a|b\nc") == "a\\|b c"
    assert format_change(100 * (122.0 / 121.6 - 1)) == "+0.33%"
    assert format_change(None) == "n/a"
    assert format_metric("median_tpot_ms", 12.345) == "12.35 ms"
    assert format_metric("output_throughput", 121.6) == "121.6 tok/s"
    assert markdown_table(["a"], []) == "None recorded."


_DEMO = Path(__file__).resolve().parents[2] / "data" / "demo_campaign.jsonl"


@pytest.mark.skipif(
    importlib.util.find_spec("ledger.cli.demo") is None or not _DEMO.exists(),
    reason="the demo campaign (ledger/cli/demo.py, data/demo_campaign.jsonl) is not in the repo yet",
)
def test_demo_session_renders_key_lines(tmp_path: Path) -> None:
    from ledger.cli.demo import DEMO_SESSION, build_demo

    store = build_demo(tmp_path / "demo.duckdb")
    text = render_markdown(store, session_id=DEMO_SESSION)
    for heading in HEADINGS:
        assert heading + "\n" in text
    assert "sm120" in text
    assert "max_running_requests 48 -> 26" in _section(text, "## Server runs")
    headings = [
        line.lower()
        for line in _section(text, "## Decisions").splitlines()
        if line.startswith("### ")
    ]
    assert any("pivot" in h and "speculative decoding" in h for h in headings), headings
    assert "| `flag:num-continuous-decode-steps` " in _section(text, "## Triage")
    # The seeds' two tunes of SGLang's script: what their events hold, nothing made up
    tunes = _section(text, "## Kernel tunes")
    assert (
        "Tune `moe-tune-1`: kernel `fused_moe_triton`, E=256 N=256, sm120; failed; error: crash in"
        in tunes
    )
    assert "timed-out in 600 s; error: timed out after 10 minutes" in tunes
    assert " None," not in tunes and "None;" not in tunes and "reference kernel" not in tunes
    assert (
        "| moe-config-b200 | c=1 | output_throughput | 121.6 tok/s | 122.0 tok/s | +0.33% |" in text
    )
    assert render_markdown(store, session_id=DEMO_SESSION) == text
