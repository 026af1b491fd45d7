"""The plan runner against real (fake-engine) servers started by the real server runner:
interleaving, recording, comparisons in the views, findings, and Ctrl-C as a real SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from runners.plan import load_plan, run_plan, verdict_table
from runners.server.runner import ServerRunner

#: Process-based on purpose (real (fake-engine) servers and a real SIGINT): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

FAKE = Path(__file__).parents[1] / "fake_servers" / "openai_stream.py"
TUNELEDGER = Path(sys.executable).parent / "tuneledger"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_plan(
    tmp_path: Path,
    *,
    base_delay: float,
    cand_delay: float,
    repeats: int,
    prompts: int,
    concurrency: str = "[1, 2]",
    session: str = "plan-test",
    cand_flags: str = "",
    plan_extra: str = "",
    model_line: str = 'model = "fake"',
) -> Path:
    text = f"""
[plan]
session = "{session}"
session_title = "fake engine trial"
baseline = "baseline"
repeats = {repeats}
concurrency = {concurrency}
{plan_extra}

[[candidates]]
config = "fast"
flag = "delay-ms"
hypothesis = "a shorter delay streams faster"

[bench]
endpoint = "chat"
{model_line}
input_len = 8
output_len = 6
num_prompts = {prompts}
warmup = 1
seed = 1

[defaults]
engine = "transformers"
command = ["{sys.executable}", "{FAKE}"]
port = {free_port()}
health_timeout_s = 30

[configs.baseline]
flags = {{ chunks = 6, delay-ms = {base_delay} }}

[configs.fast]
base = "baseline"
flags = {{ delay-ms = {cand_delay}{cand_flags} }}
"""
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def quick_runner(store: LedgerStore, session: str) -> ServerRunner:
    return ServerRunner(
        store, session_id=session, poll_interval_s=0.1, sigint_wait_s=5, sigterm_wait_s=5
    )


def test_plan_interleaves_records_and_compares(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, base_delay=12, cand_delay=3, repeats=3, prompts=16))
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    with quick_runner(store, "plan-test") as servers:
        result = run_plan(plan, store, servers, progress=False)

    # A B A B: servers started in arm order, each repeat restarting both arms
    started = [e.config_name for e in store.read(types=["server_started"])]
    assert started == ["baseline", "fast"] * 3
    assert len(store.read(types=["server_stopped"])) == 6
    benches = store.query_arrow(
        "SELECT config_name, concurrency, repeat, valid, server_run_id FROM benchmarks ORDER BY seq"
    ).to_pylist()
    assert [(b["config_name"], b["concurrency"], b["repeat"]) for b in benches] == [
        (arm, c, r) for r in range(3) for arm in ("baseline", "fast") for c in (1, 2)
    ]
    assert all(b["valid"] and b["server_run_id"] for b in benches)

    # one comparison per (candidate, concurrency, metric), feeding benchmark_deltas
    assert len(result.comparisons) == 2 * 9
    deltas = store.query_arrow(
        "SELECT concurrency, verdict, change_pct, ci_low_pct, verdict_rule FROM benchmark_deltas "
        "WHERE metric = 'output_throughput' ORDER BY concurrency"
    ).to_pylist()
    assert [d["concurrency"] for d in deltas] == [1, 2]
    assert all(
        d["verdict"] == "improved" and d["verdict_rule"].startswith("statistical") for d in deltas
    )
    assert all(d["ci_low_pct"] > 50 for d in deltas)  # 12 ms -> 3 ms per chunk: far more than +50%

    # the single-flag candidate gets a measured finding, visible in flag_verdicts
    verdicts = store.query_arrow("SELECT flag, verdict, basis FROM flag_verdicts").to_pylist()
    assert verdicts == [{"flag": "delay-ms", "verdict": "effective", "basis": "measured"}]
    board = store.query_arrow("SELECT candidate_id, kind FROM board").to_pylist()
    assert board == [{"candidate_id": "flag:delay-ms", "kind": "flag"}]
    assert store.read(types=["session_started"])[0].session_id == "plan-test"

    # the verdict table renders every comparison
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(verdict_table(result))
    text = console.export_text()
    assert "output_throughput" in text and "improved" in text
    # one sign convention: the table's change is value / baseline - 1 of the means it shows
    row = next(line for line in text.splitlines() if "output_throughput" in line)
    assert row.count("%)") >= 2  # baseline and candidate each with their CV beside them
    assert "value / baseline - 1" in text
    view = {
        (d["concurrency"], d["metric"]): d
        for d in store.query_arrow(
            "SELECT concurrency, metric, change_pct, baseline_value, value FROM benchmark_deltas"
        ).to_pylist()
    }
    for c in result.comparisons:
        d = view[(c.concurrency, c.metric)]
        assert d["change_pct"] == pytest.approx(100 * c.change)
        assert d["change_pct"] == pytest.approx(100 * (d["value"] / d["baseline_value"] - 1))

    # the export a user pastes into a PR, on this CPU host with a non-SGLang engine
    from ledger.export.markdown import render_markdown

    md = render_markdown(store, session_id="plan-test")
    hardware = next(line for line in md.splitlines() if line.startswith("- Hardware:"))
    assert "CPU" in hardware and "GPU ?" not in hardware and "x0" not in hardware
    runs_header = next(
        line for line in md.split("## Server runs")[1].splitlines() if line.startswith("| Config")
    )
    assert "max_running_requests" not in runs_header and "MoE kernel config" not in runs_header
    deltas = md.split("## Verdicts")[1].split("\n## ")[0]
    fast = next(
        line
        for line in deltas.splitlines()
        if line.startswith("| fast | c=2") and "throughput" in line
    )
    assert "(CV " in fast and "improved" in fast
    assert f"- `tuneledger run plan {plan.source}` (fast, baseline)" in deltas


def test_plan_file_errors(tmp_path: Path) -> None:
    from ledger.errors import InvalidInput

    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[plan]\nbaseline = "nope"\n[[candidates]]\nconfig = "x"\n[configs.x]\nengine = "transformers"\n'
    )
    with pytest.raises(InvalidInput, match="no configuration nope"):
        load_plan(bad)
    bad.write_text("[plan]\nrepeats = 0\n")
    with pytest.raises(InvalidInput, match="repeats"):
        load_plan(bad)


def test_sigint_stops_the_server_and_records_what_completed(tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        base_delay=30,
        cand_delay=30,
        repeats=3,
        prompts=8,
        concurrency="[1]",
        session="sigint",
    )
    ledger = tmp_path / "l.duckdb"
    env = {**os.environ, "TUNELEDGER_LEDGER": str(ledger)}
    proc = subprocess.Popen(
        [str(TUNELEDGER), "run", "plan", str(plan), "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = LedgerStore(ledger)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            time.sleep(0.3)
            try:
                if ledger.exists() and store.read(types=["benchmark_completed"]):
                    break
            except Exception:  # noqa: BLE001 - the file may exist before its tables are committed
                continue
        else:
            pytest.fail("no benchmark recorded within 60 s")
        time.sleep(0.5)  # now mid-way through a later run (each run takes ~1.5 s)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    started = store.read(types=["server_started"])
    ended = store.read(types=["server_stopped", "server_failed"])
    assert {e.run_id for e in started} == {
        e.run_id for e in ended
    }  # nothing left running unrecorded
    for event in started:  # and the fake engines really are gone
        with pytest.raises(ProcessLookupError):
            os.kill(event.pid, 0)
    notes = store.read(types=["note_added"])
    assert len(notes) == 1 and "interrupted" in notes[0].text
    done = store.read(types=["benchmark_completed"])
    assert len(notes[0].refs) == len(done) >= 1
    assert not store.read(types=["comparison_completed"])


def test_a_failed_run_is_recorded_retried_on_a_restarted_server_and_the_plan_goes_on(
    tmp_path: Path,
) -> None:
    """A regression: one failed warm-up ended the whole plan (exit 13) and lost the remaining repeats."""
    marker = tmp_path / "failed-once"
    plan = load_plan(
        write_plan(
            tmp_path,
            base_delay=2,
            cand_delay=1,
            repeats=2,
            prompts=4,
            session="retry",
            cand_flags=f', fail-posts = 5, fail-marker = "{marker}"',
        )
    )
    assert plan.plan.retries == 1
    store = LedgerStore(tmp_path / "l.duckdb")
    with quick_runner(store, "retry") as servers:
        result = run_plan(plan, store, servers, progress=False)
    assert marker.exists()
    assert [(f.config_name, f.repeat, f.loads, f.retried) for f in result.failures] == [
        ("fast", 0, [1, 2], True)
    ]
    assert "HTTP 500" in result.failures[0].cause and result.missing == []
    # the failed attempt is in the ledger, not valid, with its cause; the retry measured everything
    failed = store.query_arrow(
        "SELECT config_name, concurrency, valid, completed FROM benchmarks WHERE completed = 0"
    ).to_pylist()
    assert failed == [{"config_name": "fast", "concurrency": 1, "valid": False, "completed": 0}]
    event = result.failures[0].event
    assert event is not None and "HTTP 500" in event.validity_notes[0] and "retried" in event.notes
    started = [e.config_name for e in store.read(types=["server_started"])]
    assert started == ["baseline", "fast", "fast", "baseline", "fast"]
    # each run names the candidate it was made for (the baseline none)
    made_for = store.query_arrow(
        "SELECT DISTINCT config_name, candidate_id FROM benchmarks ORDER BY 1"
    ).to_pylist()
    assert made_for == [
        {"config_name": "baseline", "candidate_id": None},
        {"config_name": "fast", "candidate_id": "flag:delay-ms"},
    ]
    assert len(result.points) == 2 * 2 * 2
    assert all(c.baseline_runs == 2 and c.runs == 2 for c in result.comparisons)


def test_a_run_failing_past_its_retry_budget_is_missing_and_the_table_says_so(
    tmp_path: Path,
) -> None:
    path = write_plan(
        tmp_path,
        base_delay=2,
        cand_delay=1,
        repeats=2,
        prompts=4,
        session="missing",
        concurrency="[1]",
        cand_flags=", fail-posts = 1000",
        plan_extra="retries = 0",
    )
    ledger = tmp_path / "l.duckdb"
    env = {**os.environ, "TUNELEDGER_LEDGER": str(ledger), "COLUMNS": "250"}
    out = subprocess.run(
        [str(TUNELEDGER), "run", "plan", str(path), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "going on without it" in out.stderr
    assert "missing: fast rep 0 c=1" in out.stdout and "missing: fast rep 1 c=1" in out.stdout
    assert "HTTP 500" in out.stdout
    store = LedgerStore(ledger)
    assert (
        len(store.read(types=["server_started"])) == 4
        and len(store.read(types=["server_stopped"])) == 4
    )
    assert store.query_arrow(
        "SELECT count(*) FILTER (WHERE valid) AS ok, count(*) FILTER (WHERE NOT valid) AS bad "
        "FROM benchmarks"
    ).to_pylist() == [{"ok": 2, "bad": 2}]
    assert {c.verdict for c in store.read(types=["comparison_completed"])} == {"insufficient-data"}


def test_prompts_per_concurrency_sizes_each_run_to_its_concurrency(tmp_path: Path) -> None:
    """``[bench] prompts_per_concurrency``: a run at concurrency c sends min(num_prompts,
    max(min_prompts, k x c)) prompts, recorded in its workload, the same count for both arms."""
    plan = load_plan(
        _with_bench_lines(
            write_plan(
                tmp_path, base_delay=2, cand_delay=1, repeats=1, prompts=24, concurrency="[1, 2, 8]"
            ),
            "prompts_per_concurrency = 5\nmin_prompts = 6",
        )
    )
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    with quick_runner(store, "plan-test") as servers:
        run_plan(plan, store, servers, progress=False)
    # Validity is not asserted: 24 prompts at c=8 is 3 per slot, so on a busy machine the tail
    # can pull achieved concurrency under the gate; what is under test is the sizing.
    runs = [
        (e.config_name, e.concurrency, e.workload.num_prompts, e.metrics.completed)
        for e in store.read(types=["benchmark_completed"])
    ]
    # c=1: max(6, 5) = 6; c=2: 10; c=8: min(24, 40) = 24
    assert runs == [
        (arm, c, n, n) for arm in ("baseline", "fast") for c, n in ((1, 6), (2, 10), (8, 24))
    ]


def _with_bench_lines(path: Path, lines: str) -> Path:
    path.write_text(path.read_text().replace("warmup = 1\n", f"warmup = 1\n{lines}\n", 1))
    return path


def test_a_plan_past_its_time_budget_starts_no_more_arms_and_still_compares(
    tmp_path: Path,
) -> None:
    """``[plan] time_budget_s``: a plan that must end inside a lent GPU's call stops starting arms
    once the budget is spent and records its comparisons from what ran (killed, it records none)."""
    plan = load_plan(
        write_plan(
            tmp_path,
            base_delay=2,
            cand_delay=1,
            repeats=2,
            prompts=4,
            session="budget",
            concurrency="[1]",
            # below the runner's readiness poll (0.1 s), so no server start can fit inside it;
            # 0.5 s was not always enough: on an idle CI machine a second arm started
            plan_extra="time_budget_s = 0.09",
        )
    )
    store = LedgerStore(tmp_path / "l.duckdb")
    lines: list[str] = []
    with quick_runner(store, "budget") as servers:
        result = run_plan(plan, store, servers, progress=False, say=lines.append)
    # The first arm starts at once; its server start alone outlasts the budget.
    assert [e.config_name for e in store.read(types=["server_started"])] == ["baseline"]
    assert [line for line in lines if "time budget" in line] == [
        "time budget 0.09 s spent: fast repeat 1 not run",
        "time budget 0.09 s spent: baseline repeat 2 not run",
        "time budget 0.09 s spent: fast repeat 2 not run",
    ]
    assert result.comparisons and {c.verdict for c in result.comparisons} == {"insufficient-data"}


def test_a_plan_refused_for_its_inputs_leaves_nothing_in_the_ledger(tmp_path: Path) -> None:
    """The example plan without its tokenizer: exit 3, one line, and no event appended (the
    session and candidate proposals were written before the tokenizer was looked for)."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    for name in ("plan.toml", "servers-cpu.toml"):
        (tmp_path / name).write_text((examples / name).read_text())
    ledger = tmp_path / "p.duckdb"
    LedgerStore(ledger).init()
    out = subprocess.run(
        [str(TUNELEDGER), "--ledger", str(ledger), "run", "plan", "plan.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TUNELEDGER_RESIDENT": "0"},
    )
    assert out.returncode == 3 and "--tokenizer" in out.stderr and out.stderr.count("\n") == 1
    assert LedgerStore(ledger).head() == 0
