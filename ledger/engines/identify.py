"""Which engine wrote a log excerpt, from any line that names it.

What users paste into an issue, a chat or a ticket is the tail around an error: no start line, often
no engine prefix at all. The engine still shows in the text: a traceback's frames are files of its
package (``.../sglang/srt/managers/scheduler.py``), its processes are named (vLLM's
``(EngineCore_DP0 pid=1)``, SGLang's ``[... TP0]``), it dumps its arguments
(``server_args=ServerArgs(``, ``non-default args:``), it prints its own messages
(``Scheduler hit an exception``, ``Engine core initialization failed``) and the user typed its
command (``python -m sglang.launch_server``, ``vllm serve``).

Each kind of such line is a *sign* with a weight, counted once however often it shows; the engine
with the larger total wrote the excerpt. A traceback's frames weigh less for vLLM than for SGLang:
older SGLang imports vLLM's layers (its tracebacks pass through ``vllm/model_executor/...``), while
vLLM never imports SGLang. An excerpt with no sign of either is refused by the importers, naming
what was looked for (``LOOKED_FOR``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lines import strip_layers, unflatten
from .prefilter import Prefilter

# (engine, weight, pattern): each pattern is searched in a line with its launcher layers taken off.
_SIGNS: tuple[tuple[str, int, re.Pattern[str]], ...] = (
    # prefixes: SGLang's "[2025-01-01 10:00:00 TP0]" (or the old time-only "[23:17:01 TP7]"),
    # vLLM's process tag and "LEVEL MM-DD hh:mm:ss [v1/engine/core.py:N]" ("core.py:N]" before 0.8)
    (
        "sglang",
        3,
        re.compile(r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)? (?:TP|DP|EP|PP)\d+"),
    ),
    (
        "vllm",
        3,
        re.compile(
            r"\((?:EngineCore(?:_DP\d+)?|APIServer|VllmWorker(?:Process)?|Worker(?:_\w+)?|"
            r"RayWorkerWrapper|ApiServer_\d+|EngineCoreProc)(?: rank=\d+)? pid=\d+\)"
        ),
    ),
    (
        "vllm",
        3,
        re.compile(
            r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
            r"\[?[\w./-]+\.py:\d+\]"
        ),
    ),
    # the command line the user typed, the argument dumps, the engines' own messages
    (
        "sglang",
        3,
        re.compile(
            r"\bsglang\.launch_server\b|\bsglang serve\b|server_args=ServerArgs\(|"
            r"^usage: (?:python3? -m )?sglang|^launch_server\.py: error: |"
            r"Scheduler hit an exception|Received sigquit from a child proces|"
            r"The server is fired up and ready to roll|\bTpModelWorker(?:Client)?\b|"
            r"\bsgl[-_]kernel\b|sglang\.srt\b|scheduler died during initialization|"
            r"\bModelRpc(?:Client|Server)\b|\b(?:Tokenizer|Detokenizer)Manager\b|"
            r"Load weight (?:begin|end)|KV Cache is allocated|Capture cuda graph (?:begin|end)|"
            r"max_total_num_tokens=\d|\b(?:Decode|Prefill) batch[.,]|--mem-fraction-static"
        ),
    ),
    (
        "vllm",
        3,
        re.compile(
            r"\bvllm serve\b|vllm\.entrypoints|non-default args:|vLLM API server version|"
            r"^usage: vllm\b|^vllm: error: |^api_server\.py: error: |"
            r"Initializing an? (?:V1 )?LLM engine|Engine core initialization failed|"
            r"EngineCore (?:failed to start|encountered)|\bEngineDeadError\b|"
            r"Starting vLLM (?:API )?server|\bVLLM_[A-Z_]+=|"
            r"\b(?:AsyncLLMEngine|MQLLMEngine|EngineCoreProc)\b|# (?:GPU|cuda|CPU) blocks: \d|"
            r"\b(?:GPU|CPU) KV cache size: |Maximum concurrency for [\d,]+ tokens|gpu_memory_utilization"
        ),
    ),
    # SGLang's main process prints its date with no rank ("[2025-11-19 14:41:27] "), as other
    # programs may; its own wording of the sampling defaults is SGLang's
    ("sglang", 1, re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\] ")),
    ("sglang", 2, re.compile(r"Using default chat sampling params from model generation config")),
    # the name alone: a client or a wrapper may say it too
    ("sglang", 1, re.compile(r"\bSGLang\b")),
    ("vllm", 1, re.compile(r"\bvLLM\b")),
    # a traceback's frames: files of the engine's package
    ("sglang", 3, re.compile(r"[/\\]sglang[/\\](?:srt|python|launch_server)|[/\\]sgl_kernel[/\\]")),
    (
        "vllm",
        2,
        re.compile(
            r"[/\\]vllm[/\\](?:v1|engine|entrypoints|worker|executor|model_executor|config|"
            r"platforms|distributed|attention)\b"
        ),
    ),
)

#: A sign none of whose literals is in a line cannot show in it and is not searched there.
_PREFILTER = Prefilter([rx for _, _, rx in _SIGNS])

#: The least total weight that identifies an engine: one frame of vLLM's or its name alone does not.
MIN_WEIGHT = 2

#: What the importers say they looked for when an excerpt shows no engine.
LOOKED_FOR = (
    "an SGLang or vLLM line prefix, a traceback frame in sglang/ or vllm/, an argument dump "
    "(server_args=ServerArgs, non-default args), a launch command (sglang.launch_server, vllm serve) "
    "or an engine's own message"
)


@dataclass(frozen=True)
class Identified:
    """The engine of an excerpt (``None``: no sign of either), its signs' total ``weight`` and the
    1-based number of the first ``line`` that showed it."""

    engine: str | None
    weight: int = 0
    line: int | None = None


#: How many first lines of a log ``identify`` reads.
IDENTIFY_SCAN = 20000


def identify(lines: list[str], scan: int = IDENTIFY_SCAN) -> Identified:
    """The engine whose signs weigh most in the first ``scan`` lines (see the module doc); on a tie
    neither (an excerpt that names both as much is not read as either's log)."""
    totals = {"sglang": 0, "vllm": 0}
    first: dict[str, int] = {}
    # each sign counts once: a wrapper's own "[date] ..." on every line is one sign
    unseen = _PREFILTER.all
    for number, raw in enumerate(unflatten(lines[:scan]), start=1):
        text = strip_layers(raw)[0]
        possible = _PREFILTER.possible(text) & unseen
        if not possible:
            continue
        for i, (engine, weight, rx) in enumerate(_SIGNS):
            if possible & 1 << i and rx.search(text):
                unseen &= ~(1 << i)
                totals[engine] += weight
                first.setdefault(engine, number)
        if not unseen:
            break
    best = max(totals, key=lambda e: totals[e])
    if totals[best] < MIN_WEIGHT or totals["sglang"] == totals["vllm"]:
        return Identified(None)
    return Identified(best, totals[best], first[best])
