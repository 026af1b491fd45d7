"""The runners' MCP tools against a real streaming server (``tests/fake_servers/openai_stream.py``,
launched by the real server runner as an engine): servers kept between calls, a benchmark, a
plan's verdict table and progress, a job polled to its end, cancellation, and the client
leaving with a server running.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from ledger.store import LedgerStore
from tests.support.mcp_client import call, in_process, refused

#: Process-based on purpose (real servers started and stopped): `make test` runs it.
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FAKE = Path(__file__).parents[1] / "fake_servers" / "openai_stream.py"

SERVERS = f"""
[defaults]
engine = "transformers"
command = ["{sys.executable}", "{FAKE}"]
port = 0
health_timeout_s = 30

[configs.baseline]
flags = {{ chunks = 6, delay-ms = DELAY }}

[configs.fast]
base = "baseline"
flags = {{ delay-ms = 1 }}
"""

PLAN = """
[plan]
session = "mcp-plan"
baseline = "baseline"
repeats = REPEATS
concurrency = [1, 2]
servers = "servers.toml"
stop_wait_s = 5

[[candidates]]
config = "fast"
flag = "delay-ms"

[bench]
endpoint = "chat"
model = "fake"
input_len = 8
output_len = 6
num_prompts = 16
warmup = 1
"""


def _files(folder: Path, *, delay: int = 8, repeats: int = 2) -> Path:
    (folder / "servers.toml").write_text(SERVERS.replace("DELAY", str(delay)))
    plan = folder / "plan.toml"
    plan.write_text(PLAN.replace("REPEATS", str(repeats)))
    return plan


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_server_is_kept_between_calls_benchmarked_and_stopped(store: LedgerStore) -> None:
    _files(store.path.parent)
    configs = str(store.path.parent / "servers.toml")
    progress: list[str | None] = []

    async def seen(_value: float, _total: float | None, message: str | None) -> None:
        progress.append(message)

    async with in_process(store.path, session="s1") as client:
        server = await call(
            client,
            "start_server",
            {"config": "baseline", "configs": configs},
            progress_callback=seen,
        )
        assert any("ready" in (m or "") for m in progress)
        bench = await call(
            client,
            "run_bench",
            {
                "url": server["base_url"],
                "input_len": 8,
                "output_len": 6,
                "num_prompts": 16,
                "concurrency": [1, 2],
                "config_name": "baseline",
                "server_run_id": server["run_id"],
            },
            progress_callback=seen,
        )
        assert [(r["concurrency"], r["completed"], r["valid"]) for r in bench["runs"]] == [
            (1, 16, True),
            (2, 16, True),
        ]
        assert "run 2/2: c=2 repeat 0" in progress
        stopped = await call(client, "stop_server", {"run_id": server["run_id"], "reason": "done"})
        assert stopped["event_type"] == "server_stopped" and stopped["reason"] == "done"
        assert not _alive(server["pid"])
        again = await refused(client, "stop_server", {"run_id": server["run_id"]})
        assert again["error"]["exit_code"] == 5
        # a server that dies by itself is recorded by the watcher and said so at stop
        other = await call(client, "start_server", {"config": "baseline", "configs": configs})
        os.killpg(other["pid"], signal.SIGKILL)
        with anyio.fail_after(30):
            while (await call(client, "running_servers"))["servers"]:
                await anyio.sleep(0.5)
        ended = await call(client, "stop_server", {"run_id": other["run_id"]})
        assert ended["already_ended"] is True and ended["event_type"] in (
            "server_stopped",
            "server_failed",
        )
        missing = await refused(client, "start_server", {"config": "nope", "configs": configs})
        assert missing["error"]["exit_code"] in (3, 5)
    runs = store.query_arrow(
        "SELECT run_id, status FROM server_runs ORDER BY started_seq"
    ).to_pylist()
    assert [r["status"] for r in runs] == ["stopped", "stopped"] or runs[1]["status"] == "failed"
    benches = store.query_arrow("SELECT server_run_id, source FROM benchmarks").to_pylist()
    assert {b["server_run_id"] for b in benches} == {server["run_id"]}
    assert all(
        b["source"].startswith(f"tuneledger run bench --url {server['base_url']} ") for b in benches
    )


async def test_run_plan_returns_the_verdict_table_with_progress(store: LedgerStore) -> None:
    plan = _files(store.path.parent, delay=8, repeats=2)
    progress: list[tuple[float, float | None, str | None]] = []

    async def seen(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with in_process(store.path) as client:
        out = await call(
            client,
            "run_plan",
            {"plan_file": str(plan), "all_metrics": True},
            progress_callback=seen,
        )
    assert out["session_id"] == "mcp-plan" and out["runs"] == 2 * 2 * 2 and out["missing"] == []
    rows = {(v["concurrency"], v["metric"]): v for v in out["verdicts"]}
    tput = rows[(1, "output_throughput")]
    assert tput["config_name"] == "fast" and tput["baseline_runs"] == tput["runs"] == 2
    assert (
        tput["change_pct"] > 0 and tput["ci_low_pct"] <= tput["change_pct"] <= tput["ci_high_pct"]
    )
    stored = {str(e.event_id): e for e in store.read(types=["comparison_completed"])}
    assert set(stored) == {v["event_id"] for v in out["verdicts"]}
    assert stored[tput["event_id"]].change == pytest.approx(tput["change_pct"] / 100)
    values = [p[0] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert any(p[1] == 4 for p in progress) and any(
        "repeat 2/2: fast" in (p[2] or "") for p in progress
    )
    assert store.query_arrow(
        "SELECT count(*) AS n FROM server_runs WHERE status <> 'stopped'"
    ).to_pylist() == [{"n": 0}]


async def test_a_plan_as_a_job_is_polled_to_its_end_or_cancelled(store: LedgerStore) -> None:
    plan = _files(store.path.parent, delay=8, repeats=2)
    async with in_process(store.path) as client:
        job = await call(
            client, "start_job", {"tool": "run_plan", "arguments": {"plan_file": str(plan)}}
        )
        assert job["state"] == "running"
        with anyio.fail_after(300):
            status = job
            while status["state"] == "running":
                status = await call(client, "job_status", {"job_id": job["job_id"], "wait_s": 5})
        assert status["state"] == "done" and status["error"] is None
        assert status["result"]["runs"] == 8 and status["result"]["verdicts"]
        assert any("repeat 1/2: baseline" in p["message"] for p in status["progress"])
        later = await call(
            client,
            "job_status",
            {"job_id": job["job_id"], "progress_after": status["next_progress"]},
        )
        assert later["progress"] == [] and later["result"] == status["result"]
        bad = await refused(client, "start_job", {"tool": "board", "arguments": {}})
        assert bad["error"]["exit_code"] == 3
        refused_args = await call(
            client, "start_job", {"tool": "run_plan", "arguments": {"plan": "x"}}
        )
        with anyio.fail_after(30):
            while refused_args["state"] == "running":
                refused_args = await call(
                    client, "job_status", {"job_id": refused_args["job_id"], "wait_s": 5}
                )
        assert refused_args["state"] == "failed" and refused_args["error"]["exit_code"] == 3

        slow = _files(store.path.parent, delay=40, repeats=3)
        before = len(store.read(types=["benchmark_completed"]))
        second = await call(
            client, "start_job", {"tool": "run_plan", "arguments": {"plan_file": str(slow)}}
        )
        with anyio.fail_after(120):  # until its first run is recorded
            while len(store.read(types=["benchmark_completed"])) == before:
                await anyio.sleep(0.2)
        t0 = time.monotonic()
        await call(client, "cancel_job", {"job_id": second["job_id"]})
        with anyio.fail_after(120):
            state = "cancelling"
            while state in ("running", "cancelling"):
                state = (
                    await call(client, "job_status", {"job_id": second["job_id"], "wait_s": 5})
                )["state"]
        assert state == "cancelled" and time.monotonic() - t0 < 100
    assert store.query_arrow(
        "SELECT count(*) AS n FROM server_runs WHERE status NOT IN ('stopped', 'failed')"
    ).to_pylist() == [{"n": 0}]
    notes = [e.text for e in store.read(types=["note_added"])]
    assert any("interrupted" in n for n in notes), notes


async def test_the_servers_still_running_stop_when_the_client_goes(store: LedgerStore) -> None:
    _files(store.path.parent)
    async with in_process(store.path, session="s1") as client:
        server = await call(
            client,
            "start_server",
            {"config": "baseline", "configs": str(store.path.parent / "servers.toml")},
        )
        assert _alive(server["pid"])
    assert not _alive(server["pid"])
    (stopped,) = store.read(types=["server_stopped"])
    assert stopped.reason == "the MCP server ended" and stopped.run_id == server["run_id"]


async def test_over_stdio_the_servers_stop_when_the_client_closes(store: LedgerStore) -> None:
    from tests.support.mcp_client import over_stdio

    _files(store.path.parent)
    configs = str(store.path.parent / "servers.toml")
    async with over_stdio(store.path, "--session", "s1") as client:
        server = await call(client, "start_server", {"config": "baseline", "configs": configs})
        assert _alive(server["pid"])
    with anyio.fail_after(60):
        while _alive(server["pid"]) or not store.read(types=["server_stopped"]):
            await anyio.sleep(0.2)
    (stopped,) = store.read(types=["server_stopped"])
    assert stopped.reason == "the MCP server ended" and stopped.run_id == server["run_id"]
    assert stopped.actor.kind == "runner"


SPEC = f"""
[spec]
session = "spec-mcp"
baseline = "baseline"
repeats = 2
concurrency = [1]
stop_wait_s = 5

[[trials]]
name = "eagle-3-1-4"
algorithm = "EAGLE"
num_steps = 3
eagle_topk = 1
num_draft_tokens = 4
flags = {{ fake-accept = 3.0 }}

[bench]
endpoint = "chat"
model = "fake"
input_len = 8
output_len = 8
num_prompts = 6
warmup = 1

[defaults]
engine = "sglang"
model = "fake"
command = ["{sys.executable}", "{Path(__file__).parents[1] / "fake_servers" / "sglang_spec_server.py"}"]
port = 0
health_timeout_s = 30

[configs.baseline]
flags = {{ delay-ms = 6 }}
"""


async def test_run_spec_returns_the_trials_with_their_accept_length(store: LedgerStore) -> None:
    spec = store.path.parent / "spec.toml"
    spec.write_text(SPEC)
    async with in_process(store.path) as client:
        out = await call(client, "run_spec", {"spec_file": str(spec)})
    (trial,) = out["trials"]
    assert trial["trial_id"] == "spec-mcp:eagle-3-1-4" and trial["algorithm"] == "EAGLE"
    assert trial["accept_length"] == 3.0 and trial["accept_length_source"] == "server_info"
    # the change's size is timing on a shared machine (tests/runners/test_spec.py checks the
    # verdict's arithmetic); here: it is there, as a number, over the four runs
    assert isinstance(trial["output_throughput_change_pct"], float) and out["runs"] == 4
    rows = store.query_arrow("SELECT trial_id, accept_length FROM spec_trials").to_pylist()
    assert rows == [{"trial_id": "spec-mcp:eagle-3-1-4", "accept_length": 3.0}]
    assert str(store.read(types=["spec_decoding_trial_completed"])[0].event_id) == trial["event_id"]


async def test_run_bench_names_the_configuration_serving_the_port_as_the_cli_does(
    store: LedgerStore,
) -> None:
    """Before: ``run_bench`` defaulted ``config_name`` to "baseline" and skipped the CLI's
    rule, so an agent benchmarking a candidate recorded baseline runs. One rule now
    (``runners.bench.serving.resolve_config_name``) for both front ends."""
    _files(store.path.parent)
    configs = str(store.path.parent / "servers.toml")
    progress: list[str | None] = []

    async def seen(_value: float, _total: float | None, message: str | None) -> None:
        progress.append(message)

    bench = {"input_len": 8, "output_len": 6, "num_prompts": 8, "concurrency": [1]}
    async with in_process(store.path, session="s1") as client:
        server = await call(client, "start_server", {"config": "fast", "configs": configs})
        out = await call(
            client, "run_bench", {"url": server["base_url"], **bench}, progress_callback=seen
        )
        contradicted = await refused(
            client, "run_bench", {"url": server["base_url"], "config_name": "baseline", **bench}
        )
        await call(client, "stop_server", {"run_id": server["run_id"]})
    assert [r["config_name"] for r in out["runs"]] == ["fast"]
    assert any("measuring configuration 'fast'" in (m or "") for m in progress)
    assert contradicted["error"]["exit_code"] == 3
    assert "contradicts the ledger" in contradicted["error"]["message"]
    rows = store.query_arrow("SELECT config_name, is_baseline, server_run_id FROM benchmarks")
    assert rows.to_pylist() == [
        {"config_name": "fast", "is_baseline": False, "server_run_id": server["run_id"]}
    ]


def _watchdog_parent(run_id: str) -> int | None:
    """The process that owns ``run_id``'s server: its watchdog's parent."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            status = (proc / "status").read_text()
        except OSError:
            continue
        if b"runners.server.supervise" in argv and run_id.encode() in argv:
            return int(next(ln for ln in status.splitlines() if ln.startswith("PPid:")).split()[1])
    return None


async def test_sigkill_of_the_mcp_server_stops_its_servers_and_records_it(
    store: LedgerStore,
) -> None:
    """Before: the client left (the SDK's SIGTERM interrupted the shutdown) and the engine
    servers kept running, the ledger saying ``ready``. SIGKILL is the worst case of it."""
    from tests.support.mcp_client import over_stdio

    _files(store.path.parent)
    configs = str(store.path.parent / "servers.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    server: dict[str, object] = {}
    try:
        async with over_stdio(store.path, "--session", "s1", env=env, timeout_s=120) as client:
            server = await call(client, "start_server", {"config": "baseline", "configs": configs})
            owner = _watchdog_parent(str(server["run_id"]))
            assert owner is not None and owner != os.getpid()
            os.kill(owner, signal.SIGKILL)
            with anyio.fail_after(120):
                while _alive(int(server["pid"])):  # type: ignore[call-overload]
                    await anyio.sleep(0.2)
    except Exception:  # the client's streams end with the server: not what is tested here
        pass
    assert server and not _alive(int(server["pid"]))  # type: ignore[call-overload]
    deadline = time.monotonic() + 60
    while not store.read(types=["server_stopped"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    (stopped,) = store.read(types=["server_stopped"])
    assert stopped.run_id == server["run_id"]  # type: ignore[attr-defined]
    assert "its owner process died" in stopped.reason  # type: ignore[attr-defined]
    status = store.query_arrow("SELECT status FROM server_runs").to_pylist()
    assert status == [{"status": "stopped"}]
