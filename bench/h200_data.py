"""The committed H200 ledgers (data/h200_*.jsonl) and the GPU tables of docs/campaigns.md made from them.

    python bench/h200_data.py build-moe MOE_OUT            # device outputs -> data/h200_moe_tune.jsonl
    python bench/h200_data.py build-moe-fp8 FP8_OUT        # ... --fp8 outputs added to it
    python bench/h200_data.py build-flags FLAGS_OUT        # device outputs -> data/h200_flags.jsonl
    python bench/h200_data.py build-pair OUT [OUT ...]     # bench/h200_moe_pair.py runs -> data/ (adds)
    python bench/h200_data.py tables                       # data/ -> the Markdown tables of docs/campaigns.md

MOE_OUT: the outputs of ``python3 bench/h200_moe_tune.py .sgl OUT 540`` (the seeded tunes of both
shapes with default / shipped / tuned re-timed, the exhaustive runs of shape A at M = 1 and 64, the
reference-kernel check); FLAGS_OUT: the folder holding ``part1/`` and ``part2/`` of
``bash bench/run_h200_campaign.sh OUT 1`` and ``... OUT 2`` (each ``events.jsonl``).

``build-moe`` keeps every event the device recorded (``seq``/``stream_version`` dropped: the store
assigns them again), turns the re-timings the script printed into ``kernel_config_measured``
events with a ``label`` (their values as measured; ``source`` names the file they come from),
records the tuned files and the decision, computed from those re-timings. ``build-flags`` merges
the two parts' ledgers with the speculative trial already in data/h200_flags.jsonl (session
``h200-spec``) and adds, per candidate, the measured flag finding (sm90), the triage and the
decision, each computed from the plan's comparisons by the rule in ``flag_outcome``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.write.jsonl import event_to_json, read_jsonl  # noqa: E402
from schemas import Actor  # noqa: E402
from schemas.events import KernelConfigMeasured, MoeConfigRecorded, NoteAdded  # noqa: E402

MOE = ROOT / "data" / "h200_moe_tune.jsonl"
FLAGS = ROOT / "data" / "h200_flags.jsonl"
SESSION = "h200-moe-tune"


def _strip(event):
    return event.model_copy(update={"seq": None, "stream_version": None})


def _labelled(tune, tune_id, host, M, label, row, source, session=SESSION):
    return KernelConfigMeasured(
        tune_id=tune_id,
        batch_size=int(M),
        config=row["config"],
        latency_us=row["median_us"],
        label=label,
        samples_us=row.get("all_us", []),
        budget_ms=10.8,
        tune_key=tune.tune_key,
        session_id=session,
        actor=Actor(kind="runner", name="moe-tune"),
        host=host,
        source=source,
    )


def _tuned_files(run: Path) -> list[tuple[str, dict]]:
    """(file name, content) of the tuned config files a run wrote (``moe_configs/`` or cfgs.tgz)."""
    files = sorted((run / "moe_configs").rglob("*.json")) if (run / "moe_configs").is_dir() else []
    if files:
        return [(f.name, json.loads(f.read_text())) for f in files]
    import tarfile

    if not (run / "cfgs.tgz").exists():
        return []
    with tarfile.open(run / "cfgs.tgz") as tar:
        return [
            (Path(m.name).name, json.load(tar.extractfile(m)))
            for m in tar.getmembers()
            if m.isfile() and m.name.endswith(".json")
        ]


def build_moe(run: Path) -> None:
    """data/h200_moe_tune.jsonl from one run of bench/h200_moe_tune.py (module docstring)."""
    ev = read_jsonl(run / "h200_moe_tune.jsonl")
    exh_path = run / "h200_moe_exhaustive.jsonl"
    exh = read_jsonl(exh_path) if exh_path.exists() else []
    comp = json.loads((run / "h200_moe_compare.json").read_text())
    # in the order they were measured; the tune's own moe_config_recorded are replaced by the
    # ones below (which say which bench run wrote the files)
    out = [_strip(e) for e in ev + exh if e.type != "moe_config_recorded"]
    completed = {e.tune_id: e for e in ev if e.type == "kernel_tune_completed"}
    for name, shape in comp["shapes"].items():
        tune = completed[shape["tune_id"]]
        for M, row in shape["rows"].items():
            for label in ("default", "shipped", "tuned"):
                out.append(
                    _labelled(
                        tune,
                        shape["tune_id"],
                        tune.host,
                        M,
                        label,
                        row[label],
                        f"bench/h200_moe_tune.py: h200_moe_compare.json shapes.{name}.rows.{M}",
                    )
                )
    tune_a = completed.get(comp["shapes"].get("A", {}).get("tune_id", ""))
    for M, row in comp.get("halving_vs_exhaustive", {}).items():
        for label, key in (("halving-best", "halving"), ("exhaustive-best", "exhaustive")):
            out.append(
                _labelled(
                    tune_a,
                    tune_a.tune_id,
                    tune_a.host,
                    M,
                    label,
                    {"config": row[f"{key}_config"], "median_us": row[f"{key}_us"]},
                    f"bench/h200_moe_tune.py: h200_moe_compare.json halving_vs_exhaustive.{M}",
                )
            )
    host = next(e.host for e in ev if e.host is not None)
    ref = comp.get("reference_kernel", [])
    if ref and all("reference_us" in r and "sglang_us" in r for r in ref):
        lines = [
            f"M={r['M']} {r['config']}: reference {r['reference_us']} us (rel. err {r['reference_rel_err']:.1e}), "
            f"sglang {r['sglang_us']} us (rel. err {r['sglang_rel_err']:.1e})"
            for r in ref
        ]
        out.append(
            NoteAdded(
                text="tuneledger's reference fused-MoE Triton kernel against SGLang 0.5.23's on the H200, "
                "E=64 N=640 K=3584 top-8 bf16, both checked against torch: " + "; ".join(lines),
                session_id=SESSION,
                actor=Actor(kind="runner", name="moe-tune"),
                host=host,
                source="bench/h200_moe_tune.py: h200_moe_compare.json reference_kernel",
            )
        )
    triton = next(e.triton_version for e in ev if e.type == "kernel_tune_started")
    for name, data in _tuned_files(run):
        E, N = (int(part.split("=")[1]) for part in name.split(",")[:2])
        out.append(
            MoeConfigRecorded(
                file_name=name,
                E=E,
                N=N,
                device_name="NVIDIA_H200",
                triton_version=triton,
                configs=data,
                origin="tuned by tuneledger run tune (SGLang 0.5.23 kernel, seeded with SGLang's "
                "shipped H200 file; bench/h200_moe_tune.py)",
                session_id=SESSION,
                actor=Actor(kind="runner", name="moe-tune"),
                host=host,
                source=f"bench/h200_moe_tune.py: moe_configs/{name}",
            )
        )
    out += moe_decisions(out)
    MOE.write_text("".join(event_to_json(e) + "\n" for e in out), encoding="utf-8")
    print(f"{MOE}: {len(out)} events")


FP8_SESSION = "h200-moe-tune-fp8"


def build_moe_fp8(run: Path) -> None:
    """Adds one run of ``bench/h200_moe_tune.py ... --fp8`` to data/h200_moe_tune.jsonl: its tune
    events, the default / shipped / tuned re-timings as labelled ``kernel_config_measured``, the
    tuned files and a note of the outcome, all in session ``h200-moe-tune-fp8``. The bf16 events
    are kept; an earlier fp8 run's are replaced (run it again after ``build-moe``, which rewrites
    the file from a bf16 run alone)."""
    kept = [e for e in read_jsonl(MOE) if e.session_id != FP8_SESSION] if MOE.exists() else []
    ev = read_jsonl(run / "h200_moe_fp8_tune.jsonl")
    comp = json.loads((run / "h200_moe_fp8_compare.json").read_text())
    out = [_strip(e) for e in ev if e.type != "moe_config_recorded"]  # replaced below
    completed = {getattr(e, "tune_id", None): e for e in ev if e.type == "kernel_tune_completed"}
    host = next(e.host for e in ev if e.host is not None)
    lines = []
    for name, shape in comp["shapes"].items():
        if "tune_id" not in shape:
            lines.append(
                f"{shape['shape']}: not tuned ({shape.get('skipped') or shape.get('error')})"
            )
            continue
        tune = completed[shape["tune_id"]]
        parts = []
        for M, row in shape["rows"].items():
            for label in ("default", "shipped", "tuned"):
                if label in row:
                    out.append(
                        _labelled(
                            tune,
                            shape["tune_id"],
                            tune.host,
                            M,
                            label,
                            row[label],
                            f"bench/h200_moe_tune.py --fp8: h200_moe_fp8_compare.json shapes.{name}.rows.{M}",
                            FP8_SESSION,
                        )
                    )
            parts.append(f"M={M} " + ", ".join(f"{k} {r['median_us']} us" for k, r in row.items()))
        lines.append(
            f"{shape['shape']} (shipped file: {shape.get('shipped_file') or 'none'}): "
            + "; ".join(parts)
        )
    triton = next(
        (getattr(e, "triton_version", None) for e in ev if e.type == "kernel_tune_started"), None
    )
    for fname, data in _tuned_files_fp8(run):
        E, N = (int(part.split("=")[1]) for part in fname.split(",")[:2])
        out.append(
            MoeConfigRecorded(
                file_name=fname,
                E=E,
                N=N,
                device_name="NVIDIA_H200",
                triton_version=triton,
                configs=data,
                origin="tuned by tuneledger run tune, fp8 w8a8 block [128, 128] (SGLang 0.5.23 "
                "kernel; bench/h200_moe_tune.py --fp8)",
                session_id=FP8_SESSION,
                actor=Actor(kind="runner", name="moe-tune"),
                host=host,
                source=f"bench/h200_moe_tune.py --fp8: moe_configs_fp8/{fname}",
            )
        )
    out.append(
        NoteAdded(
            text="fp8 w8a8 block [128, 128] tune of SGLang 0.5.23's fused-MoE kernel on the H200, "
            f"every config checked against the dequantised torch reference (tolerance "
            f"{comp.get('tolerance')}), re-timed interleaved at {comp.get('budget_ms')} ms: "
            + " | ".join(lines),
            session_id=FP8_SESSION,
            actor=Actor(kind="runner", name="moe-tune"),
            host=host,
            source="bench/h200_moe_tune.py --fp8: h200_moe_fp8_compare.json",
        )
    )
    allev = kept + out
    MOE.write_text("".join(event_to_json(e) + "\n" for e in allev), encoding="utf-8")
    print(f"{MOE}: {len(kept)} events kept, {len(out)} fp8 events added")


def _tuned_files_fp8(run: Path) -> list[tuple[str, dict]]:
    import tarfile

    if not (run / "fp8_cfgs.tgz").exists():
        return []
    with tarfile.open(run / "fp8_cfgs.tgz") as tar:
        return [
            (Path(m.name).name, json.load(tar.extractfile(m)))  # type: ignore[arg-type]
            for m in tar.getmembers()
            if m.isfile() and m.name.endswith(".json")
        ]


PLANS = (ROOT / "examples" / "h200-flags.toml", ROOT / "examples" / "h200-flags-cb.toml")


def build_flags(run: Path) -> None:
    """data/h200_flags.jsonl: both campaign parts' ledgers, the speculative trial kept from the
    current file, and the scripted findings, triage and decisions (``flag_triage``)."""
    kept = [e for e in read_jsonl(FLAGS) if e.session_id == "h200-spec"] if FLAGS.exists() else []
    seen: set = set()
    events = []
    for part in ("part1", "part2"):
        path = run / part / "events.jsonl"
        if not path.exists():
            print(f"{path}: missing, that part is left out", file=sys.stderr)
            continue
        for e in read_jsonl(path):
            if e.event_id not in seen:  # a part run on a kept machine may repeat the other's
                seen.add(e.event_id)
                events.append(_strip(e))
    events += flag_triage(events)
    out = events + [e for e in kept if e.event_id not in seen]
    FLAGS.write_text("".join(event_to_json(e) + "\n" for e in out), encoding="utf-8")
    print(f"{FLAGS}: {len(out)} events ({len(kept)} of the speculative trial kept)")


AGENT = Actor(kind="agent", name="i14-gpu-runners")
TRIAGE_SOURCE = "triage of the H200 runs (bench/h200_data.py)"


def _id(key: str):
    import uuid

    return uuid.uuid5(uuid.NAMESPACE_URL, "tuneledger/h200/" + key)


#: The metrics a flag's outcome is read from (throughput and the latencies a user feels).
OUTCOME_METRICS = ("output_throughput", "median_ttft_ms", "median_tpot_ms")


def flag_outcome(comparisons: list) -> tuple[str, str]:
    """(verdict, one-line summary) of one candidate from its comparisons at every concurrency.

    The rule: ``effective`` when some metric of ``OUTCOME_METRICS`` improved (its CI clears tau)
    at some concurrency and none regressed; ``harmful`` when some regressed and none improved;
    ``no-measurable-change`` when every one is within noise; ``unknown`` otherwise (mixed, or
    inconclusive with these repeats) — the summary says which.
    """
    cs = [c for c in comparisons if c.metric in OUTCOME_METRICS]
    improved = [c for c in cs if c.verdict == "improved"]
    regressed = [c for c in cs if c.verdict == "regressed"]
    if improved and not regressed:
        verdict = "effective"
    elif regressed and not improved:
        verdict = "harmful"
    elif cs and all(c.verdict == "no-measurable-change" for c in cs):
        verdict = "no-measurable-change"
    else:
        verdict = "unknown"

    def part(c) -> str:
        # ComparisonCompleted.change: value / baseline - 1 (one sign convention, schemas.metrics)
        pct = "?" if c.change is None else f"{100 * c.change:+.0f}%"
        return f"c={c.concurrency} {c.metric} {pct} ({c.verdict})"

    tput = sorted(
        (c for c in cs if c.metric == "output_throughput"), key=lambda c: c.concurrency or 0
    )
    notable = sorted(improved + regressed, key=lambda c: (c.metric, c.concurrency or 0))
    summary = "; ".join(part(c) for c in tput)
    if notable:
        summary += "; beyond noise: " + ", ".join(part(c) for c in notable)
    if verdict == "unknown" and improved and regressed:
        summary += " (mixed)"
    return verdict, summary


def flag_triage(events: list) -> list:
    """Per candidate of the two plans: a measured finding for its flag on sm90 (unless the plan
    recorded one), its triage and, when settled, a decision — all from ``flag_outcome``."""
    from runners.plan import candidate_id, load_plan
    from schemas.envelope import Evidence
    from schemas.events import CandidateTriaged, DecisionRecorded, FindingRecorded

    hosts = [e.host for e in events if e.host is not None and e.host.compute_capability]
    if not hosts:
        return []
    host = hosts[0]
    comps: dict[str, list] = {}
    for e in events:
        if e.type == "comparison_completed":
            comps.setdefault(e.config_name, []).append(e)
    benches: dict[str, list] = {}
    for e in events:
        if e.type == "benchmark_completed":
            benches.setdefault(e.config_name, []).append(e)
    recorded = {
        e.flag for e in events if e.type == "finding_recorded" and e.basis == "measured" and e.flag
    }
    out: list = []
    common = dict(session_id="h200-flags", actor=AGENT, source=TRIAGE_SOURCE, host=host)
    for plan_path in PLANS:
        plan = load_plan(plan_path)
        base = plan.plan.baseline
        for spec in plan.candidates:
            cid = candidate_id(spec)
            cs = comps.get(spec.config, [])
            runs = benches.get(spec.config, [])
            if not any(r.valid for r in runs):
                if not runs:
                    continue  # not run (the part is missing)
                cause = next((r.notes for r in runs if r.notes), "no valid run")
                verdict, summary = "incompatible", f"no valid run against {base}: {cause}"[:400]
            else:
                verdict, summary = flag_outcome(cs)
                summary = f"against {base}, {len({r.repeat for r in runs if r.valid})} runs per arm: {summary}"
            ids = [c.event_id for c in cs if c.metric in OUTCOME_METRICS]
            if spec.flag and spec.flag not in recorded and verdict != "unknown":
                out.append(
                    FindingRecorded(
                        event_id=_id(f"finding:{cid}"),
                        kind="measured-change",
                        basis="measured",
                        flag=spec.flag,
                        verdict=verdict,
                        engine=host.engine,
                        engine_version=host.engine_version,
                        message=f"--{spec.flag} on {host.gpu_name} ({host.compute_capability}): {summary}",
                        evidence=[Evidence(kind="event", ref=str(i)) for i in ids[:24]],
                        **common,
                    )
                )
            status = {
                "effective": "accepted",
                "harmful": "rejected",
                "no-measurable-change": "rejected",
                "incompatible": "rejected",
            }.get(verdict, "deferred")
            out.append(
                CandidateTriaged(
                    event_id=_id(f"triage:{cid}"),
                    candidate_id=cid,
                    status=status,
                    verdict=verdict,
                    reason=summary[:600],
                    **common,
                )
            )
            if status != "deferred":
                title = spec.title or f"--{spec.flag or spec.config}"
                out.append(
                    DecisionRecorded(
                        event_id=_id(f"decision:{cid}"),
                        candidate_id=cid,
                        decision=(
                            f"serve with {title} on the H200"
                            if status == "accepted"
                            else f"do not use {title} on the H200 ({verdict})"
                        ),
                        rationale=summary[:600],
                        alternatives=[f"{base} as it is"],
                        evidence_event_ids=ids[:24],
                        **common,
                    )
                )
    return out


def moe_outcome(events: list) -> dict[int, dict[str, int]]:
    """Per tuned shape (its E): how many batch sizes the tuned config was faster than SGLang's
    shipped one beyond the noise (the larger (max - min) / median spread of the two re-timings),
    within it, or slower beyond it, and the batch sizes measured."""
    rows: dict[tuple[str, int], dict[str, object]] = {}
    for e in events:
        if e.type == "kernel_config_measured" and e.label in ("shipped", "tuned"):
            rows.setdefault((e.tune_id, e.batch_size), {})[e.label] = e
    starts = {e.tune_id: e for e in events if e.type == "kernel_tune_started"}
    out: dict[int, dict[str, int]] = {}
    for (tid, _m), d in rows.items():
        if len(d) < 2:
            continue
        sh, tu = d["shipped"], d["tuned"]
        noise = max(
            (max(x.samples_us) - min(x.samples_us)) / statistics.median(x.samples_us)
            for x in (sh, tu)
        )
        change = tu.latency_us / sh.latency_us - 1
        key = "faster" if change < -noise else "slower" if change > noise else "same"
        o = out.setdefault(starts[tid].E, {"faster": 0, "same": 0, "slower": 0, "n": 0})
        o[key] += 1
        o["n"] += 1
    return out


def moe_decisions(events: list) -> list:
    """The decision on the tuned MoE configs, computed from the labelled re-timings
    (``moe_outcome``): a shape's tuned file is used where it beats the shipped one beyond noise
    at some batch size and is never slower beyond noise."""
    from schemas.events import CandidateProposed, CandidateTriaged, DecisionRecorded

    host = next(e.host for e in events if e.host is not None)
    common = dict(session_id=SESSION, actor=AGENT, source=TRIAGE_SOURCE, host=host)
    starts = {e.E: e for e in events if e.type == "kernel_tune_started" and "halving" in e.search}
    outcome = moe_outcome(events)
    ids = [
        e.event_id
        for e in events
        if e.type == "kernel_config_measured" and e.label in ("shipped", "tuned")
    ]
    use, keep, lines = [], [], []
    for E, o in sorted(outcome.items()):
        name = f"E={E},N={starts[E].N}"
        lines.append(
            f"{name}: tuned faster than shipped beyond noise at {o['faster']} of {o['n']} batch "
            f"sizes, within noise at {o['same']}, slower beyond noise at {o['slower']}"
        )
        (use if o["faster"] and not o["slower"] else keep).append(name)
    decision = "; ".join(
        [
            f"use the tuned {n} file on the H200 (triton {starts[int(n[2:].split(',')[0])].triton_version})"
            for n in use
        ]
        + [f"keep SGLang's shipped {n} file" for n in keep]
    )
    return [
        CandidateProposed(
            event_id=_id("propose:moe"),
            candidate_id="kernel-tune:fused-moe-h200",
            kind="kernel-tune",
            title="tune SGLang's fused-MoE Triton kernel on the H200",
            hypothesis="a tune on this GPU and Triton beats the shipped triton_3_1_0 / 3_7_1 files",
            **common,
        ),
        CandidateTriaged(
            event_id=_id("triage:moe"),
            candidate_id="kernel-tune:fused-moe-h200",
            status="done",
            verdict="effective" if use else "no-measurable-change",
            reason="; ".join(lines),
            **common,
        ),
        DecisionRecorded(
            event_id=_id("decision:moe"),
            candidate_id="kernel-tune:fused-moe-h200",
            decision=decision,
            rationale="; ".join(lines)
            + ". The tune re-times its winner against the shipped and default configs and keeps "
            "the fastest, so it is never slower than shipped beyond that re-timing's noise.",
            alternatives=["SGLang's default config", "SGLang's shipped files"],
            evidence_event_ids=ids[:50],
            **common,
        ),
    ]


def tables() -> None:
    events = read_jsonl(MOE)
    starts = {e.tune_id: e for e in events if e.type == "kernel_tune_started"}
    labelled: dict[tuple[str, int], dict[str, object]] = {}
    for e in events:
        if e.type == "kernel_config_measured" and e.label:
            labelled.setdefault((e.tune_id, e.batch_size), {})[e.label] = e
    done = {e.tune_id: e for e in events if e.type == "kernel_tune_completed"}
    for tid, start in starts.items():
        rows = sorted(m for (t, m) in labelled if t == tid and "tuned" in labelled[(t, m)])
        if not rows or tid not in done:
            continue
        res = done[tid].results
        block = f" block {start.block_shape}" if getattr(start, "block_shape", None) else ""
        print(
            f"\nE={start.E} N={start.N} K={start.K} top-{start.topk} {start.dtype}{block}, tune {tid} "
            f"({done[tid].duration_s:.0f} s, {done[tid].measured} timings)\n"
        )
        print(
            "| M | SGLang default µs | SGLang shipped µs | tuned µs | tuned vs shipped | tuned vs default | "
            "noise (max spread) | tuned config (kept from) | bandwidth | FLOP/s |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for m in rows:
            d = labelled[(tid, m)]
            dd, ss, tt = (d.get(k) for k in ("default", "shipped", "tuned"))
            spread = max(
                100 * (max(x.samples_us) - min(x.samples_us)) / statistics.median(x.samples_us)
                for x in (dd, ss, tt)
                if x is not None and x.samples_us
            )
            c = tt.config
            r = res[str(m)]
            sh = f"{ss.latency_us:.1f}" if ss else "—"
            vs_sh = f"{100 * (tt.latency_us / ss.latency_us - 1):+.1f}%" if ss else "—"
            print(
                f"| {m} | {dd.latency_us:.1f} | {sh} | {tt.latency_us:.1f} | "
                f"{vs_sh} | {100 * (tt.latency_us / dd.latency_us - 1):+.1f}% | "
                f"{spread:.1f}% | {c['BLOCK_SIZE_M']}/{c['BLOCK_SIZE_N']}/{c['BLOCK_SIZE_K']} G{c['GROUP_SIZE_M']} "
                f"w{c['num_warps']} s{c['num_stages']} ({r.get('kept', 'search')}) | "
                f"{100 * r['bandwidth_fraction']:.0f}% | {100 * r['flops_fraction']:.1f}% |"
            )
    print(
        "\n| M | halving best µs | exhaustive best µs | gap | halving search s (compile) | "
        "exhaustive search s (compile) | time ratio | configs timed |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (tid, m), d in sorted(labelled.items(), key=lambda kv: kv[0][1]):
        if "halving-best" not in d:
            continue
        h, x = d["halving-best"], d["exhaustive-best"]
        exh = next(
            e
            for e in events
            if e.type == "kernel_tune_completed"
            and e.results.get(str(m))
            and "exhaustive" in (starts[e.tune_id].search or "")
        )
        hr, xr = done[tid].results[str(m)], exh.results[str(m)]
        hs, xs = hr["search_s"], xr["search_s"]
        print(
            f"| {m} | {h.latency_us:.2f} | {x.latency_us:.2f} | {100 * (h.latency_us / x.latency_us - 1):+.2f}% | "
            f"{hs:.1f} ({hr.get('prepare_s', float('nan')):.1f}) | {xs:.1f} ({xr.get('prepare_s', float('nan')):.1f}) | "
            f"{hs / xs:.1%} | {hr['configs_timed']} of {xr['configs_timed']} |"
        )
    flag_table()


def flag_table() -> None:
    """The flag campaign's outcome per candidate (the scripted triage of ``flag_triage``)."""
    if not FLAGS.exists():
        return
    events = read_jsonl(FLAGS)
    titles = {e.candidate_id: e.title for e in events if e.type == "candidate_proposed"}
    print("\n| candidate | verdict (sm90) | triage | measured (value / baseline - 1) |")
    print("|---|---|---|---|")
    for e in events:
        if (
            e.type == "candidate_triaged"
            and e.source == TRIAGE_SOURCE
            and e.session_id == "h200-flags"
        ):
            print(
                f"| {titles.get(e.candidate_id, e.candidate_id)} | {e.verdict} | {e.status} | "
                f"{(e.reason or '').replace('|', '/')} |"
            )


PAIR_SESSION = "h200-moe-pair"
PAIR = ROOT / "data" / "h200_moe_pair"
PAIR_FIXTURE = ROOT / "tests" / "fixtures" / "h200_moe_pair_timings.json"
#: the tunes the CPU tests replay, by the name bench/h200_moe_pair.py gave them: the seeds' shape
#: in bf16 (q), Qwen3-30B-A3B at TP1 in bf16 (w) and fp8 block [128, 128] (w8)
PAIR_FIXTURES = {
    "q": PAIR_FIXTURE,
    "w": PAIR_FIXTURE.with_name("h200_moe_pair_timings_e128_n768.json"),
    "w8": PAIR_FIXTURE.with_name("h200_moe_pair_timings_e128_n768_fp8.json"),
}


def build_pair(runs: list[Path]) -> None:
    """Adds runs of ``bench/h200_moe_pair.py`` to data/: each tune's start, completion (its per-M
    results: default, shipped, one config, two configs) and files to data/h200_moe_tune.jsonl
    (session ``h200-moe-pair``; the events of an earlier build of the same runs replaced, by event
    id, those of other runs kept: a device call's outputs do not outlive the session, so each
    build adds to what the earlier ones left), the summaries, logs and files to
    data/h200_moe_pair/, and the timings of the tunes in ``PAIR_FIXTURES`` (every (M, GEMM,
    config, window)) to their tests/fixtures/ file, which the CPU tests replay."""
    import tarfile

    out = []
    PAIR.mkdir(exist_ok=True)
    for run in runs:
        for f in sorted(run.glob("*.jsonl")):
            ev = read_jsonl(f)
            out += [
                _strip(e)
                for e in ev
                if e.type in ("kernel_tune_started", "kernel_tune_completed", "moe_config_recorded")
            ]
            if f.stem in PAIR_FIXTURES:
                _pair_fixture(ev, PAIR_FIXTURES[f.stem])
        summary = json.loads((run / "summary.json").read_text())
        for name, shape in summary["shapes"].items():
            (PAIR / f"{name}_summary.json").write_text(json.dumps(shape, indent=1) + "\n")
        (PAIR / ("_".join(summary["shapes"]) + "_log.txt")).write_text(
            (run / "log.txt").read_text()
        )
        with tarfile.open(run / "cfgs.tgz") as tar:
            for m in tar.getmembers():
                target = PAIR / Path(m.name).name
                # the first run's file stays: a later exhaustive run of the same shape writes
                # one for M = 1 and 64 alone
                if m.isfile() and m.name.endswith(".json") and not target.exists():
                    target.write_bytes(tar.extractfile(m).read())
    new = {e.event_id for e in out}
    kept = [e for e in read_jsonl(MOE) if e.event_id not in new] if MOE.exists() else []
    MOE.write_text("".join(event_to_json(e) + "\n" for e in kept + out), encoding="utf-8")
    print(f"{MOE}: {len(kept)} events kept, {len(out)} added")


def _pair_fixture(ev: list, path: Path) -> None:
    """The replayable timings of one split tune: latency by M, GEMM (``both`` for one config on
    both), config key and window; the early stops' probe figures apart; the facts, the shape, the
    shipped configs it was seeded with (each M's nearest entry, as the results name them) and the
    results."""
    from runners.moe.space import config_key

    lat: dict = {}
    probe: dict = {}
    for e in ev:
        if e.type != "kernel_config_measured":
            continue
        g = e.gemm or "both"
        slot = probe if e.label == "early-stop" else lat
        row = slot.setdefault(str(e.batch_size), {}).setdefault(g, {})
        key = (
            config_key(e.config)
            if e.label == "early-stop"
            else f"{config_key(e.config)}@{e.budget_ms}"
        )
        row[key] = e.latency_us if e.rejected is None else e.rejected
    done = next(e for e in ev if e.type == "kernel_tune_completed")
    start = next(e for e in ev if e.type == "kernel_tune_started")
    facts = {
        "gpu_name": start.device_name,
        "compute_capability": start.host.compute_capability,
        "shared_memory_limit": start.shared_memory_limit,
        "triton_version": start.triton_version,
    }
    shape = {"E": start.E, "N": start.N, "K": start.K, "topk": start.topk, "dtype": start.dtype}
    if start.block_shape:
        shape["block_shape"] = list(start.block_shape)
    seeds = {m: r["shipped_config"] for m, r in done.results.items() if "shipped_config" in r}
    seeds_down = {
        m: r["shipped_down_config"] for m, r in done.results.items() if "shipped_down_config" in r
    }
    data = {
        "facts": facts,
        "shape": shape,
        "seeds": seeds,
        "seeds_down": seeds_down,
        "latency_us": lat,
        "probe_us": probe,
        "results": done.results,
    }
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["build-pair"]:
        build_pair([Path(p) for p in sys.argv[2:]])
    elif sys.argv[1:2] == ["build-moe"]:
        build_moe(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["build-moe-fp8"]:
        build_moe_fp8(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["build-flags"]:
        build_flags(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["tables"]:
        tables()
    else:
        sys.exit(__doc__)
