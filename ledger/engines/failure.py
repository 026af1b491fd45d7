"""A server run's failure model: every line classified, a small state machine, one root cause.

A run is ``starting`` until the engine's own ready line (SGLang's "The server is fired up and ready
to roll!", uvicorn's "Application startup complete." under vLLM), then ``ready``; a failure at
any point makes it ``failed``, a clean shutdown ``stopped``. Nothing else makes a run ready.

Each line (its launchers' prefixes taken off by ``lines``) is classified by ``classify``:

- ``fatal``: the server or one of its processes is dead or will not serve. A Python traceback
  that no handled error line introduces, a fatal signal (``Fatal Python error``, ``core dumped``,
  SGLang's "Received sigquit from a child process"), a watchdog or collective timeout (SGLang's
  ``Watchdog timeout (self.watchdog_timeout=N)``, torch c10d's "Watchdog caught collective
  operation timeout"), a device error (CUDA, HIP, HSA, NCCL), out of memory in any of the
  engines' spellings (``OOM_RE``), and the engines' own death lines (``STRONG_FATAL``,
  ``WEAK_FATAL``);
- ``harmless``: an error-level line the engine handled, by one of the reviewed rules of
  ``HARMLESS`` (each with its reason: it carries on, one request failed, the run was shutting
  down, a side service);
- ``handled``: a line without a level that names a problem but no failure: SGLang's default
  format prints no level, so such a line may be a warning or an error; the engine logged it
  and went on (a failure shows as one of the fatal lines above);
- ``error``: an error-level line no rule knows: the run gets a finding "N unclassified error
  lines" quoting the first (``RunOutcome.unclassified``), never a silent ``ready``;
- ``warning`` / ``none``: the rest.

The root cause of a failure is the first causal fatal event in the log: a line that reports
another failure (``WRAPPER_RE``: "Received sigquit ...", "Engine core initialization failed. See
root cause above", ``EngineDeadError``, "Fatal Python error: Aborted") is never chosen while a
causal one exists, and a traceback's cause is the first exception Python printed (the one the
chain started from: the last is the outermost wrapper). The cause is ``out-of-memory`` when that
event's chain names an out-of-memory error, ``port-in-use`` for a taken port, ``timeout`` for a
watchdog or collective timeout, else ``crash``. A ready line after a "fatal" event proves the
event was not fatal: it is then counted as an unclassified error instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .lines import EXCEPTION_LINE_RE, LogLine
from .prefilter import Prefilter, digit_shape

#: How many trailing lines a failure keeps.
TAIL_LINES = 20
#: How many lines of a failure's traceback are kept, from its first line on.
TRACEBACK_LINES = 400
#: How many ``ignored`` lines a run's outcome keeps (``RunOutcome.ignored``).
IGNORED_KEPT = 1000

#: Out of memory, in the spellings of torch, CUDA, HIP, NCCL, SGLang and vLLM.
OOM_RE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|CUDA driver error: out of memory|"
    r"HIP out of memory|hipErrorOutOfMemory|CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED|"
    r"Cuda failure '?out of memory|\bruns? out of memory\b|\b(?:Prefill|Decode) out of memory|"
    r"^Out of memory\.|Not enough memory\. Please|No available memory for the cache blocks|"
    r"not enough memory available for the KV cache|Insufficient memory|"
    r"out of memory occurred when warming up|"
    r"\b(?:NPU|XPU|MPS|HPU|GPU|[Dd]evice) out of memory|"
    r"Free memory on device .* is less than desired GPU memory utilization",
    re.IGNORECASE,
)
_TIMEOUT_RE = re.compile(
    r"watchdog timeout|Watchdog caught collective operation timeout|before timing out|"
    r"Engine iteration timed out",
    re.I,
)
_PORT_RE = re.compile(r"(?:Port|Address) (?:is )?already in use|EADDRINUSE", re.I)

#: Lines that say the server or one of its processes died, whatever else they say.
STRONG_FATAL_RE = re.compile(
    "|".join(
        (
            r"\bhit an exception\b",
            r"Received sigquit from a child proces",  # "proces." in SGLang 0.4
            r"SIGQUIT received",
            r"Fatal Python error",
            r"core dumped",
            r"Segmentation fault",
            r"terminate called after throwing",
            r"\bwatchdog timeout\b",
            r"Watchdog caught collective operation timeout",
            r"watchdog thread terminated with exception",
            r"ran for \d+ milliseconds before timing out",
            r"EngineDeadError",
            r"Engine iteration timed out",
            r"EngineCore encountered (?:a fatal error|an issue)",
            r"Engine background task failed",
            r"Engine core initialization failed",
            r"(?-i:^Initialization failed)",
            r"EngineCore failed to start",
            r"HSA_STATUS_ERROR",
            r"\bCUDA error: ",
            r"CUDA driver error",
            r"an illegal memory access",
            r"device-side assert triggered",
            r"\bNCCL error\b",
            r"\bnccl(?:UnhandledCuda|System|Internal|InvalidUsage|Remote)Error\b",
            r"\bHIP error\b",
            r"\bhipError\w+",
            r"^[\w.-]+: error: ",  # argparse refusing the command line ("api_server.py: error: ...")
        )
    ),
    re.IGNORECASE,
)
#: Death or refusal to serve, unless a ``HARMLESS`` rule says the engine carried on.
WEAK_FATAL_RE = re.compile(
    "|".join(
        (
            r"\bterminated with\b",
            r"\bcrash(?:ed|es)?\b",
            r"\bdied\b",
            r"\bexit(?:ed|ing)? (?:prematurely|unexpectedly|with (?:exit )?code)",
            r"Force exiting",
            r"failed to start",
            r"did not become ready",
            r"without serving",
            r"(?:Port|Address) (?:is )?already in use",
            r"\bunhealthy\b",
            r"Health check failed\. Server",
            r"^Killed$",
            r"dangling",
            r"rank divergence",
            r"not ready after waiting",
            r"Timeout waiting for",
            r"\bunrecoverable\b",
            r"\bscheduler is dead\b",
            r"\bexited during startup\b",
            r"^Server failed",
            r"WorkerProc failed",
            r"output_handler failed",
            r"Exception occurred while running API servers",
            r"Error in (?:loading|inspecting) model architecture",
        )
    ),
    re.IGNORECASE,
)
#: A fatal line that reports a failure found elsewhere in the log, never the root cause while
#: a causal one exists.
WRAPPER_RE = re.compile(
    r"Received sigquit|SIGQUIT received|\bhit an exception\b|(?:Controller|actor) .*terminated with|"
    r"See root cause above|"
    r"See stack trace|check the stack trace above|EngineDeadError|EngineCore encountered|Force exiting|Fatal Python error: Aborted|"
    r"^Aborted|core dumped|^Killed$|terminate called after throwing|"
    r"Engine core initialization failed|EngineCore failed to start|^Initialization failed|"
    r"Engine background task failed|WorkerProc (?:hit an exception|failed)|died unexpectedly|"
    r"shutting down|Exception occurred while running API servers|Server failed",
    re.IGNORECASE,
)

#: The reviewed rules for error-level lines an engine handled, each with its reason. Order
#: matters: the first that matches gives the reason. A rule never hides a line of
#: ``STRONG_FATAL_RE`` or out of memory (those are checked first).
HARMLESS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "the engine says it carries on (falls back, retries, skips, keeps going without it)",
        re.compile(
            r"fall(?:ing|s)? ?back|fell back|continu(?:e|es|ing)\b|retry|retrying|rebuilding|skipp(?:ing|ed)|"
            r"\bskip\b|ignor(?:e|ed|ing)\b|This is normal|It is expected|is expected if|instead\b|"
            r"dropp(?:ing|ed)|giving up|disabling|\bdisabled\b|will not be|won't be|defaulting|"
            r"using default|\bkeep(?:s|ing)?\b|\bstays?\b|preserv|retain|unavailable|not available|"
            r"switching to|treating|truncating|Reduced to|Rollback|restored|declined|optional|"
            r"Setting (?:it )?to\b|\bwould\b|\bForcing\b|will \w+ if\b|degenerating|"
            r"Exception ignored in|Task exception was never retrieved",
            re.IGNORECASE,
        ),
    ),
    (
        "an optional fast path failed: the engine runs without it (fusion, workspace, kernel "
        "import or warmup)",
        re.compile(
            r"fusion|workspace|custom all-?reduce|quick ?all-?reduce|symm(?:etric)? ?mem|warm ?up|"
            r"autotun|\bJIT\b|Failed to import|failed to import",
            re.IGNORECASE,
        ),
    ),
    (
        "one request failed: the engine answers it with an error and keeps serving",
        re.compile(
            r"\b(?:rid|req_id|request_id|req|reqs|request\w*|Request\w*|room|bootstrap_room|session|item|"
            r"prompt|prompts|stream|streaming|chat|completion|create_messages|count_tokens|grammar|"
            r"tool call|function name|arguments|json_schema|JSON|regex|ebnf|structural_tag|schema|"
            r"tokeniz\w*|detokeniz\w*|detect_and_parse|parse_streaming_increment|parsing|Jinja|"
            r"template|Error with model|connection|event|generation|embedding|image|audio|video|"
            r"multimodal|lora|adapter|weights? update|update_weights|IPC weight update|"
            r"Validation should have already occurred|cancell?ed|Exception in ASGI application)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "the run was shutting down or cleaning up",
        re.compile(
            r"teardown|shut ?down|clean ?up|cleanly|on exit|during exit|\bclos(?:e|ing)\b|\bstop\b|"
            r"release|destroy|\bkill\b|deregist|unregist|unlink|remove",
            re.IGNORECASE,
        ),
    ),
    (
        "a diagnostic or side service failed, not the serving path",
        re.compile(
            r"py-?spy|coredump|\bdump(?:ing|ed)?\b|debug info|profil\w*|trace|metrics|Prometheus|plugin|"
            r"sidecar|admin|SSL|certificate|NVLink|XGMI|amdsmi|pynvml|health check server|bootstrap|"
            r"heartbeat|kv_events|replay|publisher|storage|HiCache|HiSparse|LMCache|UMBP|mooncake|"
            r"nixl|mori|transfer|\brpc\b|utility method|snapshot|CRIU|usage|TPU information|"
            r"model info cache|Elastic EP|\[FT\]|Scale failed|pause|resume|upload|EPLB|eplb|"
            r"async loop|encoder|Ray|placement group|bundle|warmup|symlink|corrupted|"
            r"cache directory|log file|Key .* not found|fault|recovery|coordinator|dp_rank|"
            r"prefill server|engine info|compute capability|D2H|callback|hook",
            re.IGNORECASE,
        ),
    ),
)

#: Words of a line that names a problem (used only for lines that carry no level).
ERROR_CUE_RE = re.compile(
    r"error|fail|exception|crash|abort|fatal|timed out|timeout|invalid|not found|mismatch|cannot|"
    r"can't|could not|unable|died|terminated|refused|reject|unsupported|lost|not ready|exceed|"
    r"coredump|py-?spy|debug info|does not exist|should be|does not match|corrupt|malformed|"
    r"too many|expected .* got|not enough|giving up|cancell?ed|\bNo (?:live|sglang|matching)\b",
    re.IGNORECASE,
)
#: Words of a line that warns (used only for lines that carry no level, as SGLang's).
WARNING_CUE_RE = re.compile(
    r"warn|deprecat|not supported|unsupported|sub-?optimal|recommend|consider|please|\bmay\b|"
    r"\bmight\b|will be|fall(?:ing)? ?back|ignor|disabl|overrid|not set|not specified|default|"
    r"instead|experimental|slow|automatically|skip|should|not (?:yet )?(?:been )?"
    r"(?:enabled|available|installed|found|recognized)|\bset(?:ting)? (?:\S+ ){0,4}to\b|\bchang(?:e|ing)\b|"
    r"adjust|switch|\bReset\b|resolved|\benabl(?:e|ed|ing)\b|\bonly supports?\b|does not support|"
    r"incompatible|has no effect|\bForc(?:e|ing)\b|Clamp|Round|Dropping|restriction|under experiment|"
    r"\bDetected\b|->|\bnot (?:compatible|implemented|verified|tested|recommended)",
    re.IGNORECASE,
)
_CHAIN_RE = re.compile(
    r"^(?:The above exception was the direct cause of the following exception:|"
    r"During handling of the above exception, another exception occurred:)$"
)
# An exception line that cannot be the next line of another's message: its class says so.
_NAMED_EXCEPTION_RE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|OutOfResources)(?::|$)"
)
_TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\):|Exception Group Traceback")
#: A traceback's frame line: a paste of the tail around an error often starts among the frames,
#: without the "Traceback" header, and a paste may lose the indentation.
_FRAME_RE = re.compile(r'^\s*(?:\|\s*)?File "[^"]+",? (?:line \d+|in \w)')
#: Lines that are Python source shown by a traceback, never a message of their own: a
#: ``raise X("CUDA error: ...")`` quotes the failure before the exception line says it.
_SOURCE_RE = re.compile(r'^\s*(?:File "|raise\b|assert\b|[~^]{3,}|\^)')
_STOP_EXC_RE = re.compile(
    r"^(?:[\w.]+\.)?(?:KeyboardInterrupt|SystemExit(?:: 0)?|CancelledError)\s*$"
)
_STOP_RE = re.compile(
    r"^Shutting down$|^Finished server process|Received SIGTERM|SIGTERM received|KeyboardInterrupt|"
    r"^\[shutdown\] .*(?:gracefully|complete|received signal=SIG(?:INT|TERM)|shutdown (?:signal|triggered))",
)


@dataclass(frozen=True)
class Verdict:
    """What a line is: ``kind`` fatal / harmless / handled / error / warning / none, the
    ``reason`` of a harmless rule, and for a fatal line whether it ``wraps`` another failure."""

    kind: str
    reason: str | None = None
    wraps: bool = False


#: The regexes ``classify`` searches, in one prefilter (``prefilter``): a regex none of whose
#: literals is in a line cannot match it and is not searched (the cascade's answer is the same).
_CASCADE = (
    OOM_RE,
    STRONG_FATAL_RE,
    ERROR_CUE_RE,
    WEAK_FATAL_RE,
    WARNING_CUE_RE,
    WRAPPER_RE,
) + tuple(rule for _, rule in HARMLESS)
_OOM, _STRONG, _ERROR_CUE, _WEAK, _WARNING_CUE, _WRAPPER = (1 << i for i in range(6))
_HARMLESS_BITS = tuple(1 << (6 + i) for i in range(len(HARMLESS)))
_PREFILTER = Prefilter(_CASCADE)
_NONE = Verdict("none")
_WARNING = Verdict("warning")


def classify(message: str, level: str | None) -> Verdict:
    """Classify one line by its ``message`` (every prefix off) and the ``level`` a prefix stated
    (``None``: none). See the module doc; never raises."""
    if level in ("DEBUG", "INFO"):
        return _NONE
    if level == "WARNING":
        return _WARNING
    text = message.strip()
    if _SHAPE is None or len(text) > _SHAPED_MAX:
        return cascade(text, level, _PREFILTER.possible(text))
    if text.isascii():  # the same text, by a byte table (~0.4 us a batch line; str's ~2 us)
        return _shaped(text.encode("ascii").translate(_SHAPE_BYTES).decode("ascii"), level)
    return _shaped(text.translate(_SHAPE), level)


#: ``classify``'s answers by a line's text with its digits written alike (``prefilter.digit_shape``:
#: no regex of the cascade tells those digits apart, so the answer is the same): a served log's
#: ``Decode batch`` lines differ only in their numbers and were each searched (6-25 µs a line,
#: twice: the facts' warning check and ``assess``). Lines past ``_SHAPED_MAX`` characters are
#: not kept (a long line is rarely repeated, and the cache must stay small).
_SHAPE = digit_shape(_CASCADE)
_SHAPED_MAX = 400
#: ``_SHAPE`` as a byte table, for an ASCII text (every code it maps is an ASCII digit).
_SHAPE_BYTES = (
    bytes.maketrans(bytes(_SHAPE), "".join(_SHAPE.values()).encode("ascii")) if _SHAPE else b""
)


@lru_cache(maxsize=4096)
def _shaped(text: str, level: str | None) -> Verdict:
    return cascade(text, level, _PREFILTER.possible(text))


def cascade(text: str, level: str | None, possible: int) -> Verdict:
    """``classify`` of a stripped line below DEBUG/INFO/WARNING, searching only the regexes whose
    bit is in ``possible`` (``_PREFILTER.all``: every one; the answer must not differ)."""

    def hit(bit: int, rule: re.Pattern[str]) -> bool:
        return bool(possible & bit) and rule.search(text) is not None

    def fatal() -> Verdict:
        return Verdict("fatal", wraps=hit(_WRAPPER, WRAPPER_RE))

    if hit(_OOM, OOM_RE) or hit(_STRONG, STRONG_FATAL_RE):
        return fatal()
    errorish = level in ("ERROR", "CRITICAL") or (
        level is None and (hit(_ERROR_CUE, ERROR_CUE_RE) or hit(_WEAK, WEAK_FATAL_RE))
    )
    if not errorish:
        if level is None and hit(_WARNING_CUE, WARNING_CUE_RE):
            return _WARNING
        if level is None and hit(_HARMLESS_BITS[2], HARMLESS[2][1]):
            return Verdict("ignored", HARMLESS[2][0])  # about one request, not about the run
        return _NONE
    for (reason, rule), bit in zip(HARMLESS, _HARMLESS_BITS, strict=True):
        if hit(bit, rule):
            return Verdict("harmless", reason)
    if hit(_WEAK, WEAK_FATAL_RE):
        return fatal()
    return Verdict("handled" if level is None else "error")


@dataclass
class Traceback:
    """A Python traceback in the log: its ``lines`` (header to last exception line), the
    ``head`` line that logged it (``logger.exception``; ``None`` for one printed uncaught) and
    each ``exceptions`` line in the order Python printed them (the first started the chain)."""

    lines: list[LogLine]
    head: LogLine | None
    exceptions: list[tuple[LogLine, str]] = field(default_factory=list)
    #: a tail that starts among the frames: the line above may be its head or a line before it
    headless: bool = False

    @property
    def root(self) -> tuple[LogLine, str] | None:
        return self.exceptions[0] if self.exceptions else None


def _body(line: LogLine) -> str:
    """A traceback line's text as Python printed it (indentation kept; an exception group's
    ``  | `` gutter taken off)."""
    text = line.message.rstrip()
    return re.sub(r"^\s*\|\s?", "", text) if text.lstrip().startswith("| ") else text


def find_tracebacks(
    lines: Sequence[LogLine], record_of: Callable[[LogLine], int]
) -> list[Traceback]:
    """Every traceback block of ``lines``: it starts at a "Traceback (most recent call last):"
    and takes the later lines of the same log record (``record_of``: the number of the line
    that began a line's record), skipping other processes' lines printed in between, until
    its process starts a new record."""
    out: list[Traceback] = []
    taken: set[int] = set()
    for i, line in enumerate(lines):
        if line.number in taken or not (
            _TRACEBACK_RE.search(line.message) or _FRAME_RE.match(line.message)
        ):
            continue
        start_record = record_of(line)
        block = [line]
        for later in lines[i + 1 :]:
            if record_of(later) == start_record:
                if (
                    _TRACEBACK_RE.search(later.message)
                    and later.message.startswith("Traceback")
                    and (
                        block
                        and EXCEPTION_LINE_RE.match(_body(block[-1]).strip())
                        and not _chained(block)
                    )
                ):
                    break  # a second, separate traceback of the same record
                block.append(later)
            elif later.process == line.process:
                break  # its process moved on to another record
        taken.update(b.number for b in block)
        head = None
        if not _TRACEBACK_RE.search(line.message) and (
            i == 0 or lines[i - 1].message[:1].isspace() or _SOURCE_RE.match(lines[i - 1].message)
        ):
            pass  # a tail that starts among the frames: the line above is a cut frame's source
        elif (
            i > 0
            and record_of(lines[i - 1]) == start_record
            and lines[i - 1].process == line.process
        ):
            head = lines[i - 1]
        elif not line.message.startswith("Traceback"):
            head = line  # "Scheduler hit an exception: Traceback (most recent call last):"
        tb = _read_block(block, head)
        tb.headless = not _TRACEBACK_RE.search(line.message)
        out.append(tb)
    return out


def _chained(block: list[LogLine]) -> bool:
    """Whether the lines just before the end of ``block`` announce a chained exception."""
    for line in reversed(block[-3:]):
        if _CHAIN_RE.match(_body(line).strip()):
            return True
    return False


def _read_block(block: list[LogLine], head: LogLine | None) -> Traceback:
    tb = Traceback(lines=block, head=head)
    in_frames, current, after_frame = False, None, False
    for line in block:
        body = _body(line)
        stripped = body.strip()
        if _TRACEBACK_RE.search(body):
            in_frames, current = True, None
            continue
        if not stripped or _CHAIN_RE.match(stripped):
            current = None
            continue
        if (
            body[:1].isspace()
            or stripped.startswith(("^", "~", 'File "'))
            or (after_frame and not _NAMED_EXCEPTION_RE.match(stripped))
        ):
            # a frame, or the source line under a frame whose indentation a paste lost
            in_frames, after_frame = True, stripped.startswith('File "')
            continue
        after_frame = False
        if (in_frames and EXCEPTION_LINE_RE.match(stripped)) or _NAMED_EXCEPTION_RE.match(stripped):
            tb.exceptions.append((line, stripped))
            current, in_frames = len(tb.exceptions) - 1, False
        elif current is not None:
            first, text = tb.exceptions[current]
            tb.exceptions[current] = (first, f"{text}\n{stripped}")
    return tb


@dataclass
class FatalEvent:
    """One fatal thing in the log: the ``line`` that shows it, its one-line ``message``, the
    full ``text`` searched for causes, whether it ``wraps`` another failure, its traceback."""

    line: LogLine
    message: str
    text: str
    wraps: bool
    traceback: Traceback | None = None

    @property
    def cause(self) -> str:
        # a terminal or a paste may wrap a line mid-word ("CUDA out of mem" / "ory."): the
        # record's lines are searched as written and re-joined
        texts = (self.text, self.text.replace("\n", ""))
        if any(OOM_RE.search(t) for t in texts):
            return "out-of-memory"
        if any(_PORT_RE.search(t) for t in texts):
            return "port-in-use"
        if any(_TIMEOUT_RE.search(t) for t in texts):
            return "timeout"
        return "crash"  # argparse refusing the command line too: the process exited


@dataclass(frozen=True)
class CrashInfo:
    """Why the server died: ``cause`` (``crash``, ``out-of-memory``, ``port-in-use``,
    ``timeout``), a one-line ``message`` (the root exception of the traceback where there is
    one), the ``line`` that showed it, the last ``TAIL_LINES`` lines of the log and the lines
    of its traceback from its first line on (at most ``TRACEBACK_LINES``)."""

    cause: str
    message: str
    line: LogLine
    tail: list[str]
    traceback: list[str] = field(default_factory=list)
    after_ready: bool = False


@dataclass
class RunOutcome:
    """The state machine's result: ``state`` starting / ready / failed / stopped, the lines that
    moved it, the ``failure`` (root cause), the ``unclassified`` error-level lines and the
    ``harmless`` ones (with their rule's reason), the level-less ``handled`` ones."""

    state: str = "starting"
    ready_line: LogLine | None = None
    stop_line: LogLine | None = None
    failure: CrashInfo | None = None
    fatal: list[FatalEvent] = field(default_factory=list)
    unclassified: list[LogLine] = field(default_factory=list)
    harmless: list[tuple[LogLine, str]] = field(default_factory=list)
    handled: list[LogLine] = field(default_factory=list)
    #: the first ``IGNORED_KEPT`` lines about one request (``HARMLESS[2]``): a served log's batch
    #: lines each say ``#running-req``, and only whether there is one is read
    ignored: list[tuple[LogLine, str]] = field(default_factory=list)


def starts_block(line: LogLine) -> bool:
    """Whether ``find_tracebacks`` may start a traceback block at ``line`` (each rule looked for
    only on a line holding the literal every match of it holds)."""
    message = line.message
    return bool(
        ("Traceback" in message and _TRACEBACK_RE.search(message))
        or ('File "' in message and _FRAME_RE.match(message))
    )


def quiet_kind(line: LogLine, block: bool | None = None) -> str | None:
    """What ``assess`` does with a line outside every traceback block that is not a ready line:
    ``"none"`` when it sets it aside (its verdict ``none`` or ``warning``, no stop wording),
    ``"ignored"`` when it files it under ``ignored``; ``None`` for anything else (``kept_lines``
    drops only the first two kinds). ``block``: ``starts_block(line)``, when known."""
    message = line.message
    if (starts_block(line) if block is None else block) or _SOURCE_RE.match(message):
        return None
    kind = classify(message, line.level).kind
    if kind in ("none", "warning"):
        return None if _STOP_RE.search(message.strip()) else "none"
    return "ignored" if kind == "ignored" else None


def may_start_excerpt(line: LogLine, *, unprefixed: bool = True) -> bool:
    """Whether a failure's excerpt (``CrashInfo.traceback``) may start at ``line``: a traceback
    block's first line, a line ``classify`` finds fatal, a line without the engine's prefix
    (``_lone_exception``; with ``unprefixed`` off, only one ``may_be_lone_exception``)."""
    return (
        starts_block(line)
        or (not line.prefixed and (unprefixed or may_be_lone_exception(line)))
        or classify(line.message, line.level).kind == "fatal"
    )


def may_be_lone_exception(line: LogLine) -> bool:
    """Whether ``assess`` may find ``line`` fatal beyond ``classify``: a line without the engine's
    prefix in a Python exception's shape (``_lone_exception``)."""
    return not line.prefixed and _NAMED_EXCEPTION_RE.match(line.message.strip()) is not None


def assess(
    lines: Sequence[LogLine],
    *,
    is_ready: Callable[[LogLine], bool],
    record_of: Callable[[LogLine], int],
    excerpt: bool = False,
    bare: bool = False,
    tail: Sequence[str] | None = None,
    raw_at: Callable[[int], str] | None = None,
    line_count: int | None = None,
) -> RunOutcome:
    """Run the state machine over a log's ``lines`` (see the module doc). ``is_ready`` says
    whether a line is the engine's ready line; ``record_of`` which log record a line belongs to.

    An ``excerpt`` (a log whose start is not in it: the tail around an error) is read as what the
    user saw: a clean shutdown is a stop even when the ready line is not in it; and when it is
    ``bare`` too (no engine prefix on any line: copied from a terminal), a traceback it shows is
    the failure unless a harmless or warning line logged it (a level-less "Exception in X:" head
    does not make it handled).

    ``lines`` may leave out lines ``kept_lines.KeptLines`` drops (bulk lines it reads only to set
    them aside); then ``tail`` is the log's last ``TAIL_LINES`` raw lines, ``raw_at(n)`` the raw
    text of line ``n`` and ``line_count`` the number of lines, for the failure's excerpt."""
    outcome = RunOutcome()
    tracebacks = find_tracebacks(lines, record_of)
    in_traceback: dict[int, Traceback] = {}
    for tb in tracebacks:
        for line in tb.lines:
            in_traceback[line.number] = tb
    handled_heads = set()
    # heads whose traceback gave the failure: "Error in inspecting model architecture" above a
    # traceback reports the exception at its end, which is the cause
    reporting_heads: set[int] = set()
    for tb in tracebacks:
        fatal_head = (
            tb.head is not None and classify(tb.head.message, tb.head.level).kind == "fatal"
        )
        if (
            tb.exceptions
            and all(_STOP_EXC_RE.match(text) for _, text in tb.exceptions)
            and not fatal_head
        ):
            # Ctrl-C or a clean exit unwinding: a stop, not a failure
            outcome.stop_line = outcome.stop_line or tb.lines[0]
            continue
        event = _traceback_event(tb, bare)
        if event is not None:
            outcome.fatal.append(event)
            if tb.head is not None and event.line is not tb.head:
                reporting_heads.add(tb.head.number)
        elif tb.head is not None:
            handled_heads.add(tb.head.number)
    for line in lines:
        if is_ready(line):
            _on_ready(outcome, line)
            continue
        block = in_traceback.get(line.number)
        if (block is not None and line is not block.head) or _SOURCE_RE.match(line.message):
            continue
        verdict = classify(line.message, line.level)
        if (
            block is None
            and not line.prefixed
            and verdict.kind != "fatal"
            and (bare or record_of(line) == line.number)  # not the next line of a logged record
        ):
            verdict = _lone_exception(line, verdict)
        if verdict.kind == "fatal":
            if line.number in handled_heads:
                continue
            if not any(e.line is line for e in outcome.fatal):
                wraps = verdict.wraps or line.number in reporting_heads
                outcome.fatal.append(FatalEvent(line, line.message.strip(), line.message, wraps))
        elif verdict.kind == "harmless":
            outcome.harmless.append((line, verdict.reason or ""))
        elif verdict.kind == "error":
            outcome.unclassified.append(line)
        elif verdict.kind == "handled":
            outcome.handled.append(line)
        elif verdict.kind == "ignored":
            if len(outcome.ignored) < IGNORED_KEPT:
                outcome.ignored.append((line, verdict.reason or ""))
        elif (outcome.ready_line is not None or excerpt) and _STOP_RE.search(line.message.strip()):
            outcome.stop_line = outcome.stop_line or line
    outcome.fatal.sort(key=lambda e: e.line.number)
    if tail is None or raw_at is None or line_count is None:
        tail = [line.raw for line in lines[-TAIL_LINES:]]

        def raw_at(number: int) -> str:
            return lines[number - 1].raw

        line_count = len(lines)
    _settle(outcome, tail, raw_at, line_count, excerpt)
    return outcome


def _on_ready(outcome: RunOutcome, line: LogLine) -> None:
    if outcome.ready_line is not None:
        return
    outcome.ready_line = line
    # A ready line after a "fatal" line proves it did not stop the server.
    for event in outcome.fatal:
        if event.line.number < line.number:
            outcome.unclassified.append(event.line)
    outcome.fatal = [e for e in outcome.fatal if e.line.number > line.number]


def _lone_exception(line: LogLine, verdict: Verdict) -> Verdict:
    """A Python exception line outside any traceback and any engine prefix (``ValueError: ...``
    whose frames the paste cut, a process's last words on stderr) is fatal, unless the engine
    says it carries on."""
    text = line.message.strip()
    if _NAMED_EXCEPTION_RE.match(text) and not HARMLESS[0][1].search(text):
        return Verdict("fatal", wraps=bool(WRAPPER_RE.search(text)))
    return verdict


def _traceback_event(tb: Traceback, bare: bool = False) -> FatalEvent | None:
    """The fatal event of a traceback, or ``None`` when a harmless line logged it and no
    exception of its chain is fatal on its own (out of memory, a device error)."""
    chain = "\n".join(text for _, text in tb.exceptions)
    handled = ("harmless", "warning") if bare else ("harmless", "warning", "handled")
    if tb.head is not None and not tb.headless:
        # A traceback logged with a line the engine handled (harmless, a warning, a level-less
        # problem it went on from) is handled too, unless its chain is fatal on its own. (Not
        # for a tail cut among the frames: the line above it may not be the line that logged it.)
        verdict = classify(tb.head.message, tb.head.level)
        if verdict.kind in handled and not (OOM_RE.search(chain) or STRONG_FATAL_RE.search(chain)):
            return None
    root = tb.root
    if root is None:
        where = tb.head or tb.lines[0]
        text = (tb.head.message if tb.head else "") + "\n" + "\n".join(x.message for x in tb.lines)
        return FatalEvent(
            where, where.message.strip(), text, bool(WRAPPER_RE.search(where.message)), tb
        )
    line, text = root
    causal = [(x, t) for x, t in tb.exceptions if not WRAPPER_RE.search(t)]
    if causal:
        line, text = causal[0]
    head_text = tb.head.message if tb.head else ""
    return FatalEvent(
        line,
        text.split("\n", 1)[0],
        f"{head_text}\n{chain}",
        wraps=not causal,
        traceback=tb,
    )


def _settle(
    outcome: RunOutcome,
    tail: Sequence[str],
    raw_at: Callable[[int], str],
    line_count: int,
    excerpt: bool = False,
) -> None:
    if outcome.fatal:
        causal = [e for e in outcome.fatal if not e.wraps]
        root = (causal or outcome.fatal)[0]
        start = root.traceback.lines[0] if root.traceback else root.line
        outcome.state = "failed"
        outcome.failure = CrashInfo(
            cause=root.cause,
            message=root.message[:500],
            line=root.line,
            tail=list(tail),
            traceback=[
                raw_at(number)
                for number in range(
                    start.number, min(start.number + TRACEBACK_LINES, line_count + 1)
                )
            ],
            after_ready=outcome.ready_line is not None,
        )
    elif outcome.ready_line is not None:
        stopped = (
            outcome.stop_line is not None and outcome.stop_line.number > outcome.ready_line.number
        )
        outcome.state = "stopped" if stopped else "ready"
    elif excerpt and outcome.stop_line is not None:
        outcome.state = (
            "stopped"  # a paste of a clean shutdown: the server ran, its start not shown
        )
