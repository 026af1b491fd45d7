"""Read a vLLM server log (``vllm serve`` / ``python -m vllm.entrypoints.openai.api_server``).

Line format (vLLM's logger, ``vllm/logger.py``): ``LEVEL MM-DD HH:MM:SS [file.py:N] message``
(before 0.8: ``LEVEL MM-DD HH:MM:SS file.py:N] message``), after a process tag
``(APIServer pid=2102)``, ``(EngineCore_DP0 pid=2211)``, ``(Worker_TP0 pid=2290)``,
``(VllmWorkerProcess pid=..)`` when there is one. vLLM prefixes every line of a multi-line
message (a ``logger.exception`` traceback) with the same header; a process's bare stderr (an
uncaught traceback, ``warnings.warn``) gets the tag or nothing. uvicorn's own lines are
``INFO:     Application startup complete.``. Launchers' prefixes are ``lines``' business.

What it reads, into the same ``ServerLogFacts`` the SGLang reader fills (so the same findings
and ``StartupFacts`` come out):

- resolved args: ``non-default args: {...}`` (0.8+) or ``args: Namespace(...)`` (older);
- the engine version: ``vLLM API server version X`` or ``Initializing a V1 LLM engine (vX)``;
- the attention backend chosen: ``Using FLASH_ATTN attention backend ...``,
  ``Using Flash Attention backend on V1 engine.``, ``Using FlashInfer backend.``;
- CUDA graph capture sizes: ``"cudagraph_capture_sizes":[512,...]`` in the engine's config
  line (``cuda_graph_bs``), lowered by ``Capping cudagraph capture sizes from max 512 to 352``
  (the sizes above the cap are not captured), or none under eager mode (``enforce_eager``);
- KV cache capacity: ``GPU KV cache size: 1,205,376 tokens`` (``CPU KV cache size`` on the CPU
  engine; 0.6+) or ``# GPU blocks: N`` x the block size (older) -> ``kv_cache_tokens`` and
  ``max_total_num_tokens``; ``max_num_seqs`` (from the args) -> ``max_running_requests``;
  ``max_model_len`` -> ``context_len``; weight loading time;
- the fused-MoE config lookups: ``Using configuration from PATH for MoE layer.`` (found) and
  ``Using default MoE config. Performance might be sub-optimal! Config file not found at ['PATH']``
  (default; each rank logs it, one lookup is kept per file);
- readiness only from the engine's own words: "Starting vLLM (API) server on http://..." (its
  engine is up and its HTTP server starting), uvicorn's ``Application startup complete.``;
  startup facts alone (a KV cache size) are not readiness;
- speculative decoding's ``SpecDecoding metrics: Mean acceptance length: 2.50, ...``;
- the run's state and failure: ``failure.assess`` (tracebacks of any process, ``EngineCore
  encountered a fatal error``, ``EngineDeadError`` as a wrapper of the root cause above it,
  argparse's ``prog: error: unrecognized arguments``);
- warnings that switch a requested arg off (``disabl``/``not supported``/``overrid``/
  ``falling back``/``ignor`` on a line naming the arg) -> ``overridden``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ledger.input_files import BulkRun

from .bulk_lines import VllmBulk, numbered, vllm_take_run
from .failure import assess
from .kept_lines import ProcessKeptLines
from .lines import LogLine, Unwrapper, head_lines, inner_level, learned_lines, parse_stamp
from .sglang_facts import MoeConfigLine, ServerLogFacts, keep_warnings
from .sglang_lines import parse_server_args
from .sglang_overrides import OverrideLine

_LINE_RE = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d{2}-\d{2}) (?P<hms>\d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"\[?(?P<src>[\w./-]+\.py):(?P<lineno>\d+)\] ?(?P<msg>.*)$"
)
_PROC_PREFIX_RE = re.compile(r"^\((?P<proc>[\w.-]+)(?: rank=\d+)? pid=(?P<pid>\d+)\)\s?")
_VERSION_RE = re.compile(
    r"vLLM API server version (\S+)|Initializing an? (?:V\d )?LLM engine \(v([^)\s]+)\)|^version ([\d.]+\S*)$"
)
_ARGS_RE = re.compile(r"^(?:non-default args|args): (.+)$")
_ATTN_RE = re.compile(
    r"^Using (?:AttentionBackendEnum\.)?(?P<name>[\w .-]+?) (?:attention )?backend(?: on V1 engine| out of potential backends.*)?\.?$"
)
_MOE_BACKEND_RE = re.compile(r"MoE backend|Experts MoE backend", re.I)
_CG_RE = re.compile(r"""["']?cudagraph_capture_sizes["']?\s*[:=]\s*\[([\d,\s]*)\]""")
_CG_CAP_RE = re.compile(r"Capping cudagraph capture sizes from max (\d+) to (\d+)")
_KV_TOKENS_RE = re.compile(r"(?:GPU|CPU|XPU|TPU)? ?KV cache size: ([\d,]+) tokens")
_MAX_CONCURRENCY_RE = re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d,.]+)x")
_GPU_BLOCKS_RE = re.compile(r"# (?:GPU|CPU) blocks: (\d+)")
_MAX_LEN_RE = re.compile(r"Using max model len (\d+)")
_WEIGHTS_RE = re.compile(
    r"(?:Model loading took [\d.]+ GiB and|Loading weights took) ([\d.]+) seconds"
)
_MOE_FOUND_RE = re.compile(r"Using configuration from (\S+?\.json) for MoE layer")
_MOE_DEFAULT_RE = re.compile(
    r"Using default MoE config\..*?Config file not found at \[?'?(.+?\.json)"
)
_READY_RE = re.compile(
    r"^Application startup complete\.?$|^Uvicorn running on |^Starting vLLM (?:API )?server\b.* on https?://"
)
_SPEC_RE = re.compile(r"SpecDecoding metrics: .*?Mean acceptance length: ([\d.]+)")
_OVERRIDE_RE = re.compile(
    r"disabl|not supported|overrid|falling back|fall back|ignor|forcing", re.IGNORECASE
)

#: Markers that make a text file a vLLM server log (used by format detection).
LOG_MARKERS: tuple[str, ...] = (
    "non-default args:",
    "vLLM API server version",
    "LLM engine (v",
    "GPU KV cache size:",
    "CPU KV cache size:",
    "# GPU blocks:",
    "Starting vLLM API server",
    "Starting vLLM server",
    "Using default MoE config",
    "EngineCore failed to start",
    "Capping cudagraph capture sizes",
    "SpecDecoding metrics",
)


@dataclass
class VllmLogFacts:
    """What ``parse_vllm_log`` found: ``facts`` (the shared ``ServerLogFacts``), the
    ``engine_version``, the ``overridden`` args (arg name -> the warning line), the
    speculative decoding ``accept_lengths`` (one per ``SpecDecoding metrics`` line) and the
    ``cuda_graph_cap`` line when vLLM capped its capture sizes."""

    facts: ServerLogFacts
    engine_version: str | None = None
    overridden: dict[str, LogLine] = field(default_factory=dict)
    accept_lengths: list[float] = field(default_factory=list)
    #: the series' first line and its last with a time (what its trial reads of its lines)
    first_accept_line: LogLine | None = None
    last_accept_stamped: LogLine | None = None
    cuda_graph_cap: tuple[int, int, LogLine] | None = None
    #: Requests of ``max_model_len`` tokens the KV cache holds at once, as vLLM logs it on the
    #: KV cache line (the CPU build's one-line form; ``None`` otherwise).
    max_concurrency: float | None = None
    #: ``--speculative-config`` as vLLM parsed it (``None``: no speculative decoding).
    speculative_config: dict[str, object] | None = None


def split_vllm_line(
    number: int, raw: str, year: int = 1900, unwrapper: Unwrapper | None = None
) -> LogLine:
    """One raw line as a ``LogLine`` (timestamp without a year: vLLM prints none)."""
    if unwrapper is None:
        unwrapper = Unwrapper()
        unwrapper.learn([raw])
    outer = unwrapper.unwrap(raw)
    text = outer.text
    process = None
    if m := _PROC_PREFIX_RE.match(text):
        process, text = m.group("proc"), text[m.end() :]
    m = _LINE_RE.match(text)
    ranks = {"rank": outer.rank} if outer.rank is not None else {}
    if not m:
        level, message = inner_level(text)
        return LogLine(
            number,
            raw.rstrip("\r\n"),
            message if level else text,
            ranks=ranks,
            level=level or outer.level,
            wrapped=outer.wrapped,
            process=process,
        )
    try:
        stamp = parse_stamp(f"{year}-{m.group('md')} {m.group('hms')}")
    except ValueError:
        stamp = None
    return LogLine(
        number,
        raw.rstrip("\r\n"),
        m.group("msg"),
        timestamp=stamp,
        ranks=ranks,
        level=m.group("level"),
        wrapped=outer.wrapped,
        process=process,
    )


def is_vllm_log(text: str, scan_lines: int = 5000) -> bool:
    """True when some line has vLLM's ``LEVEL MM-DD HH:MM:SS [file.py:N]`` form and a vLLM marker."""
    for line in head_lines(text, scan_lines):
        if any(marker in line for marker in LOG_MARKERS) and _LINE_RE.search(line):
            return True
    return False


def is_ready_line(line: LogLine) -> bool:
    """vLLM's "Starting vLLM (API) server ... on http://..." or uvicorn's "Application startup
    complete." (see the module doc)."""
    return bool(_READY_RE.search(line.message.strip()))


class _Records:
    """The log record each line belongs to, per process: a new one at each header that differs
    from that process's last (vLLM repeats a record's header on each of its lines); a line
    without a header continues its process's record (or, untagged, the record before it)."""

    def __init__(self) -> None:
        self.current: dict[str | None, int] = {}
        self.header: dict[str | None, str] = {}
        self.last = 0

    def of(self, line: LogLine) -> int:
        """The record of ``line``, the next line of the log."""
        proc, raw = line.process, line.raw
        this = raw[: len(raw) - len(line.message)] if line.prefixed else None
        if this is not None and this != self.header.get(proc):
            self.current[proc], self.header[proc] = line.number, this
        elif this is None and line.level is not None:
            self.current[proc], self.header[proc] = (
                line.number,
                "",
            )  # uvicorn's "INFO:     ..." line
        elif proc not in self.current:
            self.current[proc] = self.last or line.number
        self.last = self.current[proc]
        return self.last


class _Reader:
    """The facts of the lines read so far (``parse_vllm_log`` feeds them in order)."""

    def __init__(self) -> None:
        self.out = VllmLogFacts(facts=ServerLogFacts())
        self.kv_blocks: tuple[int, LogLine] | None = None
        self.seen_moe: set[str] = set()

    def feed(self, line: LogLine, bare: bool) -> None:
        facts = self.out.facts
        if line.wrapped and line.prefixed:
            facts.wrapped_lines += 1
        if facts.pid is None and line.process and line.process.startswith("APIServer"):
            m = _PROC_PREFIX_RE.match(line.raw[line.raw.find("(") :])
            facts.pid = int(m.group("pid")) if m else None
        if is_ready_line(line) and not facts.ready:
            facts.ready, facts.ready_timestamp = True, facts.last_timestamp
            facts.evidence["ready"] = line
        if not line.prefixed and not (bare and line.message and not line.message[:1].isspace()):
            return
        facts.first_timestamp = facts.first_timestamp or line.timestamp
        facts.last_timestamp = line.timestamp
        self.kv_blocks = _read_line(self.out, line, self.seen_moe) or self.kv_blocks


def parse_vllm_log(raw_lines: Iterable[str], *, forward: bool = False) -> VllmLogFacts:
    """Facts of a vLLM log (see the module doc). Never raises on odd lines: they are skipped.

    ``forward``: the caller checked that the log runs forward (``lines.runs_backwards``): its
    lines are read one at a time, none held but what ``ProcessKeptLines`` keeps (a log read as a
    stream)."""
    unwrapper, raws = learned_lines(raw_lines, forward)
    kept = ProcessKeptLines(is_ready_line)
    records = _Records()
    reader = _Reader()
    # An excerpt pasted without vLLM's prefix: every line is read as a line of its own. Lines
    # before the first prefixed one wait until it says the log is not bare.
    held: list[LogLine] | None = []
    # a served log's bulk lines, read by their shape (``bulk_lines``)
    bulk = (
        VllmBulk(kept, lambda n, r: split_vllm_line(n, r, unwrapper=unwrapper), records, reader.out)
        if unwrapper.host is None
        else None
    )
    take_run: Callable[[int, BulkRun], int] = lambda n, run: (  # noqa: E731
        vllm_take_run(bulk, n, run, reader.out.facts) if held is None and bulk is not None else 0
    )
    for number, raw in numbered(raws, take_run):
        if held is None and bulk is not None and bulk.take(number, raw, reader.out.facts):
            continue
        line = split_vllm_line(number, raw, unwrapper=unwrapper)
        kept.add(line, records.of(line))
        if held is not None:
            if not line.prefixed:
                held.append(line)
                continue
            for early in held:
                reader.feed(early, False)
            held = None
        reader.feed(line, False)
    kept.close()
    if bulk is not None:
        bulk.accepts.close(reader.out)
    bare = held is not None
    for early in held or ():
        reader.feed(early, True)
    out, facts = reader.out, reader.out.facts
    facts.line_count = kept.count
    _settle(out, reader.kv_blocks)
    facts.outcome = assess(
        kept.lines,
        is_ready=is_ready_line,
        record_of=lambda x: kept.record[x.number],
        # the log's start is not in it: a paste of its tail
        excerpt=bare or not (facts.server_args or out.engine_version),
        bare=bare,
        tail=kept.tail,
        raw_at=kept.raw_at,
        line_count=kept.count,
    )
    facts.crash = facts.outcome.failure
    keep_warnings(facts)
    if not out.overridden:
        for line in facts.warnings:
            if _OVERRIDE_RE.search(line.message):
                _note_override(out, line)
    return out


def _read_line(out: VllmLogFacts, line: LogLine, seen_moe: set[str]) -> tuple[int, LogLine] | None:
    """Read one prefixed line into ``out``; returns ``(blocks, line)`` for a ``# GPU blocks`` line."""
    facts, msg = out.facts, line.message
    if line.level == "WARNING":
        facts.warnings.append(line)
    if (m := _ARGS_RE.match(msg)) and not facts.server_args:
        try:
            facts.server_args = parse_server_args(m.group(1))
            facts.evidence["server_args"] = line
        except ValueError:
            pass
        return None
    if (m := _VERSION_RE.search(msg.strip())) and out.engine_version is None:
        out.engine_version = m.group(1) or m.group(2) or m.group(3)
    if (m := _CG_RE.search(msg)) and facts.cuda_graph_bs is None:
        facts.cuda_graph_bs = sorted({int(x) for x in m.group(1).replace(" ", "").split(",") if x})
        facts.evidence["cuda_graph_bs"] = line
    if m := _CG_CAP_RE.search(msg):
        out.cuda_graph_cap = (int(m.group(1)), int(m.group(2)), line)
    if (
        (m := _ATTN_RE.match(msg))
        and facts.attention_backend is None
        and not _MOE_BACKEND_RE.search(msg)
    ):
        facts.attention_backend = m.group("name")
        facts.evidence["attention_backend"] = line
    if m := _KV_TOKENS_RE.search(msg):
        facts.kv_cache_tokens = int(m.group(1).replace(",", ""))
        facts.evidence["max_total_num_tokens"] = line
        if m := _MAX_CONCURRENCY_RE.search(msg):
            out.max_concurrency = float(m.group(1).replace(",", ""))
    if m := _MAX_LEN_RE.search(msg):
        facts.context_len = int(m.group(1))
    if (m := _WEIGHTS_RE.search(msg)) and facts.weight_load_s is None:
        facts.weight_load_s = float(m.group(1))
    for regex, status in ((_MOE_FOUND_RE, "found"), (_MOE_DEFAULT_RE, "default")):
        m = regex.search(msg)
        if m and m.group(1) not in seen_moe:
            seen_moe.add(m.group(1))
            facts.moe_configs.append(MoeConfigLine(line=line, status=status, path=m.group(1)))
    if m := _SPEC_RE.search(msg):
        out.accept_lengths.append(float(m.group(1)))
        out.first_accept_line = out.first_accept_line or line
        if line.timestamp is not None:
            out.last_accept_stamped = line
    if line.level == "WARNING" and _OVERRIDE_RE.search(msg):
        _note_override(out, line)
    if m := _GPU_BLOCKS_RE.search(msg):
        return int(m.group(1)), line
    return None


def _settle(out: VllmLogFacts, kv_blocks: tuple[int, LogLine] | None) -> None:
    """Facts that need the whole log: KV tokens from blocks, the args' limits, the capture
    sizes in effect after a cap."""
    facts = out.facts
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
    if out.cuda_graph_cap is not None:
        before, cap, line = out.cuda_graph_cap
        if facts.cuda_graph_bs:
            facts.cuda_graph_bs = [bs for bs in facts.cuda_graph_bs if bs <= cap]
        else:
            # the list itself is not in the log: what is known is its largest size
            facts.cuda_graph_bs = [cap]
        facts.evidence["cuda_graph_bs"] = line
        reason = re.search(r"to fit (.+?)(?:\. |\.?$)", line.message)
        facts.overrides.append(
            OverrideLine(
                line,
                "max-cudagraph-capture-size",
                cap,
                f"capped from {before}" + (f" to fit {reason.group(1)}" if reason else ""),
            )
        )
    if isinstance(args.get("speculative_config"), dict):
        out.speculative_config = args["speculative_config"]
    if args.get("enforce_eager") is True and facts.cuda_graph_bs is None:
        facts.cuda_graph_bs = []


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
