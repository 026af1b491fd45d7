"""Parse an SGLang server log into facts, and derive findings from them.

Shared by ``tuneledger import`` and the server runner, so it holds no store
code: it reads lines and returns plain data (``ServerLogFacts``) and events.

Formats (docs/engines.md; SGLang's own ``logger.info`` format strings, read
in its source and in public logs of 0.4.x to 0.5.23). ``LINE_SPELLINGS`` lists
every line this parser reads, with each spelling, the SGLang versions that print
it and an example (each example is a test); ``FLAG_NAMES`` lists the server args
whose name changed between versions.

- line prefix ``[YYYY-mm-dd HH:MM:SS{.mmm}{ TPn}{ DPn}{ EPn}{ PPn}] message``
  (``.mmm`` when ``SGLANG_LOG_MS`` is set); newer builds put
  ``LEVEL file.py:NNN: `` before the message. Lines without the prefix
  (tracebacks, tqdm bars, warnings.warn output) are kept for crash tails and
  traceback parsing but never break the parse.
- a host program that re-logs SGLang's output with its own prefix
  (``2025-03-07 23:50:27,531 - __main__ - INFO - [2025-03-07 23:50:27 TP0] ...``,
  docker compose's ``name  | ``, journald's ``Mar 07 23:50:27 host python[1]: ``)
  is unwrapped: the inner SGLang line is read; the host's own lines are kept as
  unprefixed lines.
- ``server_args=ServerArgs(k=v, ...)`` (dataclass repr, up to 0.5.14) or
  ``server_args={'k': v, ...}`` (dict repr, 0.5.23), both Python literal syntax.
- With tensor parallelism every rank prints its startup lines (``TP0``, ``TP1``,
  ... in any order): a fact counts once, from the first rank that printed it.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.engines.gpu_arch import compute_capability_for, is_sm90_or_sm10x
from schemas import Evidence, FindingRecorded, Host, SettingOverride, StartupFacts

#: How many trailing lines a crash report keeps.
TAIL_LINES = 20

_TS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
_RANKS = r"(?: [A-Z][A-Z_]*\d+)*"
_PREFIX_RE = re.compile(
    rf"^\[(?P<ts>{_TS})(?:[.,](?P<frac>\d{{1,6}}))?(?P<ranks>{_RANKS})\] ?(?P<msg>.*)$"
)
# A host program's own prefix before SGLang's: a time of day, a log level or a "name | " column,
# then SGLang's "[YYYY-mm-dd HH:MM:SS". Anything else before a "[" is not a wrapper.
_INNER_RE = re.compile(rf"\[{_TS}(?:[.,]\d{{1,6}})?{_RANKS}\] ")
_WRAP_CHAR = r"(?:[^\[]|\[\d+\])"  # no "[" but a pid's "[811]" (journald: "python[811]: ")
_WRAPPED_RE = re.compile(
    rf"^(?P<wrap>{_WRAP_CHAR}{{1,200}}?(?:\d{{1,2}}:\d{{2}}:\d{{2}}|\b(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b|\|)"
    rf"{_WRAP_CHAR}{{0,120}}?)(?P<inner>\[{_TS}(?:[.,]\d{{1,6}})?{_RANKS}\].*)$"
)
# Newer builds log "INFO server_args.py:1974: message"; strip it to get the message.
_LEVEL_RE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w./-]+\.py:\d+: ")
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)")

_ATTN_DEFAULT_RE = re.compile(
    r"Attention backend not (?:specified|set)\. Use (\S+?) backend by default"
)
_MLA_ATTN_RE = re.compile(r"MLA optimization is turned on\. Use (\S+?) backend")
_LOAD_WEIGHT_RE = re.compile(r"Load weight end\.(?: elapsed=([\d.]+) s)?")
_KV_RE = re.compile(r"KV Cache is allocated\.(?: dtype: [\w.]+,)?(?: #tokens: (\d+))?")
_KV_GB_RE = re.compile(r"\b(K|V|KV) size: ([\d.]+) ?GB")
_CG_BS_RE = re.compile(r"Capture cuda graph bs \[([\d,\s]*)\]")
# 0.5.23: "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=..."
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
_DEVICE_RE = re.compile(r"device_name=([^,/]+?)(?:_down)?(?:,|\.json)")
_EXC_RE = re.compile(
    r"^(?P<cls>(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|OutOfResources|Interrupt|Exit))(?::\s*(?P<msg>.*))?$"
)
_OOM_RE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory", re.IGNORECASE
)

# Lines that override a requested setting later in the startup (SGLang's server_args.py,
# model_runner.py and the KV cache configurator log these with the reason).
_CAPPED_RE = re.compile(
    r"^(?P<name>max_running_requests|max_total_num_tokens|cuda_graph_max_bs\w*) is capped to "
    r"(?P<value>-?\d+) by the (?P<reason>.+?)(?: \(.*\))?\.?$"
)
_AUTO_FLAG_RE = re.compile(
    r"^Automatically (?P<verb>reduce|increase|set|adjust|change|enable|disable|turn off) (?P<flag>--[\w-]+)(?P<rest>.*)$"
)
_TO_VALUE_RE = re.compile(r"^ to ([^\s,]+?)\.?(?:[\s,]|$)")
_REASON_RE = re.compile(r"\b(?:because|for|since|as) (.+?)\.?$")
_DISABLE_FLAG_RE = re.compile(r"^Disable (?P<flag>--[\w-]+) because (?P<reason>.+?)\.?$")
_IS_DISABLED_RE = re.compile(
    r"^(?P<what>[A-Z][\w .-]*?) (?:is|are) (?:disabled|turned off|not supported)(?: and will be turned off)?"
    r" (?:because|since|as|for|when) (?P<reason>.+?)\.?$"
)
#: The setting an "X is disabled because ..." line names, in CLI spelling (value once overridden).
_DISABLED_WHAT: dict[str, tuple[str, Any]] = {
    "overlap scheduler": ("disable-overlap-schedule", True),
    "overlap schedule": ("disable-overlap-schedule", True),
    "cuda graph": ("disable-cuda-graph", True),
    "mixed chunked prefill": ("enable-mixed-chunk", False),
    "mixed chunk": ("enable-mixed-chunk", False),
    "radix cache": ("disable-radix-cache", True),
    "chunked prefill": ("chunked-prefill-size", -1),
    "torch compile": ("enable-torch-compile", False),
    "two batch overlap": ("enable-two-batch-overlap", False),
}

#: Server args that switch piecewise CUDA graph off as a side effect (docs/engines.md).
_PIECEWISE_DISABLERS: tuple[tuple[str, Any], ...] = (
    ("enable_flashinfer_allreduce_fusion", True),
    ("enable_torch_compile", True),
    ("enable_dp_attention", True),
    ("enable_deterministic_inference", True),
)

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

#: Every line the views need, each spelling with the SGLang versions that print it and one
#: example (tests/engines/test_sglang_log.py parses each example). ``fact`` names the ``ServerLogFacts``
#: field it sets. Versions are those whose source or published logs show the spelling.
LINE_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    ("server_args", "<=0.5.14", "server_args=ServerArgs(model_path='/m', tp_size=2)"),
    ("server_args", "0.5.23", "server_args={'model_path': '/m', 'tp_size': 2}"),
    (
        "attention_backend",
        "0.4.x-0.5.3",
        "Attention backend not set. Use flashinfer backend by default.",
    ),
    (
        "attention_backend",
        "0.5.4-0.5.23",
        "Attention backend not specified. Use fa3 backend by default.",
    ),
    ("attention_backend", "0.4.x (MLA)", "MLA optimization is turned on. Use triton backend."),
    (
        "weight_load_s",
        "0.5.x",
        "Load weight end. elapsed=95.31 s, type=Qwen3MoeForCausalLM, avail mem=27.10 GB, mem usage=28.51 GB.",
    ),
    (
        "weights_loaded",
        "0.4.x-0.5.9",
        "Load weight end. type=Qwen2VLForConditionalGeneration, dtype=torch.bfloat16, avail mem=6.70 GB",
    ),
    (
        "kv_cache_tokens",
        "0.4.x-0.5.14",
        "KV Cache is allocated. #tokens: 394210, K size: 9.02 GB, V size: 9.02 GB",
    ),
    (
        "kv_cache_tokens",
        "0.5.23",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2980168, KV size: 31.83 GB",
    ),
    (
        "kv_cache_tokens",
        "0.5.23 (split K/V)",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 535124, K size: 16.33 GB, V size: 16.33 GB",
    ),
    ("kv_cache_gb", "0.4.x", "KV Cache is allocated. K size: 1.02 GB, V size: 1.02 GB."),
    ("cuda_graph_bs", "0.4.x-0.5.14", "Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]"),
    (
        "cuda_graph_bs",
        "0.5.23 (decode)",
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 12, 16, 24, 32], avail mem=7.10 GB",
    ),
    (
        "cuda_graph_bs",
        "0.5.23 (speculative: verify)",
        "Capture target verify CUDA graph begin. backend=full, num_tokens_per_bs=3, bs=[1, 2, 4, 8, 12, 16], avail mem=6.01 GB",
    ),
    (
        "cuda_graph_captured",
        "0.4.x-0.5.14",
        "Capture cuda graph end. Time elapsed: 13.41 s. mem usage=1.05 GB. avail mem=13.88 GB.",
    ),
    (
        "cuda_graph_captured",
        "0.5.23",
        "Capture target decode CUDA graph end. elapsed=0.89 s, mem usage=0.15 GB, avail mem=6.95 GB",
    ),
    (
        "piecewise_cuda_graph",
        "0.5.4-0.5.14",
        "Capture piecewise CUDA graph end. Time elapsed: 21.07 s. mem usage=0.69 GB. avail mem=11.98 GB.",
    ),
    (
        "piecewise_cuda_graph",
        "0.5.23 (prefill graph)",
        "Capture target prefill CUDA graph end. elapsed=3.83 s, mem usage=0.28 GB, avail mem=5.23 GB.",
    ),
    (
        "piecewise_disabled_reason",
        "0.5.4-0.5.23",
        "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set",
    ),
    (
        "piecewise_disabled_reason",
        "0.5.23",
        "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).",
    ),
    (
        "piecewise_disabled_reason",
        "0.5.23",
        "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph.",
    ),
    (
        "max_running_requests",
        "0.4.x-0.5.23",
        "max_total_num_tokens=2980168, chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=4096, context_len=32768, available_gpu_mem=6.95 GB",
    ),
    (
        "max_running_requests",
        "0.3.x-0.4.0",
        "max_total_num_tokens=412345, max_prefill_tokens=16384, max_running_requests=2049, context_len=32768",
    ),
    (
        "overrides",
        "0.5.x (mamba)",
        "max_running_requests is capped to 24 by the mamba state cache (max_mamba_cache_size=96, 4 state slots per request)",
    ),
    (
        "overrides",
        "0.4.x-0.5.23",
        "Automatically reduce --mem-fraction-static to 0.760 because this is a multimodal model.",
    ),
    (
        "overrides",
        "0.4.x",
        "Automatically turn off --chunked-prefill-size and disable radix cache for qwen2-vl.",
    ),
    (
        "overrides",
        "0.5.23",
        "Disable --flashinfer-allreduce-fusion-backend because deterministic inference is enabled.",
    ),
    (
        "overrides",
        "0.4.x-0.5.x",
        "Overlap scheduler is disabled because of using eagle speculative decoding.",
    ),
    (
        "flashinfer_fusion_disabled",
        "0.5.9-0.5.23",
        "Disabling flashinfer allreduce fusion permanently.",
    ),
    (
        "moe_configs",
        "0.4.x-0.5.23",
        "Using default MoE kernel config. Performance might be sub-optimal! Config file not found at /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100.json, you can create them with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton",
    ),
    (
        "moe_configs",
        "0.5.x (_down)",
        "Using MoE kernel config with down_moe=False. Performance might be sub-optimal! Config file not found at /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100_down.json, you can create them with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton",
    ),
    (
        "moe_configs",
        "0.4.x-0.5.23",
        "Using MoE kernel config from /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100.json.",
    ),
    (
        "moe_configs",
        "0.5.x",
        "Config file not found at /x/triton_3_5_1/E=512,N=128,device_name=NVIDIA_H100.json. Fallback to triton version 3.4.0 and use MoE kernel config from /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100.json. Performance might be sub-optimal!",
    ),
    ("ready", "0.2.x-0.5.23", "The server is fired up and ready to roll!"),
    (
        "decode_batches",
        "0.4.x-0.5.x",
        "Decode batch. #running-req: 3, #token: 120, token usage: 0.01, gen throughput (token/s): 55.10, #queue-req: 0, ",
    ),
    (
        "decode_batches",
        "0.5.x-0.5.23",
        "Decode batch, #running-req: 67, #token: 27310, token usage: 0.01, cuda graph: False, gen throughput (token/s): 1702.18, #queue-req: 0, ",
    ),
)

#: Server args whose name changed across SGLang versions: the setting, then each (arg name,
#: versions, meaning). A finding names the flag as the log's own version spells it.
FLAG_NAMES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "flashinfer allreduce fusion": (
        (
            "enable_flashinfer_allreduce_fusion",
            "0.4.x-0.5.14",
            "True turns the fusion on (0.5.23: deprecated alias, sets the backend to 'auto')",
        ),
        (
            "flashinfer_allreduce_fusion_backend",
            "0.5.23",
            "'auto' / 'trtllm' / 'mnnvl' turns it on; None off",
        ),
        (
            "enforce_disable_flashinfer_allreduce_fusion",
            "0.5.9-0.5.23",
            "True keeps it off whatever else says",
        ),
    ),
    "CUDA graph max batch size (decode)": (
        (
            "cuda_graph_max_bs",
            "0.4.x-0.5.14",
            "largest captured decode batch; 0.5.23: deprecated alias of cuda_graph_max_bs_decode",
        ),
        (
            "cuda_graph_max_bs_decode",
            "0.5.23",
            "largest captured decode batch (prefill has cuda_graph_max_bs_prefill)",
        ),
    ),
    "CUDA graph batch sizes (decode)": (
        ("cuda_graph_bs", "0.4.x-0.5.14", "the captured decode batch sizes"),
        ("cuda_graph_bs_decode", "0.5.23", "the captured decode batch sizes"),
    ),
    "piecewise / prefill CUDA graph": (
        ("enable_piecewise_cuda_graph", "0.5.3-0.5.7", "opt-in: off unless True"),
        ("disable_piecewise_cuda_graph", "0.5.8-0.5.23", "on by default; True turns it off"),
        (
            "cuda_graph_backend_prefill",
            "0.5.23",
            "'breakable' / 'tc_piecewise' / 'full' on, 'disabled' off",
        ),
    ),
}


#: Markers that make a text file an SGLang server log (used by format detection).
LOG_MARKERS: tuple[str, ...] = (
    "server_args=",
    "Load weight end",
    "KV Cache is allocated",
    "Capture cuda graph",
    "CUDA graph begin",
    "The server is fired up and ready to roll",
    "Decode batch",
    "Prefill batch",
    "Attention backend not specified",
    "Attention backend not set",
    "Scheduler hit an exception",
    "max_total_num_tokens=",
)


class LogFormatError(ValueError):
    """A line that has SGLang's shape but a value that cannot be (``Feb 30``, hour 24, year 0, a
    ``pp_size`` given as a string, ``max_running_requests=0``).

    ``line`` is the 1-based line number, ``field`` the name of the value; ``str()`` is
    ``line N: field F: problem``. Raised only by ``parse_server_log(..., strict=True)``.
    """

    def __init__(self, line: int, field: str, problem: str) -> None:
        super().__init__(f"line {line}: field {field}: {problem}")
        self.line, self.field, self.problem = line, field, problem


@dataclass(frozen=True)
class LogLine:
    """One line of the log: 1-based ``number``, the ``raw`` text, and the parsed prefix.

    ``timestamp`` is naive local time as SGLang prints it; ``ranks`` maps
    ``TP``/``DP``/``EP``/``PP`` to the rank number; ``message`` is the text after
    the prefix (and after ``LEVEL file.py:N:`` in newer builds), or the raw text
    for a line without the prefix. ``wrapped``: the line came inside a host
    program's own log line (its prefix removed).
    """

    number: int
    raw: str
    message: str
    timestamp: datetime | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    level: str | None = None
    wrapped: bool = False  # re-logged by a host program whose own prefix was taken off

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
    traceback: list[str] = field(
        default_factory=list
    )  # the lines from the crash's first line on (<= 400)


@dataclass(frozen=True)
class OverrideLine:
    """A later line that changed a requested setting: ``flag`` (CLI spelling, no dashes, or
    ``None``), the ``effective`` value when the line states one, the ``reason``, and the line."""

    line: LogLine
    flag: str | None
    effective: Any = None
    reason: str | None = None
    implied: bool = False  # no line of its own: read from the resolved limits (no finding)


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
    decode_batches: list[BatchLine] = field(default_factory=list)
    prefill_batches: list[BatchLine] = field(default_factory=list)
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

    @property
    def cuda_graph_max_bs_flag(self) -> str:
        """The CLI flag for the largest captured decode batch, as this log's SGLang version spells it."""
        if self.phase_graphs or "cuda_graph_max_bs_decode" in self.server_args:
            return "--cuda-graph-max-bs-decode"
        return "--cuda-graph-max-bs"

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
                    requested=_jsonable(self.server_args.get(o.flag.replace("-", "_")))
                    if o.flag
                    else None,
                    effective=_jsonable(o.effective),
                    reason=o.reason,
                    source=f"{source_name}:{o.line.number}"
                    if source_name
                    else f"line {o.line.number}",
                )
                for o in self.overrides
            ],
        )


# --- line level -------------------------------------------------------------------


def split_line(number: int, raw: str, *, strict: bool = False) -> LogLine:
    """Split one raw line into prefix parts and message (see the module doc for the format).

    A line re-logged by a host program is unwrapped (``wrapped`` is then True).
    A prefix whose date or time cannot be (Feb 30, hour 24, year 0) makes the line
    an unprefixed one, or with ``strict`` raises ``LogFormatError`` naming the line.
    """
    text = raw.rstrip("\r\n")
    match = _PREFIX_RE.match(text)
    wrapped = False
    if not match and "[" in text:
        outer = _WRAPPED_RE.match(text)
        if outer:
            match, wrapped = _PREFIX_RE.match(outer.group("inner")), True
        elif (inner := _INNER_RE.search(text)) and text[: inner.start()].rstrip().endswith("]"):
            # a progress bar's last frame glued to the next log line ("... 5.58it/s][2026-...] ...")
            match = _PREFIX_RE.match(text[inner.start() :])
    if not match:
        return LogLine(number=number, raw=text, message=text.strip())
    try:
        stamp = datetime.strptime(match.group("ts"), "%Y-%m-%d %H:%M:%S")
    except ValueError as exc:
        if strict:
            raise LogFormatError(
                number, "timestamp", f"{match.group('ts')!r} is not a date and time ({exc})"
            ) from None
        return LogLine(number=number, raw=text, message=text.strip())
    if match.group("frac"):
        frac = match.group("frac")
        stamp = stamp.replace(microsecond=int(frac.ljust(6, "0")))
    ranks = {kind: int(n) for kind, n in _RANK_RE.findall(match.group("ranks"))}
    message = match.group("msg")
    level = None
    level_match = _LEVEL_RE.match(message)
    if level_match:
        level = level_match.group("level")
        message = message[level_match.end() :]
    return LogLine(
        number=number,
        raw=text,
        message=message,
        timestamp=stamp,
        ranks=ranks,
        level=level,
        wrapped=wrapped,
    )


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
        for key, value in zip(tree.keys, tree.values, strict=True):
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
        body, sep = text[len("ServerArgs(") : -1], "="
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


def parse_server_log(lines: Iterable[str], *, strict: bool = False) -> ServerLogFacts:
    """Read an SGLang server log (an iterable of lines, newlines optional) into facts.

    Startup lines logged once per rank (``TP0`` .. ``TPn``, in any order) count once
    (the first rank's). Unknown lines are skipped. Lines that override a requested
    setting (``... is capped to N by ...``, ``Automatically reduce --flag to X because
    ...``, ``Disable --flag because ...``, ``X is disabled because ...``) are kept in
    ``overrides``, as are limits below what the args asked for.

    With ``strict`` (imports), a line of SGLang's shape whose value cannot be
    raises ``LogFormatError`` (line and field): an impossible timestamp, a server arg
    of the wrong type (``pp_size='2'``), a limit of 0 or less. Without it (the runner,
    reading a live log) such lines are skipped and it never raises.
    """
    facts = ServerLogFacts()
    all_lines: list[LogLine] = []
    piecewise_begin = piecewise_end = False
    crash_start: LogLine | None = None
    seen_moe: set[tuple[str, str]] = set()
    seen_overrides: set[tuple[str | None, str]] = set()
    for number, raw in enumerate(lines, start=1):
        line = split_line(number, raw, strict=strict)
        all_lines.append(line)
        if (
            strict
            and not line.prefixed
            and (inner := _INNER_RE.search(line.raw))
            and inner.start() > 0
        ):
            # SGLang's lines inside a host program's prefix this parser does not know: refuse the
            # log rather than read the part of it that happens to be bare.
            raise LogFormatError(
                number,
                "line prefix",
                f"SGLang line after an unrecognised prefix "
                f"{line.raw[: inner.start()].strip()[:60]!r}; not read in part",
            )
        if line.wrapped:
            facts.wrapped_lines += 1
        if line.timestamp:
            facts.last_timestamp = line.timestamp
            if facts.first_timestamp is None:
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
                facts.server_args = parse_server_args(msg[len("server_args=") :])
                facts.evidence["server_args"] = line
            except ValueError:
                pass
            else:
                _check_args(facts.server_args, line, strict)
        elif m := (_ATTN_DEFAULT_RE.search(msg) or _MLA_ATTN_RE.search(msg)):
            if facts.attention_backend is None:
                facts.attention_backend = m.group(1)
                facts.evidence["attention_backend"] = line
        elif m := _LOAD_WEIGHT_RE.search(msg):
            if "weights_loaded" not in facts.evidence:
                facts.evidence["weights_loaded"] = line
                if m.group(1):
                    facts.weight_load_s = float(m.group(1))
                    facts.evidence["weight_load_s"] = line
        elif msg.startswith("KV Cache is allocated"):
            _read_kv(facts, msg, line)
        elif m := _CG_BS_RE.search(msg):
            if facts.cuda_graph_bs is None:
                facts.cuda_graph_bs = _int_list(m.group(1))
                facts.evidence["cuda_graph_bs"] = line
        elif m := _CG_PHASE_RE.search(msg):
            piecewise_begin, piecewise_end = _read_phase_capture(
                facts, m, msg, line, piecewise_begin, piecewise_end
            )
        elif msg.startswith("Capture cuda graph end"):
            facts.cuda_graph_captured = True
            facts.evidence.setdefault("cuda_graph_end", line)
        elif msg.startswith("Capture piecewise CUDA graph begin"):
            piecewise_begin = True
        elif msg.startswith("Capture piecewise CUDA graph end"):
            piecewise_end = True
            facts.evidence["piecewise_cuda_graph"] = line
        elif m := (
            _PIECEWISE_DISABLE_RE.search(msg) or _first_match(_PREFILL_GRAPH_DISABLE_RES, msg)
        ):
            if facts.piecewise_disabled_reason is None:
                facts.piecewise_disabled_reason = m.group(1)
                facts.evidence["piecewise_cuda_graph"] = line
                facts.warnings.append(line)
        elif _LIMITS_RE.search(msg):
            if facts.max_total_num_tokens is None:
                _read_limits(facts, msg, line, strict)
        elif "MoE kernel config" in msg or "Config file not found at" in msg:
            moe = _moe_line(line)
            if moe is not None and (moe.status, moe.path) not in seen_moe:
                seen_moe.add((moe.status, moe.path))
                facts.moe_configs.append(moe)
        elif "The server is fired up and ready to roll" in msg:
            if not facts.ready:
                facts.ready = True
                facts.ready_timestamp = line.timestamp
                facts.evidence["ready"] = line
        elif msg.startswith(("Decode batch.", "Decode batch,")):
            facts.decode_batches.append(
                BatchLine(line, "decode", parse_batch_fields(msg[len("Decode batch.") :]))
            )
        elif msg.startswith(("Prefill batch.", "Prefill batch,")):
            facts.prefill_batches.append(
                BatchLine(line, "prefill", parse_batch_fields(msg[len("Prefill batch.") :]))
            )
        elif "Disabling flashinfer allreduce fusion permanently" in msg:
            if facts.flashinfer_fusion_disabled is None:
                facts.flashinfer_fusion_disabled = line
                facts.warnings.append(line)
        elif (m := _PID_RE.search(msg)) and facts.pid is None:
            facts.pid = int(m.group(1))
        elif override := _override_line(line):
            key = (override.flag, msg)
            if key not in seen_overrides:
                seen_overrides.add(key)
                facts.overrides.append(override)
                facts.warnings.append(line)
        elif line.level == "WARNING" or "deprecated" in msg.lower():
            facts.warnings.append(line)
    facts.line_count = len(all_lines)
    if facts.attention_backend is None and isinstance(
        facts.server_args.get("attention_backend"), str
    ):
        facts.attention_backend = facts.server_args["attention_backend"]
        if "server_args" in facts.evidence:
            facts.evidence["attention_backend"] = facts.evidence["server_args"]
    _settle_piecewise(facts, piecewise_begin, piecewise_end)
    _implied_overrides(facts)
    if crash_start is not None:
        facts.crash = _crash_info(all_lines, crash_start)
    return facts


def _first_match(patterns: Iterable[re.Pattern[str]], text: str) -> re.Match[str] | None:
    for pattern in patterns:
        if m := pattern.search(text):
            return m
    return None


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


def _read_kv(facts: ServerLogFacts, msg: str, line: LogLine) -> None:
    """``KV Cache is allocated.`` in its spellings (``#tokens`` since 0.4.x, ``dtype:`` in 0.5.23,
    ``KV size`` or ``K size``/``V size``); sizes in GB are summed."""
    if "kv_cache" in facts.evidence:
        return
    facts.evidence["kv_cache"] = line
    m = _KV_RE.search(msg)
    if m and m.group(1):
        facts.kv_cache_tokens = int(m.group(1))
        facts.evidence["kv_cache_tokens"] = line
    sizes = [float(gb) for _, gb in _KV_GB_RE.findall(msg)]
    if sizes:
        facts.kv_cache_gb = round(sum(sizes), 3)


def _read_phase_capture(
    facts: ServerLogFacts, m: re.Match[str], msg: str, line: LogLine, pw_begin: bool, pw_end: bool
) -> tuple[bool, bool]:
    """0.5.23's per-phase capture lines. The decode batch sizes are the target's ``decode`` phase,
    or its ``verify`` phase under speculative decoding (its decode step is a verify step);
    the target's ``prefill`` phase is what older versions called piecewise CUDA graph."""
    facts.phase_graphs = True
    who, phase, edge = m.group("who"), m.group("phase"), m.group("edge")
    if who != "target":
        return pw_begin, pw_end
    if phase in ("decode", "verify"):
        if edge == "begin":
            bs = _BS_LIST_RE.search(msg)
            backend = _BACKEND_RE.search(msg)
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
            pw_begin = True
        else:
            pw_end = True
            facts.evidence["piecewise_cuda_graph"] = line
    return pw_begin, pw_end


def _override_line(line: LogLine) -> OverrideLine | None:
    """The setting a later startup line overrides, in its spellings (see ``LINE_SPELLINGS``)."""
    msg = line.message.strip()
    if m := _CAPPED_RE.match(msg):
        return OverrideLine(
            line,
            m.group("name").replace("_", "-"),
            int(m.group("value")),
            f"capped by the {m.group('reason')}",
        )
    if m := _AUTO_FLAG_RE.match(msg):
        flag, rest = m.group("flag").lstrip("-"), m.group("rest")
        value = _TO_VALUE_RE.match(rest)
        effective: Any = _scalar(value.group(1)) if value else None
        reason = _REASON_RE.search(rest) if "because" in rest else None
        return OverrideLine(
            line, flag, effective, reason.group(1) if reason else f"SGLang: {msg.rstrip('.')}"
        )
    if m := _DISABLE_FLAG_RE.match(msg):
        return OverrideLine(line, m.group("flag").lstrip("-"), None, m.group("reason"))
    if m := _IS_DISABLED_RE.match(msg):
        what = m.group("what").strip().lower()
        if what.startswith(("piecewise", "prefill")):
            return None  # read as the piecewise / prefill CUDA graph fact
        flag, effective = _DISABLED_WHAT.get(what, (None, None))
        return OverrideLine(line, flag, effective, m.group("reason"))
    return None


def _implied_overrides(facts: ServerLogFacts) -> None:
    """Requested values the resolved limits undercut without a line of their own: a
    ``max_running_requests`` above the one the limits line shows, a CUDA graph max batch size
    above the largest captured one."""
    args = facts.server_args
    named = {o.flag for o in facts.overrides}
    asked = args.get("max_running_requests")
    if (
        isinstance(asked, int)
        and facts.max_running_requests is not None
        and facts.max_running_requests < asked
        and "max-running-requests" not in named
    ):
        facts.overrides.append(
            OverrideLine(
                facts.evidence["max_running_requests"],
                "max-running-requests",
                facts.max_running_requests,
                "lowered at startup (the KV cache or another pool holds fewer requests)",
                implied=True,
            )
        )
    if facts.cuda_graph_bs:
        for name in ("cuda_graph_max_bs_decode", "cuda_graph_max_bs"):
            asked = args.get(name)
            if (
                isinstance(asked, int)
                and max(facts.cuda_graph_bs) < asked
                and name.replace("_", "-") not in named
            ):
                facts.overrides.append(
                    OverrideLine(
                        facts.evidence["cuda_graph_bs"],
                        name.replace("_", "-"),
                        max(facts.cuda_graph_bs),
                        "capped at startup (captured batch sizes stop lower, e.g. at max_running_requests)",
                        implied=True,
                    )
                )
                break


def _read_limits(facts: ServerLogFacts, msg: str, line: LogLine, strict: bool = False) -> None:
    values = dict(_KV_PAIR_RE.findall(msg))
    for name in (
        "max_total_num_tokens",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "max_running_requests",
        "context_len",
    ):
        if name in values:
            try:
                value = int(values[name])
            except ValueError:
                if strict:
                    raise LogFormatError(
                        line.number, name, f"expected an integer, got {values[name]!r}"
                    ) from None
                continue
            if name in _POSITIVE_LIMITS and value <= 0:
                if strict:
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


def _moe_line(line: LogLine) -> MoeConfigLine | None:
    msg = line.message
    if m := _MOE_FALLBACK_RE.search(msg):
        return MoeConfigLine(
            line, "fallback", m.group(1), fallback_path=m.group(3), fallback_triton=m.group(2)
        )
    if m := _MOE_DEFAULT_RE.search(msg):
        return MoeConfigLine(line, "default", m.group(1))
    if m := _MOE_FOUND_RE.search(msg):
        return MoeConfigLine(line, "found", m.group(1))
    return None


def _settle_piecewise(facts: ServerLogFacts, begin: bool, end: bool) -> None:
    """Piecewise (0.5.23: prefill) CUDA graph is switched off silently: no capture lines after the
    decode CUDA graph capture finished means off (docs/engines.md); a "Disable ... because"
    line says so and why. Before the decode capture ends (a crash, a truncated log) it is unknown."""
    if end:  # its end line (a begin without end: the capture did not finish)
        facts.piecewise_cuda_graph = True
    elif facts.piecewise_disabled_reason is not None:
        facts.piecewise_cuda_graph = False
    elif not begin and facts.cuda_graph_captured and not facts.phase_graphs:
        # 0.5.23 logs "Disable prefill CUDA graph because ..." whenever it is off: there,
        # silence means an excerpt, not off.
        facts.piecewise_cuda_graph = False
        if facts.server_args.get("disable_piecewise_cuda_graph") is True:
            facts.piecewise_disabled_reason = "disable_piecewise_cuda_graph=True in server_args"
        elif facts.server_args.get("cuda_graph_backend_prefill") == "disabled":
            facts.piecewise_disabled_reason = "cuda_graph_backend_prefill='disabled' in server_args"


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    parts = re.findall(r"\d+", version.split("+")[0])[:3]
    return tuple(int(p) for p in parts) if parts else None


#: First SGLang release with piecewise CUDA graph on by default (sgl-project/sglang PR #16331,
#: merged 2026-01-03, replaced --enable-piecewise-cuda-graph by --disable-piecewise-cuda-graph).
PIECEWISE_DEFAULT_ON_SINCE = (0, 5, 8)


def piecewise_on_by_default(
    facts: ServerLogFacts, engine_version: str | None = None
) -> bool | None:
    """Whether this log's SGLang version captures piecewise (prefill) CUDA graphs unless told not to.

    Read from the server args' own names first (``FLAG_NAMES``): ``disable_piecewise_cuda_graph``
    or ``cuda_graph_backend_prefill`` (or 0.5.23's per-phase capture lines) mean on by default;
    only ``enable_piecewise_cuda_graph`` means opt-in. Else from ``engine_version`` against
    ``PIECEWISE_DEFAULT_ON_SINCE``; ``None`` when neither tells.
    """
    args = facts.server_args
    if (
        "disable_piecewise_cuda_graph" in args
        or "cuda_graph_backend_prefill" in args
        or facts.phase_graphs
    ):
        return True
    if "enable_piecewise_cuda_graph" in args:
        return False
    version = _version_tuple(engine_version)
    return None if version is None else version >= PIECEWISE_DEFAULT_ON_SINCE


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
    for line in lines[start.number - 1 :]:
        text = line.raw.strip() if not line.prefixed else line.message.strip()
        if _EXC_RE.match(text):
            message, where = text, line
            break
    if message is None:
        message = start.message.strip()
    oom = any(_OOM_RE.search(line.raw) for line in lines[start.number - 1 :])
    tail = [line.raw for line in lines[-TAIL_LINES:]]
    trace = [line.raw for line in lines[start.number - 1 : start.number + 399]]
    return CrashInfo(
        cause="out-of-memory" if oom else "crash",
        message=message,
        line=where,
        tail=tail,
        traceback=trace,
    )


def looks_like_server_log(text: str, scan_lines: int = 5000) -> bool:
    """True when some line (of the first ``scan_lines``) is an SGLang line, bare or re-logged by a
    host program (see ``split_line``), carrying an SGLang startup/run marker (``LOG_MARKERS``)."""
    for number, raw in enumerate(text.splitlines()):
        if number >= scan_lines:
            break
        # the prefix's shape only: a line with an impossible date is still SGLang's, and refused later
        if (
            "[" in raw
            and any(marker in raw for marker in LOG_MARKERS)
            and (_PREFIX_RE.match(raw) or _WRAPPED_RE.match(raw))
        ):
            return True
    return False


# --- findings ------------------------------------------------------------------------


def _ref(source_name: str, line: LogLine) -> str:
    return f"{source_name}:{line.number}"


def _evidence(source_name: str, line: LogLine | None, text: str | None = None) -> list[Evidence]:
    if line is None:
        return []
    shown = (
        text if text is not None else (line.raw if len(line.raw) <= 300 else line.raw[:297] + "...")
    )
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

    Kinds: ``crash`` with verdict ``incompatible`` (a feature the args turned on is
    where the crash happened: see ``CRASH_CULPRITS``), ``flag-not-in-effect``
    (flashinfer allreduce fusion asked for, in either spelling, but not on an
    SM90/SM10X multi-GPU setup or disabled at run time; a requested setting a later
    line overrode), ``piecewise-cuda-graph-off`` (only where that version has it on
    by default, with its evidence), ``default-moe-config`` (one per missing file),
    ``decode-without-cuda-graph`` (decode batches larger than the largest captured
    batch size ran eager) and ``capacity-reduced`` (against ``previous``, the startup
    facts of the run compared with). One finding per fact, however many ranks
    printed it. Evidence refs are ``source_name:line``. Never raises.
    """
    engine_version = host.engine_version if host else None
    common = dict(
        basis="log",
        server_run_id=run_id,
        session_id=session_id,
        engine="sglang",
        engine_version=engine_version,
    )
    found: list[FindingRecorded] = []
    crashed = _crash_culprits(facts, host, source_name)
    found += crashed
    if not any(f.flag in _FUSION_FLAGS for f in crashed):
        found += _flashinfer_fusion(facts, host, source_name)
    found += _piecewise(facts, engine_version, source_name)
    found += _default_moe(facts, source_name)
    found += _decode_eager(facts, source_name)
    found += _capacity(facts, previous, source_name)
    found += _overridden(facts, source_name)
    unique: dict[tuple[str, str | None, str], FindingRecorded] = {}
    for f in found:
        unique.setdefault((f.kind, f.flag, f.message), f)
    return [f.model_copy(update=common) for f in unique.values()]


_FUSION_FLAGS = ("enable-flashinfer-allreduce-fusion", "flashinfer-allreduce-fusion-backend")


def fusion_requested(args: dict[str, Any]) -> tuple[str, Any] | None:
    """The server arg that turns flashinfer allreduce fusion on, in the log's own spelling
    (``FLAG_NAMES``): ``("enable_flashinfer_allreduce_fusion", True)`` up to 0.5.14,
    ``("flashinfer_allreduce_fusion_backend", 'auto')`` in 0.5.23; ``None`` when off or
    ``enforce_disable_flashinfer_allreduce_fusion`` is set."""
    if args.get("enforce_disable_flashinfer_allreduce_fusion") is True:
        return None
    backend = args.get("flashinfer_allreduce_fusion_backend")
    if isinstance(backend, str) and backend.lower() not in ("none", "", "disabled"):
        return "flashinfer_allreduce_fusion_backend", backend
    if args.get("enable_flashinfer_allreduce_fusion") is True:
        return "enable_flashinfer_allreduce_fusion", True
    return None


def _flashinfer_fusion(facts: ServerLogFacts, host: Host | None, src: str) -> list[FindingRecorded]:
    requested = fusion_requested(facts.server_args)
    if requested is None:
        return []
    name, value = requested
    flag = name.replace("_", "-")
    shown = f"--{flag}" if value is True else f"--{flag} {value}"
    evidence = _arg_evidence(facts, src, name)
    if facts.flashinfer_fusion_disabled is not None:
        return [
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                message=f"{shown} is set, but SGLang logged "
                "'Disabling flashinfer allreduce fusion permanently.' (its workspace failed); server_args still say it is on",
                evidence=evidence + _evidence(src, facts.flashinfer_fusion_disabled),
            )
        ]
    arch, gpu = resolve_arch(facts, host)
    if arch is not None and not is_sm90_or_sm10x(arch):
        moe_line = (
            facts.moe_configs[0].line
            if facts.moe_configs and not (host and host.gpu_name)
            else None
        )
        return [
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                message=f"{shown} has no effect on {arch} ({gpu or 'this GPU'}): "
                "SGLang's flashinfer allreduce fusion runs only on SM90 or SM10X",
                evidence=evidence + _evidence(src, moe_line),
            )
        ]
    if facts.server_args.get("tp_size") == 1:
        return [
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                message=f"{shown} has no effect with tp_size=1 (no all-reduce to fuse)",
                evidence=evidence + _arg_evidence(facts, src, "tp_size"),
            )
        ]
    return []


#: Features that crash the server where they run: (what turns it on, words of the traceback
#: that put the crash inside it). A crash with such words while the feature is on makes the
#: feature ``incompatible`` on that arch (not ``not-activated``: it was active, and it crashed).
#: Sources: sgl-project/sglang#15650 (flashinfer TRT allreduce fusion JIT on SM120),
#: #24633 (trtllm_mla prefill, TllmGenFmhaRunner), #12178 (fa3 asserts SM80-90).
CRASH_CULPRITS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "flashinfer allreduce fusion",
        (
            "flashinfer/jit/comm.py",
            "gen_trtllm_comm_module",
            "flashinfer_comm_fusion",
            "trtllm_allreduce",
            "allreduce_fusion",
        ),
    ),
    (
        "attention backend",
        (
            "_backend.py",
            "TllmGenFmhaRunner",
            "FlashAttention v3 Backend requires",
            "attention_registry.py",
        ),
    ),
)


def _crash_culprits(facts: ServerLogFacts, host: Host | None, src: str) -> list[FindingRecorded]:
    crash = facts.crash
    if crash is None:
        return []
    text = "\n".join([*crash.traceback, *crash.tail, crash.message])
    arch, gpu = resolve_arch(facts, host)
    where = f" on {arch} ({gpu})" if arch and gpu else (f" on {arch}" if arch else "")
    out = []
    fusion = fusion_requested(facts.server_args)
    if fusion is not None and any(w in text for w in CRASH_CULPRITS[0][1]):
        name, value = fusion
        flag = name.replace("_", "-")
        shown = f"--{flag}" if value is True else f"--{flag} {value}"
        out.append(
            FindingRecorded(
                kind="crash",
                flag=flag,
                value=None if value is True else str(value),
                verdict="incompatible",
                message=f"{shown} crashed the server{where}: it was active and its kernel failed ({crash.message})",
                evidence=_arg_evidence(facts, src, name) + _evidence(src, crash.line),
            )
        )
    backend = facts.attention_backend
    if backend and any(w in text for w in CRASH_CULPRITS[1][1]) and _names_backend(text, backend):
        out.append(
            FindingRecorded(
                kind="crash",
                flag="attention-backend",
                value=backend,
                verdict="incompatible",
                message=f"attention backend {backend} crashed the server{where} ({crash.message})",
                evidence=_evidence(src, facts.evidence.get("attention_backend"))
                + _evidence(src, crash.line),
            )
        )
    return out


def _names_backend(text: str, backend: str) -> bool:
    """Whether a traceback points at ``backend``'s own code (``trtllm_mla_backend.py``, TRT-LLM's
    FMHA runner for a ``trtllm*`` backend, FlashAttention v3's assertion for ``fa3``)."""
    lowered = text.lower()
    if f"{backend.lower()}_backend.py" in lowered:
        return True
    if backend.startswith("trtllm") and "tllmgenfmharunner" in lowered:
        return True
    return backend == "fa3" and "flashattention v3 backend requires" in lowered


def _piecewise(
    facts: ServerLogFacts, engine_version: str | None, src: str
) -> list[FindingRecorded]:
    """Piecewise CUDA graph off, only where this version has it on by default (or the args asked
    for it) and only with evidence: the line that disabled it, the arg, or the decode capture
    that ended without a piecewise capture."""
    if facts.piecewise_cuda_graph is not False:
        return []
    args = facts.server_args
    if not (
        piecewise_on_by_default(facts, engine_version)
        or args.get("enable_piecewise_cuda_graph") is True
    ):
        return []
    name = "prefill CUDA graph" if facts.phase_graphs else "piecewise CUDA graph"
    parts = [f"{name} is off (the decode CUDA graph capture ended without a {name} capture)"]
    evidence: list[Evidence] = []
    if facts.piecewise_disabled_reason and "piecewise_cuda_graph" in facts.evidence:
        parts = [f"{name} is off: {facts.piecewise_disabled_reason}"]
        evidence += _evidence(src, facts.evidence["piecewise_cuda_graph"])
    if args.get("disable_piecewise_cuda_graph") is True:
        parts = [f"{name} is off: server_args has disable_piecewise_cuda_graph=True"]
        evidence += _arg_evidence(facts, src, "disable_piecewise_cuda_graph")
    disablers = [name for name, value in _PIECEWISE_DISABLERS if args.get(name) is value]
    pp = args.get("pp_size")
    if isinstance(pp, int) and not isinstance(pp, bool) and pp > 1:
        disablers.append("pp_size>1")
    if disablers:
        parts.append(f"while {', '.join(disablers)} is on (it switches piecewise CUDA graph off)")
        for arg in disablers:
            if arg in args:
                evidence += _arg_evidence(facts, src, arg)
    if not evidence:
        evidence += _evidence(src, facts.evidence.get("cuda_graph_end"))
    if not evidence:
        return []
    return [
        FindingRecorded(kind="piecewise-cuda-graph-off", message=" ".join(parts), evidence=evidence)
    ]


def _default_moe(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    out = []
    for moe in facts.moe_configs:
        if moe.status == "default":
            name = moe.path.rsplit("/", 1)[-1]
            out.append(
                FindingRecorded(
                    kind="default-moe-config",
                    message=f"default fused-MoE kernel config in use: no tuned file {name}",
                    evidence=_evidence(src, moe.line),
                )
            )
        elif moe.status == "fallback":
            name = moe.path.rsplit("/", 1)[-1]
            out.append(
                FindingRecorded(
                    kind="default-moe-config",
                    message=f"fused-MoE kernel config from another Triton version ({moe.fallback_triton}): no file {name} "
                    "for this Triton version",
                    evidence=_evidence(src, moe.line),
                )
            )
    return out


def _decode_eager(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    if not facts.cuda_graph_bs:
        return []
    largest = max(facts.cuda_graph_bs)
    eager = [
        b for b in facts.decode_batches if b.cuda_graph is False and (b.running_req or 0) > largest
    ]
    if not eager:
        return []
    peak = max(b.running_req or 0 for b in eager)
    evidence = _evidence(src, facts.evidence.get("cuda_graph_bs"))
    for batch in eager[:3]:
        evidence += _evidence(src, batch.line)
    return [
        FindingRecorded(
            kind="decode-without-cuda-graph",
            message=f"{len(eager)} decode batch line(s) ran without CUDA graph at #running-req up to {peak}, "
            f"above the largest captured batch size {largest} (see {facts.cuda_graph_max_bs_flag})",
            evidence=evidence,
        )
    ]


def _capacity(
    facts: ServerLogFacts, previous: StartupFacts | None, src: str
) -> list[FindingRecorded]:
    if previous is None:
        return []
    out = []
    for name in ("max_running_requests", "max_total_num_tokens"):
        before, now = getattr(previous, name), getattr(facts, name)
        if before is not None and now is not None and 0 < now < before:
            out.append(
                FindingRecorded(
                    kind="capacity-reduced",
                    message=f"{name} {before} -> {now} ({(now - before) / before:+.0%}) against the previous run",
                    evidence=_evidence(src, facts.evidence.get(name)),
                )
            )
    return out


def _overridden(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    """A setting the args asked for that a later line overrode: flag-not-in-effect naming the line
    (no verdict: the setting works elsewhere; this run did not have it)."""
    out = []
    for o in facts.overrides:
        if o.implied:
            continue
        requested = facts.server_args.get(o.flag.replace("-", "_")) if o.flag else None
        what = f"--{o.flag}" if o.flag else "a setting"
        asked = f" (requested {requested!r})" if requested is not None else ""
        now = f" is {o.effective!r} in effect" if o.effective is not None else " is not in effect"
        out.append(
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=o.flag,
                message=f"{what}{asked}{now}: {o.reason or 'overridden at startup'}",
                evidence=_arg_evidence(facts, src, o.flag.replace("-", "_"))
                + _evidence(src, o.line)
                if o.flag and o.flag.replace("-", "_") in facts.server_args
                else _evidence(src, o.line),
            )
        )
    return out


__all__ = [
    "BatchLine",
    "CRASH_CULPRITS",
    "CrashInfo",
    "FLAG_NAMES",
    "LINE_SPELLINGS",
    "LOG_MARKERS",
    "LogFormatError",
    "LogLine",
    "OverrideLine",
    "fusion_requested",
    "piecewise_on_by_default",
    "looks_like_server_log",
    "MoeConfigLine",
    "ServerLogFacts",
    "derive_findings",
    "parse_batch_fields",
    "parse_server_args",
    "parse_server_log",
    "split_line",
]
