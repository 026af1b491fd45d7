"""Typed ledger events: one pydantic model per ``type``, joined in ``AnyEvent``.

Every model is the *current* schema version of its type. Older stored versions
are upcast on read (``schemas.upcasting``); stored rows are never rewritten.

Units: durations in seconds (``_s``) or milliseconds (``_ms``), throughputs in
tokens/s (``tok/s``) or requests/s, memory in MiB or GB as the field name says.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union
from uuid import UUID

from pydantic import Field, TypeAdapter, field_validator, model_validator

from .envelope import EventEnvelope, Evidence
from .metrics import direction_of
from .parts import BenchMetrics, StartupFacts, Workload
from .vocab import (
    CandidateKind,
    ComparisonVerdict,
    Confidence,
    FailureCause,
    FindingKind,
    Priority,
    TriageStatus,
    TuneOutcome,
    Verdict,
    VerdictBasis,
)

#: A server flag value as given on the command line (``True`` for a bare switch).
FlagValue = bool | int | float | str | list[Any] | None


def normalize_flag(name: str) -> str:
    """Spell a server flag the CLI way without dashes: ``--enable-x`` / ``enable_x`` -> ``enable-x``.

    Raises:
        ValueError: empty, or contains whitespace or ``=``.
    """
    flag = name.strip().lstrip("-").replace("_", "-")
    if not flag or any(ch.isspace() for ch in flag) or "=" in flag:
        raise ValueError(f"not a flag name: {name!r} (want e.g. 'enable-fused-moe-sum-all-reduce')")
    return flag


#: How an event names the candidate (board item) it concerns, by payload field:
#: ``candidate_id`` names it; ``flag`` names a flag (candidates proposing that flag on the same
#: arch); ``config_name`` names a configuration (``config:NAME``, or the flag candidates whose
#: flags it sets).
CandidateLink = Literal["candidate_id", "flag", "config_name"]

#: The registry: type name -> model class (the current schema version of that type). Filled by
#: ``Event.__pydantic_init_subclass__``: defining a concrete event class registers it.
EVENT_TYPES: dict[str, type[Event]] = {}

#: type name -> current schema_version (filled with ``EVENT_TYPES``).
CURRENT_VERSIONS: dict[str, int] = {}


class Event(EventEnvelope):
    """Base of all event types. Subclasses set ``type`` and ``schema_version``.

    A concrete subclass (one whose ``type`` is a ``Literal`` with a default) registers itself
    in ``EVENT_TYPES`` and must declare, as class variables:

    - ``summary_sql``: its one-line summary, a DuckDB SQL expression over ``p`` (the upcast
      payload, parsed once per row into a struct of the fields it names: ``p.title``,
      ``p.startup.max_running_requests``; VARCHAR, BOOLEAN for a bool field) and ``h`` (the
      envelope host: ``gpu_name``, ``gpu_count``, ``compute_capability``). The ``event_summaries``
      projection (timeline, ``show``, ``events``, export) evaluates it.
    - ``candidate_link``: the payload fields through which it names a candidate
      (``CandidateLink``), ``()`` for a type that concerns none. The board links the
      ``candidate_id`` ones to their candidate.

    Raises (at class definition):
        TypeError: a missing or empty ``summary_sql``, an undeclared ``candidate_link`` or one
            naming a field the model lacks, or a type name registered twice.
    """

    type: str
    schema_version: int = 1
    summary_sql: ClassVar[str] = ""
    candidate_link: ClassVar[tuple[CandidateLink, ...]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.model_fields["type"].default
        if not isinstance(name, str):
            return  # an abstract base (``_CandidateEvent``): no type of its own
        if not cls.summary_sql.strip():
            raise TypeError(f"event type {name}: no summary_sql (its one-line summary)")
        link = getattr(cls, "candidate_link", None)
        if not isinstance(link, tuple):
            raise TypeError(f"event type {name}: no candidate_link (() when it names no candidate)")
        missing = [f for f in link if f not in cls.model_fields]
        if missing:
            raise TypeError(f"event type {name}: candidate_link names unknown field(s) {missing}")
        if name in EVENT_TYPES and EVENT_TYPES[name].__qualname__ != cls.__qualname__:
            raise TypeError(
                f"event type {name} is defined twice ({EVENT_TYPES[name].__qualname__})"
            )
        EVENT_TYPES[name] = cls
        CURRENT_VERSIONS[name] = cls.model_fields["schema_version"].default

    def default_stream(self) -> str:
        """The stream this event goes to when none is given (its aggregate)."""
        return f"session:{self.session_id}" if self.session_id else "ledger"

    def payload(self) -> dict[str, Any]:
        """The payload fields (everything but the envelope) as JSON-ready values."""
        data = self.model_dump(mode="json", exclude=set(self.ENVELOPE_FIELDS))
        return data


# --- sessions and hosts -------------------------------------------------------


class SessionStarted(Event):
    """An optimization session begins: what is tuned, on what, towards what goal."""

    type: Literal["session_started"] = "session_started"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'session: ' || p.title"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    title: str
    model: str | None = None
    goal: str | None = None
    tensor_parallel: int | None = Field(
        default=None, ge=1, description="Tensor-parallel size (--tp)."
    )
    dtype: str | None = None
    notes: str | None = None


class SessionEnded(Event):
    """An optimization session ends, with its outcome in a sentence."""

    type: Literal["session_ended"] = "session_ended"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'session ended' || coalesce(': ' || p.summary, '')"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    summary: str | None = None


class HostObserved(Event):
    """A host fingerprint: the envelope's ``host`` plus library versions.

    ``cpu_only`` is true for a host without a usable GPU.
    """

    type: Literal["host_observed"] = "host_observed"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'host: ' || CASE WHEN p.cpu_only THEN 'CPU only' "
        "ELSE coalesce(h.gpu_name, '?') || ' x' || coalesce(h.gpu_count, '?') "
        "|| coalesce(' ' || h.compute_capability, '') END"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    cpu_only: bool = False
    gpu_names: list[str] = Field(default_factory=list)
    torch_version: str | None = None
    triton_version: str | None = None
    python_version: str | None = None
    other_versions: dict[str, str] = Field(default_factory=dict)
    notes: str | None = None


# --- candidates (the todo / triage board) --------------------------------------


class _CandidateEvent(Event):
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    candidate_id: str = Field(
        description="Stable slug of the todo item, e.g. 'flag:enable-fused-moe-sum-all-reduce'."
    )

    def default_stream(self) -> str:
        return f"candidate:{self.candidate_id}"


class CandidateProposed(_CandidateEvent):
    """A todo item: something to try (a flag, kernel tune, speculative-decoding trial, patch)."""

    type: Literal["candidate_proposed"] = "candidate_proposed"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'proposed ' || p.candidate_id "
        "|| coalesce(' [' || p.priority || ']', '') || ': ' || p.title"
    )
    kind: CandidateKind
    title: str
    flag: str | None = None
    value: FlagValue = None
    priority: Priority | None = None
    hypothesis: str | None = None

    @field_validator("flag")
    @classmethod
    def _flag(cls, value: str | None) -> str | None:
        return normalize_flag(value) if value is not None else None


class CandidateTriaged(_CandidateEvent):
    """A triage decision on a candidate; the latest one is its status."""

    type: Literal["candidate_triaged"] = "candidate_triaged"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "p.candidate_id || ' -> ' || p.status || coalesce(': ' || p.reason, '')"
    )
    status: TriageStatus
    reason: str | None = None
    verdict: Verdict | None = None


class FlagResearched(Event):
    """What reading the engine's code or docs says about one server flag.

    ``flag`` is the CLI spelling without dashes (``enable-fused-moe-sum-all-reduce``).
    ``engine``/``engine_version`` default to the envelope host's in the views, ``arch`` to the
    host's compute capability. ``basis``: ``researched`` (a person or agent read code or docs)
    or ``source`` (``tuneledger research`` read the engine's source for ``engine_version``,
    ``arch``, ``model_architecture`` and ``tp_size``); ``conditions``: the conditions as
    written that decide the verdict (the runtime values a ``conditional`` verdict depends on);
    ``evidence``: ``source`` pointers (``sglang/srt/x.py:123``) with what is there;
    ``verdict_confidence`` (basis ``source``): ``proven``, ``likely`` or ``unknown`` (None: not
    stated).
    """

    type: Literal["flag_researched"] = "flag_researched"
    schema_version: Literal[4] = 4
    summary_sql: ClassVar[str] = (
        "p.flag || ': ' || p.verdict || coalesce(' - ' || coalesce(p.what_it_does, p.notes), '')"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id", "flag")
    flag: str
    engine: str | None = None
    engine_version: str | None = None
    what_it_does: str | None = None
    activation_condition: str | None = None
    arch_gating: str | None = None
    auto_enabled_for: str | None = None
    verdict: Verdict = "unknown"
    basis: VerdictBasis = "researched"
    arch: str | None = None
    model_architecture: str | None = None
    tp_size: int | None = None
    conditions: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    notes: str | None = None
    verdict_confidence: Confidence | None = None
    candidate_id: str | None = None

    @field_validator("flag")
    @classmethod
    def _flag(cls, value: str) -> str:
        return normalize_flag(value)

    def default_stream(self) -> str:
        return f"flag:{self.flag}"


class FindingRecorded(Event):
    """A finding derived automatically from a server log or a measurement.

    For a flag, ``verdict`` and ``basis`` feed the ``flag_verdicts`` view
    (``basis`` ``log``: the log shows it; ``measured``: a benchmark comparison).
    ``value``: for a flag that takes one (``attention-backend``), the value the finding is
    about, as text; a verdict on ``trtllm_mla`` says nothing of ``flashinfer``, so the views
    keep one verdict per flag and value (None: the flag as a whole).
    """

    type: Literal["finding_recorded"] = "finding_recorded"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "p.kind || coalesce(' ' || p.flag, '') || ': ' || p.message"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("flag",)
    kind: FindingKind
    basis: VerdictBasis = "log"
    message: str
    flag: str | None = None
    value: str | None = None
    verdict: Verdict | None = None
    server_run_id: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)

    @field_validator("flag")
    @classmethod
    def _flag(cls, value: str | None) -> str | None:
        return normalize_flag(value) if value is not None else None


# --- servers --------------------------------------------------------------------


class _ServerEvent(Event):
    run_id: str = Field(description="Id of one server process lifetime (start to stop).")

    def default_stream(self) -> str:
        return f"server:{self.run_id}"


class ServerStarted(_ServerEvent):
    """A server process was launched with this configuration (argv, flags, env)."""

    type: Literal["server_started"] = "server_started"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'server ' || p.run_id || ' started (' || coalesce(p.config_name, p.engine) || ')'"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("config_name",)
    engine: str
    model: str | None = None
    config_name: str | None = None
    flags: dict[str, FlagValue] = Field(
        default_factory=dict, description="Flag name without dashes -> value."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="The environment subset that matters."
    )
    argv: list[str] = Field(default_factory=list)
    port: int | None = None
    pid: int | None = None
    log_path: str | None = None
    startup: StartupFacts | None = Field(
        default=None,
        description="Startup facts an imported log showed for a run that never became ready nor failed.",
    )

    @field_validator("flags")
    @classmethod
    def _flags(cls, value: dict[str, FlagValue]) -> dict[str, FlagValue]:
        return {normalize_flag(k): v for k, v in value.items()}


class ServerReady(_ServerEvent):
    """The server answered its health check; ``startup`` holds what it resolved to."""

    type: Literal["server_ready"] = "server_ready"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'server ' || p.run_id || ' ready' "
        "|| coalesce(', max_running_requests=' || p.startup.max_running_requests, '')"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    ready_after_s: float | None = None
    startup: StartupFacts = Field(default_factory=StartupFacts)
    warnings: list[str] = Field(default_factory=list)


class ServerStopped(_ServerEvent):
    """The server process ended after a stop request (or on its own)."""

    type: Literal["server_stopped"] = "server_stopped"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'server ' || p.run_id || ' stopped'"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None


class ServerFailed(_ServerEvent):
    """A server failed to start or died: the cause and the log tail, not a traceback."""

    type: Literal["server_failed"] = "server_failed"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'server ' || p.run_id || ' failed (' || p.cause || '): ' || p.message"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    cause: FailureCause
    message: str
    log_tail: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    startup: StartupFacts | None = Field(
        default=None,
        description="Startup facts the log showed before the failure (they survive the crash).",
    )


# --- benchmarks -----------------------------------------------------------------


class BenchmarkCompleted(Event):
    """One benchmark run at one concurrency against one server configuration.

    ``config_name`` names the configuration (``baseline`` is the session's
    baseline unless ``is_baseline`` says otherwise); ``valid`` is the run's
    validity gate (no failed requests, achieved concurrency >= 0.9 c, output
    tokens as asked) with ``validity_notes`` saying what failed.

    Imported from another tool: ``tool`` (``vllm.bench_serve``, ``guidellm``,
    ``llmperf``, ``aiperf``…) and ``tool_version`` where the file says it;
    ``metrics`` holds only what that tool defines as sglang does, and
    ``tool_metrics`` (tool's own name -> value, unit in the name) keeps what it
    defines otherwise, with ``metric_notes`` saying how each differs.
    """

    type: Literal["benchmark_completed"] = "benchmark_completed"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'bench ' || p.config_name || coalesce(' c=' || p.concurrency, '') "
        "|| coalesce(': ' || round(p.metrics.output_throughput::DOUBLE, 1) || ' tok/s', '')"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id", "config_name")
    run_id: str
    config_name: str
    is_baseline: bool = False
    server_run_id: str | None = None
    tool: str | None = None
    workload: Workload = Field(default_factory=Workload)
    concurrency: int | None = Field(default=None, ge=1)
    repeat: int | None = Field(default=None, ge=0)
    metrics: BenchMetrics = Field(default_factory=BenchMetrics)
    valid: bool | None = None
    validity_notes: list[str] = Field(default_factory=list)
    notes: str | None = None
    tool_version: str | None = None
    tool_metrics: dict[str, float] = Field(
        default_factory=dict,
        description="Metrics of the tool whose definition differs from ours, by the tool's name (unit in the name).",
    )
    metric_notes: list[str] = Field(
        default_factory=list,
        description="Where the tool's metric definitions differ from sglang bench_serving's.",
    )
    #: The board's candidate this run was made for (``flag:X``, ``config:NAME``), recorded by
    #: plans and ``run bench --candidate``; None for a baseline or an unattributed run.
    candidate_id: str | None = None
    server_metrics: dict[str, float] = Field(
        default_factory=dict,
        description="The server's own Prometheus /metrics over the run: each counter's increase "
        "(vllm:num_preemptions, vllm:spec_decode_num_drafts, ...), each gauge's maximum "
        "(name:max), and spec_accept_length, spec_draft_acceptance_rate, prefix_cache_hit_rate "
        "derived from them (runners/bench/server_metrics.py). Empty: not scraped or no /metrics.",
    )

    def default_stream(self) -> str:
        return f"bench:{self.config_name}"


class ComparisonCompleted(Event):
    """A noise-aware comparison of one configuration against the baseline, per metric.

    Runs are the unit (docs/comparison.md): ``d = mean(ln B) - mean(ln A)``,
    Welch standard error and degrees of freedom; ``change = e^d - 1`` with CI
    ``e^(d +- t*SE) - 1``: the metric's own change, ``value / baseline - 1`` ("+" means it went
    up, the one sign convention of ``schemas.metrics``); whether that is better is
    ``better_direction`` (+1: higher is better, -1: lower is better; when absent, the metric
    table's). v1 events signed the change so that + was better: the upcaster converts them.
    ``noise_threshold`` is tau, the practical threshold (the user's, else the metric's
    default; events written before the practical threshold hold max(floor, 2 * CV of A-vs-A repeats)), as a
    fraction. ``verdict``: ``schemas.vocab.ComparisonVerdict`` (``runs_needed`` per arm
    when inconclusive or too-noisy). Changes and CI bounds are fractions (0.05 = +5%).
    ``baseline_mean`` and ``mean`` are the central values the change compares: geometric
    means ``e^mean(ln x)`` of the runs (so ``mean / baseline_mean - 1`` is the change);
    events written before they were may hold arithmetic means. ``baseline_cv`` and
    ``cv`` give each arm's spread.
    """

    type: Literal["comparison_completed"] = "comparison_completed"
    schema_version: Literal[2] = 2
    summary_sql: ClassVar[str] = (
        "'compare ' || p.config_name || ' vs ' || p.baseline_config "
        "|| coalesce(' c=' || p.concurrency, '') || ' ' || p.metric || ': ' || p.verdict"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("config_name",)
    baseline_config: str
    config_name: str
    metric: str
    concurrency: int | None = None
    request_rate: float | None = None
    dataset: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    seed: int | None = Field(
        default=None,
        description="The seed of the compared runs' workload (runs of two seeds are two arms); "
        "events written before it was kept: the seed of the runs they list.",
    )
    better_direction: Literal[1, -1] = 1
    baseline_runs: int
    runs: int
    baseline_mean: float | None = None
    mean: float | None = None
    change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 0.95
    noise_threshold: float
    noise_source: str | None = Field(
        default=None,
        description="Where tau came from: the metric's default threshold or the user's (older events: the floor, or the A-vs-A runs used).",
    )
    verdict: ComparisonVerdict
    runs_needed: int | None = None
    benchmark_event_ids: list[UUID] = Field(default_factory=list)
    notes: str | None = None
    #: Spread of each arm over its repeats: coefficient of variation (sample SD / mean, a fraction).
    baseline_cv: float | None = None
    cv: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _direction(cls, data: Any) -> Any:
        # Without a stated direction the metric table's (a metric it does not judge: +1).
        if isinstance(data, dict) and data.get("better_direction") is None:
            direction = direction_of(str(data.get("metric")))
            return {**data, "better_direction": direction or 1}
        return data

    def default_stream(self) -> str:
        return f"comparison:{self.config_name}"


# --- kernel tuning ----------------------------------------------------------------


class _TuneEvent(Event):
    tune_id: str

    def default_stream(self) -> str:
        return f"tune:{self.tune_id}"


class KernelTuneStarted(_TuneEvent):
    """A kernel tuning run began (e.g. sglang's fused-MoE Triton tuner).

    ``N`` is the per-rank intermediate size; ``search_space`` the number of
    configs tried per batch size.
    """

    type: Literal["kernel_tune_started"] = "kernel_tune_started"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'tune ' || p.tune_id || ' started (' || p.kernel || ')'"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    kernel: str
    script: str | None = None
    E: int | None = None
    N: int | None = None
    dtype: str | None = None
    device_name: str | None = None
    batch_sizes: list[int] = Field(default_factory=list)
    search_space: int | None = None
    timeout_s: float | None = None
    candidate_id: str | None = None
    # Added for `tuneledger run tune` (all optional, so earlier events stay valid):
    #: The hidden size and experts per token (the file name does not hold them).
    K: int | None = None
    topk: int | None = None
    block_shape: list[int] | None = None
    #: ``sglang`` (SGLang's own kernel, ``kernel_version`` its version) or ``reference``
    #: (tuneledger's own Triton kernel: its configs are not SGLang-tuned).
    kernel_source: str | None = None
    kernel_version: str | None = None
    triton_version: str | None = None
    #: (kernel, shape, dtype, device, triton version) as one string: measurements with the same
    #: key are reused by a resumed tune, never measured twice.
    tune_key: str | None = None
    search: str | None = None
    shared_memory_limit: int | None = Field(default=None, description="bytes per block")
    pruned: int | None = Field(
        default=None, description="configs rejected before running (shared memory)"
    )


class KernelConfigMeasured(_TuneEvent):
    """One kernel config timed at one batch size M; ``latency_us`` in microseconds."""

    type: Literal["kernel_config_measured"] = "kernel_config_measured"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'tune ' || p.tune_id || ' M=' || p.batch_size"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    batch_size: int
    config: dict[str, Any]
    latency_us: float | None = None
    # Added for `tuneledger run tune`: the key the measurement belongs to (see
    # KernelTuneStarted.tune_key), the timing window (ms of do_bench's ``rep``), the
    # reference check, and why a config was rejected (latency_us is then None).
    tune_key: str | None = None
    budget_ms: float | None = None
    max_rel_error: float | None = None
    rejected: str | None = None
    #: A named re-timing outside the search (``default``, ``shipped``, ``tuned``,
    #: ``halving-best``, ``exhaustive-best``): ``latency_us`` is the median of ``samples_us``,
    #: rounds interleaved with the other labels of the same batch size.
    label: str | None = None
    samples_us: list[float] = Field(default_factory=list)
    #: The expert GEMM timed: ``up`` (up/gate), ``down``, or None for both with one config
    #: (every measurement recorded before the tuner tuned them separately).
    gemm: Literal["up", "down"] | None = None


class KernelTuneCompleted(_TuneEvent):
    """A tuning run ended: completed, timed out, failed or cancelled."""

    type: Literal["kernel_tune_completed"] = "kernel_tune_completed"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = (
        "'tune ' || p.tune_id || ' ' || p.outcome || coalesce(': ' || p.error, '')"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    outcome: TuneOutcome
    duration_s: float | None = None
    batch_sizes_done: list[int] = Field(default_factory=list)
    error: str | None = None
    best_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    output_file: str | None = None
    # Added for `tuneledger run tune`: per batch size (string key) the default's and the
    # tuned config's latency (µs, re-timed interleaved), their ratio, and the roofline
    # fractions of the tuned config (see runners.moe.space.roofline).
    results: dict[str, dict[str, Any]] = Field(default_factory=dict)
    kernel_source: str | None = None
    tune_key: str | None = None
    candidate_id: str | None = None
    measured: int | None = Field(default=None, description="configs timed in this run (not reused)")
    reused: int | None = Field(
        default=None, description="measurements taken from the ledger (resume)"
    )
    summary: str | None = None


class MoeConfigRecorded(Event):
    """A fused-MoE Triton kernel config file (sglang's ``E=..,N=..,device_name=..json``).

    Fields from the file name: ``E``, ``N``, ``device_name`` (spaces as ``_``),
    ``dtype``, ``block_shape``, ``per_channel_quant``, ``down`` (the ``_down``
    suffix); ``triton_version`` from its ``triton_X_Y_Z`` folder when known.
    ``configs`` maps batch size M (a string) to the kernel parameters.
    """

    type: Literal["moe_config_recorded"] = "moe_config_recorded"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'MoE config ' || p.file_name"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    file_name: str
    E: int
    N: int
    device_name: str
    dtype: str | None = None
    block_shape: list[int] | None = None
    per_channel_quant: bool = False
    down: bool = False
    triton_version: str | None = None
    configs: dict[str, dict[str, Any]]
    origin: str | None = Field(
        default=None,
        description="Where the file came from (tuned here, copied from B200, shipped).",
    )

    def default_stream(self) -> str:
        return "moe-configs"


# --- speculative decoding, patches, decisions, notes -------------------------------


class SpecDecodingTrialCompleted(Event):
    """A speculative-decoding configuration was served and measured.

    ``accept_length``: mean accepted tokens per verify step (sglang's
    ``avg_spec_accept_length``); ``benchmark_event_ids``: its benchmark runs.
    """

    type: Literal["spec_decoding_trial_completed"] = "spec_decoding_trial_completed"
    schema_version: Literal[2] = 2
    summary_sql: ClassVar[str] = (
        "'spec decoding ' || p.algorithm || coalesce(' accept_length=' || p.accept_length, '')"
    )
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    trial_id: str
    algorithm: str
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    draft_model: str | None = None
    accept_length: float | None = None
    accept_rate: float | None = None
    server_run_id: str | None = None
    benchmark_event_ids: list[UUID] = Field(default_factory=list)
    verdict: Verdict | None = None
    candidate_id: str | None = None
    notes: str | None = None
    # Added for `tuneledger run spec` (optional: earlier events stay valid).
    #: Per-request generation options sent with every request (e.g. transformers'
    #: ``{"prompt_lookup_num_tokens": 10}``) and the server flags of the trial.
    request_options: dict[str, Any] = Field(default_factory=dict)
    flags: dict[str, Any] = Field(default_factory=dict)
    #: Where ``accept_length`` came from: ``server_info`` (lifetime average since start),
    #: ``decode_log`` (mean of the windowed ``accept len`` series), ``meta_info`` (per request).
    accept_length_source: str | None = None
    accept_length_series: list[float] = Field(default_factory=list)
    per_request_accept_length: float | None = None
    baseline_config: str | None = None
    concurrency: int | None = None
    #: Change against the no-speculation baseline as ``comparison_completed`` signs it: a fraction,
    #: ``value / baseline - 1`` (+0.12: 12% more throughput; -0.10: a 10% shorter TPOT/TTFT),
    #: with the 95% CI. v1 events signed TPOT/TTFT so that + was shorter: the upcaster flips them.
    output_throughput_change: float | None = None
    output_throughput_ci: list[float] | None = None
    median_tpot_change: float | None = None
    median_ttft_change: float | None = None
    runs: int | None = None


class PatchApplied(Event):
    """A change to the engine or its tools (file, what, why), optionally the diff."""

    type: Literal["patch_applied"] = "patch_applied"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'patch ' || p.target || ': ' || p.description"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    target: str
    description: str
    reason: str | None = None
    diff: str | None = None
    candidate_id: str | None = None


class DecisionRecorded(Event):
    """A decision with its rationale, the alternatives weighed and the evidence events."""

    type: Literal["decision_recorded"] = "decision_recorded"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'decision: ' || p.decision"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    decision: str
    rationale: str | None = None
    alternatives: list[str] = Field(default_factory=list)
    evidence_event_ids: list[UUID] = Field(default_factory=list)
    candidate_id: str | None = None


class NoteAdded(Event):
    """Free text, optionally about other events (``refs``)."""

    type: Literal["note_added"] = "note_added"
    schema_version: Literal[2] = 2
    summary_sql: ClassVar[str] = "'note: ' || p.text"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ("candidate_id",)
    text: str
    refs: list[UUID] = Field(default_factory=list)
    candidate_id: str | None = None


class EventRetracted(Event):
    """A correction: the event ``retracted_event_id`` no longer counts in the views.

    The retracted event stays in the log (nothing is updated or deleted).
    """

    type: Literal["event_retracted"] = "event_retracted"
    schema_version: Literal[1] = 1
    summary_sql: ClassVar[str] = "'retracted ' || p.retracted_event_id || ': ' || p.reason"
    candidate_link: ClassVar[tuple[CandidateLink, ...]] = ()
    retracted_event_id: UUID
    reason: str


#: Every event type's model, in definition order (the registry's values).
EVENT_CLASSES: tuple[type[Event], ...] = tuple(EVENT_TYPES.values())

AnyEvent = Annotated[Union[tuple(EVENT_CLASSES)], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007 (a runtime Union over a tuple)

#: Validates one event dict (current version) into its model.
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent, config={"defer_build": True})  # type: ignore[arg-type]  # a Union built at run time from EVENT_CLASSES
