"""The runners' use cases both front ends call: ``run bench``'s built-in sweep, once.

``tuneledger run bench`` (``runners/cli/measure.py``) and the MCP ``run_bench`` tool
(``runners/mcp_tools/measure.py``) turn their input into one ``BenchRequest`` and call
``run_bench``; neither orchestrates. Here, in order: the configuration measured by the one
config-name rule (``resolve_config_name``: the ledger knows which run serves the port; a
contradicting name is exit 3), the loads (``concurrencies``), the model the server answers to,
the workload, the run's identity with the command line that repeats it, and the sweep, each run
recorded as it ends. The ledger layer's use cases (propose, triage, decide, record) are
``ledger.app``: the ledger never imports the runners.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidInput

if TYPE_CHECKING:
    from ledger.store import LedgerStore


@dataclass(frozen=True)
class BenchRequest:
    """One ``run bench`` with the built-in client (the CLI's options, the tool's arguments)."""

    url: str
    endpoint: str = "chat"
    model: str | None = None
    input_len: int = 64
    output_len: int = 32
    num_prompts: int = 64
    concurrency: Sequence[int] = ()
    request_rate: float | None = None
    seed: int = 0
    warmup: int = 1
    repeats: int = 1
    config_name: str | None = None
    is_baseline: bool | None = None
    tokenizer: str | None = None
    server_run_id: str | None = None
    ignore_eos: bool = True
    candidate_id: str | None = None
    session_id: str | None = None
    shared_prefix_len: int = 0
    server_metrics: bool = False


@dataclass(frozen=True)
class Measured:
    """What to measure, resolved: the configuration, the server run, the loads."""

    config_name: str
    server_run_id: str | None
    concurrencies: list[int | None]


def resolve(store: LedgerStore, request: BenchRequest, say: Callable[[str], None]) -> Measured:
    """The configuration (the one rule, ``resolve_config_name``) and loads of ``request``;
    what is worth saying goes to ``say``.

    Raises:
        InvalidInput: a concurrency below 1, several with a request rate, a shared prefix not
            below the input, a configuration name the ledger contradicts (exit 3).
    """
    from runners.bench.metrics import prompts_warning
    from runners.bench.serving import resolve_config_name

    if any(c < 1 for c in request.concurrency):
        raise InvalidInput("concurrency: every concurrency must be >= 1")
    if request.shared_prefix_len >= request.input_len:
        raise InvalidInput(
            f"shared_prefix_len {request.shared_prefix_len} must be below input_len "
            f"{request.input_len}"
        )
    loads: list[int | None] = list(request.concurrency)
    if request.request_rate is not None:
        if len(loads) > 1:
            raise InvalidInput("with a request rate give at most one concurrency (a cap)")
        loads = [loads[0] if loads else None]
    else:
        loads = loads or [1]
        if warning := prompts_warning(request.num_prompts, loads):
            say(warning)
    config_name, server_run_id, said = resolve_config_name(
        store, request.url, request.config_name, request.server_run_id
    )
    if said:
        say(said)
    return Measured(config_name, server_run_id, loads)


def run_bench(
    store: LedgerStore,
    request: BenchRequest,
    measured: Measured,
    *,
    on_point: Callable[[Any], None],
    progress: bool = False,
) -> None:
    """The sweep of ``request`` as ``measured`` resolved it: each run recorded in ``store`` (a
    kept-open store: a run of appends) as it ends, and passed to ``on_point``.

    Raises:
        RuntimeError: the warm-up failed, the model list unreadable (``run bench``'s exit 13).
        KeyboardInterrupt: from ``on_point`` (Ctrl-C, a cancelled call): what ended is recorded.
    """
    from runners.bench.client import BenchTarget, RunIdentity, sweep
    from runners.bench.discovery import served_model
    from runners.bench.reproduce import reproducing_command
    from runners.bench.workload import WorkloadSpec, build_workload

    r = request
    workload = build_workload(
        WorkloadSpec(
            r.input_len, r.output_len, r.num_prompts, r.seed, r.tokenizer, r.shared_prefix_len
        )
    )
    model = r.model
    if model is None:
        model = "default" if r.endpoint == "generate" else served_model(r.url)
    target = BenchTarget(
        url=r.url,
        endpoint=r.endpoint,
        model=model,
        workload=workload,
        ignore_eos=r.ignore_eos,
        server_metrics=r.server_metrics,
    )
    concurrency_text = ",".join(str(c) for c in r.concurrency) or None
    source = reproducing_command(
        r.url, r.endpoint, model, r.input_len, r.output_len, r.num_prompts, concurrency_text,
        r.request_rate, r.seed, r.warmup, r.tokenizer, r.ignore_eos, measured.config_name,
    )  # fmt: skip
    baseline = measured.config_name == "baseline" if r.is_baseline is None else r.is_baseline
    identity = RunIdentity(
        config_name=measured.config_name,
        request_rate=r.request_rate,
        is_baseline=baseline,
        candidate_id=r.candidate_id,
        session_id=r.session_id,
        server_run_id=measured.server_run_id,
        source=source,
    )
    asyncio.run(
        sweep(
            target,
            identity,
            concurrencies=measured.concurrencies,
            repeats=range(r.repeats),
            warmup_requests=r.warmup,
            store=store,
            progress=progress,
            on_point=on_point,
        )
    )
