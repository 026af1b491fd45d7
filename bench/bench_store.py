"""tuneledger's store beside MLflow (sqlite) and Optuna (JournalStorage), in one run, plus the
CLI append and the hand-off time. Numbers for docs/performance.md, not tests.

Run (``make bench`` runs it with the defaults)::

    .venv/bin/python bench/bench_store.py [--rounds 3] [--singles 300] [--batches 5] [--json OUT]
    .venv/bin/python bench/bench_store.py --smoke --json OUT   # every step, tiny: a check, no figures

``--smoke`` runs every step at a tiny size (one round, a few calls, 2,000 imported events) and
tuneledger's store alone (the peers' venv needs the network): it shows that the script runs to
its JSON (tests/project/test_bench_runs.py runs it), its figures mean nothing.

Each round runs every store's series (``bench/store_peers.py``) in a fresh process and a fresh
folder, in a shuffled order, so that the machine's load (other people's work on the 2 cores)
falls on all of them alike; the load average is recorded beside every figure. MLflow and
Optuna run from ``bench/.venv-peers`` (created on first use: ``pip install mlflow-skinny
optuna sqlalchemy alembic``), never from the project's environment.

Reported, over all rounds:

- single append: p50 / p99 of one-record calls (tuneledger: a kept-open ``LedgerStore``,
  ``hold_s`` 5 s, like a runner); sustained records/s = records / time of the whole series
  including tuneledger's final catch-up of the projections and close; CPU ms per record;
- batches of 1,000: records/s over the calls alone (as the peers are timed), and over the
  whole series (tuneledger including the final catch-up and close, a once-a-session cost that
  more batches spread thinner; the file is opened, and pyarrow imported, before the series,
  as the singles' file and the peers' clients are);
- ``tuneledger append`` from process start to exit (``--cli`` calls, one-shot store): wall
  p50 / p90 and CPU (user + system of the child), in-process (``TUNELEDGER_RESIDENT=0``) and
  forwarded to a warm resident process (``ledger.frontdoor.resident``; its CPU a call from
  ``/proc/PID/stat``, a mean: the kernel counts it in 10 ms ticks), interleaved call by call;
- import: ``ledger.write.bulk.import_lines`` of the deterministic synthetic campaign of
  bench/bench_ledger.py (``--import-events``, default 100,000 events, ~2 KB each; cached in
  /tmp/tuneledger-bench) into a fresh ledger, end to end from lines in memory to committed
  and projected (the store inserting each validated chunk while the workers validate the next),
  then the DuckDB-side ceiling on a file of its own (``append_columns`` of the same lines
  validated beforehand, untimed: numbering + insert + projections + commit + checkpoint);
- hand-off: a child keeps the ledger open and appends in a loop; this process reads (one-shot)
  ``--handoffs`` times: the wait for the file, p50 / p99 / max against ``HANDOFF_S``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PEERS_VENV = ROOT / "bench" / ".venv-peers"
PEERS_PACKAGES = ["mlflow-skinny", "optuna", "sqlalchemy", "alembic"]
WORKER = ROOT / "bench" / "store_peers.py"


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def load() -> float:
    return round(os.getloadavg()[0], 2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def peers_python() -> Path:
    """The peers' interpreter, with MLflow and Optuna installed there on first use."""
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        log(f"creating {PEERS_VENV} (MLflow, Optuna: benchmark peers, not project dependencies)")
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import mlflow, optuna"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *PEERS_PACKAGES], check=True
        )
    return python


def run_series(
    system: str, python: Path, workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    before = load()
    out = subprocess.run(
        [
            str(python),
            str(WORKER),
            system,
            str(workdir),
            "--singles",
            str(args.singles),
            "--batches",
            str(args.batches),
            "--batch-size",
            str(args.batch_size),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(f"{system} series failed: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.splitlines()[-1])
    result["load"] = (before, load())
    return result


def bench_stores(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    pythons = {"tuneledger": Path(sys.executable)}
    if not args.smoke:
        pythons |= {"mlflow": peers_python(), "optuna": peers_python()}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in pythons}
    rng = random.Random(13)
    for round_ in range(args.rounds):
        order = list(pythons)
        rng.shuffle(order)
        for system in order:
            result = run_series(system, pythons[system], tmp / f"{system}-{round_}", args)
            rounds[system].append(result)
            log(
                f"round {round_} {system}: single p50 {statistics.median(result['single_ms']):.2f} ms, "
                f"batch {args.batches * args.batch_size / result['batch_total_s']:,.0f}/s, load {result['load']}"
            )
    summary = {}
    for system, results in rounds.items():
        singles = [ms for r in results for ms in r["single_ms"]]
        n_single = args.singles * len(results)
        n_batch = args.batches * args.batch_size * len(results)
        summary[system] = {
            "single_p50_ms": round(statistics.median(singles), 2),
            "single_p99_ms": round(percentile(singles, 0.99), 2),
            "sustained_per_s": round(n_single / sum(r["single_total_s"] for r in results)),
            "single_cpu_ms": round(sum(r["single_cpu_s"] for r in results) / n_single * 1e3, 3),
            "batch_per_s": round(n_batch / sum(r["batch_total_s"] for r in results)),
            # the calls alone, as the peers' series are timed (they have no close to pay)
            "batch_calls_per_s": round(n_batch / sum(sum(r["batch_s"]) for r in results)),
            "batch_cpu_us": round(sum(r["batch_cpu_s"] for r in results) / n_batch * 1e6, 1),
            "load": [
                min(x for r in results for x in r["load"]),
                max(x for r in results for x in r["load"]),
            ],
        }
    return summary


#: DuckDB's share of a one-shot append, in a process of its own: import, connect, one
#: committed insert, close (with its checkpoint), then ``os._exit`` as the CLI ends. No
#: one-shot Python process on DuckDB goes below it.
DUCKDB_FLOOR = """
import os, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("BEGIN")
con.execute("INSERT INTO t VALUES (?, ?)", [1, '{"text": "floor"}'])
con.execute("COMMIT")
con.close()
os._exit(0)
"""


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (``/proc/PID/stat``
    fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_resident(env: dict[str, str]) -> int:
    """Start a resident process for ``env`` and wait until it answers; its pid."""
    from ledger.frontdoor.launcher import start_server
    from ledger.resident_socket import ask_server

    start_server(env)
    deadline = time.monotonic() + 120
    while (answer := ask_server("status", env)) is None:
        if time.monotonic() > deadline:
            raise SystemExit("the resident process did not start")
        time.sleep(0.1)
    return int(answer[1])


def bench_cli(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """``tuneledger append`` from process start to exit, beside what it is made of, each a
    process of its own, interleaved call by call so the same load falls on all: forwarded to a
    warm resident process (``append_resident``; the server's CPU a call beside the client's),
    in-process (``append``), the bare interpreter, DuckDB's floor (``DUCKDB_FLOOR``),
    pydantic's import, the imports of an append (``ledger.cli.main`` and ``ledger.store``),
    ``tuneledger --help``.
    """
    import duckdb

    from ledger.resident_socket import ask_server

    runtime = tempfile.mkdtemp(prefix="tl-bench-")  # short: a socket path is at most 107 bytes
    os.chmod(runtime, 0o700)
    resident_env = {
        **os.environ,
        "TUNELEDGER_RESIDENT": "1",
        "TUNELEDGER_RUNTIME_DIR": runtime,
        "TUNELEDGER_RESIDENT_IDLE_S": "600",
    }
    in_process_env = {**os.environ, "TUNELEDGER_RESIDENT": "0"}

    tuneledger = Path(sys.executable).with_name("tuneledger")
    ledger = tmp / "cli.duckdb"
    floor = tmp / "floor.duckdb"
    # Bytecode for the project's modules, as any installed package has: with
    # PYTHONDONTWRITEBYTECODE set (it is on some machines) an editable install would otherwise
    # compile ledger/ and schemas/ in every process.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            *(str(ROOT / p) for p in ("schemas", "ledger", "runners", "tui")),
        ],
        check=True,
    )
    subprocess.run(
        [str(tuneledger), "--ledger", str(ledger), "init"], check=True, capture_output=True
    )
    con = duckdb.connect(str(floor))
    con.execute("CREATE TABLE t (n BIGINT, payload JSON)")
    con.close()
    append = [str(tuneledger), "--ledger", str(ledger), "append", "note_added", "-f"]
    series: dict[str, list[str]] = {
        "append_resident": append,
        "append": append,
        "python": [sys.executable, "-c", "pass"],
        "duckdb_floor": [sys.executable, "-c", DUCKDB_FLOOR, str(floor)],
        "pydantic": [
            sys.executable,
            "-c",
            "import os; from pydantic import BaseModel; os._exit(0)",
        ],
        # what an append imports before it runs (the CLI, the event models, the store, DuckDB)
        "imports": [sys.executable, "-c", "import os, ledger.cli.main, ledger.store; os._exit(0)"],
        "help": [str(tuneledger), "--help"],
    }
    walls: dict[str, list[float]] = {name: [] for name in series}
    cpus: dict[str, list[float]] = {name: [] for name in series}
    server = _start_resident(resident_env)
    server_cpu_s = 0.0
    loads = [load()]
    try:
        for i in range(args.cli):
            for name, argv in series.items():
                env = resident_env if name == "append_resident" else in_process_env
                argv = [*argv, f"text=cli {i}"] if name.startswith("append") else argv
                usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                served0 = _process_cpu_s(server)
                start = time.perf_counter()
                subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=env)
                walls[name].append((time.perf_counter() - start) * 1e3)
                usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus[name].append(
                    (usage.ru_utime - usage0.ru_utime + usage.ru_stime - usage0.ru_stime) * 1e3
                )
                if name == "append_resident":
                    server_cpu_s += _process_cpu_s(server) - served0
        loads.append(load())
        answer = ask_server("status", resident_env)
        if answer is None or int(answer[1]) != server or int(answer[2]) != args.cli:
            raise SystemExit(f"not every call was forwarded to the resident process: {answer}")
    finally:
        ask_server("stop", resident_env)
        shutil.rmtree(runtime, ignore_errors=True)
    parts = {
        name: {
            "wall_p50_ms": round(statistics.median(walls[name])),
            "cpu_p50_ms": round(statistics.median(cpus[name])),
        }
        for name in series
    }
    return {
        "wall_p50_ms": parts["append"]["wall_p50_ms"],
        "wall_p90_ms": round(percentile(walls["append"], 0.9)),
        "cpu_p50_ms": parts["append"]["cpu_p50_ms"],
        "python_start_cpu_ms": parts["python"]["cpu_p50_ms"],
        "imports_cpu_ms": parts["imports"]["cpu_p50_ms"],
        "resident": {
            "wall_p50_ms": parts["append_resident"]["wall_p50_ms"],
            "wall_p90_ms": round(percentile(walls["append_resident"], 0.9)),
            "client_cpu_p50_ms": parts["append_resident"]["cpu_p50_ms"],
            "server_cpu_mean_ms": round(server_cpu_s / args.cli * 1e3, 1),
        },
        "parts": parts,
        "load": loads,
    }


def bench_import(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_ledger import GENERATOR_VERSION, generate_jsonl

    from ledger.store import LedgerStore
    from ledger.write import bulk

    cache = Path("/tmp/tuneledger-bench")
    cache.mkdir(parents=True, exist_ok=True)
    source = cache / f"campaign-{args.import_events}-g{GENERATOR_VERSION}.jsonl"
    if not source.exists():
        log(f"generating {args.import_events:,} events -> {source}")
        generate_jsonl(source, args.import_events)
    lines = source.read_text(encoding="utf-8").splitlines()
    loads = [load()]
    store = LedgerStore(tmp / "import.duckdb")
    store.init()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, cpu0 = time.perf_counter(), time.process_time()
    results, _ = bulk.import_lines(store, lines, str(source))
    total = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = children.ru_utime - children0.ru_utime + children.ru_stime - children0.ru_stime
    # The DuckDB-side ceiling: the same lines validated beforehand (not timed), then only the
    # store's column path (numbering, insert, projections, commit, checkpoint) into a fresh file.
    import pyarrow as pa

    validated = pa.concat_tables(
        bulk.table_of_lines(lines[i : i + bulk.CHUNK_LINES], str(source), i + 1)
        for i in range(0, len(lines), bulk.CHUNK_LINES)
    )
    ceiling = LedgerStore(tmp / "ceiling.duckdb")
    ceiling.init()
    store_start = time.perf_counter()
    ceiling.append_columns(validated)
    store_s = [time.perf_counter() - store_start]
    loads.append(load())
    assert len(results) == len(lines)
    return {
        "events": len(lines),
        "mb": round(source.stat().st_size / 1e6),
        "per_s": round(len(lines) / total),
        # CPU, steadier than wall time on a loaded machine: this process and the workers.
        "cpu_us_per_event": round((cpu + workers_cpu) / len(lines) * 1e6, 1),
        "workers_cpu_us_per_event": round(workers_cpu / len(lines) * 1e6, 1),
        "store_per_s": round(len(lines) / store_s[0]),
        "seconds": round(total, 1),
        "workers": min(os.cpu_count() or 1, bulk.MAX_WORKERS),
        "load": loads,
    }


def bench_handoff(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from ledger.store import HANDOFF_S, LedgerStore

    ledger = tmp / "handoff.duckdb"
    LedgerStore(ledger).init()
    env = {**os.environ, "TUNELEDGER_TEST_HOLD_S": "60"}
    writer = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "store" / "writer_process.py"),
            "append",
            str(ledger),
            "--count",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    loads = [load()]
    waits = []
    try:
        assert writer.stdout is not None and writer.stdout.readline().startswith("ack ")
        store = LedgerStore(ledger)
        for _ in range(args.handoffs):
            start = time.perf_counter()
            store.query_arrow("SELECT count(*) FROM timeline")
            waits.append((time.perf_counter() - start) * 1e3)
            time.sleep(0.05)
    finally:
        writer.kill()
        writer.communicate(timeout=60)
    loads.append(load())
    return {
        "p50_ms": round(statistics.median(waits)),
        "p99_ms": round(percentile(waits, 0.99)),
        "max_ms": round(max(waits)),
        "stated_ms": round(HANDOFF_S * 1e3),
        "load": loads,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--singles", type=int, default=300, help="one-record calls per series")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--cli", type=int, default=30, help="`tuneledger append` processes")
    parser.add_argument("--handoffs", type=int, default=30)
    parser.add_argument("--import-events", type=int, default=100_000)
    parser.add_argument("--only", choices=["stores", "cli", "import", "handoff"], action="append")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every step at a tiny size, without the peers: that the script runs, no figures",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.singles, args.batches, args.batch_size = 1, 20, 1, 100
        args.cli, args.handoffs, args.import_events = 2, 3, 2_000
    only = set(args.only or ["stores", "cli", "import", "handoff"])
    results: dict[str, Any] = {"cpus": os.cpu_count(), "smoke": args.smoke}
    # each step's wall seconds, so that the bench says where its own time goes (the aim: the
    # whole of ``make bench`` within 3 minutes, docs/performance.md)
    step_s: dict[str, float] = {}
    steps = (
        ("stores", "stores", bench_stores),
        ("cli", "cli_append", bench_cli),
        ("import", "import", bench_import),
        ("handoff", "handoff", bench_handoff),
    )
    with tempfile.TemporaryDirectory(prefix="tuneledger-bench-store-") as name:
        tmp = Path(name)
        for step, key, run in steps:
            if step not in only:
                continue
            started = time.perf_counter()
            results[key] = run(args, tmp)
            step_s[key] = round(time.perf_counter() - started, 1)
            if step != "stores":
                log(f"{key}: {results[key]}")
    results["step_s"] = step_s
    print_report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def print_report(results: dict[str, Any]) -> None:
    stores = results.get("stores")
    if stores:
        print(
            "| store | single append p50 / p99 | sustained | CPU per single "
            "| batches of 1,000: calls / with the close | load |"
        )
        print("|---|---:|---:|---:|---:|---|")
        for system, s in stores.items():
            print(
                f"| {system} | {s['single_p50_ms']} / {s['single_p99_ms']} ms | {s['sustained_per_s']:,}/s "
                f"| {s['single_cpu_ms']} ms | {s['batch_calls_per_s']:,}/s / {s['batch_per_s']:,}/s "
                f"| {s['load'][0]}–{s['load'][1]} |"
            )
    cli = results.get("cli_append")
    if cli:
        print(
            f"\n`tuneledger append`: wall p50 {cli['wall_p50_ms']} ms (p90 {cli['wall_p90_ms']}), CPU p50 "
            f"{cli['cpu_p50_ms']} ms; load {cli['load']}"
        )
        res = cli.get("resident")
        if res:
            print(
                f"  forwarded to the resident process: wall p50 {res['wall_p50_ms']} ms (p90 "
                f"{res['wall_p90_ms']}), client CPU p50 {res['client_cpu_p50_ms']} ms, server CPU "
                f"{res['server_cpu_mean_ms']} ms a call (mean)"
            )
        for name, part in cli.get("parts", {}).items():
            print(f"  {name}: wall p50 {part['wall_p50_ms']} ms, CPU p50 {part['cpu_p50_ms']} ms")
    imp = results.get("import")
    if imp:
        print(
            f"\nimport of {imp['events']:,} events ({imp['mb']} MB JSONL), {imp['workers']} validation workers: "
            f"{imp['per_s']:,} events/s end to end ({imp['seconds']} s; CPU "
            f"{imp['cpu_us_per_event']} us an event, {imp['workers_cpu_us_per_event']} of it in the "
            f"workers); the DuckDB-side ceiling (the store alone, lines validated beforehand) {imp['store_per_s']:,} events/s; load {imp['load']}"
        )
    handoff = results.get("handoff")
    if handoff:
        print(
            f"\nhand-off from a kept-open writer: p50 {handoff['p50_ms']} ms, p99 {handoff['p99_ms']} ms, "
            f"max {handoff['max_ms']} ms (stated {handoff['stated_ms']} ms); load {handoff['load']}"
        )
    step_s = results.get("step_s")
    if step_s:
        print("\nwall time a step: " + ", ".join(f"{k} {v} s" for k, v in step_s.items()))


if __name__ == "__main__":
    sys.exit(main())
