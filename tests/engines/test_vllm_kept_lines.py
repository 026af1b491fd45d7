"""``kept_lines.ProcessKeptLines`` drops the bulk lines of a served vLLM log from what
``failure.assess`` reads, and ``assess`` must answer as it does over every line (docs/reliability.md,
"Server log import speed and memory"; the class's doc says why each kept line is kept).

The reference is ``assess`` over every ``LogLine`` of the log, with each line's record as
``parse_vllm_log`` computed them over the whole log before lines were dropped; the logs are every
fixture log and variants of them with a served vLLM log's bulk lines (uvicorn's access lines under
the API server's tag, ``Avg prompt throughput`` lines, level-less request lines, of the process
of the line before them and of others) put after each line with vLLM's prefix and at random
places, inside tracebacks too.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ledger.engines.failure import IGNORED_KEPT, RunOutcome, assess
from ledger.engines.lines import LogLine, Unwrapper, unflatten
from ledger.engines.vllm_facts import is_ready_line, parse_vllm_log, split_vllm_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_STAMP_RE = re.compile(
    r"(\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d)"
)


def _bulk(tag: str, stamp: str, i: int) -> str:
    """A served vLLM log's bulk line of the ``i``-th shape, of process ``tag`` ("" untagged)."""
    shapes = (
        f'{tag}INFO:     127.0.0.1:{40000 + i % 999} - "POST /v1/completions HTTP/1.1" 200 OK',
        f"{tag}INFO {stamp} [loggers.py:257] Engine 000: Avg prompt throughput: {i % 900}.0 "
        f"tokens/s, Avg generation throughput: {i}.5 tokens/s, Running: {i % 9} reqs, Waiting: "
        f"0 reqs, GPU KV cache usage: {i % 90}.0%, Prefix cache hit rate: 0.0%",
        f"(APIServer pid=21521) Received request cmpl-{i}: prompt: 'hi', params: SamplingParams(n=1)",
        f'INFO:     127.0.0.1:{40000 + i % 999} - "GET /health HTTP/1.1" 200 OK',
        f"(EngineCore_DP0 pid=2211) DEBUG {stamp} [core.py:88] EngineCore loop step {i}",
        f"{tag}INFO {stamp} [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s",
    )
    return shapes[i % len(shapes)]


def _variants(lines: list[str], seed: int) -> list[list[str]]:
    """``lines`` with 25 bulk lines after each line with vLLM's prefix (of its process), and with
    runs of them at random places (a traceback's lines included)."""
    rng = random.Random(seed)
    after: list[str] = []
    anywhere: list[str] = []
    tag, stamp, i = "(APIServer pid=21521) ", "12-01 14:45:00", 0
    for line in lines:
        after.append(line)
        anywhere.append(line)
        if m := _STAMP_RE.search(line):
            tag, stamp = m.group(1) or "", m.group(2)
            after.extend(_bulk(tag, stamp, i + k) for k in range(25))
            i += 25
        if rng.random() < 0.3:
            count = rng.randint(1, 60)
            anywhere.extend(_bulk(tag, stamp, i + k) for k in range(count))
            i += count
    return [after, anywhere]


def _full_outcome(raw: list[str]) -> tuple[RunOutcome, int]:
    """``parse_vllm_log``'s outcome as it was read before lines were dropped: ``assess`` over every
    line, each with its record over the whole log."""
    parsed = parse_vllm_log(raw)  # the reader's facts (args, version) decide excerpt
    raws = unflatten([x.rstrip("\r\n") for x in raw])
    unwrapper = Unwrapper()
    unwrapper.learn(raws)
    every = [split_vllm_line(n, x, unwrapper=unwrapper) for n, x in enumerate(raws, start=1)]
    record: list[int] = [0]
    current: dict[str | None, int] = {}
    header: dict[str | None, str] = {}
    last = 0
    for line in every:
        proc = line.process
        this = line.raw[: len(line.raw) - len(line.message)] if line.prefixed else None
        if this is not None and this != header.get(proc):
            current[proc], header[proc] = line.number, this
        elif this is None and line.level is not None:
            current[proc], header[proc] = line.number, ""
        elif proc not in current:
            current[proc] = last or line.number
        record.append(current[proc])
        last = current[proc]
    bare = not any(x.prefixed for x in every)
    outcome = assess(
        every,
        is_ready=is_ready_line,
        record_of=lambda x: record[x.number],
        excerpt=bare or not (parsed.facts.server_args or parsed.engine_version),
        bare=bare,
    )
    return outcome, len(every)


def _logs() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.log") if p.is_file())


def _lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [x[:-1] if x.endswith("\r") else x for x in lines]


@pytest.mark.parametrize("path", _logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_outcome_over_the_kept_lines_is_the_outcome_over_every_line(path: Path) -> None:
    for seed, lines in enumerate([_lines(path), *_variants(_lines(path), len(path.name))]):
        facts = parse_vllm_log(lines).facts
        expected, count = _full_outcome(lines)
        assert facts.line_count == count
        assert repr(facts.outcome) == repr(expected), (path, seed)


def _served(stamp: str, count: int) -> list[str]:
    """The API server's bulk lines and untagged ones (no engine core line: a record of the engine
    core is written at once, nothing of its own process comes between its lines)."""
    return [_bulk("(APIServer pid=21521) ", stamp, i) for i in range(count) if i % 6 != 4]


def test_bulk_lines_are_dropped_and_a_crash_among_them_keeps_its_block_and_excerpt() -> None:
    """A served log of 12,000 bulk lines, then an engine core's traceback logged line by line
    with other processes' bulk lines between its lines: the outcome is the one over every line,
    its excerpt and tail the log's own lines, and the kept lines do not grow with the traffic."""
    startup = _lines(FIXTURES / "vllm_cpu" / "good-start.log")
    core = "(EngineCore_DP0 pid=2211) ERROR 12-01 15:10:00 [core.py:710]"
    crash = [
        f"{core} EngineCore encountered a fatal error.",
        f"{core} Traceback (most recent call last):",
        *_served("12-01 15:10:00", 30),
        f'{core}   File "/vllm/v1/engine/core.py", line 701, in run_engine_core',
        *_served("12-01 15:10:00", 30),
        f"{core}     engine_core.run_busy_loop()",
        f"{core} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        *_served("12-01 15:10:01", 30),
        "(APIServer pid=21521) ERROR 12-01 15:10:02 [async_llm.py:480] EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        *_served("12-01 15:10:02", 10),
    ]
    lines = startup + _served("12-01 14:50:00", 12000) + crash
    parsed = parse_vllm_log(lines)
    expected, count = _full_outcome(lines)
    assert repr(parsed.facts.outcome) == repr(expected)
    crash_info = parsed.facts.crash
    assert crash_info is not None and crash_info.cause == "out-of-memory"
    start = len(lines) - len(crash) + 2  # the traceback's first line
    assert crash_info.traceback == lines[start - 1 :]
    assert crash_info.tail == lines[-20:]
    assert len(parsed.facts.outcome.ignored) == IGNORED_KEPT
    assert parsed.facts.line_count == count


def test_the_kept_lines_of_a_served_log_do_not_grow_with_its_traffic() -> None:
    """Whatever the number of access and throughput lines, what ``assess`` gets is the startup's
    lines and the first ``IGNORED_KEPT`` request lines."""
    from ledger.engines.kept_lines import ProcessKeptLines

    startup = _lines(FIXTURES / "vllm_cpu" / "good-start.log")
    sizes = []
    for served in (6000, 30000):
        kept = ProcessKeptLines(is_ready_line)
        unwrapper = Unwrapper()
        for number, text in enumerate(startup + _served("12-01 14:50:00", served), start=1):
            line: LogLine = split_vllm_line(number, text, unwrapper=unwrapper)
            kept.add(line, number if line.prefixed or line.level else 1)
        kept.close()
        sizes.append(len(kept.lines))
    assert sizes[0] == sizes[1] < len(startup) + IGNORED_KEPT + 50


def test_a_line_without_the_prefix_that_reads_as_an_exception_is_kept() -> None:
    """A paste of a served log's tail without vLLM's prefix: an exception line among the access
    lines is the failure (``assess`` reads it as a lone exception), so it is not dropped."""
    access = [_bulk("", "12-01 15:00:00", i) for i in range(0, 60, 6)]
    lines = [*access, "SystemExit: 3", *access]
    parsed = parse_vllm_log(lines)
    expected, _ = _full_outcome(lines)
    assert repr(parsed.facts.outcome) == repr(expected)
    assert parsed.facts.crash is not None and parsed.facts.crash.message == "SystemExit: 3"
