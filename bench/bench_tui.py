"""Benchmark of the TUI: cold start to first paint, and append-to-visible latency under load.

Measures (numbers for docs/performance.md):

1. cold start to first paint, as a real process: a child Python process starts,
   imports the app, runs it headless and reports the wall-clock time at which
   the board first showed rows; the parent timed the spawn. On the demo ledger
   and on a generated ledger of ``--events`` events (default 100,000).
2. the same as a real terminal process in tmux (when tmux is installed):
   ``tuneledger tui`` in a detached 160x45 session, ``capture-pane`` polled
   until a board row is on screen.
3. append-to-visible latency: the app runs headless while ANOTHER PROCESS
   appends ``note_added`` events at ``--rate`` per second, writing the
   wall-clock time of each append into the note's text; the app records when
   each event reached the timeline. Reported as p50/p95/max.

Usage: .venv/bin/python bench/bench_tui.py [--events 100000] [--notes 60] [--rate 10] [--no-tmux] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.cli.demo import DEMO_SESSION, build_demo  # noqa: E402
from tui.synthetic import SESSION as LARGE_SESSION  # noqa: E402
from tui.synthetic import build_large  # noqa: E402

_CHILD = textwrap.dedent("""
    import time
    t0 = time.time()
    import asyncio, json, sys
    from tui.app import TuneLedgerApp

    async def main():
        app = TuneLedgerApp(sys.argv[1], sys.argv[2], watch=False, poll_s=0)
        async with app.run_test(size=(160, 45)) as pilot:
            while app.first_board_at is None:
                await pilot.pause(0.005)
            painted = time.time()
        print(json.dumps({"t0": t0, "painted": painted}))

    asyncio.run(main())
""")

_APPENDER = textwrap.dedent("""
    import sys, time
    from ledger.store import LedgerStore
    from schemas.events import NoteAdded

    path, session, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    store = LedgerStore(path)
    start = time.time()
    for i in range(n):
        due = start + i / rate
        time.sleep(max(0.0, due - time.time()))
        stamp = time.time()
        store.append(NoteAdded(text=f"bench-append {i} t={stamp:.6f}", session_id=session))
    print("done", flush=True)
""")


def cold_start_process(path: Path, session: str, runs: int) -> list[float]:
    """Seconds from spawning a fresh Python process to the board showing rows (headless)."""
    out = []
    for _ in range(runs):
        spawned = time.time()
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path), session],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        out.append(result["painted"] - spawned)
    return out


def cold_start_in_app(path: Path, session: str, runs: int) -> list[float]:
    """Seconds from constructing the app (modules already imported) to the board showing rows."""
    from tui.app import TuneLedgerApp

    async def one() -> float:
        app = TuneLedgerApp(path, session, watch=False, poll_s=0)
        async with app.run_test(size=(160, 45)) as pilot:
            while app.first_board_at is None:
                await pilot.pause(0.005)
        return app.first_board_at - app.started

    return [asyncio.run(one()) for _ in range(runs)]


def cold_start_tmux(path: Path, runs: int, marker: str) -> list[float] | None:
    """Seconds from starting ``tuneledger tui`` in a real tmux terminal to a board row on screen."""
    if shutil.which("tmux") is None:
        return None
    exe = ROOT / ".venv" / "bin" / "tuneledger"
    out = []
    for i in range(runs):
        name = f"tl-bench-{os.getpid()}-{i}"
        start = time.time()
        subprocess.run(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                "160",
                "-y",
                "45",
                f"{exe} --ledger {path} tui",
            ],
            check=True,
        )
        try:
            while time.time() - start < 30:
                screen = subprocess.run(
                    ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True
                ).stdout
                if marker in screen:
                    out.append(time.time() - start)
                    break
                time.sleep(0.01)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    return out


def append_to_visible(path: Path, session: str, notes: int, rate: float) -> list[float]:
    """Seconds from another process's append to the event showing in the app's timeline."""
    from tui.app import TuneLedgerApp

    async def run() -> list[float]:
        app = TuneLedgerApp(path, session, poll_s=2.0)
        app.timeline.record_visibility = True
        async with app.run_test(size=(160, 45)) as pilot:
            head = app.store.head()
            while app.last_seq < head or app.refreshing:
                await pilot.pause(0.01)
            await pilot.pause(0.5)  # the watcher is up
            proc = subprocess.Popen(
                [sys.executable, "-c", _APPENDER, str(path), session, str(notes), str(rate)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.time() + notes / rate + 30
            while time.time() < deadline:
                seen = [
                    r for r in app.timeline.rows if r["summary"].startswith("note: bench-append ")
                ]
                if len(seen) >= notes:
                    break
                await pilot.pause(0.01)
            _, err = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise RuntimeError(err[-2000:])
            latencies = []
            for row in app.timeline.rows:
                if row["summary"].startswith("note: bench-append "):
                    stamp = float(row["summary"].rsplit("t=", 1)[1])
                    latencies.append(app.timeline.visible_wall[row["seq"]] - stamp)
            return latencies

    return asyncio.run(run())


def summary(values: list[float]) -> dict[str, float]:
    """p50 / p95 / max / n of a list of seconds, in milliseconds."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(values),
        "p50_ms": round(1000 * statistics.median(ordered), 1),
        "p95_ms": round(1000 * p95, 1),
        "max_ms": round(1000 * ordered[-1], 1),
    }


def main() -> None:
    """Run every measurement and print a Markdown table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--notes", type=int, default=60)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-tmux", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    demo = build_demo(folder / "demo.duckdb", clock=lambda: datetime(2026, 1, 2, tzinfo=UTC)).path
    t = time.perf_counter()
    large = build_large(folder / "large.duckdb", args.events).path
    print(f"generated {args.events:,} events in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    # the machine's load changes every number here: record it with them
    results: dict[str, object] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
    for name, path, session in (
        ("demo", demo, DEMO_SESSION),
        (f"{args.events // 1000}k", large, LARGE_SESSION),
    ):
        results[f"first_paint_process_{name}"] = summary(
            cold_start_process(path, session, args.runs)
        )
        results[f"first_paint_in_app_{name}"] = summary(cold_start_in_app(path, session, args.runs))
        if not args.no_tmux:
            tmux = cold_start_tmux(
                path, args.runs, "accepted" if name == "demo" else "synthetic-flag"
            )
            if tmux:
                results[f"first_paint_tmux_{name}"] = summary(tmux)
        latencies = append_to_visible(path, session, args.notes, args.rate)
        results[f"append_to_visible_{name}"] = summary(latencies)

    results["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"cpus {results['cpus']}, load average before {results['loadavg_before']}, after {results['loadavg_after']}"
    )
    print("| measurement | n | p50 ms | p95 ms | max ms |\n|---|---|---|---|---|")
    for key, value in results.items():
        if isinstance(value, dict):
            print(
                f"| {key} | {value['n']} | {value['p50_ms']} | {value['p95_ms']} | {value['max_ms']} |"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
