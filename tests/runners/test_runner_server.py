"""The server runner against real processes and real HTTP: a fake SGLang server script
(tests/fake_servers/sglang_server.py) launched through the sglang adapter's ``command``, so the
real lifecycle code (process group, log file, health polling, signals, events) runs unchanged.
No mocks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from ledger.errors import NotFound
from ledger.store import LedgerStore
from runners.host import parse_gpu_query
from runners.server.configs import ConfigError, ServerConfig, load_config, parse_configs
from runners.server.engines import MissingEngine, adapter_for, flag_args
from runners.server.runner import PortInUse, ServerStartFailed, group_alive
from tests.support.fake_sglang import CPU_HOST, FAKE, FAKE_SMI, fake_config, free_port, make_runner

#: Process-based on purpose (real server processes, signals, HTTP): `make test` runs it, `make check` does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "tuneledger"


def types(store: LedgerStore) -> list[str]:
    return [e.type for e in store.read()]


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return not group_alive(pgid)  # only zombies awaiting init's reaping are left


# --- configurations and argv ---------------------------------------------------------------


def test_configs_inherit_flags_and_env(tmp_path: Path) -> None:
    path = tmp_path / "servers.toml"
    path.write_text(
        "[defaults]\nport = 31000\n"
        '[configs.baseline]\nmodel = "/m"\nflags = { tp = 4, enable_metrics = true }\nenv = { SGLANG_X = "1" }\n'
        '[configs.fusion]\nbase = "baseline"\nflags = { enable-flashinfer-allreduce-fusion = true, enable-metrics = false }\n'
    )
    fusion = load_config(path, "fusion")
    assert fusion.port == 31000 and fusion.model == "/m" and fusion.env == {"SGLANG_X": "1"}
    assert fusion.flags == {
        "tp": 4,
        "enable-metrics": False,
        "enable-flashinfer-allreduce-fusion": True,
    }
    argv = adapter_for("sglang").argv(fusion, 31000)
    assert argv[1:] == [
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
        "--tp",
        "4",
        "--enable-flashinfer-allreduce-fusion",
    ]


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="loops"):
        parse_configs({"configs": {"a": {"base": "b"}, "b": {"base": "a"}}})
    with pytest.raises(ConfigError, match="no configuration 'nope'"):
        parse_configs({"configs": {"a": {"base": "nope"}}})
    with pytest.raises(ConfigError, match="unknown key"):
        parse_configs({"configs": {"a": {"modle": "x"}}})
    with pytest.raises(ConfigError, match="engine"):
        parse_configs({"configs": {"a": {"engine": "tgi"}}})
    with pytest.raises(NotFound, match="no configuration file"):
        load_config(tmp_path / "missing.toml", "a")


def test_flag_args_and_engine_argv() -> None:
    assert flag_args({"a": True, "b": False, "c": None, "d": [1, 2], "e": 0.5}) == [
        "--a",
        "--d",
        "1",
        "2",
        "--e",
        "0.5",
    ]
    vllm = ServerConfig(name="v", engine="vllm", model="/m", flags={"tensor-parallel-size": 4})
    argv = adapter_for("vllm").argv(vllm, 8000)
    # our interpreter (a configuration's `python` otherwise), the entry point that reads --model
    assert argv[0] == sys.executable
    assert argv[1:] == [
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "4",
    ]
    tf = ServerConfig(
        name="t", engine="transformers", flags={"device": "cpu", "continuous-batching": True}
    )
    argv = adapter_for("transformers").argv(tf, 8001)  # no model: chosen per request
    assert Path(argv[0]).name == "transformers"
    assert argv[1:] == [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "8001",
        "--device",
        "cpu",
        "--continuous-batching",
    ]


def test_example_file_loads() -> None:
    configs = load_config(ROOT / "examples" / "servers.toml", "flashinfer-fusion")
    assert configs.flags["enable-flashinfer-allreduce-fusion"] is True and configs.flags["tp"] == 4


# --- lifecycle -----------------------------------------------------------------------------------


def test_start_ready_with_startup_facts_then_stop(store: LedgerStore) -> None:
    said: list[str] = []
    runner = make_runner(store, say=said.append)
    config = fake_config()
    run = runner.start(config)
    assert run.ready and httpx.get(run.base_url + "/health", trust_env=False).status_code == 200
    stopped = runner.stop(run)
    assert stopped is not None and stopped.signal == "SIGINT" and stopped.exit_code == 0
    assert gone(run.pgid)
    # a draining server took ~26 s with nothing said; the stop says so first
    stopping = [i for i, line in enumerate(said) if line.startswith(f"stopping {run.run_id}…")]
    assert stopping and stopping[0] < next(
        i for i, x in enumerate(said) if x.startswith("stopped ")
    )

    events = store.read()
    assert [e.type for e in events] == [
        "host_observed",
        "server_started",
        "server_ready",
        "finding_recorded",
        "finding_recorded",
        "server_stopped",
    ]
    started, ready = events[1], events[2]
    assert started.argv[:2] == [sys.executable, str(FAKE)] and "--model-path" in started.argv
    assert started.flags == {"tp": 4} and started.port == config.port and started.pid == run.pid
    assert Path(started.log_path).parent.name == "servers" and started.log_path.startswith(
        str(store.path.with_suffix(""))
    )
    assert ready.startup.max_running_requests == 48 and ready.startup.max_total_num_tokens == 412345
    assert ready.startup.context_len == 262144 and ready.startup.cuda_graph_bs[-1] == 48
    assert (
        ready.startup.piecewise_cuda_graph is True and ready.startup.moe_kernel_config == "default"
    )
    assert (
        ready.startup.attention_backend == "triton"
    )  # the log's server_args win over /server_info's fa3
    # the chain: one correlation id (the start), each event caused by the one before
    run_events = events[1:]
    assert {e.correlation_id for e in run_events} == {started.event_id}
    for before, after in pairwise(run_events):
        assert after.causation_id == before.event_id
    assert all(e.actor.kind == "runner" and e.actor.name == "tuneledger" for e in events)
    assert all(e.host == CPU_HOST.host.model_copy(update={"engine": "sglang"}) for e in events[1:])
    assert {f.kind for f in events if f.type == "finding_recorded"} == {"default-moe-config"}


def test_second_run_finds_capacity_reduced_and_flashinfer_not_in_effect_on_sm120(
    store: LedgerStore,
) -> None:
    runner = make_runner(store)
    first = runner.start(fake_config("baseline"))
    runner.stop(first)
    second = runner.start(
        fake_config(
            "fusion",
            **{"fake-log": "flashinfer_fusion", "enable-flashinfer-allreduce-fusion": True},
        )
    )
    runner.stop(second)
    findings = [
        e for e in store.read(types=["finding_recorded"]) if e.server_run_id == second.run_id
    ]
    by_kind = {f.kind: f for f in findings}
    capacity = [f.message for f in findings if f.kind == "capacity-reduced"]
    assert any("max_running_requests 48 -> 26" in m for m in capacity)
    assert any("max_total_num_tokens 412345 -> 223361" in m for m in capacity)
    flag = by_kind["flag-not-in-effect"]
    assert flag.flag == "enable-flashinfer-allreduce-fusion" and flag.verdict == "not-activated"
    assert (
        "sm120" in flag.message
    )  # the arch from the log's MoE config path (RTX PRO 6000): this host has no GPU
    assert "piecewise-cuda-graph-off" in by_kind
    assert all(
        f.basis == "log" and f.evidence and f.evidence[0].ref.startswith("servers/")
        for f in findings
    )
    rows = store.query_arrow(
        "SELECT run_id, max_running_requests_change FROM server_runs ORDER BY started_at"
    ).to_pylist()
    assert rows[-1] == {"run_id": second.run_id, "max_running_requests_change": -22}


def test_host_from_nvidia_smi_is_every_events_host(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNELEDGER_NVIDIA_SMI", str(FAKE_SMI))
    monkeypatch.setenv("FAKE_GPU", "rtx6000")
    monkeypatch.setenv("FAKE_GPU_COUNT", "4")
    runner = make_runner(store, host=None)  # fingerprint this "machine" through the fake nvidia-smi
    run = runner.start(fake_config("fusion", **{"fake-log": "flashinfer_fusion"}))
    runner.stop(run)
    run2 = runner.start(fake_config("again"))
    runner.stop(run2)
    hosts = store.read(types=["host_observed"])
    assert len(hosts) == 1  # once per session and fingerprint
    assert (
        hosts[0].host.compute_capability == "sm120"
        and hosts[0].host.gpu_count == 4
        and hosts[0].host.cuda == "13.0"
    )
    assert all(
        e.host.gpu_name == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition" for e in store.read()
    )
    flag = next(e for e in store.read(types=["finding_recorded"]) if e.kind == "flag-not-in-effect")
    assert (
        "sm120" in flag.message
        and "NVIDIA RTX PRO 6000 Blackwell Workstation Edition" in flag.message
    )


def test_server_info_fills_what_the_log_lacks_and_404_is_tolerated(store: LedgerStore) -> None:
    runner = make_runner(store)
    run = runner.start(fake_config(**{"fake-log": "none", "fake-old-server-info": True}))
    runner.stop(run)
    assert run.startup.max_running_requests == 128 and run.startup.attention_backend == "fa3"
    run = runner.start(fake_config(**{"fake-log": "none", "fake-no-server-info": True}))
    runner.stop(run)
    ready = store.read(types=["server_ready"])[-1]
    assert ready.startup.max_running_requests is None
    assert any("/server_info" in w for w in ready.warnings)


def test_decode_without_cuda_graph_found_while_running_recorded_at_stop_once(
    store: LedgerStore,
) -> None:
    runner = make_runner(store)
    run = runner.start(fake_config(**{"fake-eager-decode": True}))
    assert not any(
        e.kind == "decode-without-cuda-graph" for e in store.read(types=["finding_recorded"])
    )
    httpx.post(run.base_url + "/generate", json={"text": "hi"}, trust_env=False).raise_for_status()
    time.sleep(0.2)
    first = runner.check(run)  # a periodic check while it runs (the CLI does this every 30 s)
    assert [f.kind for f in first] == ["decode-without-cuda-graph"]
    runner.stop(run)
    eager = [
        e for e in store.read(types=["finding_recorded"]) if e.kind == "decode-without-cuda-graph"
    ]
    assert len(eager) == 1 and "64" in eager[0].message and eager[0].server_run_id == run.run_id
    # recording the same findings again (another process, a retry) is idempotent: same ids
    before = store.head()
    runner.runs[-1].finding_ids.clear()
    runner.runs[-1].ready = True
    runner.check(run)
    assert store.head() == before


def test_restart_stops_then_starts_on_the_same_port(store: LedgerStore) -> None:
    runner = make_runner(store)
    run = runner.start(fake_config())
    again = runner.restart(run, fake_config("fusion", **{"fake-log": "flashinfer_fusion"}))
    runner.stop(again)
    assert again.port == run.port and again.run_id != run.run_id
    stopped = store.read(types=["server_stopped"])
    assert stopped[0].reason == "restart" and gone(run.pgid) and gone(again.pgid)


# --- failures ------------------------------------------------------------------------------------


def test_crash_is_server_failed_with_cause_and_log_tail(store: LedgerStore) -> None:
    runner = make_runner(store)
    with pytest.raises(ServerStartFailed) as err:
        runner.start(fake_config(**{"fake-crash": "resources"}))
    failed = err.value.event
    assert failed.cause == "crash" and "OutOfResources" in failed.message and failed.exit_code == 1
    assert any("OutOfResources" in line for line in failed.log_tail) and len(failed.log_tail) <= 40
    assert "Traceback" not in str(err.value)  # the user gets one line, not a traceback
    assert types(store) == ["host_observed", "server_started", "server_failed"]
    # what the log showed before the crash stays with the failed run
    assert failed.startup is not None and failed.startup.kv_cache_tokens == 1384810
    (row,) = store.query_arrow("SELECT status, cuda_graph_bs FROM server_runs").to_pylist()
    assert row["status"] == "failed" and row["cuda_graph_bs"]


def test_cuda_oom_in_log_is_cause_out_of_memory(store: LedgerStore) -> None:
    runner = make_runner(store)
    with pytest.raises(ServerStartFailed) as err:
        runner.start(fake_config(**{"fake-crash": "oom"}))
    assert err.value.event.cause == "out-of-memory"


def test_timeout_kills_the_group(store: LedgerStore) -> None:
    runner = make_runner(store)
    with pytest.raises(ServerStartFailed) as err:
        runner.start(
            fake_config(**{"fake-never-ready": True, "fake-children": 2}), health_timeout_s=1.0
        )
    failed = err.value.event
    assert failed.cause == "timeout" and "not healthy after 1 s" in failed.message
    run = runner.runs[-1]
    assert gone(run.pgid) and run.process.returncode is not None


def test_port_in_use_is_refused_before_start_without_event(store: LedgerStore) -> None:
    runner = make_runner(store)
    config = fake_config()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", config.port))
        taken.listen()
        with pytest.raises(PortInUse, match=f"port {config.port}"):
            runner.start(config)
    assert types(store) == []


def test_missing_engine_is_refused_before_start_without_event(store: LedgerStore) -> None:
    runner = make_runner(store)
    # This venv has no sglang: the real adapter (python -m sglang.launch_server) is refused.
    with pytest.raises(MissingEngine, match="sglang: module not installed"):
        runner.start(ServerConfig(name="real", engine="sglang", model="/m", port=free_port()))
    with pytest.raises(MissingEngine, match="not found"):
        runner.start(
            ServerConfig(
                name="nope",
                engine="sglang",
                model="/m",
                port=free_port(),
                python="/nonexistent/python",
            )
        )
    with pytest.raises(MissingEngine, match="not found"):
        runner.start(
            ServerConfig(
                name="bin",
                engine="vllm",
                model="/m",
                port=free_port(),
                command=["/nonexistent/vllm"],
            )
        )
    assert types(store) == []


# --- stop escalation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ignore", "children", "ended_by"),
    [("", 0, "SIGINT"), ("INT", 0, "SIGTERM"), ("INT,TERM", 0, "SIGKILL"), ("", 2, "SIGTERM")],
)
def test_stop_escalates_and_records_the_signal_that_ended_it(
    store: LedgerStore, ignore: str, children: int, ended_by: str
) -> None:
    # The signal expected to end it gets a long wait (the stop returns once the group is gone,
    # so a long wait costs nothing); only the ones the fake ignores get a short one. A 0.5 s
    # grace for all was too short for the fake to stop on its SIGINT on a loaded machine, and
    # SIGTERM ended it instead (docs/performance.md, *The test suite*).
    order = ("SIGINT", "SIGTERM", "SIGKILL")
    waits = [60.0 if name == ended_by else 0.5 for name in order]
    runner = make_runner(
        store, sigint_wait_s=waits[0], sigterm_wait_s=waits[1], sigkill_wait_s=waits[2]
    )
    flags = {"fake-children": children} if children else {}
    if ignore:
        flags["fake-ignore"] = ignore
    run = runner.start(fake_config(**flags))
    stopped = runner.stop(run)
    assert stopped is not None and stopped.signal == ended_by
    # children ignore SIGINT: the leader exits cleanly but the group lives on until SIGTERM
    assert gone(run.pgid)
    assert runner.stop(run) is None  # stopping twice records nothing


def test_ctrl_c_during_stop_hurries_it_records_it_then_interrupts(store: LedgerStore) -> None:
    runner = make_runner(store, sigint_wait_s=30.0, sigterm_wait_s=30.0)
    run = runner.start(fake_config(**{"fake-ignore": "INT"}))
    # Ctrl-C to this process while the stop waits out the ignored SIGINT (a real signal, from a timer)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.stop(run)
    assert time.monotonic() - began < 10  # not the 30 s SIGINT wait: Ctrl-C moved on to SIGTERM
    stopped = store.read(types=["server_stopped"])[-1]
    assert stopped.signal == "SIGTERM" and gone(run.pgid)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_context_manager_leaves_nothing_running(store: LedgerStore) -> None:
    with make_runner(store) as runner:
        run = runner.start(fake_config(**{"fake-children": 1}))
    assert gone(run.pgid) and store.read(types=["server_stopped"])[-1].reason == "runner closed"


# --- the CLI as a real process -------------------------------------------------------------------


def _write_configs(tmp_path: Path, port: int, **flags: object) -> Path:
    path = tmp_path / "servers.toml"
    flag_text = ", ".join(f"{k} = {json.dumps(v)}" for k, v in {"tp": 4, **flags}.items())
    path.write_text(
        f'[configs.fake]\nengine = "sglang"\nmodel = "/models/Qwen3.5-122B-A10B"\nport = {port}\n'
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}]\nflags = {{ {flag_text} }}\n"
    )
    return path


def _start_cli(tmp_path: Path, ledger: Path, configs: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TUNELEDGER_NVIDIA_SMI": str(tmp_path / "no-nvidia-smi")}
    return subprocess.Popen(
        [
            str(CLI),
            "--ledger",
            str(ledger),
            "--session",
            "s1",
            "run",
            "server",
            "start",
            "fake",
            "--configs",
            str(configs),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_event(store: LedgerStore, event_type: str, timeout_s: float = 20.0) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.path.exists():
            found = [e for e in store.read(types=[event_type])]
            if found:
                return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no {event_type} within {timeout_s} s")


def test_cli_ctrl_c_while_waiting_stops_server_and_records_interrupted(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    proc = _start_cli(
        tmp_path, ledger, _write_configs(tmp_path, free_port(), **{"fake-never-ready": True})
    )
    store = LedgerStore(ledger)
    started = _wait_for_event(store, "server_started")
    proc.send_signal(
        signal.SIGINT
    )  # Ctrl-C reaches the runner only: the server has its own session
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    failed = store.read(types=["server_failed"])[-1]
    assert failed.cause == "interrupted" and failed.run_id == started.run_id
    assert gone(started.pid)


def test_cli_foreground_until_ctrl_c_then_stopped(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    proc = _start_cli(tmp_path, ledger, _write_configs(tmp_path, free_port()))
    line = proc.stdout.readline()  # printed once ready
    info = json.loads(line)
    assert httpx.get(f"http://127.0.0.1:{info['port']}/health", trust_env=False).status_code == 200
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    store = LedgerStore(ledger)
    stopped = store.read(types=["server_stopped"])[-1]
    assert (
        stopped.run_id == info["run_id"]
        and stopped.reason == "interrupted (Ctrl-C)"
        and stopped.signal == "SIGINT"
    )
    assert gone(info["pid"])
    assert store.read(types=["host_observed"])[0].cpu_only is True


@pytest.mark.parametrize(
    ("flags", "code", "text"),
    [
        ({"fake-crash": "resources"}, 12, "OutOfResources"),
        ({"fake-never-ready": True}, 12, "timeout"),
    ],
)
def test_cli_failed_start_prints_one_line_and_exits_non_zero(
    tmp_path: Path, flags: dict, code: int, text: str
) -> None:
    ledger = tmp_path / "l.duckdb"
    proc = _start_cli(
        tmp_path, ledger, _write_configs(tmp_path, free_port(), **flags), "--health-timeout", "1"
    )
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    error_lines = [line for line in err.splitlines() if line.startswith("tuneledger: error:")]
    assert len(error_lines) == 1 and text in error_lines[0] and "Traceback" not in err


def test_cli_port_in_use_exits_10_without_event(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        proc = _start_cli(tmp_path, ledger, _write_configs(tmp_path, port))
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 10 and "already in use" in err
    assert LedgerStore(ledger).read() == []


def test_cli_show_prints_argv(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            str(CLI),
            "run",
            "server",
            "show",
            "flashinfer-fusion",
            "--configs",
            str(ROOT / "examples" / "servers.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert "--enable-flashinfer-allreduce-fusion" in shown["argv"] and shown["flags"]["tp"] == 4


def test_gpu_query_parser_is_shared_with_host_module() -> None:
    assert (
        parse_gpu_query("NVIDIA H200, 9.0, 143771 MiB, 580.159.04")[0].compute_capability == "sm90"
    )


# --- a real engine: transformers serve with a tiny random-weight model ----------------------------


@pytest.mark.engine("torch", "transformers", "fastapi")
def test_real_transformers_serve_starts_answers_and_stops(
    store: LedgerStore, tmp_path: Path
) -> None:
    from tests.support import tiny_model

    model = tiny_model.build_tiny_model(tmp_path / "tiny")
    runner = make_runner(store, sigint_wait_s=15.0)
    config = ServerConfig(
        name="tf",
        engine="transformers",
        model=str(model),
        port=free_port(),
        flags={"device": "cpu"},
    )
    run = runner.start(config, health_timeout_s=180)
    assert run.argv[1:3] == ["serve", str(model)] and "--device" in run.argv
    response = httpx.post(
        run.base_url + "/v1/chat/completions",
        timeout=120,
        trust_env=False,
        json={
            "model": str(model),
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
        },
    )
    assert response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 4
    stopped = runner.stop(run)
    assert stopped.signal == "SIGINT" and gone(run.pgid)
    started = store.read(types=["server_started"])[0]
    assert (
        started.engine == "transformers" and started.host.engine_version
    )  # version from package metadata
    assert types(store)[-1] == "server_stopped"
