"""`run bench` without --config-name recorded any server as `baseline` (a
`continuous-batching` server started by `run server start` became the baseline, and every later
delta was computed against it). The configuration serving the URL's port is in the ledger
(`server_started.port`, `server_runs.status`): the bench takes its name, or refuses a
--config-name that contradicts it, and says which."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.errors import InvalidInput
from ledger.store import LedgerStore
from runners.bench.serving import resolve_config_name, serving_runs, url_port
from schemas import ServerStarted, ServerStopped
from schemas.envelope import Host

HERE = Path(__file__).parents[1]
TUNELEDGER = Path(sys.executable).parent / "tuneledger"
THIS_HOST = Host(hostname=socket.gethostname())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def started(run_id: str, config: str, port: int, pid: int, host: Host = THIS_HOST) -> ServerStarted:
    return ServerStarted(
        run_id=run_id, engine="transformers", config_name=config, port=port, pid=pid,
        session_id="s", host=host,
    )  # fmt: skip


def test_url_port_reads_the_port_or_the_schemes_default() -> None:
    assert url_port("http://127.0.0.1:30000") == ("127.0.0.1", 30000)
    assert url_port("http://LOCALHOST/") == ("localhost", 80)
    assert url_port("https://gpu-node") == ("gpu-node", 443)
    assert url_port("http://h:99999") == ("h", None)


def test_the_configuration_serving_the_port_is_taken_or_a_contradiction_refused(
    tmp_path: Path,
) -> None:
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # nothing known on that port: `baseline` as before, and the bench says so
    name, run_id, said = resolve_config_name(store, url, None, None)
    assert (name, run_id) == ("baseline", None)
    assert f"no server run in the ledger serves port {port}" in said and "--config-name" in said
    # a continuous-batching server started by the runner (this process stands for it: alive)
    store.append(started("cb-1", "continuous-batching", port, os.getpid()))
    name, run_id, said = resolve_config_name(store, url, None, None)
    assert (name, run_id) == ("continuous-batching", "cb-1")
    assert (
        said
        == f"measuring configuration 'continuous-batching': server run cb-1 serves port {port} (server_runs)"
    )
    assert (
        resolve_config_name(store, f"http://localhost:{port}/", None, None)[0]
        == "continuous-batching"
    )
    # the same name given: taken, linked to the run, nothing to say
    assert resolve_config_name(store, url, "continuous-batching", None) == (
        "continuous-batching", "cb-1", "",
    )  # fmt: skip
    # a contradicting name: exit 3, naming the port, the run and its configuration
    with pytest.raises(InvalidInput) as refused:
        resolve_config_name(store, url, "baseline", None)
    assert refused.value.exit_code == 3
    text = str(refused.value)
    assert "--config-name baseline contradicts the ledger" in text
    assert f"port {port}" in text and "cb-1" in text and "'continuous-batching'" in text
    # another port: not that run's business
    assert (
        resolve_config_name(store, f"http://127.0.0.1:{free_port()}", "baseline", None)[0]
        == "baseline"
    )
    # stopped: no longer serving
    store.append(ServerStopped(run_id="cb-1", session_id="s", host=THIS_HOST))
    assert serving_runs(store, url) == []
    assert resolve_config_name(store, url, "baseline", None)[:2] == ("baseline", None)


def test_a_run_whose_process_is_gone_or_on_another_host_does_not_count(tmp_path: Path) -> None:
    """A runner killed with SIGKILL records no stop: its run stays `ready`, but its pid is gone."""
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    port = free_port()
    store.append(started("gone", "continuous-batching", port, dead_pid()))
    store.append(started("far", "spec", port, os.getpid(), Host(hostname="some-other-node")))
    assert serving_runs(store, f"http://127.0.0.1:{port}") == []
    # the other host's run is found when the URL names that host
    (run,) = serving_runs(store, f"http://some-other-node:{port}")
    assert (run.run_id, run.config_name) == ("far", "spec")
    # a run the ledger still holds as serving is matched, latest first
    store.append(started("now", "tuned", port, os.getpid()))
    assert [r.run_id for r in serving_runs(store, f"http://127.0.0.1:{port}")] == ["now"]


@pytest.mark.slow
def test_run_bench_takes_the_name_of_the_server_started_by_run_server_start(
    tmp_path: Path,
) -> None:
    """End to end: `run server start continuous-batching` then `run bench` with no --config-name."""
    port = free_port()
    configs = tmp_path / "servers.toml"
    configs.write_text(
        f"""
[defaults]
engine = "transformers"
model = "fake"
command = ["{sys.executable}", "{HERE / "fake_servers" / "openai_stream.py"}"]
port = {port}
health_timeout_s = 30

[configs.baseline]
flags = {{ chunks = 4 }}

[configs.continuous-batching]
base = "baseline"
flags = {{ delay-ms = 1 }}
"""
    )
    ledger = tmp_path / "l.duckdb"
    env = {**os.environ, "TUNELEDGER_LEDGER": str(ledger), "TUNELEDGER_SESSION": "s"}
    server = subprocess.Popen(
        [TUNELEDGER, "run", "server", "start", "continuous-batching", "--configs", configs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        ready = json.loads(server.stdout.readline())
        assert ready["port"] == port
        bench = [TUNELEDGER, "run", "bench", "--url", f"http://127.0.0.1:{port}", "--num-prompts", "8",
                 "--input-len", "4", "--output-len", "4"]  # fmt: skip
        out = subprocess.run(
            [*bench, "--json"], capture_output=True, text=True, env=env, timeout=120
        )
        assert out.returncode == 0, out.stderr
        assert "bench client:" not in out.stderr  # no debug line on every bench
        # --json: one object on stdout, the run's line on stderr (docs/cli.md: Output for programs)
        (run,) = json.loads(out.stdout)["runs"]
        assert run["config_name"] == "continuous-batching" and run["concurrency"] == 1
        assert run["valid"] and run["completed"] == 8 and run["output_throughput"] > 0
        assert "continuous-batching c=1 rep 0:" in out.stderr and "rep 0:" not in out.stdout
        assert (
            f"measuring configuration 'continuous-batching': server run {ready['run_id']} serves port {port}"
            in out.stderr
        )
        out = subprocess.run(
            [*bench, "--config-name", "baseline"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
        assert "contradicts the ledger" in out.stderr and "'continuous-batching'" in out.stderr
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    rows = (
        LedgerStore(ledger)
        .query_arrow("SELECT config_name, is_baseline, server_run_id FROM benchmarks")
        .to_pylist()
    )
    assert rows == [
        {
            "config_name": "continuous-batching",
            "is_baseline": False,
            "server_run_id": ready["run_id"],
        }
    ]
    # the server stopped: the port is nobody's, a bench there is `baseline` again (and says so)
    deadline = time.monotonic() + 10
    while (
        serving_runs(LedgerStore(ledger), f"http://127.0.0.1:{port}")
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert serving_runs(LedgerStore(ledger), f"http://127.0.0.1:{port}") == []
