"""Parse an SGLang server log into facts, and derive findings from them.

Shared by ``tuneledger import`` and the server runner, so it holds no store
code: it reads lines and returns plain data (``ServerLogFacts``) and events.

Formats (REFERENCE section 2; SGLang 0.5.9-0.5.23 ``logging`` format strings):

- line prefix ``[YYYY-mm-dd HH:MM:SS{.mmm}{ TPn}{ DPn}{ EPn}{ PPn}] message``
  (``.mmm`` when ``SGLANG_LOG_MS`` is set); newer builds put
  ``LEVEL file.py:NNN: `` before the message. Lines without the prefix
  (tracebacks, tqdm bars, warnings.warn output) are kept for crash tails and
  traceback parsing but never break the parse.
- ``server_args=ServerArgs(k=v, ...)`` (dataclass repr, up to 0.5.14) or
  ``server_args={'k': v, ...}`` (dict repr, 0.5.23), both Python literal syntax.
- startup, MoE kernel config, ready, Prefill/Decode batch and crash lines as
  listed in REFERENCE section 2.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas import Evidence, FindingRecorded, Host, StartupFacts

from .gpu_arch import compute_capability_for, is_sm90_or_sm10x

#: How many trailing lines a crash report keeps.
TAIL_LINES = 20

_PREFIX_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,6}))?"
    r"(?P<ranks>(?: (?:TP|DP|EP|PP|CP)\d+)*)\] ?(?P<msg>.*)$"
)
# Newer builds log "INFO server_args.py:1974: message"; strip it to get the message.
_LEVEL_RE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w./-]+\.py:\d+: ")
_RANK_RE = re.compile(r"(TP|DP|EP|PP|CP)(\d+)")

_ATTN_DEFAULT_RE = re.compile(r"Attention backend not specified\. Use (\S+?) backend by default")
_LOAD_WEIGHT_RE = re.compile(r"Load weight end\. elapsed=([\d.]+) s")
_KV_RE = re.compile(r"KV Cache is allocated\. #tokens: (\d+)")
_CG_BS_RE = re.compile(r"Capture cuda graph bs \[([\d,\s]*)\]")
_LIMITS_RE = re.compile(r"max_total_num_tokens=\d+, chunked_prefill_size=")
_KV_PAIR_RE = re.compile(r"(\w+)=([-\w.]+)")
_PIECEWISE_DISABLE_RE = re.compile(r"Disable piecewise CUDA graph because (.+?)\.?$")
_PID_RE = re.compile(r"Started server process \[(\d+)\]")
_MOE_FOUND_RE = re.compile(r"Using MoE kernel config from (.+?)\.?$")
_MOE_FALLBACK_RE = re.compile(
    r"Config file not found at (.+?)\. Fallback to triton version ([\w.]+) and use MoE kernel config from (.+?)\. "
)
_MOE_DEFAULT_RE = re.compile(
    r"Using (?:default MoE kernel config|MoE kernel config with down_moe=False)\. .*?Config file not found at (.+?\.json)"
)
_DEVICE_RE = re.compile(r"device_name=([^,/]+?)(?:_down)?(?:,|\.json)")
_EXC_RE = re.compile(
    r"^(?P<cls>(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|OutOfResources|Interrupt|Exit))(?::\s*(?P<msg>.*))?$"
)
_OOM_RE = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory", re.IGNORECASE)

#: Server args that switch piecewise CUDA graph off as a side effect (REFERENCE section 2).
_PIECEWISE_DISABLERS: tuple[tuple[str, Any], ...] = (
    ("enable_flashinfer_allreduce_fusion", True),
    ("enable_torch_compile", True),
    ("enable_dp_attention", True),
    ("enable_deterministic_inference", True),
)

#: Markers that make a text file an SGLang server log (used by format detection).
LOG_MARKERS: tuple[str, ...] = (
    "server_args=",
    "Load weight end",
    "KV Cache is allocated",
    "Capture cuda graph",
    "The server is fired up and ready to roll",
    "Decode batch",
    "Prefill batch",
    "Attention backend not specified",
    "Scheduler hit an exception",
    "max_total_num_tokens=",
)


@dataclass(frozen=True)
class LogLine:
    """One line of the log: 1-based ``number``, the ``raw`` text, and the parsed prefix.

    ``timestamp`` is naive local time as SGLang prints it; ``ranks`` maps
    ``TP``/``DP``/``EP``/``PP`` to the rank number; ``message`` is the text after
    the prefix (and after ``LEVEL file.py:N:`` in newer builds), or the raw text
    for a line without the prefix.
    """

    number: int
    raw: str
    message: str
    timestamp: datetime | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    level: str | None = None

    @property
    def prefixed(self) -> bool:
        """True when the line has SGLang's ``[timestamp ...]`` prefix."""
        return self.timestamp is not None


@dataclass(frozen=True)
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
        return self.fields.get("accept len")


@dataclass(frozen=True)
class MoeConfigLine:
    """A fused-MoE kernel config lookup: ``status`` found / fallback / default, and the file path."""

    line: LogLine
    status: str
    path: str
    fallback_path: str | None = None
    fallback_triton: str | None = None


@dataclass(frozen=True)
class CrashInfo:
    """Why the server died: ``cause`` ``crash`` or ``out-of-memory``, a one-line ``message``
    (the root exception of the traceback where there is one), the line that showed it and the last
    ``TAIL_LINES`` lines of the log."""

    cause: str
    message: str
    line: LogLine
    tail: list[str]


@dataclass
class ServerLogFacts:
    """Everything ``parse_server_log`` found. ``None`` means "not in the log".

    Units as SGLang logs them: seconds for ``weight_load_s``, GB for memory,
    tokens for ``max_total_num_tokens`` / ``kv_cache_tokens``. ``evidence`` maps a
    fact name (``"max_running_requests"``, ``"ready"``, ...) to the line that showed it.
    """

    server_args: dict[str, Any] = field(default_factory=dict)
    attention_backend: str | None = None
    weight_load_s: float | None = None
    kv_cache_tokens: int | None = None
    cuda_graph_bs: list[int] | None = None
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
    decode_batches: list[BatchLine] = field(default_factory=list)
    prefill_batches: list[BatchLine] = field(default_factory=list)
    warnings: list[LogLine] = field(default_factory=list)
    flashinfer_fusion_disabled: LogLine | None = None
    crash: CrashInfo | None = None
    evidence: dict[str, LogLine] = field(default_factory=dict)
    line_count: int = 0

    # --- derived ---------------------------------------------------------------

    @property
    def moe_kernel_config(self) -> str | None:
        """The worst MoE config status seen: ``default`` > ``fallback`` > ``found``; ``None`` if no lookup."""
        statuses = {m.status for m in self.moe_configs}
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
    def has_startup_facts(self) -> bool:
        """True when any startup fact (not just server args) was found."""
        return any(
            value is not None
            for value in (
                self.attention_backend, self.weight_load_s, self.kv_cache_tokens, self.cuda_graph_bs,
                self.max_total_num_tokens, self.max_running_requests, self.moe_kernel_config,
            )
        )

    def to_startup_facts(self) -> StartupFacts:
        """The ledger's ``StartupFacts`` for a ``ServerReady`` event."""
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
            moe_kernel_config=self.moe_kernel_config,  # type: ignore[arg-type]
            moe_config_paths=paths,
            kv_cache_tokens=self.kv_cache_tokens,
            weight_load_s=self.weight_load_s,
            available_gpu_mem_gb=self.available_gpu_mem_gb,
            server_args=jsonable_args(self.server_args),
        )


# --- line level -------------------------------------------------------------------


def split_line(number: int, raw: str) -> LogLine:
    """Split one raw line into prefix parts and message (see the module doc for the format)."""
    text = raw.rstrip("\r\n")
    match = _PREFIX_RE.match(text)
    if not match:
        return LogLine(number=number, raw=text, message=text.strip())
    stamp = datetime.strptime(match.group("ts"), "%Y-%m-%d %H:%M:%S")
    if match.group("frac"):
        frac = match.group("frac")
        stamp = stamp.replace(microsecond=int(frac.ljust(6, "0")))
    ranks = {kind: int(n) for kind, n in _RANK_RE.findall(match.group("ranks"))}
    message = match.group("msg")
    level = None
    level_match = _LEVEL_RE.match(message)
    if level_match:
        level = level_match.group("level")
        message = message[level_match.end():]
    return LogLine(number=number, raw=text, message=message, timestamp=stamp, ranks=ranks, level=level)


def _scalar(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_batch_fields(text: str) -> dict[str, Any]:
    """``"#running-req: 1, #token: 20, cuda graph: True, "`` -> ``{"#running-req": 1, ...}``.

    Values become int, float or bool where they parse so. A trailing comma
    (older ``Decode batch.`` lines) is fine.
    """
    fields: dict[str, Any] = {}
    for part in text.split(", "):
        key, sep, value = part.strip().strip(",").partition(": ")
        if sep and key:
            fields[key.strip()] = _scalar(value.strip().rstrip(","))
    return fields


# --- server args ----------------------------------------------------------------------


def _literal(node: ast.AST) -> Any:
    """A literal value, or the source text when it is not a literal (``device(type='cuda')``)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)


def parse_server_args(text: str) -> dict[str, Any]:
    """Parse the text after ``server_args=``: ``ServerArgs(a=1, b='x')`` or ``{'a': 1, 'b': 'x'}``.

    Values are Python literals (``ast.literal_eval``); a value that is not a
    literal (an enum or object repr) is kept as its source text. A repr that is
    not valid Python at all (an ``<Enum.X: 1>`` repr) is split on top-level
    commas and parsed key by key.

    Raises:
        ValueError: the text is neither form.
    """
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return _parse_args_tolerant(text)
    if isinstance(tree, ast.Call):
        return {kw.arg: _literal(kw.value) for kw in tree.keywords if kw.arg}
    if isinstance(tree, ast.Dict):
        result: dict[str, Any] = {}
        for key, value in zip(tree.keys, tree.values):
            if key is not None:
                result[str(_literal(key))] = _literal(value)
        return result
    raise ValueError(f"server_args is neither ServerArgs(...) nor a dict: {text[:60]!r}")


def _split_top_level(body: str) -> list[str]:
    """Split on commas outside quotes and brackets."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_args_tolerant(text: str) -> dict[str, Any]:
    if text.startswith("ServerArgs(") and text.endswith(")"):
        body, sep = text[len("ServerArgs("):-1], "="
    elif text.startswith("{") and text.endswith("}"):
        body, sep = text[1:-1], ":"
    else:
        raise ValueError(f"server_args is neither ServerArgs(...) nor a dict: {text[:60]!r}")
    result: dict[str, Any] = {}
    for part in _split_top_level(body):
        key, found, value = part.partition(sep)
        if not found:
            continue
        key = key.strip().strip("'\"")
        try:
            result[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            result[key] = value.strip()
    return result


def jsonable_args(args: dict[str, Any]) -> dict[str, Any]:
    """Server args with JSON-safe values: tuples and sets as lists, non-finite floats as strings."""
    return {key: _jsonable(value) for key, value in args.items()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


# --- whole log -------------------------------------------------------------------


def parse_server_log(lines: Iterable[str]) -> ServerLogFacts:
    """Read an SGLang server log (an iterable of lines, newlines optional) into facts.

    Startup lines logged once per rank (``TP0`` .. ``TPn``) count once (the
    first). Unknown lines are skipped. Never raises on odd lines; a
    ``server_args=`` line that does not parse leaves ``server_args`` empty.
    """
    facts = ServerLogFacts()
    all_lines: list[LogLine] = []
    piecewise_begin = piecewise_end = False
    crash_start: LogLine | None = None
    for number, raw in enumerate(lines, start=1):
        line = split_line(number, raw)
        all_lines.append(line)
        if line.timestamp and facts.first_timestamp is None:
            facts.first_timestamp = line.timestamp
        msg = line.message
        if not msg:
            continue
        if crash_start is None and _is_crash_marker(line):
            crash_start = line
        if not line.prefixed:
            continue
        if msg.startswith("server_args=") and not facts.server_args:
            try:
                facts.server_args = parse_server_args(msg[len("server_args="):])
                facts.evidence["server_args"] = line
            except ValueError:
                pass
        elif (m := _ATTN_DEFAULT_RE.search(msg)) and facts.attention_backend is None:
            facts.attention_backend = m.group(1)
            facts.evidence["attention_backend"] = line
        elif (m := _LOAD_WEIGHT_RE.search(msg)) and facts.weight_load_s is None:
            facts.weight_load_s = float(m.group(1))
            facts.evidence["weight_load_s"] = line
        elif (m := _KV_RE.search(msg)) and facts.kv_cache_tokens is None:
            facts.kv_cache_tokens = int(m.group(1))
            facts.evidence["kv_cache_tokens"] = line
        elif m := _CG_BS_RE.search(msg):
            if facts.cuda_graph_bs is None:
                facts.cuda_graph_bs = [int(x) for x in m.group(1).replace(",", " ").split()]
                facts.evidence["cuda_graph_bs"] = line
        elif msg.startswith("Capture cuda graph end"):
            facts.cuda_graph_captured = True
        elif msg.startswith("Capture piecewise CUDA graph begin"):
            piecewise_begin = True
        elif msg.startswith("Capture piecewise CUDA graph end"):
            piecewise_end = True
            facts.evidence["piecewise_cuda_graph"] = line
        elif m := _PIECEWISE_DISABLE_RE.search(msg):
            facts.piecewise_disabled_reason = m.group(1)
            facts.evidence["piecewise_cuda_graph"] = line
            facts.warnings.append(line)
        elif _LIMITS_RE.search(msg) and facts.max_total_num_tokens is None:
            _read_limits(facts, msg, line)
        elif "MoE kernel config" in msg or "Config file not found at" in msg:
            moe = _moe_line(line)
            if moe is not None:
                facts.moe_configs.append(moe)
        elif "The server is fired up and ready to roll" in msg:
            facts.ready = True
            facts.ready_timestamp = line.timestamp
            facts.evidence["ready"] = line
        elif msg.startswith(("Decode batch.", "Decode batch,")):
            facts.decode_batches.append(BatchLine(line, "decode", parse_batch_fields(msg[len("Decode batch."):])))
        elif msg.startswith(("Prefill batch.", "Prefill batch,")):
            facts.prefill_batches.append(BatchLine(line, "prefill", parse_batch_fields(msg[len("Prefill batch."):])))
        elif "Disabling flashinfer allreduce fusion permanently" in msg:
            facts.flashinfer_fusion_disabled = line
            facts.warnings.append(line)
        elif (m := _PID_RE.search(msg)) and facts.pid is None:
            facts.pid = int(m.group(1))
        elif line.level == "WARNING" or "deprecated" in msg.lower():
            facts.warnings.append(line)
    facts.line_count = len(all_lines)
    if facts.attention_backend is None and isinstance(facts.server_args.get("attention_backend"), str):
        facts.attention_backend = facts.server_args["attention_backend"]
        if "server_args" in facts.evidence:
            facts.evidence["attention_backend"] = facts.evidence["server_args"]
    _settle_piecewise(facts, piecewise_begin, piecewise_end)
    if crash_start is not None:
        facts.crash = _crash_info(all_lines, crash_start)
    return facts


def _read_limits(facts: ServerLogFacts, msg: str, line: LogLine) -> None:
    values = dict(_KV_PAIR_RE.findall(msg))
    for name in ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests", "context_len"):
        if name in values:
            try:
                setattr(facts, name, int(values[name]))
                facts.evidence[name] = line
            except ValueError:
                pass
    if "available_gpu_mem" in values:
        try:
            facts.available_gpu_mem_gb = float(values["available_gpu_mem"])
        except ValueError:
            pass


def _moe_line(line: LogLine) -> MoeConfigLine | None:
    msg = line.message
    if m := _MOE_FALLBACK_RE.search(msg):
        return MoeConfigLine(line, "fallback", m.group(1), fallback_path=m.group(3), fallback_triton=m.group(2))
    if m := _MOE_DEFAULT_RE.search(msg):
        return MoeConfigLine(line, "default", m.group(1))
    if m := _MOE_FOUND_RE.search(msg):
        return MoeConfigLine(line, "found", m.group(1))
    return None


def _settle_piecewise(facts: ServerLogFacts, begin: bool, end: bool) -> None:
    """Piecewise is on by default and switched off silently: no capture lines after the
    decode CUDA graph capture finished means off (REFERENCE section 2)."""
    if begin and end:
        facts.piecewise_cuda_graph = True
    elif facts.piecewise_disabled_reason is not None:
        facts.piecewise_cuda_graph = False
    elif not begin and (facts.cuda_graph_captured or facts.ready):
        facts.piecewise_cuda_graph = False
        if facts.server_args.get("disable_piecewise_cuda_graph") is True:
            facts.piecewise_disabled_reason = "disable_piecewise_cuda_graph=True in server_args"


def _is_crash_marker(line: LogLine) -> bool:
    msg = line.message
    return (
        "Traceback (most recent call last)" in msg
        or "Scheduler hit an exception" in msg
        or "OutOfResources" in msg
        or msg.startswith("Exception: ")
        or bool(_OOM_RE.search(msg))
        or "Received sigquit from a child process" in msg
    )


def _crash_info(lines: list[LogLine], start: LogLine) -> CrashInfo:
    """The root exception line after ``start`` (Python prints the root of a chain first)."""
    message, where = None, start
    for line in lines[start.number - 1:]:
        text = line.raw.strip() if not line.prefixed else line.message.strip()
        if _EXC_RE.match(text):
            message, where = text, line
            break
    if message is None:
        message = start.message.strip()
    oom = any(_OOM_RE.search(line.raw) for line in lines[start.number - 1:])
    tail = [line.raw for line in lines[-TAIL_LINES:]]
    return CrashInfo(cause="out-of-memory" if oom else "crash", message=message, line=where, tail=tail)


# --- findings ------------------------------------------------------------------------


def _ref(source_name: str, line: LogLine) -> str:
    return f"{source_name}:{line.number}"


def _evidence(source_name: str, line: LogLine | None, text: str | None = None) -> list[Evidence]:
    if line is None:
        return []
    shown = text if text is not None else (line.raw if len(line.raw) <= 300 else line.raw[:297] + "...")
    return [Evidence(kind="log", ref=_ref(source_name, line), text=shown)]


def _arg_evidence(facts: ServerLogFacts, source_name: str, name: str) -> list[Evidence]:
    """Evidence for one server arg: its ``name=value`` on the (long) server_args line."""
    line = facts.evidence.get("server_args")
    return _evidence(source_name, line, f"{name}={facts.server_args.get(name)!r}") if line else []


def resolve_arch(facts: ServerLogFacts, host: Host | None) -> tuple[str | None, str | None]:
    """(compute capability, GPU name) from the given host first, else from the log's MoE config path."""
    gpu = (host.gpu_name if host else None) or facts.gpu_name
    arch = (host.compute_capability if host else None) or compute_capability_for(gpu)
    return arch, gpu


def derive_findings(
    facts: ServerLogFacts,
    *,
    host: Host | None = None,
    previous: StartupFacts | None = None,
    run_id: str | None = None,
    session_id: str | None = None,
    source_name: str = "server.log",
) -> list[FindingRecorded]:
    """Findings the log supports on its own (``basis="log"``), each with its log lines as evidence.

    Kinds: ``flag-not-in-effect`` (flashinfer allreduce fusion asked for but not
    on an SM90/SM10X multi-GPU setup, or disabled at run time),
    ``piecewise-cuda-graph-off``, ``default-moe-config`` (one per missing file),
    ``decode-without-cuda-graph`` (decode batches larger than the largest
    captured batch size ran eager) and ``capacity-reduced`` (against
    ``previous``, the startup facts of the run compared with). Evidence refs are
    ``source_name:line``. Never raises.
    """
    engine_version = host.engine_version if host else None
    common = dict(basis="log", server_run_id=run_id, session_id=session_id, engine="sglang", engine_version=engine_version)
    found: list[FindingRecorded] = []
    found += _flashinfer_fusion(facts, host, source_name)
    found += _piecewise(facts, source_name)
    found += _default_moe(facts, source_name)
    found += _decode_eager(facts, source_name)
    found += _capacity(facts, previous, source_name)
    return [f.model_copy(update=common) for f in found]


def _flashinfer_fusion(facts: ServerLogFacts, host: Host | None, src: str) -> list[FindingRecorded]:
    if facts.server_args.get("enable_flashinfer_allreduce_fusion") is not True:
        return []
    flag = "enable-flashinfer-allreduce-fusion"
    evidence = _arg_evidence(facts, src, "enable_flashinfer_allreduce_fusion")
    if facts.flashinfer_fusion_disabled is not None:
        return [FindingRecorded(
            kind="flag-not-in-effect", flag=flag, verdict="not-activated",
            message="--enable-flashinfer-allreduce-fusion is set, but SGLang logged "
            "'Disabling flashinfer allreduce fusion permanently.' (its workspace failed); server_args still say true",
            evidence=evidence + _evidence(src, facts.flashinfer_fusion_disabled),
        )]
    arch, gpu = resolve_arch(facts, host)
    if arch is not None and not is_sm90_or_sm10x(arch):
        moe_line = facts.moe_configs[0].line if facts.moe_configs and not (host and host.gpu_name) else None
        return [FindingRecorded(
            kind="flag-not-in-effect", flag=flag, verdict="not-activated",
            message=f"--enable-flashinfer-allreduce-fusion has no effect on {arch} ({gpu or 'this GPU'}): "
            "SGLang's flashinfer allreduce fusion runs only on SM90 or SM10X",
            evidence=evidence + _evidence(src, moe_line),
        )]
    if facts.server_args.get("tp_size") == 1:
        return [FindingRecorded(
            kind="flag-not-in-effect", flag=flag, verdict="not-activated",
            message="--enable-flashinfer-allreduce-fusion has no effect with tp_size=1 (no all-reduce to fuse)",
            evidence=evidence + _arg_evidence(facts, src, "tp_size"),
        )]
    return []


def _piecewise(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    if facts.piecewise_cuda_graph is not False:
        return []
    args = facts.server_args
    parts = ["piecewise CUDA graph is off (no piecewise capture in the log)"]
    evidence: list[Evidence] = []
    if facts.piecewise_disabled_reason and "piecewise_cuda_graph" in facts.evidence:
        parts = [f"piecewise CUDA graph is off: {facts.piecewise_disabled_reason}"]
        evidence += _evidence(src, facts.evidence["piecewise_cuda_graph"])
    if args.get("disable_piecewise_cuda_graph") is True:
        parts = ["piecewise CUDA graph is off: server_args has disable_piecewise_cuda_graph=True"]
        evidence += _arg_evidence(facts, src, "disable_piecewise_cuda_graph")
    disablers = [name for name, value in _PIECEWISE_DISABLERS if args.get(name) is value]
    if (args.get("pp_size") or 1) > 1:
        disablers.append("pp_size>1")
    if disablers:
        parts.append(f"while {', '.join(disablers)} is on (it switches piecewise CUDA graph off)")
        for name in disablers:
            if name in args:
                evidence += _arg_evidence(facts, src, name)
    if not evidence and "cuda_graph_bs" in facts.evidence:
        evidence += _evidence(src, facts.evidence["cuda_graph_bs"])
    return [FindingRecorded(kind="piecewise-cuda-graph-off", message=" ".join(parts), evidence=evidence)]


def _default_moe(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    out = []
    for moe in facts.moe_configs:
        if moe.status == "default":
            name = moe.path.rsplit("/", 1)[-1]
            out.append(FindingRecorded(
                kind="default-moe-config",
                message=f"default fused-MoE kernel config in use: no tuned file {name}",
                evidence=_evidence(src, moe.line),
            ))
        elif moe.status == "fallback":
            name = moe.path.rsplit("/", 1)[-1]
            out.append(FindingRecorded(
                kind="default-moe-config",
                message=f"fused-MoE kernel config from another Triton version ({moe.fallback_triton}): no file {name} "
                "for this Triton version",
                evidence=_evidence(src, moe.line),
            ))
    return out


def _decode_eager(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    if not facts.cuda_graph_bs:
        return []
    largest = max(facts.cuda_graph_bs)
    eager = [b for b in facts.decode_batches if b.cuda_graph is False and (b.running_req or 0) > largest]
    if not eager:
        return []
    peak = max(b.running_req or 0 for b in eager)
    evidence = _evidence(src, facts.evidence.get("cuda_graph_bs"))
    for batch in eager[:3]:
        evidence += _evidence(src, batch.line)
    return [FindingRecorded(
        kind="decode-without-cuda-graph",
        message=f"{len(eager)} decode batch line(s) ran without CUDA graph at #running-req up to {peak}, "
        f"above the largest captured batch size {largest} (see --cuda-graph-max-bs)",
        evidence=evidence,
    )]


def _capacity(facts: ServerLogFacts, previous: StartupFacts | None, src: str) -> list[FindingRecorded]:
    if previous is None:
        return []
    out = []
    for name in ("max_running_requests", "max_total_num_tokens"):
        before, now = getattr(previous, name), getattr(facts, name)
        if before is not None and now is not None and now < before:
            out.append(FindingRecorded(
                kind="capacity-reduced",
                message=f"{name} {before} -> {now} ({(now - before) / before:+.0%}) against the previous run",
                evidence=_evidence(src, facts.evidence.get(name)),
            ))
    return out


__all__ = [
    "BatchLine",
    "CrashInfo",
    "LOG_MARKERS",
    "LogLine",
    "MoeConfigLine",
    "ServerLogFacts",
    "derive_findings",
    "parse_batch_fields",
    "parse_server_args",
    "parse_server_log",
    "split_line",
]
