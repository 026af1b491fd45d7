"""Benchmark the ledger: single appends, bulk JSONL import, derived views at scale.

Numbers from this script go in docs/performance.md; they are not tests. Run::

    .venv/bin/python bench/bench_ledger.py                      # everything, 1M events
    .venv/bin/python bench/bench_ledger.py --events 200000 --only views

What is measured:

1. ``append``: latency of single-event ``LedgerStore.append`` calls (each opens
   the file, runs one transaction, closes it), on an empty ledger and on a copy
   of the ledger that already holds ``--events`` events.
2. ``import``: a JSONL file of ``--events`` synthetic events imported as a user
   would: ``ledger.write.jsonl.read_jsonl`` (parse + validate) then
   ``LedgerStore.append`` in batches. Batch sizes are compared on a subset
   (``--subset``), the fastest one imports the whole file. A breakdown of the
   store's own steps (model_dump, json.dumps, Arrow build, DuckDB insert with
   and without the table's indexes) is measured on the subset.
3. ``views``: for each view in ``ledger.derive.views.VIEW_NAMES`` on the ledger of
   ``--events`` events: ``SELECT *`` fetched as Arrow (``store.query_arrow``),
   ``SELECT count(*)``, and for ``timeline`` the TUI query
   ``ORDER BY seq DESC LIMIT 200``; the median of ``--reps`` repetitions after
   one warm-up run. Also the file size and the time to open it.

The synthetic campaign is deterministic (seeded): sessions on three GPU hosts,
~0.3% candidates with proposals and triages, flag research and findings over
several flags, archs and engine versions, server runs (started, ready with
startup facts, stopped or failed), benchmark runs with full metrics at
concurrencies 1, 4, 16, 64 over several configurations and workloads (the
bulk, ~88%), kernel tuning, notes, decisions, patches, retractions.

The JSONL file and the imported ledger are cached in ``--workdir`` (keyed by
event count and generator version); results go to ``<workdir>/results-<N>.json``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ledger.derive import views as views_mod
from ledger.store import LedgerStore
from ledger.store import encoding as store_encoding
from ledger.store import schema as store_mod
from ledger.write.jsonl import event_from_obj, iter_jsonl
from schemas import Event, parse_event

#: Bump when the generator's output changes (invalidates cached files).
#: 2: triages carry their stream_version (the command layer requires it); 3: no retraction
#: names a retraction (refused since: a retraction is final)
GENERATOR_VERSION = 3

# --- the synthetic campaign --------------------------------------------------------

HOSTS = (
    {
        "gpu_name": "NVIDIA H200",
        "compute_capability": "sm90",
        "gpu_count": 8,
        "gpu_memory_mib": 143771,
        "driver": "570.124.06",
        "cuda": "12.8",
        "hostname": "h200-node-01",
    },
    {
        "gpu_name": "NVIDIA B200",
        "compute_capability": "sm100",
        "gpu_count": 8,
        "gpu_memory_mib": 183359,
        "driver": "575.57.08",
        "cuda": "12.9",
        "hostname": "b200-node-03",
    },
    {
        "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "compute_capability": "sm120",
        "gpu_count": 4,
        "gpu_memory_mib": 97887,
        "driver": "580.65.06",
        "cuda": "13.0",
        "hostname": "rtx6000-ws",
    },
)
ENGINE_VERSIONS = ("0.4.10", "0.5.0rc2", "0.5.1", "0.5.2", "0.5.3")
MODELS = (
    "Qwen/Qwen3-235B-A22B-FP8",
    "deepseek-ai/DeepSeek-V3.1",
    "openai/gpt-oss-120b",
    "zai-org/GLM-4.6-FP8",
)
FLAG_WORDS = (
    "enable",
    "disable",
    "fused",
    "moe",
    "sum",
    "all",
    "reduce",
    "piecewise",
    "cuda",
    "graph",
    "chunked",
    "prefill",
    "overlap",
    "schedule",
    "torch",
    "compile",
    "flashinfer",
    "mla",
    "deepep",
    "mode",
    "two",
    "batch",
    "dp",
    "attention",
    "radix",
    "cache",
    "mixed",
    "kv",
    "fp8",
    "e4m3",
    "tbo",
    "eplb",
    "spec",
)
ATTENTION_BACKENDS = ("flashinfer", "fa3", "triton", "trtllm_mha", "cutlass_mla")
CONCURRENCIES = (1, 4, 16, 64)
WORKLOADS = (
    {"dataset": "random", "input_len": 1024, "output_len": 1024, "range_ratio": 1.0},
    {"dataset": "random", "input_len": 8192, "output_len": 512, "range_ratio": 1.0},
    {"dataset": "sharegpt", "input_len": None, "output_len": None, "range_ratio": None},
)
REPEATS = 3
FINDING_KINDS = (
    "flag-not-in-effect",
    "piecewise-cuda-graph-off",
    "default-moe-config",
    "decode-without-cuda-graph",
    "capacity-reduced",
    "warning",
    "measured-change",
)
VERDICTS = (
    "effective",
    "no-op",
    "dead-code",
    "not-activated",
    "harmful",
    "incompatible",
    "already-default",
    "no-measurable-change",
    "unknown",
)
WORDS = (
    "the",
    "server",
    "flag",
    "kernel",
    "decode",
    "prefill",
    "graph",
    "batch",
    "throughput",
    "latency",
    "memory",
    "capacity",
    "tokens",
    "config",
    "baseline",
    "regression",
    "improves",
    "no",
    "change",
    "reads",
    "path",
    "activation",
    "when",
    "arch",
    "is",
    "not",
    "used",
    "MoE",
    "tuned",
    "warning",
)


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize() + "."


def _uuid7(rng: random.Random, when: datetime) -> str:
    """A deterministic UUIDv7 (time-ordered, like the store's default ids)."""
    ms = int(when.timestamp() * 1000)
    rand = rng.getrandbits(74)
    value = (
        (ms & ((1 << 48) - 1)) << 80
        | 0x7 << 76
        | ((rand >> 62) & 0xFFF) << 64
        | 0b10 << 62
        | (rand & ((1 << 62) - 1))
    )
    return str(uuid.UUID(int=value))


class Campaign:
    """Generates flat event dicts (JSONL objects) of one long tuning campaign, deterministically."""

    def __init__(self, total: int, seed: int = 20251129) -> None:
        self.total = total
        self.rng = random.Random(seed)
        self.clock = datetime(2025, 6, 1, 8, 0, tzinfo=UTC)
        self.emitted = 0
        rng = self.rng
        flags = set()
        while len(flags) < 300:
            flags.add("-".join(rng.sample(FLAG_WORDS, rng.randint(2, 5))))
        self.flags = sorted(flags)
        self.configs = ["baseline"] + [f"cfg-{i:02d}-" + self.flags[i * 7] for i in range(11)]
        self.config_flags = {
            name: {
                f: rng.choice([True, 1, 2, 4, 8, 8192, "auto", "fa3"])
                for f in rng.sample(self.flags[:60], rng.randint(0, 6))
            }
            for name in self.configs
        }
        self.config_flags["baseline"] = {}
        n_runs = max(1, total // (len(WORKLOADS) * len(CONCURRENCIES) * REPEATS + 5))
        self.n_runs = n_runs
        self.n_sessions = max(2, min(40, total // 40_000))
        n_candidates = max(20, total * 3 // 1000)
        #: expected events per server run of each side activity
        self.rates = {
            "propose": n_candidates / n_runs,
            "triage": 1.8 * n_candidates / n_runs,
            "research": total * 3 // 1000 / n_runs,
            "note": total * 8 // 1000 / n_runs,
            "decision": total * 15 // 10000 / n_runs,
            "patch": total * 3 // 10000 / n_runs,
            "retract": total * 3 // 10000 / n_runs,
            "spec": total * 2 // 10000 / n_runs,
            "tune": total // 50000 / n_runs,
            "moe": total // 50000 / n_runs,
        }
        self.candidates: list[dict[str, Any]] = []
        self.next_candidate = 0
        self.recent_ids: list[str] = []
        self.retracted: set[str] = set()

    # --- helpers

    def _count(self, rate: float) -> int:
        whole = int(rate)
        return whole + (1 if self.rng.random() < rate - whole else 0)

    def _event(
        self,
        type_: str,
        actor: str,
        payload: dict[str, Any],
        host: dict | None = None,
        source: str | None = None,
        advance_s: float = 20.0,
    ) -> dict[str, Any]:
        self.clock += timedelta(seconds=self.rng.uniform(0.2, advance_s))
        kind, _, name = actor.partition(":")
        event = {
            "type": type_,
            "event_id": _uuid7(self.rng, self.clock),
            "recorded_at": self.clock.isoformat(),
            "actor": {"kind": kind, "name": name},
            "session_id": self.session_id,
        }
        if host is not None:
            event["host"] = host
        if source is not None:
            event["source"] = source
        event.update(payload)
        self.emitted += 1
        if self.rng.random() < 0.02:
            self.recent_ids.append(event["event_id"])
            if len(self.recent_ids) > 200:
                self.recent_ids.pop(0)
        return event

    def _host(self, engine_version: str | None = None, partial: bool = False) -> dict[str, Any]:
        host = dict(self.host)
        host["engine"] = "sglang"
        host["engine_version"] = engine_version or self.engine_version
        if partial:
            host = {
                k: host[k] for k in ("gpu_name", "compute_capability", "engine", "engine_version")
            }
        return host

    # --- the campaign

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self._campaign():
            if self.emitted > self.total:
                return
            yield event

    def _campaign(self) -> Iterator[dict[str, Any]]:
        rng = self.rng
        runs_per_session = max(1, math.ceil(self.n_runs / self.n_sessions))
        run_index = 0
        bench_index = 0
        session = 0
        while True:
            self.session_id = f"s{session:03d}-{rng.choice(('tp8', 'ep8', 'tp4', 'dp-attn'))}"
            self.host = HOSTS[session % len(HOSTS)]
            self.engine_version = ENGINE_VERSIONS[
                min(len(ENGINE_VERSIONS) - 1, session * len(ENGINE_VERSIONS) // self.n_sessions)
            ]
            model = MODELS[session % len(MODELS)]
            yield self._event(
                "session_started",
                "person:ada",
                {
                    "title": f"Tune {model.split('/')[-1]} on {self.host['gpu_name']}",
                    "model": model,
                    "goal": "max output throughput at c=64 within p99 TTFT 2 s",
                    "tensor_parallel": self.host["gpu_count"],
                    "dtype": "fp8",
                    "notes": _sentence(rng, 5, 20),
                },
            )
            yield self._event(
                "host_observed",
                "runner:probe",
                {
                    "gpu_names": [self.host["gpu_name"]] * self.host["gpu_count"],
                    "torch_version": "2.8.0+cu128",
                    "triton_version": "3.4.0",
                    "python_version": "3.12.11",
                    "other_versions": {"flashinfer": "0.3.1", "sgl-kernel": "0.3.9"},
                },
                host=self._host(),
            )
            for _ in range(runs_per_session):
                yield from self._server_run(run_index, bench_index, model)
                bench_index += len(WORKLOADS) * len(CONCURRENCIES) * REPEATS
                run_index += 1
                yield from self._side_activity()
            yield self._event("session_ended", "person:ada", {"summary": _sentence(rng, 8, 25)})
            session += 1

    def _server_run(self, run_index: int, bench_index: int, model: str) -> Iterator[dict[str, Any]]:
        rng = self.rng
        config = "baseline" if rng.random() < 0.25 else rng.choice(self.configs[1:])
        flags = {
            "tp": self.host["gpu_count"],
            "mem-fraction-static": 0.85,
            **self.config_flags[config],
        }
        run_id = f"run-{run_index:06d}"
        host = self._host()
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--port", "30000"]
        for name, value in flags.items():
            argv += [f"--{name}"] if value is True else [f"--{name}", str(value)]
        yield self._event(
            "server_started",
            "runner:serve",
            {
                "run_id": run_id,
                "engine": "sglang",
                "model": model,
                "config_name": config,
                "flags": flags,
                "env": {
                    "SGLANG_ENABLE_JIT_DEEPGEMM": "1",
                    "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
                },
                "argv": argv,
                "port": 30000,
                "pid": rng.randint(1000, 99999),
                "log_path": f"logs/{run_id}.log",
            },
            host=host,
        )
        if rng.random() < 0.04:
            yield self._event(
                "server_failed",
                "runner:serve",
                {
                    "run_id": run_id,
                    "cause": rng.choice(("crash", "out-of-memory", "timeout")),
                    "message": _sentence(rng, 5, 12),
                    "exit_code": 1,
                    "log_tail": [_sentence(rng, 6, 16) for _ in range(rng.randint(3, 20))],
                },
                host=host,
            )
            return
        bs = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256][: rng.randint(6, 14)]
        piecewise = rng.random() < 0.6
        yield self._event(
            "server_ready",
            "runner:serve",
            {
                "run_id": run_id,
                "ready_after_s": round(rng.uniform(60, 600), 2),
                "startup": {
                    "attention_backend": rng.choice(ATTENTION_BACKENDS),
                    "max_running_requests": rng.choice((128, 256, 512, 1024)),
                    "max_total_num_tokens": rng.randint(200_000, 2_000_000),
                    "context_len": 131072,
                    "chunked_prefill_size": 8192,
                    "max_prefill_tokens": 16384,
                    "cuda_graph_bs": bs,
                    "piecewise_cuda_graph": piecewise,
                    "piecewise_disabled_reason": None if piecewise else "torch.compile disabled",
                    "moe_kernel_config": rng.choice(("found", "fallback", "default")),
                    "moe_config_paths": [
                        f"configs/triton_3_4_0/E=128,N=768,device_name={self.host['gpu_name'].replace(' ', '_')}.json"
                    ],
                    "kv_cache_tokens": rng.randint(200_000, 2_000_000),
                    "weight_load_s": round(rng.uniform(20, 200), 2),
                    "available_gpu_mem_gb": round(rng.uniform(5, 40), 2),
                    "server_args": {
                        "tp_size": self.host["gpu_count"],
                        "mem_fraction_static": 0.85,
                        "schedule_policy": "fcfs",
                        "disable_radix_cache": False,
                    },
                },
                "warnings": [_sentence(rng, 5, 12) for _ in range(rng.randint(0, 3))],
            },
            host=host,
        )
        for _ in range(self._count(1.0)):
            flag = rng.choice(self.flags)
            yield self._event(
                "finding_recorded",
                "runner:logscan",
                {
                    "kind": rng.choice(FINDING_KINDS),
                    "basis": rng.choice(("log", "log", "measured")),
                    "message": _sentence(rng, 6, 18),
                    "flag": flag if rng.random() < 0.7 else None,
                    "verdict": rng.choice(VERDICTS) if rng.random() < 0.7 else None,
                    "server_run_id": run_id,
                    "engine": "sglang",
                    "engine_version": self.engine_version,
                    "evidence": [
                        {
                            "kind": "log",
                            "ref": f"logs/{run_id}.log:{rng.randint(1, 4000)}",
                            "text": _sentence(rng, 4, 10),
                        }
                    ],
                },
                host=self._host(partial=True),
            )
        k = 0
        for workload in WORKLOADS:
            for concurrency in CONCURRENCIES:
                for repeat in range(REPEATS):
                    yield self._bench(
                        f"bench-{bench_index + k:07d}",
                        run_id,
                        config,
                        workload,
                        concurrency,
                        repeat,
                        host,
                    )
                    k += 1
        yield self._event(
            "server_stopped",
            "runner:serve",
            {"run_id": run_id, "exit_code": 0, "signal": "SIGTERM", "reason": "benchmarks done"},
            host=host,
        )

    def _bench(
        self,
        bench_id: str,
        run_id: str,
        config: str,
        workload: dict,
        concurrency: int,
        repeat: int,
        host: dict,
    ) -> dict[str, Any]:
        rng = self.rng
        num_prompts = max(64, concurrency * 10)
        out_len = workload["output_len"] or 300
        in_len = workload["input_len"] or 250
        tpot = rng.uniform(6, 14) * (1 + math.log2(concurrency) / 6)
        ttft = rng.uniform(40, 250) * (1 + concurrency / 16)
        e2e = ttft + tpot * (out_len - 1)
        duration = num_prompts * e2e / 1000 / concurrency
        out_tp = num_prompts * out_len / duration
        in_tp = num_prompts * in_len / duration

        def dist(mean: float, prefix: str) -> dict[str, float]:
            return {
                f"mean_{prefix}_ms": mean,
                f"median_{prefix}_ms": mean * rng.uniform(0.9, 1.0),
                f"std_{prefix}_ms": mean * rng.uniform(0.05, 0.4),
                f"p90_{prefix}_ms": mean * rng.uniform(1.1, 1.5),
                f"p95_{prefix}_ms": mean * rng.uniform(1.3, 1.8),
                f"p99_{prefix}_ms": mean * rng.uniform(1.5, 3.0),
            }

        metrics = {
            "completed": num_prompts,
            "failed": 0 if rng.random() < 0.97 else rng.randint(1, 5),
            "duration_s": duration,
            "total_input_tokens": num_prompts * in_len,
            "total_output_tokens": num_prompts * out_len,
            "request_throughput": num_prompts / duration,
            "input_throughput": in_tp,
            "output_throughput": out_tp,
            "total_throughput": in_tp + out_tp,
            "achieved_concurrency": concurrency * rng.uniform(0.85, 1.0),
            "max_output_tokens_per_s": out_tp * rng.uniform(1.1, 1.6),
            "max_concurrent_requests": concurrency,
            "accept_length": None,
            **dist(ttft, "ttft"),
            **dist(tpot, "tpot"),
            **dist(tpot, "itl"),
            "max_itl_ms": tpot * rng.uniform(5, 40),
            **dist(e2e, "e2e_latency"),
        }
        valid = metrics["failed"] == 0 and metrics["achieved_concurrency"] >= 0.9 * concurrency
        return self._event(
            "benchmark_completed",
            "runner:bench",
            {
                "run_id": bench_id,
                "config_name": config,
                "is_baseline": config == "baseline",
                "server_run_id": run_id,
                "tool": "sglang.bench_serving",
                "workload": {
                    **workload,
                    "num_prompts": num_prompts,
                    "load": "closed-loop",
                    "request_rate": None,
                    "seed": 1,
                    "ignore_eos": True,
                    "endpoint": "/generate",
                },
                "concurrency": concurrency,
                "repeat": repeat,
                "metrics": metrics,
                "valid": valid,
                "validity_notes": []
                if valid
                else [
                    "achieved concurrency below 0.9 c"
                    if metrics["failed"] == 0
                    else "failed requests"
                ],
            },
            host=host,
            source=f"results/{run_id}.jsonl:{repeat + 1}",
            advance_s=60.0,
        )

    def _side_activity(self) -> Iterator[dict[str, Any]]:
        rng = self.rng
        r = self.rates
        for _ in range(self._count(r["propose"])):
            i = len(self.candidates)
            kind = rng.choice(
                ("flag", "flag", "flag", "kernel-tune", "spec-decoding", "patch", "config")
            )
            flag = rng.choice(self.flags) if kind == "flag" else None
            cid = f"flag:{flag}:{i}" if flag else f"{kind}:{i:05d}"
            # "version": the candidate stream's, so each triage can pass its expected version
            # (the command layer refuses a triage without one: ledger/write/commands.py)
            self.candidates.append({"id": cid, "flag": flag, "version": 1})
            yield self._event(
                "candidate_proposed",
                "agent:claude",
                {
                    "candidate_id": cid,
                    "kind": kind,
                    "title": _sentence(rng, 4, 10),
                    "flag": flag,
                    "value": True if flag else None,
                    "priority": rng.choice(("high", "medium", "low", None)),
                    "hypothesis": _sentence(rng, 8, 30),
                },
                host=self._host(partial=True) if rng.random() < 0.5 else None,
            )
        for _ in range(self._count(r["triage"])):
            if not self.candidates:
                break
            cand = self.candidates[
                min(len(self.candidates) - 1, int(len(self.candidates) * rng.random() ** 0.3))
            ]
            status = rng.choice(("accepted", "rejected", "deferred", "done"))
            cand["version"] += 1
            yield self._event(
                "candidate_triaged",
                rng.choice(("agent:claude", "person:ada")),
                {
                    "candidate_id": cand["id"],
                    "stream_version": cand["version"],
                    "status": status,
                    "reason": _sentence(rng, 4, 14),
                    "verdict": rng.choice(VERDICTS) if status == "done" else None,
                },
            )
        for _ in range(self._count(r["research"])):
            flagged = [c for c in self.candidates[-50:] if c["flag"]]
            cand = rng.choice(flagged) if flagged and rng.random() < 0.5 else None
            flag = cand["flag"] if cand else rng.choice(self.flags)
            yield self._event(
                "flag_researched",
                "agent:claude",
                {
                    "flag": flag,
                    "engine": "sglang" if rng.random() < 0.5 else None,
                    "engine_version": self.engine_version if rng.random() < 0.5 else None,
                    "what_it_does": _sentence(rng, 8, 30),
                    "activation_condition": _sentence(rng, 4, 12),
                    "arch_gating": rng.choice((None, "sm90 only", "sm100+", "not sm120")),
                    "auto_enabled_for": None,
                    "verdict": rng.choice(VERDICTS),
                    "evidence": [
                        {
                            "kind": "source",
                            "ref": f"python/sglang/srt/server_args.py:{rng.randint(100, 4000)}",
                            "text": None,
                        }
                        for _ in range(rng.randint(1, 3))
                    ],
                    "notes": _sentence(rng, 4, 20) if rng.random() < 0.3 else None,
                    "candidate_id": cand["id"] if cand else None,
                },
                host=self._host(partial=True),
            )
        for _ in range(self._count(r["note"])):
            cand = rng.choice(self.candidates) if self.candidates and rng.random() < 0.3 else None
            yield self._event(
                "note_added",
                rng.choice(("agent:claude", "person:ada")),
                {
                    "text": _sentence(rng, 5, 60),
                    "refs": rng.sample(
                        self.recent_ids, min(len(self.recent_ids), rng.randint(0, 2))
                    ),
                    "candidate_id": cand["id"] if cand else None,
                },
            )
        for _ in range(self._count(r["decision"])):
            cand = rng.choice(self.candidates) if self.candidates and rng.random() < 0.5 else None
            yield self._event(
                "decision_recorded",
                "person:ada",
                {
                    "decision": _sentence(rng, 5, 15),
                    "rationale": _sentence(rng, 10, 40),
                    "alternatives": [_sentence(rng, 3, 8) for _ in range(rng.randint(0, 3))],
                    "evidence_event_ids": rng.sample(
                        self.recent_ids, min(len(self.recent_ids), rng.randint(0, 4))
                    ),
                    "candidate_id": cand["id"] if cand else None,
                },
            )
        for _ in range(self._count(r["patch"])):
            yield self._event(
                "patch_applied",
                "agent:claude",
                {
                    "target": f"python/sglang/srt/layers/moe/fused_moe_triton/layer.py:{rng.randint(10, 900)}",
                    "description": _sentence(rng, 5, 15),
                    "reason": _sentence(rng, 5, 15),
                    "diff": "\n".join(
                        f"{rng.choice('+-')} {_sentence(rng, 3, 10)}"
                        for _ in range(rng.randint(2, 30))
                    ),
                },
            )
        for _ in range(self._count(r["spec"])):
            yield self._event(
                "spec_decoding_trial_completed",
                "runner:spec",
                {
                    "trial_id": f"spec-{self.emitted}",
                    "algorithm": rng.choice(("EAGLE3", "NEXTN", "NGRAM")),
                    "num_steps": rng.randint(1, 5),
                    "eagle_topk": rng.choice((1, 2, 4)),
                    "num_draft_tokens": rng.randint(2, 8),
                    "accept_length": round(rng.uniform(1.5, 4.0), 3),
                    "accept_rate": round(rng.uniform(0.3, 0.9), 3),
                    "verdict": rng.choice(VERDICTS),
                },
                host=self._host(),
            )
        for _ in range(self._count(r["tune"])):
            tune_id = f"tune-{self.emitted}"
            sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
            yield self._event(
                "kernel_tune_started",
                "runner:tune",
                {
                    "tune_id": tune_id,
                    "kernel": "fused_moe",
                    "script": "benchmark/kernels/fused_moe_triton/tuning_fused_moe_triton.py",
                    "E": 128,
                    "N": 768,
                    "dtype": "fp8_w8a8",
                    "device_name": self.host["gpu_name"],
                    "batch_sizes": sizes,
                    "search_space": 1920,
                    "timeout_s": 7200.0,
                },
                host=self._host(),
            )
            best = {}
            for m in sizes:
                for _ in range(rng.randint(3, 12)):
                    cfg = {
                        "BLOCK_SIZE_M": rng.choice((16, 32, 64, 128)),
                        "BLOCK_SIZE_N": rng.choice((32, 64, 128, 256)),
                        "BLOCK_SIZE_K": rng.choice((64, 128, 256)),
                        "GROUP_SIZE_M": rng.choice((1, 16, 32, 64)),
                        "num_warps": rng.choice((4, 8)),
                        "num_stages": rng.choice((2, 3, 4, 5)),
                    }
                    best[str(m)] = cfg
                    yield self._event(
                        "kernel_config_measured",
                        "runner:tune",
                        {
                            "tune_id": tune_id,
                            "batch_size": m,
                            "config": cfg,
                            "latency_us": round(rng.uniform(5, 900), 3),
                        },
                        advance_s=2.0,
                    )
            yield self._event(
                "kernel_tune_completed",
                "runner:tune",
                {
                    "tune_id": tune_id,
                    "outcome": "completed",
                    "duration_s": round(rng.uniform(600, 7000), 1),
                    "batch_sizes_done": sizes,
                    "best_configs": best,
                    "output_file": f"E=128,N=768,device_name={self.host['gpu_name'].replace(' ', '_')},dtype=fp8_w8a8.json",
                },
                host=self._host(),
            )
        for _ in range(self._count(r["moe"])):
            yield self._event(
                "moe_config_recorded",
                "runner:tune",
                {
                    "file_name": f"E=128,N=768,device_name={self.host['gpu_name'].replace(' ', '_')},dtype=fp8_w8a8.json",
                    "E": 128,
                    "N": 768,
                    "device_name": self.host["gpu_name"].replace(" ", "_"),
                    "dtype": "fp8_w8a8",
                    "block_shape": [128, 128],
                    "triton_version": "3.4.0",
                    "origin": "tuned here",
                    "configs": {
                        str(m): {
                            "BLOCK_SIZE_M": 64,
                            "BLOCK_SIZE_N": 128,
                            "BLOCK_SIZE_K": 128,
                            "GROUP_SIZE_M": 1,
                            "num_warps": 4,
                            "num_stages": 3,
                        }
                        for m in (1, 2, 4, 8, 16, 64, 256, 1024)
                    },
                },
                host=self._host(),
            )
        for _ in range(self._count(r["retract"])):
            candidates = [i for i in self.recent_ids if i not in self.retracted]
            if not candidates:
                break
            target = rng.choice(candidates)
            self.retracted.add(target)
            retraction = self._event(
                "event_retracted",
                "person:ada",
                {"retracted_event_id": target, "reason": _sentence(rng, 4, 12)},
            )
            self.retracted.add(retraction["event_id"])  # a retraction is final: never a target
            yield retraction


def generate_jsonl(path: Path, total: int) -> dict[str, int]:
    """Write ``total`` synthetic events to ``path``; return the count per type."""
    counts: dict[str, int] = {}
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for event in Campaign(total):
            counts[event["type"]] = counts.get(event["type"], 0) + 1
            out.write(json.dumps(event, separators=(",", ":")))
            out.write("\n")
    tmp.replace(path)
    return counts


# --- measuring --------------------------------------------------------------------


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _remove_ledger(path: Path) -> None:
    for p in (path, Path(str(path) + ".wal")):
        if p.exists():
            p.unlink()


def _file_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(str(path) + ".wal")) if p.exists())


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        tag = f"{args.events}-g{GENERATOR_VERSION}"
        self.jsonl = self.workdir / f"campaign-{tag}.jsonl"
        # the cached ledger is rebuilt when the store's table layout changes (LAYOUT_VERSION)
        self.ledger = self.workdir / f"ledger-{tag}-l{store_mod.LAYOUT_VERSION}.duckdb"
        self.results: dict[str, Any] = {"events": args.events, "machine": machine_info()}
        self.rows: list[tuple[str, str, str, str]] = []  # (section, what, value, note)

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    def row(self, section: str, what: str, value: str, note: str = "") -> None:
        self.rows.append((section, what, value, note))
        self.log(f"{section} | {what} | {value} | {note}")

    # --- input files

    def ensure_jsonl(self) -> None:
        if self.jsonl.exists():
            return
        self.log(f"generating {self.args.events} events -> {self.jsonl}")
        seconds, counts = _timed(lambda: generate_jsonl(self.jsonl, self.args.events))
        self.results["generate_s"] = round(seconds, 1)
        self.results["type_counts"] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
        (self.workdir / f"{self.jsonl.stem}.counts.json").write_text(
            json.dumps(self.results["type_counts"], indent=1)
        )
        self.log(f"generated in {seconds:.1f} s: {counts}")

    def type_counts(self) -> dict[str, int]:
        path = self.workdir / f"{self.jsonl.stem}.counts.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def ensure_ledger(self) -> None:
        if not self.ledger.exists():
            self.bench_import()

    # --- 2. bulk import

    def bench_import(self) -> None:
        self.ensure_jsonl()
        size_mb = self.jsonl.stat().st_size / 1e6
        n = self.args.events
        subset = min(self.args.subset, n)
        res: dict[str, Any] = {"jsonl_mb": round(size_mb, 1), "subset": subset}

        # Batch-size comparison and store-step breakdown on a subset.
        with self.jsonl.open(encoding="utf-8") as fh:
            lines = [next(fh) for _ in range(subset)]
        t_loads, objs = _timed(lambda: [json.loads(line) for line in lines])
        rss0 = _rss_mb()
        t_validate, events = _timed(lambda: [event_from_obj(obj, "x") for obj in objs])
        res["rss_per_model_kb"] = round((_rss_mb() - rss0) * 1000 / subset, 1)
        self.row(
            "import",
            "memory per validated event model (RSS growth)",
            f"{res['rss_per_model_kb']} KB",
            f"read_jsonl of {n:,} events would hold ~{res['rss_per_model_kb'] * n / 1e6:,.1f} GB",
        )
        res["subset_json_loads_us_per_event"] = round(t_loads / subset * 1e6, 2)
        res["subset_validate_us_per_event"] = round(t_validate / subset * 1e6, 2)
        lines.clear()  # let the parsed subset go before the store trials (RSS)
        objs.clear()
        res["breakdown"] = self._store_breakdown(events)
        batches: dict[str, float] = {}
        for batch in self.args.batch_sizes:
            batch = min(batch, subset)
            path = self.workdir / "import-trial.duckdb"
            _remove_ledger(path)
            store = LedgerStore(path)
            store.init()
            gc.collect()
            seconds, _ = _timed(
                lambda: [store.append(events[i : i + batch]) for i in range(0, subset, batch)]
            )
            batches[str(batch)] = round(subset / seconds)
            self.row(
                "import",
                f"store.append, {subset:,} events, batches of {batch:,}",
                f"{subset / seconds:,.0f} ev/s",
                f"{seconds:.1f} s",
            )
            _remove_ledger(path)
        res["subset_store_events_per_s_by_batch"] = batches
        best = int(max(batches, key=lambda b: batches[b]))
        if best >= subset and n > subset:
            best = n  # "all in one" won: use one transaction for the whole file
        res["chosen_batch"] = best
        del events
        gc.collect()

        # End to end on the whole file: parse + validate a chunk of lines (ledger.write.jsonl.iter_jsonl,
        # what read_jsonl does), append it as one batch, repeat. Chunking bounds memory: read_jsonl
        # on the whole file holds every model at once (see rss_per_model_kb).
        chunk = min(best, self.args.max_batch)
        self.log(
            f"importing {n:,} events from {self.jsonl} ({size_mb:.0f} MB) in batches of {chunk:,}"
        )
        tmp = self.workdir / "import-full.duckdb"
        _remove_ledger(tmp)
        store = LedgerStore(tmp)
        store.init()
        t_parse = t_store = 0.0
        with self.jsonl.open(encoding="utf-8") as fh:
            it = iter_jsonl(fh, str(self.jsonl))
            while True:
                t0 = time.perf_counter()
                events = list(itertools.islice(it, chunk))
                t1 = time.perf_counter()
                if not events:
                    break
                store.append(events)
                t2 = time.perf_counter()
                t_parse += t1 - t0
                t_store += t2 - t1
                del events
        assert store.head() == n, (store.head(), n)
        gc.collect()
        _remove_ledger(self.ledger)
        tmp.replace(self.ledger)
        total = t_parse + t_store
        res.update(
            full_batch=chunk,
            parse_validate_s=round(t_parse, 2),
            store_s=round(t_store, 2),
            total_s=round(total, 2),
            events_per_s=round(n / total),
            parse_events_per_s=round(n / t_parse),
            store_events_per_s=round(n / t_store),
            peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        )
        self.row(
            "import",
            f"parse + validate (iter_jsonl), {n:,} events, {size_mb:,.0f} MB",
            f"{n / t_parse:,.0f} ev/s",
            f"{t_parse:.1f} s",
        )
        self.row(
            "import",
            f"store.append, batches of {chunk:,}",
            f"{n / t_store:,.0f} ev/s",
            f"{t_store:.1f} s",
        )
        self.row(
            "import",
            "**end to end (aim >= 50,000 ev/s)**",
            f"**{n / total:,.0f} ev/s**",
            f"{total:.1f} s, peak RSS {res['peak_rss_mb']:,} MB",
        )
        self.results["import"] = res

    def _store_breakdown(self, events: list[Event]) -> dict[str, float]:
        """Where ``LedgerStore.append`` spends its time, step by step (the store's own code paths)."""
        n = len(events)
        store = LedgerStore(self.workdir / "unused.duckdb")
        from schemas import EventEnvelope

        env = EventEnvelope.ENVELOPE_FIELDS
        t_dump, dumped = _timed(lambda: [e.model_dump(mode="json") for e in events])
        t_json, _ = _timed(
            lambda: [
                json.dumps({k: v for k, v in d.items() if k not in env}, separators=(",", ":"))
                for d in dumped
            ]
        )
        dumped.clear()
        now = store.clock()
        t_row, rows = _timed(lambda: [store_encoding.event_row(e, now) for e in events])
        for i, r in enumerate(rows, start=1):
            r["seq"], r["stream_version"] = (
                i,
                i,
            )  # positions as the store assigns them (unique per row)
        t_arrow, table = _timed(lambda: pa.Table.from_pylist(rows, schema=store_mod.arrow_schema()))
        insert_sql = (
            "INSERT INTO events SELECT seq, event_id::UUID, type, schema_version, stream, "
            "stream_version, recorded_at, actor_kind, actor_name, session_id, causation_id::UUID, "
            "correlation_id::UUID, source, host::JSON, payload::JSON, occurred_at FROM incoming"
        )
        out: dict[str, float] = {}
        for label, ddl in (
            ("indexed", store_mod.EVENTS_DDL),
            ("no_constraints", _strip_constraints(store_mod.EVENTS_DDL)),
        ):
            path = self.workdir / f"breakdown-{label}.duckdb"
            _remove_ledger(path)
            con = duckdb.connect(str(path))
            con.execute(ddl)
            con.register("incoming", table)
            t_ins, _ = _timed(lambda: con.execute(insert_sql))
            t_close, _ = _timed(con.close)  # close = checkpoint to the file
            out[f"insert_{label}_s"] = round(t_ins, 3)
            out[f"close_checkpoint_{label}_s"] = round(t_close, 3)
            _remove_ledger(path)
        out.update(
            model_dump_s=round(t_dump, 3),
            json_dumps_s=round(t_json, 3),
            row_total_s=round(t_row, 3),
            arrow_build_s=round(t_arrow, 3),
            events=n,
        )
        for key in (
            "model_dump_s",
            "json_dumps_s",
            "row_total_s",
            "arrow_build_s",
            "insert_indexed_s",
            "insert_no_constraints_s",
            "close_checkpoint_indexed_s",
            "close_checkpoint_no_constraints_s",
        ):
            self.row(
                "import breakdown",
                f"{key} ({n:,} events)",
                f"{out[key] / n * 1e6:.1f} us/ev",
                f"{out[key]:.2f} s",
            )
        return out

    # --- 1. single appends

    def bench_append(self) -> None:
        n = self.args.appends
        # Fresh events (not in the big ledger: another seed), validated up front.
        sample = [parse_event(obj) for obj in _take(Campaign(n * 3, seed=7), n * 3)]
        picks = [e for e in sample if e.type == "benchmark_completed"][: n // 2]
        # Shuffled, out of their streams' order: no retraction (its target may be missing)
        # and no triage (it passes its candidate stream's version).
        skip = ("benchmark_completed", "event_retracted", "candidate_triaged")
        picks += [e for e in sample if e.type not in skip][: n - len(picks)]
        random.Random(3).shuffle(picks)
        res: dict[str, Any] = {"appends": len(picks)}

        def series(path: Path, label: str) -> None:
            store = LedgerStore(path)
            lat = []
            for event in picks:
                t0 = time.perf_counter()
                store.append(event)
                lat.append(time.perf_counter() - t0)
            res[label] = {
                "p50_ms": _ms(_percentile(lat, 0.5)),
                "p99_ms": _ms(_percentile(lat, 0.99)),
                "mean_ms": _ms(statistics.fmean(lat)),
                "max_ms": _ms(max(lat)),
            }
            self.row(
                "append",
                f"single append, {label} ({len(lat)} calls)",
                f"p50 {res[label]['p50_ms']} ms / p99 {res[label]['p99_ms']} ms",
                f"mean {res[label]['mean_ms']} ms",
            )

        empty = self.workdir / "append-empty.duckdb"
        _remove_ledger(empty)
        LedgerStore(empty).init()
        series(empty, "empty ledger")
        _remove_ledger(empty)

        self.ensure_ledger()
        full = self.workdir / "append-full.duckdb"
        _remove_ledger(full)
        shutil.copyfile(self.ledger, full)
        series(full, f"ledger of {self.args.events:,} events")
        _remove_ledger(full)
        self.results["append"] = res

    # --- 3. views

    def bench_views(self) -> None:
        self.ensure_ledger()
        store = LedgerStore(self.ledger)
        store.init()  # refreshes the views if ledger/derive/views.py changed since the file was built
        reps = self.args.reps
        res: dict[str, Any] = {"file_mb": round(_file_size(self.ledger) / 1e6, 1)}
        opens = []
        for _ in range(5):
            t0 = time.perf_counter()
            con = duckdb.connect(str(self.ledger), read_only=True)
            con.execute("SELECT count(*) FROM events").fetchall()
            t1 = time.perf_counter()
            con.close()
            opens.append((t1 - t0, time.perf_counter() - t1))
        res["open_first_query_ms"] = [_ms(o) for o, _ in opens]
        res["close_ms"] = [_ms(c) for _, c in opens]
        self.row(
            "ledger file",
            f"size on disk, {self.args.events:,} events",
            f"{res['file_mb']:,.0f} MB",
            f"JSONL {self.jsonl.stat().st_size / 1e6:,.0f} MB" if self.jsonl.exists() else "",
        )
        self.row(
            "ledger file",
            "duckdb.connect + first query (count(*))",
            f"{res['open_first_query_ms'][0]} ms first, median {statistics.median(res['open_first_query_ms'])} ms",
            "page cache warm (file just written or read)",
        )
        self.row(
            "ledger file",
            "LedgerStore.head() (open + max(seq) + close)",
            f"{_ms(statistics.median(_timed(store.head)[0] for _ in range(5)))} ms",
            "median of 5",
        )

        def measure(sql: str) -> tuple[float, float, int]:
            warm, table = _timed(lambda: store.query_arrow(sql))
            times = [warm]
            if warm < 30:
                times = [
                    _timed(lambda: store.query_arrow(sql))[0]
                    for _ in range(reps if warm < 5 else 2)
                ]
            return statistics.median(times), min(times), table.num_rows

        queries = [("events", "SELECT * FROM events", "raw table, for reference")]
        for view in views_mod.VIEW_NAMES:
            queries.append((view, f"SELECT * FROM {view}", ""))
            queries.append((view, f"SELECT count(*) FROM {view}", ""))
            if view == "timeline":
                queries.append(
                    (view, "SELECT * FROM timeline ORDER BY seq DESC LIMIT 200", "TUI query")
                )
        out = []
        for view, sql, note in queries:
            med, best, rows = measure(sql)
            flag = "" if med <= 0.3 or view == "events" else " **over 300 ms**"
            out.append(
                {"view": view, "sql": sql, "median_ms": _ms(med), "min_ms": _ms(best), "rows": rows}
            )
            self.row(
                "views",
                f"`{sql}`",
                f"{_ms(med)} ms{flag}",
                f"{rows:,} rows, min {_ms(best)} ms {note}".strip(),
            )
        res["queries"] = out
        self.results["views"] = res

    # --- report

    def report(self) -> None:
        m = self.results["machine"]
        m["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        m["views_version"] = views_mod.VIEWS_VERSION
        lines = [
            f"## tuneledger benchmark: {self.args.events:,} events",
            "",
            f"Machine: {m['cpu']} ({m['cores']} cores), {m['mem_gb']} GB RAM, load average at start {m['loadavg']}, "
            f"at end {m['loadavg_end']}; views version {m['views_version']}; "
            f"Python {m['python']}, DuckDB {m['duckdb']}, pydantic {m['pydantic']}, pyarrow {m['pyarrow']}.",
            "",
        ]
        counts = self.results.get("type_counts") or self.type_counts()
        if counts:
            lines += ["Synthetic ledger: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()), ""]
        lines += ["| section | what | result | note |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.rows]
        print("\n".join(lines))
        out = self.workdir / f"results-{self.args.events}.json"
        previous = json.loads(out.read_text()) if out.exists() else {}
        previous.update(self.results)
        out.write_text(json.dumps(previous, indent=1, default=str))
        self.log(f"results written to {out}")


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _strip_constraints(ddl: str) -> str:
    """The events table DDL without PRIMARY KEY / UNIQUE (to price index maintenance)."""
    text = ddl.replace("BIGINT PRIMARY KEY", "BIGINT").replace(
        "UUID NOT NULL UNIQUE", "UUID NOT NULL"
    )
    return text.replace(",\n    UNIQUE (stream, stream_version)", "")


def _take(it: Any, n: int) -> list[Any]:
    out = []
    for item in it:
        out.append(item)
        if len(out) >= n:
            break
    return out


def machine_info() -> dict[str, Any]:
    import pydantic

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gb": round(mem, 1),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "pydantic": pydantic.VERSION,
        "pyarrow": pa.__version__,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events",
        type=int,
        default=1_000_000,
        help="size of the synthetic ledger (default 1,000,000)",
    )
    parser.add_argument(
        "--workdir", default="/tmp/tuneledger-bench", help="cache and results folder"
    )
    parser.add_argument(
        "--only",
        choices=("append", "import", "views"),
        action="append",
        help="run only this part (repeatable); default: all",
    )
    parser.add_argument(
        "--appends", type=int, default=200, help="single appends per series (default 200)"
    )
    parser.add_argument(
        "--subset", type=int, default=200_000, help="events for the batch-size comparison"
    )
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=[1_000_000, 100_000, 20_000, 5_000],
        help="batch sizes to compare on the subset (capped at the subset)",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=200_000,
        help="largest batch for the whole-file import (memory bound; default 200,000)",
    )
    parser.add_argument(
        "--reps", type=int, default=5, help="repetitions per view query (median reported)"
    )
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached JSONL and ledger")
    args = parser.parse_args(argv)
    parts = args.only or ["import", "append", "views"]
    bench = Bench(args)
    if args.fresh:
        for p in (bench.jsonl, bench.ledger):
            _remove_ledger(p)
    bench.log(f"machine: {bench.results['machine']}")
    if "import" in parts:
        bench.bench_import()
    if "append" in parts:
        bench.bench_append()
    if "views" in parts:
        bench.bench_views()
    bench.report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
