"""``tuneledger run spec``: speculative-decoding trials, each a restart and a benchmark against the
no-speculation baseline, interleaved and repeated like ``run plan`` (it runs on ``runners.plan``).

A spec file (TOML)::

    [spec]
    session = "spec-h200"
    baseline = "baseline"            # the configuration without speculation
    repeats = 3
    concurrency = [1, 8]

    [[trials]]                       # SGLang: server flags
    name = "eagle-3-1-4"
    algorithm = "EAGLE"              # --speculative-algorithm
    num_steps = 3                    # --speculative-num-steps
    eagle_topk = 1                   # --speculative-eagle-topk
    num_draft_tokens = 4             # --speculative-num-draft-tokens
    draft_model = "/models/eagle"    # --speculative-draft-model-path

    [[trials]]                       # vLLM: --speculative-config '{"method": ..., ...}'
    name = "ngram-3"
    algorithm = "ngram"              # "method"
    num_draft_tokens = 3             # "num_speculative_tokens"
    speculative_config = { prompt_lookup_max = 3, prompt_lookup_min = 1 }   # any other keys

    [[trials]]                       # transformers serve: per-request generation options
    name = "prompt-lookup-10"
    algorithm = "prompt-lookup"
    request_options = { generation_config = '{"prompt_lookup_num_tokens": 10}' }

    [bench] / [defaults] / [configs.NAME]   as in a plan file (runners/plan.py)

Each trial becomes a configuration: the baseline's plus the ``--speculative-*`` flags (and any
``flags`` of the trial); its requests carry ``request_options``. After each arm's benchmarks,
while its server still runs, the accept length is read from (docs/engines.md):

- ``GET /server_info`` (``/get_server_info`` on older SGLang): ``internal_states[i].avg_spec_accept_length``,
  a lifetime average since the server started — hence one trial per server start;
- the server's log: ``Decode batch ... accept len: X, accept rate: Y`` lines, windowed: the series
  is kept and its mean taken;
- ``POST /generate`` once: ``meta_info.spec_accept_length`` of one request (SGLang only);
- vLLM: its own Prometheus counters over each benchmark run (``vllm:spec_decode_num_drafts``,
  ``_num_draft_tokens``, ``_num_accepted_tokens``, kept in each run's ``server_metrics``):
  accept length = 1 + accepted / drafts over all of the trial's runs, acceptance rate =
  accepted / draft tokens (source ``metrics``).

Then, per trial, one ``spec_decoding_trial_completed``: accept length (and its source), the
change in output throughput (with its CI), median TPOT and median TTFT against the baseline at
the lowest concurrency, and a verdict from the throughput comparison.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from ledger.errors import InvalidInput
from ledger.store import LedgerStore
from ledger.write import commands
from schemas import Actor
from schemas.events import SpecDecodingTrialCompleted
from schemas.vocab import FLAG_VERDICT_OF_COMPARISON

from .plan import (
    BenchSection,
    CandidateSpec,
    Plan,
    PlanResult,
    PlanSection,
    Servers,
    read_toml,
    run_plan,
    validated,
)

SPEC_ACTOR = Actor(kind="runner", name="spec")

#: ``accept len: 2.31, accept rate: 0.77`` inside a ``Decode batch`` line (0.5.x formats).
_ACCEPT_RE = re.compile(r"Decode batch.*?accept len: ([0-9.]+)(?:, accept rate: ([0-9.]+))?")

#: Comparison verdict of output throughput -> the trial's verdict.
_VERDICTS = FLAG_VERDICT_OF_COMPARISON


class TrialSpec(BaseModel):
    """``[[trials]]``: one speculative configuration (server flags and/or request options)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    algorithm: str
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    num_draft_tokens: int | None = Field(default=None, ge=1)
    draft_model: str | None = None
    #: vLLM: more keys of ``--speculative-config`` (``prompt_lookup_max``, ``model``...).
    speculative_config: dict[str, Any] = Field(default_factory=dict)
    flags: dict[str, Any] = Field(default_factory=dict)
    request_options: dict[str, Any] = Field(default_factory=dict)
    hypothesis: str | None = None

    def server_flags(self, engine: str) -> dict[str, Any]:
        """SGLang's ``--speculative-*`` flags for this trial, or vLLM's ``--speculative-config``
        JSON (``method`` = algorithm, ``num_speculative_tokens`` = num_draft_tokens, ``model`` =
        draft_model, plus ``speculative_config``), plus its own ``flags``.

        Other engines get only ``flags`` (their speculation is per request)."""
        flags: dict[str, Any] = {}
        if engine == "vllm":
            config: dict[str, Any] = {"method": self.algorithm}
            if self.num_draft_tokens is not None:
                config["num_speculative_tokens"] = self.num_draft_tokens
            if self.draft_model is not None:
                config["model"] = self.draft_model
            # as JSON text: what the flag takes, and a flag value the ledger's events hold
            flags["speculative-config"] = json.dumps({**config, **self.speculative_config})
        if engine == "sglang":
            flags["speculative-algorithm"] = self.algorithm
            for key, value in (
                ("speculative-num-steps", self.num_steps),
                ("speculative-eagle-topk", self.eagle_topk),
                ("speculative-num-draft-tokens", self.num_draft_tokens),
                ("speculative-draft-model-path", self.draft_model),
            ):
                if value is not None:
                    flags[key] = value
        return {**flags, **self.flags}


@dataclass
class SpecPlan:
    """A parsed spec file: the underlying plan (baseline + one arm per trial) and the trials."""

    plan: Plan
    trials: list[TrialSpec]

    @property
    def request_options(self) -> dict[str, dict[str, Any]]:
        return {t.name: t.request_options for t in self.trials if t.request_options}


def load_spec(path: str | Path) -> SpecPlan:
    """Read a spec file (module docstring).

    Raises:
        InvalidInput: missing file, bad TOML, unknown keys, unknown baseline, duplicate trial names.
    """
    from runners.server.configs import parse_configs

    file = Path(path)
    data = read_toml(file, "spec", {"spec", "trials", "bench", "defaults", "configs"})
    section, trials, bench = validated(
        file,
        lambda: (
            PlanSection.model_validate(data.get("spec", {})),
            [TrialSpec.model_validate(t) for t in data.get("trials", [])],
            BenchSection.model_validate(data.get("bench", {})),
        ),
    )
    if not trials:
        raise InvalidInput(f"{file}: no [[trials]]: nothing to compare against the baseline")
    configs = parse_configs(
        {k: v for k, v in data.items() if k in ("defaults", "configs")}, str(file)
    )
    base = configs.get(section.baseline)
    if base is None:
        raise InvalidInput(
            f"{file}: no configuration {section.baseline}; known: {', '.join(sorted(configs))}"
        )
    names = [t.name for t in trials]
    if len(set(names)) != len(names) or section.baseline in names:
        raise InvalidInput(
            f"{file}: trial names must be unique and differ from the baseline: {names}"
        )
    for t in trials:
        configs[t.name] = base.model_copy(
            update={"name": t.name, "flags": {**base.flags, **t.server_flags(base.engine)}}
        )
    candidates = [
        CandidateSpec(
            config=t.name, title=f"speculative decoding: {t.name}", hypothesis=t.hypothesis
        )
        for t in trials
    ]
    return SpecPlan(Plan(section, candidates, bench, configs, str(file)), trials)


@dataclass
class AcceptObservation:
    """What one arm's server said about accepted tokens (None where it said nothing)."""

    server_info: float | None = None
    decode_series: list[float] = field(default_factory=list)
    accept_rates: list[float] = field(default_factory=list)
    per_request: float | None = None


def server_info_accept_length(base_url: str, *, timeout_s: float = 10.0) -> float | None:
    """Mean over DP ranks of ``internal_states[i].avg_spec_accept_length`` from ``/server_info``
    (``/get_server_info`` on SGLang before 0.4.7); None when absent (no speculation, other engine)."""
    for path in ("/server_info", "/get_server_info"):
        try:
            r = httpx.get(base_url.rstrip("/") + path, timeout=timeout_s)
        except httpx.HTTPError:
            return None
        if r.status_code == 404:
            continue
        if r.status_code != 200:
            return None
        try:
            states = r.json().get("internal_states") or []
        except ValueError:
            return None
        values = [
            float(s["avg_spec_accept_length"])
            for s in states
            if isinstance(s, dict) and s.get("avg_spec_accept_length") is not None
        ]
        return fmean(values) if values else None
    return None


def decode_log_accept(lines: list[str]) -> tuple[list[float], list[float]]:
    """The ``accept len`` and ``accept rate`` series of SGLang's ``Decode batch`` lines."""
    lengths, rates = [], []
    for line in lines:
        m = _ACCEPT_RE.search(line)
        if m:
            lengths.append(float(m.group(1)))
            if m.group(2):
                rates.append(float(m.group(2)))
    return lengths, rates


def generate_accept_length(
    base_url: str, prompt: str, *, max_new_tokens: int = 32, timeout_s: float = 60.0
) -> float | None:
    """``meta_info.spec_accept_length`` of one greedy, non-streamed ``POST /generate`` (SGLang)."""
    try:
        r = httpx.post(
            base_url.rstrip("/") + "/generate",
            timeout=timeout_s,
            json={
                "text": prompt,
                "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens},
            },
        )
        if r.status_code != 200:
            return None
        value = (r.json().get("meta_info") or {}).get("spec_accept_length")
        return float(value) if value is not None else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


def observe(run: Any, engine: str, prompt: str) -> AcceptObservation:
    """Read the three accept-length sources of a running server (``run``: a ``ServerRun``)."""
    obs = AcceptObservation()
    if engine != "sglang":
        return obs  # transformers serve / vLLM expose none of SGLang's accept-length sources
    obs.server_info = server_info_accept_length(run.base_url)
    log_path = getattr(run, "log_path", None)
    if log_path and Path(log_path).exists():
        obs.decode_series, obs.accept_rates = decode_log_accept(
            Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
        )
    obs.per_request = generate_accept_length(run.base_url, prompt)
    return obs


def run_spec(
    spec: SpecPlan,
    store: LedgerStore,
    servers: Servers,
    *,
    say: Callable[[str], None] = lambda _l: None,
    progress: bool = True,
    resume: bool = False,
) -> tuple[PlanResult, list[SpecDecodingTrialCompleted]]:
    """Run the trials (module docstring); return the plan's result and the trial events recorded.

    ``resume``: as ``run_plan``'s (the runs the session holds are compared, not measured again;
    a resumed trial's accept length comes from its runs' recorded engine counters)."""
    plan = spec.plan
    observed: dict[str, list[AcceptObservation]] = {}
    probe = "Repeat the following text exactly: " + " ".join(
        f"item {i} is ready;" for i in range(24)
    )

    def after_sweep(arm: str, run: Any, _repeat: int) -> None:
        if arm != plan.plan.baseline:
            observed.setdefault(arm, []).append(observe(run, plan.configs[arm].engine, probe))

    result = run_plan(
        plan,
        store,
        servers,
        say=say,
        progress=progress,
        request_options=spec.request_options,
        after_sweep=after_sweep,
        resume=resume,
    )
    events = []
    for trial in spec.trials:
        event = trial_event(spec, trial, result, observed.get(trial.name, []))
        commands.record(store, event)
        events.append(event)
        say(
            f"{trial.name}: accept length {event.accept_length if event.accept_length is not None else 'n/a'}"
            f" ({event.accept_length_source or 'not reported by this engine'}); output throughput "
            f"{_pct(event.output_throughput_change)} at c={event.concurrency}: {event.verdict}"
        )
    return result, events


def _counted_acceptance(runs: list[dict[str, float]]) -> tuple[float, float | None] | None:
    """(accept length, draft acceptance rate) from the engine's counters over the runs (vLLM's
    ``server_metrics``): 1 + accepted / drafts, accepted / draft tokens; None without drafts."""
    drafts = sum(m.get("vllm:spec_decode_num_drafts", 0.0) for m in runs)
    tokens = sum(m.get("vllm:spec_decode_num_draft_tokens", 0.0) for m in runs)
    accepted = sum(m.get("vllm:spec_decode_num_accepted_tokens", 0.0) for m in runs)
    if drafts <= 0:
        return None
    return round(1.0 + accepted / drafts, 4), round(accepted / tokens, 4) if tokens > 0 else None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def trial_event(
    spec: SpecPlan, trial: TrialSpec, result: PlanResult, observations: list[AcceptObservation]
) -> SpecDecodingTrialCompleted:
    """The ``spec_decoding_trial_completed`` of one trial from its comparisons and observations.

    Accept length: the mean of the per-start ``/server_info`` values when there are any (one per
    server start: a lifetime average), else the mean of the ``Decode batch`` series, else the
    per-request value."""
    plan = spec.plan
    comps = [c for c in result.comparisons if c.config_name == trial.name]
    loads = sorted({c.concurrency for c in comps if c.concurrency is not None})
    load = loads[0] if loads else None
    by_metric = {c.metric: c for c in comps if c.concurrency == load}
    thr = by_metric.get("output_throughput")
    series = [x for o in observations for x in o.decode_series]
    rates = [x for o in observations for x in o.accept_rates]
    infos = [o.server_info for o in observations if o.server_info is not None]
    per_req = [o.per_request for o in observations if o.per_request is not None]
    counted = _counted_acceptance(
        [p.event.server_metrics for p in result.points if p.event.config_name == trial.name]
    )
    if counted is not None:
        accept, source = counted[0], "metrics"
        rates = [counted[1]] if counted[1] is not None else rates
    elif infos:
        accept, source = fmean(infos), "server_info"
    elif series:
        accept, source = fmean(series), "decode_log"
    elif per_req:
        accept, source = fmean(per_req), "meta_info"
    else:
        accept, source = None, None
    verdict = _VERDICTS.get(thr.verdict, "unknown") if thr else "unknown"
    others = [
        f"c={c.concurrency}: {c.verdict} ({_pct(c.change)})"
        for c in comps
        if c.metric == "output_throughput" and c.concurrency != load
    ]
    return SpecDecodingTrialCompleted(
        trial_id=f"{plan.plan.session or 'spec'}:{trial.name}",
        algorithm=trial.algorithm,
        num_steps=trial.num_steps,
        eagle_topk=trial.eagle_topk,
        num_draft_tokens=trial.num_draft_tokens,
        draft_model=trial.draft_model,
        accept_length=accept,
        accept_rate=fmean(rates) if rates else None,
        benchmark_event_ids=[
            p.event.event_id for p in result.points if p.event.config_name == trial.name
        ],
        verdict=verdict,
        candidate_id=f"config:{trial.name}",
        notes=("output throughput at other loads: " + "; ".join(others)) if others else None,
        request_options=trial.request_options,
        flags=plan.configs[trial.name].flags,
        accept_length_source=source,
        accept_length_series=series[:1000],
        per_request_accept_length=fmean(per_req) if per_req else None,
        baseline_config=plan.plan.baseline,
        concurrency=load,
        output_throughput_change=thr.change if thr else None,
        output_throughput_ci=[thr.ci_low, thr.ci_high] if thr and thr.ci_low is not None else None,
        median_tpot_change=by_metric["median_tpot_ms"].change
        if "median_tpot_ms" in by_metric
        else None,
        median_ttft_change=by_metric["median_ttft_ms"].change
        if "median_ttft_ms" in by_metric
        else None,
        runs=thr.runs if thr else None,
        session_id=plan.plan.session,
        actor=SPEC_ACTOR,
        host=result.host,
        source=plan.source,
    )
