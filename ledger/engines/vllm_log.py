"""Parse a vLLM server log (``vllm serve`` / ``python -m vllm.entrypoints.openai.api_server``).

Line format (vLLM's logger, ``vllm/logger.py``): ``LEVEL MM-DD HH:MM:SS [file.py:N] message``
(before 0.8: ``LEVEL MM-DD HH:MM:SS file.py:N] message``), optionally after a process tag
``(APIServer pid=2102)``, ``(EngineCore_DP0 pid=2211)``, ``(Worker_TP0 pid=2290)``,
``(VllmWorkerProcess pid=..)``, and after whatever a supervisor put first (journald's
``Aug 19 18:30:22 host vllm[8727]:``). Continuation lines (tracebacks, progress bars) have none.

What it reads, into the same ``ServerLogFacts`` the SGLang parser fills (so the same
findings and ``StartupFacts`` come out):

- resolved args: ``non-default args: {...}`` (0.8+) or ``args: Namespace(...)`` (older);
- the engine version: ``vLLM API server version X`` or ``Initializing a V1 LLM engine (vX)``;
- the attention backend chosen: ``Using FLASH_ATTN attention backend ...``,
  ``Using Flash Attention backend on V1 engine.``, ``Using FlashInfer backend.``;
- CUDA graph capture sizes: ``"cudagraph_capture_sizes":[512,...]`` in the engine's config
  line (``cuda_graph_bs``), or none under eager mode (``enforce_eager``);
- KV cache capacity: ``GPU KV cache size: 1,205,376 tokens`` (0.6+; the CPU build logs ``CPU KV
  cache size: ...``) or ``# GPU blocks: N`` x the block size (older) -> ``kv_cache_tokens`` and
  ``max_total_num_tokens``; the same line's ``Maximum concurrency for 512 tokens per request:
  2048.00x`` -> ``max_concurrency``;
- the speculative decoding config: the ``speculative_config`` of the args (``None`` when absent);
  ``max_num_seqs`` (from the args) -> ``max_running_requests``; ``max_model_len`` ->
  ``context_len``; weight loading time;
- the fused-MoE config lookups: ``Using configuration from PATH for MoE layer.`` (found) and
  ``Using default MoE config. Performance might be sub-optimal! Config file not found at ['PATH']``
  (default; each rank logs it, one lookup is kept per file);
- readiness, on the ready line only: ``Starting vLLM API server ... on http://...`` (0.32:
  ``Starting vLLM server on http://...``, logged once the engine is up, as the HTTP server
  starts), or uvicorn's own unprefixed ``Application startup complete.`` / ``Uvicorn running on``;
- a crash: the root exception of the first traceback, whether bare or logged line by line under
  the ERROR prefix (a worker's exception after readiness: ``RuntimeError: Unsupported CPU
  attention configuration ...``; vLLM's own ``Engine core initialization failed. See root cause
  above``, ``EngineCore encountered a fatal error`` and ``EngineDeadError`` point back to it),
  out of memory when the log says so; a command line refused by argparse (``api_server.py:
  error: unrecognized arguments: --x``), which prints no vLLM line at all;
- warnings that switch a requested arg off (``disabl``/``not supported``/``overrid``/
  ``falling back``/``ignor`` on a line naming the arg) -> ``overridden``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from ledger.engines.sglang_log import (
    CrashInfo,
    LogLine,
    MoeConfigLine,
    ServerLogFacts,
    derive_findings,
    parse_server_args,
)
from schemas import Evidence, FindingRecorded, Host, StartupFacts, normalize_flag

TAIL_LINES = 20

_LINE_RE = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d{2}-\d{2}) (?P<hms>\d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"\[?(?P<src>[\w./-]+\.py):(?P<lineno>\d+)\] ?(?P<msg>.*)$"
)
_PROC_PREFIX_RE = re.compile(r"^\([\w.-]+(?: rank=\d+)? pid=\d+\)\s?")
_PROC_RE = re.compile(r"\((?P<proc>[\w.-]+)(?: rank=\d+)? pid=(?P<pid>\d+)\)")
_VERSION_RE = re.compile(
    r"vLLM API server version (\S+)|Initializing an? (?:V\d )?LLM engine \(v([^)\s]+)\)"
)
_ARGS_RE = re.compile(r"^(?:non-default args|args): (.+)$")
_ATTN_RE = re.compile(
    r"^Using (?:AttentionBackendEnum\.)?(?P<name>[\w .-]+?) (?:attention )?backend(?: on V1 engine| out of potential backends.*)?\.?$"
)
_CG_RE = re.compile(r"""["']?cudagraph_capture_sizes["']?\s*[:=]\s*\[([\d,\s]*)\]""")
_KV_TOKENS_RE = re.compile(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens")
_MAX_CONCURRENCY_RE = re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d,.]+)x")
_ARGPARSE_ERROR_RE = re.compile(r"^[\w.-]+(?:\.py)?: error: (?P<msg>.+)$")
_GPU_BLOCKS_RE = re.compile(r"# GPU blocks: (\d+)")
_MAX_LEN_RE = re.compile(r"Using max model len (\d+)")
_WEIGHTS_RE = re.compile(
    r"(?:Model loading took [\d.]+ GiB and|Loading weights took) ([\d.]+) seconds"
)
_MOE_FOUND_RE = re.compile(r"Using configuration from (\S+?\.json) for MoE layer")
_MOE_DEFAULT_RE = re.compile(
    r"Using default MoE config\..*?Config file not found at \[?'?(.+?\.json)"
)
_READY_RE = re.compile(
    r"Starting vLLM (?:API )?server\b.* on https?://|Application startup complete|Uvicorn running on"
)
_EXC_RE = re.compile(
    r"^(?P<cls>(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Interrupt|Exit))(?::\s*(?P<msg>.*))?$"
)
_OOM_RE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory", re.IGNORECASE
)
_GENERIC_CRASH = (
    "Engine core initialization failed",
    "EngineCore failed to start",
    "See root cause above",
    "EngineCore encountered a fatal error",
    "EngineDeadError",
    "please check the stack trace above for the root cause",
)
_OVERRIDE_RE = re.compile(
    r"disabl|not supported|overrid|falling back|fall back|ignor|forcing", re.IGNORECASE
)

#: Markers that make a text file a vLLM server log (used by format detection).
LOG_MARKERS: tuple[str, ...] = (
    "non-default args:",
    "vLLM API server version",
    "LLM engine (v",
    "GPU KV cache size:",
    "# GPU blocks:",
    "Starting vLLM API server",
    "Using default MoE config",
    "EngineCore failed to start",
    "CPU KV cache size:",
)


@dataclass
class VllmLogFacts:
    """What ``parse_vllm_log`` found: ``facts`` (the shared ``ServerLogFacts``), the
    ``engine_version``, the ``overridden`` args (arg name -> the warning line), and
    ``block_size`` used to turn GPU blocks into tokens."""

    facts: ServerLogFacts
    engine_version: str | None = None
    overridden: dict[str, LogLine] = field(default_factory=dict)
    #: Requests of ``max_model_len`` tokens the KV cache holds at once, as vLLM logs it.
    max_concurrency: float | None = None
    #: ``--speculative-config`` as vLLM parsed it (``None``: no speculative decoding).
    speculative_config: dict[str, object] | None = None


def split_vllm_line(number: int, raw: str, year: int = 1900) -> LogLine:
    """One raw line as a ``LogLine`` (timestamp without a year: vLLM prints none)."""
    text = raw.rstrip("\r\n")
    m = _LINE_RE.search(text)
    if not m:
        # a continuation line (traceback) keeps its text without the process tag
        return LogLine(number=number, raw=text, message=_PROC_PREFIX_RE.sub("", text, count=1))
    try:
        stamp = datetime.strptime(f"{year}-{m.group('md')} {m.group('hms')}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        stamp = None
    return LogLine(
        number=number, raw=text, message=m.group("msg"), timestamp=stamp, level=m.group("level")
    )


def is_vllm_log(text: str, scan_lines: int = 5000) -> bool:
    """True when some line has vLLM's ``LEVEL MM-DD HH:MM:SS [file.py:N]`` form and a vLLM marker."""
    for number, line in enumerate(text.splitlines()):
        if number >= scan_lines:
            break
        if any(marker in line for marker in LOG_MARKERS) and _LINE_RE.search(line):
            return True
    return False


def parse_vllm_log(raw_lines: list[str]) -> VllmLogFacts:
    """Facts of a vLLM log (see the module doc). Never raises on odd lines: they are skipped."""
    lines = [split_vllm_line(n, raw) for n, raw in enumerate(raw_lines, start=1)]
    facts = ServerLogFacts(line_count=len(lines))
    out = VllmLogFacts(facts=facts)
    seen_moe: set[str] = set()
    crash_start: LogLine | None = None
    kv_blocks: tuple[int, LogLine] | None = None
    for line in lines:
        msg = line.message
        if line.prefixed and facts.first_timestamp is None:
            facts.first_timestamp = line.timestamp
        if facts.pid is None:
            proc = _PROC_RE.search(line.raw)
            if proc and proc.group("proc").startswith("APIServer"):
                facts.pid = int(proc.group("pid"))
        if "Traceback (most recent call last)" in line.raw and crash_start is None:
            crash_start = line  # bare, or a worker's traceback logged line by line at ERROR
        if not line.prefixed:
            m = _ARGPARSE_ERROR_RE.match(line.raw)
            if m and crash_start is None:
                crash_start = line  # the command line was refused before vLLM logged anything
            if _READY_RE.search(msg) and not facts.ready:
                # uvicorn's own logger: "INFO:     Application startup complete." (no timestamp)
                facts.ready = True
                facts.evidence["ready"] = line
            continue
        if line.level == "WARNING":
            facts.warnings.append(line)
        m = _ARGS_RE.match(msg)
        if m and not facts.server_args:
            try:
                facts.server_args = parse_server_args(m.group(1))
                facts.evidence["server_args"] = line
            except ValueError:
                pass
            continue
        m = _VERSION_RE.search(msg)
        if m and out.engine_version is None:
            out.engine_version = m.group(1) or m.group(2)
        m = _CG_RE.search(msg)
        if m and facts.cuda_graph_bs is None:
            facts.cuda_graph_bs = sorted(
                {int(x) for x in m.group(1).replace(" ", "").split(",") if x}
            )
            facts.evidence["cuda_graph_bs"] = line
        m = _ATTN_RE.match(msg)
        if m and facts.attention_backend is None:
            facts.attention_backend = m.group("name")
            facts.evidence["attention_backend"] = line
        m = _KV_TOKENS_RE.search(msg)
        if m:
            facts.kv_cache_tokens = int(m.group(1).replace(",", ""))
            facts.evidence["max_total_num_tokens"] = line
            m = _MAX_CONCURRENCY_RE.search(msg)
            if m:
                out.max_concurrency = float(m.group(1).replace(",", ""))
        m = _GPU_BLOCKS_RE.search(msg)
        if m:
            kv_blocks = (int(m.group(1)), line)
        m = _MAX_LEN_RE.search(msg)
        if m:
            facts.context_len = int(m.group(1))
        m = _WEIGHTS_RE.search(msg)
        if m and facts.weight_load_s is None:
            facts.weight_load_s = float(m.group(1))
        for regex, status in ((_MOE_FOUND_RE, "found"), (_MOE_DEFAULT_RE, "default")):
            m = regex.search(msg)
            if m and m.group(1) not in seen_moe:
                seen_moe.add(m.group(1))
                facts.moe_configs.append(MoeConfigLine(line=line, status=status, path=m.group(1)))
        if _READY_RE.search(msg) and not facts.ready:
            facts.ready = True
            facts.ready_timestamp = line.timestamp
            facts.evidence["ready"] = line
        if crash_start is None and (
            line.level in ("ERROR", "CRITICAL") and any(g in msg for g in _GENERIC_CRASH)
        ):
            crash_start = line
        if line.level == "WARNING" and _OVERRIDE_RE.search(msg):
            _note_override(out, line)
    args = facts.server_args
    if facts.kv_cache_tokens is None and kv_blocks is not None:
        block_size = args.get("block_size")
        block = block_size if isinstance(block_size, int) else 16
        facts.kv_cache_tokens = kv_blocks[0] * block
        facts.evidence["max_total_num_tokens"] = kv_blocks[1]
    facts.max_total_num_tokens = facts.kv_cache_tokens
    if isinstance(args.get("max_num_seqs"), int):
        facts.max_running_requests = args["max_num_seqs"]
        facts.evidence["max_running_requests"] = facts.evidence.get("server_args")  # type: ignore[assignment]
    if facts.context_len is None and isinstance(args.get("max_model_len"), int):
        facts.context_len = args["max_model_len"]
    spec = args.get("speculative_config")
    if isinstance(spec, dict):
        out.speculative_config = spec
    if args.get("enforce_eager") is True and facts.cuda_graph_bs is None:
        facts.cuda_graph_bs = []
    if crash_start is not None:
        facts.crash = _crash(lines, crash_start)
    if not out.overridden:
        for line in facts.warnings:
            if _OVERRIDE_RE.search(line.message):
                _note_override(out, line)
    return out


def _note_override(out: VllmLogFacts, line: LogLine) -> None:
    """Record each requested arg that a switching-off warning names (``max_num_seqs`` or ``--max-num-seqs``)."""
    text = line.message
    for name in out.facts.server_args:
        if name in out.overridden or name in ("model", "model_tag"):
            continue
        flag = name.replace("_", "-")
        # A one-word arg (dtype, seed) is only taken in its --flag form: as a bare word it is too common.
        forms = [rf"--{re.escape(flag)}(?![\w-])"]
        if "_" in name:
            forms += [
                rf"(?<![\w-]){re.escape(name)}(?!\w)",
                rf"(?<![\w-]){re.escape(flag)}(?![\w-])",
            ]
        if re.search("|".join(forms), text):
            out.overridden[name] = line


def _crash(lines: list[LogLine], start: LogLine) -> CrashInfo:
    """The root exception: the last ``Xxx Error: msg`` line of the log that is not vLLM's
    generic "engine core initialization failed" (which points back at the root cause)."""
    message, where = None, start
    for line in lines[max(0, start.number - 1) :]:
        text = line.message.strip()
        m = _EXC_RE.match(text)
        if m and not any(g in text for g in _GENERIC_CRASH):
            message, where = text, line
            break
    if message is None:
        message = start.message.strip()
    oom = any(_OOM_RE.search(line.raw) for line in lines[start.number - 1 :])
    return CrashInfo(
        cause="out-of-memory" if oom else "crash",
        message=message[:500],
        line=where,
        tail=[line.raw for line in lines[-TAIL_LINES:]],
    )


def to_startup_facts(parsed: VllmLogFacts) -> StartupFacts:
    """The ledger's ``StartupFacts`` (``attention_backend``, ``max_running_requests`` =
    ``max_num_seqs``, ``max_total_num_tokens`` = ``kv_cache_tokens`` = the KV cache's tokens,
    ``context_len``, ``cuda_graph_bs``, ``moe_kernel_config``, ``server_args``)."""
    return parsed.facts.to_startup_facts()


def vllm_findings(
    parsed: VllmLogFacts,
    *,
    host: Host | None,
    previous: StartupFacts | None,
    run_id: str | None,
    session_id: str | None,
    source_name: str,
) -> list[FindingRecorded]:
    """The SGLang parser's findings that apply (``default-moe-config``, ``capacity-reduced``)
    plus ``flag-not-in-effect`` for each requested arg a warning says was switched off;
    every finding's engine is ``vllm``."""
    found = derive_findings(
        parsed.facts,
        host=host,
        previous=previous,
        run_id=run_id,
        session_id=session_id,
        source_name=source_name,
    )
    found = [f for f in found if f.kind in ("default-moe-config", "capacity-reduced")]
    for name, line in parsed.overridden.items():
        try:
            flag = normalize_flag(name)
        except ValueError:
            continue
        value = parsed.facts.server_args.get(name)
        found.append(
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                basis="log",
                message=f"--{flag} {value!r} was requested, but vLLM warned: {line.message.strip()[:200]}",
                server_run_id=run_id,
                session_id=session_id,
                evidence=[
                    Evidence(kind="log", ref=f"{source_name}:{line.number}", text=line.raw[:300])
                ],
            )
        )
    version = (host.engine_version if host else None) or parsed.engine_version
    return [f.model_copy(update={"engine": "vllm", "engine_version": version}) for f in found]


__all__ = [
    "LOG_MARKERS",
    "VllmLogFacts",
    "is_vllm_log",
    "parse_vllm_log",
    "split_vllm_line",
    "to_startup_facts",
    "vllm_findings",
]
