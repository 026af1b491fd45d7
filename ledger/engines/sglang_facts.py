"""Read an SGLang server log into facts: what the server resolved to, and how its run went.

Shared by ``tuneledger import`` and the server runner, so it holds no store code: it reads lines
and returns plain data (``ServerLogFacts``). The line grammar is ``sglang_lines`` (launchers'
prefixes: ``lines``); every line read here is listed with its spellings in
``sglang_spellings.LINE_SPELLINGS``; the run's state and failure come from the failure model
(``failure.assess``); findings are ``sglang_findings``.

With tensor parallelism every rank prints its startup lines (``TP0``, ``TP1``, ... in any
order): a fact counts once, from the first rank that printed it.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from ledger.input_files import BulkRun
from schemas import SettingOverride, StartupFacts

from .bulk_lines import BATCH_LINES_KEPT, SglangBulk, numbered
from .eager_decodes import EagerDecodes
from .failure import TAIL_LINES, CrashInfo, RunOutcome, assess, classify
from .kept_lines import KeptLines
from .lines import LogLine, learned_lines
from .sglang_lines import (
    INNER_RE,
    READY,
    LogFormatError,
    batch_kind,
    jsonable,
    jsonable_args,
    parse_batch_fields,
    parse_server_args,
    split_line,
)
from .sglang_overrides import OverrideLine, implied_overrides, override_line_of, with_line
from .sglang_settle import apply_caps, backend_from_args, keep_warnings, settle_piecewise

__all__ = ["TAIL_LINES", "CrashInfo", "keep_warnings"]

_ATTN_DEFAULT_RE = re.compile(
    r"Attention backend not (?:specified|set)\. Use (\S+?) backend by default"
)
_MLA_ATTN_RE = re.compile(r"MLA optimization is turned on\. Use (\S+?) backend")
_LOAD_WEIGHT_RE = re.compile(r"Load weight end\.(?: elapsed=([\d.]+) s)?")
_KV_RE = re.compile(r"KV Cache is allocated\.(?: dtype: [\w.]+,)?(?: #tokens: (\d+))?")
_KV_GB_RE = re.compile(r"\b(K|V|KV) size: ([\d.]+) ?GB")
_CG_BS_RE = re.compile(r"Capture cuda graph bs \[([\d,\s]*)\]")
# 0.5.4-0.5.14's piecewise capture lists its token counts (0.5.5 logs only this line).
_CG_TOKENS_RE = re.compile(r"Capture cuda graph num tokens \[([\d,\s]*)\]")
# 0.5.23: "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], ..."
_CG_PHASE_RE = re.compile(
    r"Capture (?P<who>target|draft) (?P<phase>decode|verify|prefill|extend) (?:CUDA|NPU) graph (?P<edge>begin|end)\b"
)
_BACKEND_RE = re.compile(r"\bbackend=(\w+)")
_BS_LIST_RE = re.compile(r"\b(?:bs|num_tokens)=\[([\d,\s]*)\]")
_LIMITS_RE = re.compile(r"^max_total_num_tokens=-?\d+, ")
_KV_PAIR_RE = re.compile(r"(\w+)=([-\w.]+)")
_PIECEWISE_DISABLE_RE = re.compile(r"Disable piecewise CUDA graph because (.+?)\.?$")
_PREFILL_GRAPH_DISABLE_RES = (
    re.compile(r"Disable prefill CUDA graph because (.+?)\.?$"),
    re.compile(r"Breakable CUDA graph is incompatible with (.+?); disabling prefill CUDA graph"),
)
_PID_RE = re.compile(r"Started server process \[(\d+)\]")
_MOE_FOUND_RE = re.compile(r"Using MoE kernel config from (.+?)\.?$")
_MOE_FALLBACK_RE = re.compile(
    r"Config file not found at (.+?)\. Fallback to triton version ([\w.]+) and use MoE kernel config from (.+?)\. "
)
_MOE_DEFAULT_RE = re.compile(
    r"Using (?:default MoE kernel config|MoE kernel config with down_moe=False)\. .*?Config file not found at (.+?\.json)"
)
# 0.5.23: the down projection's own file is missing and the up projection's config is reused.
_MOE_DOWN_REUSE_RE = re.compile(r"Down MoE config file not found at (.+?\.json); reusing")
_DEVICE_RE = re.compile(r"device_name=([^,/]+?)(?:_down)?(?:,|\.json)")


#: Server args that must be integers (or None) when logged: the checks and findings compare them.
_INT_ARGS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "max_running_requests",
    "max_total_tokens",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode",
    "context_length",
    "port",
)
#: Limits-line values that are counts of at least one (0 or less is not a server that can serve).
_POSITIVE_LIMITS = ("max_total_num_tokens", "max_running_requests", "context_len")


@dataclass(frozen=True, slots=True)  # one per line of a log: no __dict__ each
class BatchLine:
    """A ``Prefill batch`` or ``Decode batch`` line: its fields as logged.

    ``fields`` keeps every ``key: value`` pair (``"#running-req": 48``,
    ``"gen throughput (token/s)": 1571.2``); the properties name the common ones.
    Throughputs in tokens/s.
    """

    line: LogLine
    kind: str  # "prefill" or "decode"
    fields: dict[str, Any]

    @property
    def running_req(self) -> int | None:
        """``#running-req``: requests in the running batch."""
        return self.fields.get("#running-req")

    @property
    def cuda_graph(self) -> bool | None:
        """``cuda graph: True|False``; ``None`` when not logged (older builds)."""
        return self.fields.get("cuda graph")

    @property
    def gen_throughput(self) -> float | None:
        """Decode throughput in tokens/s over the logging window."""
        return self.fields.get("gen throughput (token/s)")

    @property
    def accept_len(self) -> float | None:
        """Speculative decoding accept length over the window, when logged."""
        value = self.fields.get("accept len")
        return float(value) if isinstance(value, (int, float)) else None


@dataclass(frozen=True)
class MoeConfigLine:
    """A fused-MoE kernel config lookup: ``status`` found / fallback / default, and the file path.

    ``down``: the lookup was for the down projection's own ``_down.json`` file, which is optional
    (when it is missing SGLang reuses the up projection's config): it never decides which config
    the run uses."""

    line: LogLine
    status: str
    path: str
    fallback_path: str | None = None
    fallback_triton: str | None = None

    @property
    def down(self) -> bool:
        return self.path.endswith("_down.json")


@dataclass
class ServerLogFacts:
    """Everything ``parse_server_log`` found. ``None`` means "not in the log".

    Units as SGLang logs them: seconds for ``weight_load_s``, GB for memory,
    tokens for ``max_total_num_tokens`` / ``kv_cache_tokens``. ``evidence`` maps a
    fact name (``"max_running_requests"``, ``"ready"``, ...) to the line that showed it.
    ``outcome`` is the failure model's reading of the run (state, root cause, the error lines
    no rule knows); ``crash`` its failure, ``ready`` whether the engine said it was ready.
    Limits a later line lowered (``max_running_requests is capped to N``) hold the value in
    effect; the requested one stays in ``server_args`` and ``overrides``.
    """

    server_args: dict[str, Any] = field(default_factory=dict)
    attention_backend: str | None = None
    weight_load_s: float | None = None
    kv_cache_tokens: int | None = None
    cuda_graph_bs: list[int] | None = None
    #: The 0.5.23 capture phase ``cuda_graph_bs`` came from ("decode" or "verify"; None before).
    cuda_graph_phase: str | None = None
    cuda_graph_captured: bool = False
    piecewise_cuda_graph: bool | None = None
    piecewise_disabled_reason: str | None = None
    max_total_num_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    available_gpu_mem_gb: float | None = None
    moe_configs: list[MoeConfigLine] = field(default_factory=list)
    ready: bool = False
    pid: int | None = None
    first_timestamp: datetime | None = None
    ready_timestamp: datetime | None = None
    #: The first ``BATCH_LINES_KEPT`` batch lines of each kind; what is read of all of them is
    #: kept beside: ``eager_decodes``, ``accept_series`` and its first and last lines.
    decode_batches: list[BatchLine] = field(default_factory=list)
    prefill_batches: list[BatchLine] = field(default_factory=list)
    #: The decode batch lines logged with ``cuda graph: False``: their count by ``#running-req``
    #: and the first lines of each value (what the decode-eager finding reads; bounded).
    eager_decodes: EagerDecodes = field(default_factory=EagerDecodes)
    #: The ``accept len`` of every decode batch line that logs one, in order; the first such
    #: line and the last one with a timestamp (the spec trial's ``source`` and time).
    accept_series: array[float] = field(default_factory=lambda: array("d"))
    first_accept_line: LogLine | None = None
    last_accept_stamped: LogLine | None = None
    warnings: list[LogLine] = field(default_factory=list)
    flashinfer_fusion_disabled: LogLine | None = None
    crash: CrashInfo | None = None
    evidence: dict[str, LogLine] = field(default_factory=dict)
    line_count: int = 0
    kv_cache_gb: float | None = None
    cuda_graph_backend: str | None = None
    phase_graphs: bool = False  # 0.5.23's per-phase "Capture target decode CUDA graph" lines
    overrides: list[OverrideLine] = field(default_factory=list)
    wrapped_lines: int = 0
    last_timestamp: datetime | None = None
    outcome: RunOutcome = field(default_factory=RunOutcome)

    @property
    def cuda_graph_max_bs_flag(self) -> str:
        """The CLI flag for the largest captured decode batch, as this log's SGLang version spells it."""
        if self.phase_graphs or "cuda_graph_max_bs_decode" in self.server_args:
            return "--cuda-graph-max-bs-decode"
        return "--cuda-graph-max-bs"

    @property
    def moe_kernel_config(self) -> str | None:
        """The worst status of the run's own MoE config lookups (``_down`` files are optional:
        not counted): ``default`` > ``fallback`` > ``found``; ``None`` if no lookup."""
        statuses = {m.status for m in self.moe_configs if not m.down}
        for status in ("default", "fallback", "found"):
            if status in statuses:
                return status
        return None

    @property
    def device_name(self) -> str | None:
        """The GPU name SGLang used in MoE config file names (spaces as ``_``), if logged."""
        for moe in self.moe_configs:
            match = _DEVICE_RE.search(moe.path)
            if match:
                return match.group(1)
        return None

    @property
    def gpu_name(self) -> str | None:
        """``device_name`` with ``_`` written as spaces (``torch.cuda.get_device_name()`` spelling)."""
        return self.device_name.replace("_", " ") if self.device_name else None

    @property
    def ready_after_s(self) -> float | None:
        """Seconds from the first timestamped line to the ready line."""
        if self.first_timestamp and self.ready_timestamp:
            return (self.ready_timestamp - self.first_timestamp).total_seconds()
        return None

    @property
    def accept_lengths(self) -> list[float]:
        """The ``accept len`` of each decode batch line that logs one (speculative decoding)."""
        return list(self.accept_series)

    @property
    def has_startup_facts(self) -> bool:
        """True when any startup fact (not just server args) was found."""
        return (
            any(
                value is not None
                for value in (
                    self.attention_backend,
                    self.weight_load_s,
                    self.kv_cache_tokens,
                    self.cuda_graph_bs,
                    self.max_total_num_tokens,
                    self.max_running_requests,
                    self.moe_kernel_config,
                    self.kv_cache_gb,
                )
            )
            or "weights_loaded" in self.evidence
        )

    def to_startup_facts(self, source_name: str | None = None) -> StartupFacts:
        """The ledger's ``StartupFacts`` (for ``ServerReady``, or a failed / starting run).

        ``source_name`` (a file name) makes each override's ``source`` ``name:line``.
        """
        paths: list[str] = []
        for moe in self.moe_configs:
            for path in (moe.path, moe.fallback_path):
                if path and path not in paths:
                    paths.append(path)
        return StartupFacts(
            attention_backend=self.attention_backend,
            max_running_requests=self.max_running_requests,
            max_total_num_tokens=self.max_total_num_tokens,
            context_len=self.context_len,
            chunked_prefill_size=self.chunked_prefill_size,
            max_prefill_tokens=self.max_prefill_tokens,
            cuda_graph_bs=self.cuda_graph_bs,
            piecewise_cuda_graph=self.piecewise_cuda_graph,
            piecewise_disabled_reason=self.piecewise_disabled_reason,
            moe_kernel_config=self.moe_kernel_config,
            moe_config_paths=paths,
            kv_cache_tokens=self.kv_cache_tokens,
            weight_load_s=self.weight_load_s,
            available_gpu_mem_gb=self.available_gpu_mem_gb,
            server_args=jsonable_args(self.server_args),
            kv_cache_gb=self.kv_cache_gb,
            overrides=[
                SettingOverride(
                    flag=o.flag,
                    requested=jsonable(self.server_args.get(o.flag.replace("-", "_")))
                    if o.flag
                    else None,
                    effective=jsonable(o.effective),
                    reason=o.reason,
                    source=f"{source_name}:{o.line.number}"
                    if source_name
                    else f"line {o.line.number}",
                )
                for o in self.overrides
            ],
        )


class _Reader:
    """The state of one pass over a log: the facts so far and what later lines need."""

    def __init__(self, strict: bool) -> None:
        self.facts = ServerLogFacts()
        self.strict = strict
        self.piecewise_begin = False
        self.piecewise_end = False
        self.seen_moe: set[tuple[str, str]] = set()
        self.seen_overrides: set[tuple[str | None, str]] = set()

    def read(self, line: LogLine) -> None:
        """Read one prefixed line: the first rule whose pattern matches handles it."""
        msg = line.message
        if (kind := batch_kind(msg)) is not None:  # most lines: the rules before not tried
            (_decode if kind == "decode" else _prefill)(self, None, line)
            return
        for match, handle in _RULES:
            m = match(msg)
            if m:
                handle(self, m, line)
                return
        if line.level == "WARNING" or classify(msg, line.level).kind == "warning":
            self.facts.warnings.append(line)


# --- one handler per kind of line ---------------------------------------------------------


def _server_args(r: _Reader, m: Any, line: LogLine) -> None:
    if r.facts.server_args:
        return
    try:
        r.facts.server_args = parse_server_args(line.message[len("server_args=") :])
        r.facts.evidence["server_args"] = line
    except ValueError:
        return
    _check_args(r.facts.server_args, line, r.strict)


def _attention(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    if r.facts.attention_backend is None:
        r.facts.attention_backend = m.group(1)
        r.facts.evidence["attention_backend"] = line


def _weights(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    if "weights_loaded" not in r.facts.evidence:
        r.facts.evidence["weights_loaded"] = line
        if m.group(1):
            r.facts.weight_load_s = float(m.group(1))
            r.facts.evidence["weight_load_s"] = line


def _kv(r: _Reader, m: Any, line: LogLine) -> None:
    """``KV Cache is allocated.`` in its spellings (``#tokens`` since 0.4.x, ``dtype:`` in 0.5.23,
    ``KV size`` or ``K size``/``V size``); sizes in GB are summed."""
    facts = r.facts
    if "kv_cache" in facts.evidence:
        return
    facts.evidence["kv_cache"] = line
    kv = _KV_RE.search(line.message)
    if kv and kv.group(1):
        facts.kv_cache_tokens = int(kv.group(1))
        facts.evidence["kv_cache_tokens"] = line
    sizes = [float(gb) for _, gb in _KV_GB_RE.findall(line.message)]
    if sizes:
        facts.kv_cache_gb = round(sum(sizes), 3)


def _graph_bs(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    if r.facts.cuda_graph_bs is None:
        r.facts.cuda_graph_bs = _int_list(m.group(1))
        r.facts.evidence["cuda_graph_bs"] = line


def _piecewise_tokens(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    r.piecewise_begin = True
    r.facts.evidence.setdefault("piecewise_begin", line)


def _phase(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    """0.5.23's per-phase capture lines. The decode batch sizes are the target's ``decode`` phase,
    or its ``verify`` phase under speculative decoding (its decode step is a verify step);
    the target's ``prefill`` phase is what older versions called piecewise CUDA graph."""
    facts = r.facts
    facts.phase_graphs = True
    who, phase, edge = m.group("who"), m.group("phase"), m.group("edge")
    if who != "target":
        return
    if phase in ("decode", "verify"):
        if edge == "begin":
            bs = _BS_LIST_RE.search(line.message)
            backend = _BACKEND_RE.search(line.message)
            if bs and (
                facts.cuda_graph_bs is None
                or (phase == "decode" and facts.cuda_graph_phase == "verify")
            ):
                facts.cuda_graph_bs = _int_list(bs.group(1))
                facts.cuda_graph_phase = phase
                facts.evidence["cuda_graph_bs"] = line
                facts.cuda_graph_backend = backend.group(1) if backend else None
        else:
            facts.cuda_graph_captured = True
            facts.evidence.setdefault("cuda_graph_end", line)
    elif phase == "prefill":
        if edge == "begin":
            r.piecewise_begin = True
        else:
            r.piecewise_end = True
            facts.evidence["piecewise_cuda_graph"] = line


def _graph_end(r: _Reader, m: Any, line: LogLine) -> None:
    r.facts.cuda_graph_captured = True
    r.facts.evidence.setdefault("cuda_graph_end", line)


def _piecewise_begin(r: _Reader, m: Any, line: LogLine) -> None:
    r.piecewise_begin = True


def _piecewise_end(r: _Reader, m: Any, line: LogLine) -> None:
    r.piecewise_end = True
    r.facts.evidence["piecewise_cuda_graph"] = line


def _piecewise_off(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    if r.facts.piecewise_disabled_reason is None:
        r.facts.piecewise_disabled_reason = m.group(1)
        r.facts.evidence["piecewise_cuda_graph"] = line
        r.facts.warnings.append(line)


def _limits(r: _Reader, m: Any, line: LogLine) -> None:
    facts = r.facts
    if facts.max_total_num_tokens is not None:
        return
    values = dict(_KV_PAIR_RE.findall(line.message))
    for name in (
        "max_total_num_tokens",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "max_running_requests",
        "context_len",
    ):
        if name not in values:
            continue
        try:
            value = int(values[name])
        except ValueError:
            if r.strict:
                raise LogFormatError(
                    line.number, name, f"expected an integer, got {values[name]!r}"
                ) from None
            continue
        if name in _POSITIVE_LIMITS and value <= 0:
            if r.strict:
                raise LogFormatError(
                    line.number, name, f"{name}={value}: a server needs at least 1"
                )
            continue
        setattr(facts, name, value)
        facts.evidence[name] = line
    if "available_gpu_mem" in values:
        try:
            facts.available_gpu_mem_gb = float(values["available_gpu_mem"])
        except ValueError:
            pass


def _moe(r: _Reader, m: Any, line: LogLine) -> None:
    moe = _moe_line(line)
    if moe is not None and (moe.status, moe.path) not in r.seen_moe:
        r.seen_moe.add((moe.status, moe.path))
        r.facts.moe_configs.append(moe)
        if moe.status != "found":
            r.facts.warnings.append(line)


def _ready(r: _Reader, m: Any, line: LogLine) -> None:
    if not r.facts.ready:
        r.facts.ready = True
        r.facts.ready_timestamp = line.timestamp
        r.facts.evidence["ready"] = line


def _decode(r: _Reader, m: Any, line: LogLine) -> None:
    facts = r.facts
    text = line.message[len("Decode batch.") :]
    if len(facts.decode_batches) >= BATCH_LINES_KEPT and "False" not in text:
        if "accept len" not in text:
            return  # not kept, no "cuda graph: False" part, no accept length: nothing read
    batch = BatchLine(line, "decode", parse_batch_fields(text))
    if len(facts.decode_batches) < BATCH_LINES_KEPT:
        facts.decode_batches.append(batch)
    if batch.cuda_graph is False:
        facts.eager_decodes.add(batch.running_req, lambda: line)
    if (accept := batch.accept_len) is not None:
        facts.accept_series.append(accept)
        facts.first_accept_line = facts.first_accept_line or line
        if line.timestamp:
            facts.last_accept_stamped = line


def _prefill(r: _Reader, m: Any, line: LogLine) -> None:
    if len(r.facts.prefill_batches) < BATCH_LINES_KEPT:
        r.facts.prefill_batches.append(
            BatchLine(line, "prefill", parse_batch_fields(line.message[len("Prefill batch.") :]))
        )


def _fusion_off(r: _Reader, m: Any, line: LogLine) -> None:
    if r.facts.flashinfer_fusion_disabled is None:
        r.facts.flashinfer_fusion_disabled = line
        r.facts.warnings.append(line)


def _pid(r: _Reader, m: re.Match[str], line: LogLine) -> None:
    if r.facts.pid is None:
        r.facts.pid = int(m.group(1))


def _override(r: _Reader, override: OverrideLine, line: LogLine) -> None:
    r.facts.warnings.append(line)
    if override.flag is None:
        return  # names no setting of the args: a warning, not a finding
    key = (override.flag, line.message)
    if key in r.seen_overrides:
        return
    r.seen_overrides.add(key)
    r.facts.overrides.append(override)


def _search(rx: re.Pattern[str]) -> Callable[[str], re.Match[str] | None]:
    return rx.search


def _starts(*prefixes: str) -> Callable[[str], bool]:
    return lambda msg: msg.startswith(prefixes)


def _contains(text: str) -> Callable[[str], bool]:
    return lambda msg: text in msg


def _first(*patterns: re.Pattern[str]) -> Callable[[str], re.Match[str] | None]:
    def match(msg: str) -> re.Match[str] | None:
        for pattern in patterns:
            if m := pattern.search(msg):
                return m
        return None

    return match


#: (matcher, handler): the first matcher that returns something true handles the line.
_RULES: tuple[tuple[Callable[[str], Any], Callable[[_Reader, Any, LogLine], None]], ...] = (
    (_starts("server_args="), _server_args),
    (_first(_ATTN_DEFAULT_RE, _MLA_ATTN_RE), _attention),
    (_search(_LOAD_WEIGHT_RE), _weights),
    (_starts("KV Cache is allocated"), _kv),
    (_search(_CG_BS_RE), _graph_bs),
    (_search(_CG_TOKENS_RE), _piecewise_tokens),
    (_search(_CG_PHASE_RE), _phase),
    (_starts("Capture cuda graph end"), _graph_end),
    (_starts("Capture piecewise CUDA graph begin"), _piecewise_begin),
    (_starts("Capture piecewise CUDA graph end"), _piecewise_end),
    (_first(_PIECEWISE_DISABLE_RE, *_PREFILL_GRAPH_DISABLE_RES), _piecewise_off),
    (_search(_LIMITS_RE), _limits),
    (
        lambda msg: (
            "MoE kernel config" in msg
            or "Config file not found at" in msg
            or "Down MoE config file not found" in msg
        ),
        _moe,
    ),
    (_contains(READY), _ready),
    (_starts("Decode batch.", "Decode batch,"), _decode),
    (_starts("Prefill batch.", "Prefill batch,"), _prefill),
    (_contains("Disabling flashinfer allreduce fusion permanently"), _fusion_off),
    (_search(_PID_RE), _pid),
    (lambda msg: override_line_of(msg), lambda r, o, line: _override(r, with_line(o, line), line)),
)


# uvicorn's own word that it serves: "Application startup complete." / "Uvicorn running on http://..."
_UVICORN_READY_RE = re.compile(r"Application startup complete\.$|Uvicorn running on https?://")


def is_ready_line(line: LogLine) -> bool:
    """SGLang's own ready line (``The server is fired up and ready to roll!``)."""
    return line.prefixed and READY in line.message


def parse_server_log(
    lines: Iterable[str], *, strict: bool = False, forward: bool = False
) -> ServerLogFacts:
    """Read an SGLang server log (an iterable of lines, newlines optional) into facts.

    Startup lines logged once per rank (``TP0`` .. ``TPn``, in any order) count once
    (the first rank's). Unknown lines are skipped. Lines that override a requested
    setting (``... is capped to N by ...``, ``Automatically reduce --flag to X because
    ...``, ``Disable --flag because ...``, ``X is disabled because ...``) are kept in
    ``overrides``, as are limits below what the args asked for. The run's state and failure
    come from ``failure.assess`` (see its module doc).

    With ``strict`` (imports), a line of SGLang's shape whose value cannot be
    raises ``LogFormatError`` (line and field): an impossible timestamp, a server arg
    of the wrong type (``pp_size='2'``), a limit of 0 or less, SGLang lines behind a prefix
    no launcher rule knows. Without it (the runner, reading a live log) such lines are skipped
    and it never raises.

    ``forward``: the caller checked that the log runs forward (``lines.runs_backwards``): its
    lines are read one at a time, none held but what ``kept_lines`` keeps (a log read as a
    stream).
    """
    unwrapper, raw_lines = learned_lines(lines, forward)
    kept = KeptLines(_any_ready)
    # An excerpt pasted without SGLang's prefix (the tail around an error, copied from a
    # terminal): every line is read as a line of its own, leniently (a pasted line may be cut).
    # Lines before the first prefixed one wait until it says the log is not bare.
    held: list[LogLine] = []
    reader: _Reader | None = None
    # A split error (a bad timestamp, an unknown prefix) is raised before any reader error,
    # whatever their order: the reader's first error waits until every line split.
    read_error: list[LogFormatError] = []
    current = 0
    # a served log's bulk lines, read by their shape once the reader keeps no more of them
    split = partial(split_line, strict=strict, unwrapper=unwrapper)
    bulk = SglangBulk(kept, split) if unwrapper.host is None else None
    take_run: Callable[[int, BulkRun], int] = lambda n, run: (  # noqa: E731
        bulk.take_run(n, run, reader.facts) if reader is not None and bulk is not None else 0
    )
    for number, raw in numbered(raw_lines, take_run):
        if reader is not None and bulk is not None and bulk.take(number, raw, reader.facts):
            continue
        line = split(number, raw)
        current = max(current, bulk.taken) if bulk is not None else current  # a bulk line's
        if line.prefixed or current == 0:
            current = number
        kept.add(line, current)
        if (
            strict
            and not line.prefixed
            and (inner := INNER_RE.search(line.message))
            and inner.start() > 0
        ):
            # SGLang's lines inside a prefix no launcher rule knows: refuse the log rather than
            # read the part of it that happens to be bare.
            raise LogFormatError(
                number,
                "line prefix",
                f"SGLang line after an unrecognised prefix "
                f"{line.message[: inner.start()].strip()[:60]!r}; not read in part",
            )
        if reader is None:
            if not line.prefixed:
                held.append(line)
                continue
            reader = _Reader(strict)
            for early in held:
                _feed(reader, early, False, read_error)
            held = []
        _feed(reader, line, False, read_error)
    kept.close()
    if reader is not None and bulk is not None:
        bulk.accepts.close(reader.facts)
    bare = reader is None
    if reader is None:
        reader = _Reader(False)
        for early in held:
            _feed(reader, early, True, read_error)
    if read_error:
        raise read_error[0]
    facts = reader.facts
    all_lines = kept.lines
    facts.line_count = kept.count
    backend_from_args(facts)
    fired_up = any(READY in line.message for line in all_lines)

    def outcome(uvicorn: bool) -> RunOutcome:
        return assess(
            all_lines,
            is_ready=lambda x: (
                (x.prefixed or bare)
                and (
                    READY in x.message
                    if not uvicorn
                    else bool(_UVICORN_READY_RE.match(x.message.strip()))
                )
            ),
            record_of=lambda x: kept.record[x.number],
            excerpt=bare or not facts.server_args,  # the log's start is not in it: its tail
            bare=bare,
            tail=kept.tail,
            raw_at=kept.raw_at,
            line_count=kept.count,
        )

    facts.outcome = outcome(uvicorn=False)
    if not fired_up and facts.outcome.state != "failed":
        # Where SGLang's own ready line is not shown (a paste that stops at uvicorn's start),
        # uvicorn's "Application startup complete." / "Uvicorn running on" is its readiness,
        # unless the run failed: SGLang starts uvicorn before its warmup, which may crash.
        facts.outcome = outcome(uvicorn=True)
    facts.crash = facts.outcome.failure
    if facts.outcome.ready_line is not None and not facts.ready:
        _ready(reader, None, facts.outcome.ready_line)  # uvicorn's line, where SGLang's is not seen
    keep_warnings(facts)
    apply_caps(facts)
    settle_piecewise(facts, reader.piecewise_begin, reader.piecewise_end)
    implied_overrides(facts)
    return facts


def _feed(reader: _Reader, line: LogLine, bare: bool, error: list[LogFormatError]) -> None:
    """One line's share of the facts: its time, its launcher layer, what the reader reads in it
    (until the reader's first error, kept in ``error``)."""
    facts = reader.facts
    if line.wrapped and line.prefixed:
        facts.wrapped_lines += 1
    if line.timestamp:
        facts.last_timestamp = line.timestamp
        if facts.first_timestamp is None:
            facts.first_timestamp = line.timestamp
    if (line.prefixed or bare) and line.message and not line.message[:1].isspace() and not error:
        try:
            reader.read(line)
        except LogFormatError as exc:
            error.append(exc)


def _any_ready(line: LogLine) -> bool:
    """Whether either reading of ``parse_server_log`` may take ``line`` as the ready line."""
    message = line.message
    return READY in message or (
        ("Application startup complete." in message or "Uvicorn running on" in message)
        and bool(_UVICORN_READY_RE.match(message.strip()))
    )


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.replace(",", " ").split()]


def _check_args(args: dict[str, Any], line: LogLine, strict: bool) -> None:
    """Server args the findings compare must be integers (or None): ``pp_size='2'`` is refused
    under ``strict``, and dropped otherwise (a finding never compares a string with a number)."""
    for name in _INT_ARGS:
        value = args.get(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        if strict:
            raise LogFormatError(
                line.number, f"server_args.{name}", f"expected an integer or None, got {value!r}"
            )
        del args[name]


def _moe_line(line: LogLine) -> MoeConfigLine | None:
    msg = line.message
    if m := _MOE_FALLBACK_RE.search(msg):
        return MoeConfigLine(
            line, "fallback", m.group(1), fallback_path=m.group(3), fallback_triton=m.group(2)
        )
    if m := _MOE_DOWN_REUSE_RE.search(msg):
        return MoeConfigLine(line, "default", m.group(1))
    if m := _MOE_DEFAULT_RE.search(msg):
        return MoeConfigLine(line, "default", m.group(1))
    if m := _MOE_FOUND_RE.search(msg):
        return MoeConfigLine(line, "found", m.group(1))
    return None
