"""A benchmark run's identity and workload as one value: ``RunIdentity``.

Which configuration was measured, at which load (concurrency or request rate) and repeat, for
which candidate, in which session, on which server run and host, what reproduces it, and the
workload as recorded. The callers build it once (``run bench``: runners/cli/measure.py; a plan
and ``run spec``: runners/plan.py), ``runners.bench.client.sweep`` narrows it to each run
(``measured``), and ``runners.bench.record.benchmark_event`` turns it into the run's
``benchmark_completed`` event, so every field travels as one argument, not fifteen.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from runners.bench.workload import WorkloadSpec
from schemas import Host
from schemas.parts import Workload
from schemas.vocab import LoadKind


def run_id_for(
    config_name: str, concurrency: int | None, request_rate: float | None, repeat: int
) -> str:
    """A readable unique run id: ``<config>-c<c>|r<rate>-rep<r>-<8 hex>``."""
    load = f"c{concurrency}" if request_rate is None else f"rate{request_rate:g}"
    return f"{config_name}-{load}-rep{repeat}-{uuid.uuid4().hex[:8]}"


def load_kind(request_rate: float | None) -> LoadKind:
    """Closed loop (a fixed concurrency) without a request rate, open loop (arrivals) with one."""
    return "closed-loop" if request_rate is None else "open-loop"


def event_workload(
    spec: WorkloadSpec,
    *,
    dataset: str,
    endpoint: str,
    ignore_eos: bool,
    request_rate: float | None,
) -> Workload:
    """The ``Workload`` a benchmark event records for prompts built from ``spec``."""
    return Workload(
        dataset=dataset,
        input_len=spec.input_len,
        output_len=spec.output_len,
        range_ratio=1.0,
        num_prompts=spec.num_prompts,
        load=load_kind(request_rate),
        request_rate=request_rate,
        seed=spec.seed,
        ignore_eos=ignore_eos,
        endpoint=endpoint,
        shared_prefix_len=spec.shared_prefix_len or None,
    )


@dataclass(frozen=True)
class RunIdentity:
    """Who a benchmark run is: configuration, load, repeat, candidate, session, server, workload.

    ``concurrency``: the closed loop's concurrency, or the open loop's cap (None: no cap);
    ``request_rate``: requests/s of the open loop (None: closed loop). ``candidate_id``: the board
    item the run was made for; ``source``: what reproduces it (a command line, a plan file);
    ``workload``: what was sent, as the event records it (set per run by ``measured``).
    """

    config_name: str
    concurrency: int | None = None
    request_rate: float | None = None
    repeat: int = 0
    is_baseline: bool = False
    candidate_id: str | None = None
    session_id: str | None = None
    server_run_id: str | None = None
    host: Host | None = None
    source: str | None = None
    workload: Workload | None = None

    def at(self, concurrency: int | None, repeat: int) -> RunIdentity:
        """This identity at one load and repeat."""
        return replace(self, concurrency=concurrency, repeat=repeat)

    def on_server(self, server_run_id: str | None, host: Host | None) -> RunIdentity:
        """This identity on a started server (its run id and host)."""
        return replace(self, server_run_id=server_run_id, host=host)

    def with_workload(self, workload: Workload) -> RunIdentity:
        """This identity with the workload its run sent."""
        return replace(self, workload=workload)

    @property
    def load(self) -> LoadKind:
        """``closed-loop`` or ``open-loop``."""
        return load_kind(self.request_rate)

    @property
    def load_label(self) -> str:
        """``c=4`` (closed loop) or ``rate=2/s`` (open loop), as progress lines say it."""
        if self.request_rate is None:
            return f"c={self.concurrency}"
        return f"rate={self.request_rate:g}/s"

    def new_run_id(self) -> str:
        """A fresh readable unique run id for one run of this identity (``run_id_for``)."""
        return run_id_for(self.config_name, self.concurrency, self.request_rate, self.repeat)
