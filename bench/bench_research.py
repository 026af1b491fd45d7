"""How long ``tuneledger research`` takes on a whole engine version: the first time (the wheel
analysed, 2 worker processes on the 2-core machine) and again (the analysis read back from the
cache), each for every flag of the version (``--all``). Figures go to docs/performance.md.

    .venv/bin/python bench/bench_research.py --engine sglang==0.5.23 [--model-config C] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from ledger.engines.research import Target, load_index, load_model_config, open_engine, research


def cpu_seconds() -> tuple[float, float]:
    """CPU time of this process and of its finished children (the scan's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="sglang==0.5.23")
    parser.add_argument("--arch", default="sm120")
    parser.add_argument(
        "--model-config", type=Path, default=Path("examples/models/qwen3_5_moe/config.json")
    )
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = load_model_config(args.model_config)
    rows = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["TUNELEDGER_RESEARCH_CACHE"] = cache
            times = {}
            for phase in ("first", "cached"):
                start, cpu_start = time.perf_counter(), cpu_seconds()
                source = open_engine(args.engine)
                index = load_index(source)
                loaded = time.perf_counter()
                target = Target.make(arch=args.arch, model=model, tp=args.tp)
                result = research(source, index, target, [], everything=True)
                done, cpu_done = time.perf_counter(), cpu_seconds()
                own, workers = (cpu_done[i] - cpu_start[i] for i in range(2))
                times[phase] = {
                    "analysis_s": round(loaded - start, 2),
                    "verdicts_s": round(done - loaded, 2),
                    "total_s": round(done - start, 2),
                    "cpu_main_s": round(own, 2),
                    "cpu_workers_s": round(workers, 2),
                    # on an idle 2-core machine: the main process plus the workers' share
                    "idle_2core_estimate_s": round(own + workers / 2, 1),
                    "flags": len(result.reports),
                }
            rows.append(times)
            print(json.dumps(times))
    load = os.getloadavg()[0]
    for phase in ("first", "cached"):
        totals = sorted(r[phase]["total_s"] for r in rows)
        idle = sorted(r[phase]["idle_2core_estimate_s"] for r in rows)
        print(
            f"{args.engine} {phase}: wall median {totals[len(totals) // 2]} s "
            f"(min {totals[0]}, max {totals[-1]}; load {load:.1f} on {os.cpu_count()} cores), "
            f"idle 2-core estimate median {idle[len(idle) // 2]} s"
        )


if __name__ == "__main__":
    main()
