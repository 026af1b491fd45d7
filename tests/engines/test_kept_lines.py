"""``kept_lines.KeptLines`` drops the bulk lines of a served log from what ``failure.assess``
reads, and ``assess`` must answer as it does over every line (docs/reliability.md, "Server log
import speed and memory"; the module's doc says why each kept line is kept).

The reference is ``assess`` over every ``LogLine`` of the log, read as ``parse_server_log`` read
it before the lines were dropped (the same split, records, ``bare`` and two readings of
readiness); the logs are every fixture log and variants of them with a served log's bulk lines
(``Decode batch`` / ``Prefill batch`` past the 1,000 ``ignored`` kept, uvicorn's access lines)
put after each prefixed line and at random places, inside tracebacks too.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ledger.engines import sglang_facts
from ledger.engines.failure import IGNORED_KEPT, RunOutcome, assess
from ledger.engines.kept_lines import KeptLines
from ledger.engines.lines import (
    LogLine,
    Unwrapper,
    oldest_first,
    runs_backwards,
    split_flattened,
    unflatten,
)
from ledger.engines.sglang_lines import READY, split_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_PREFIX_RE = re.compile(r"^(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]{2}\d+)*\]) ")


def _bulk(prefix: str, i: int) -> str:
    """A served log's bulk line of the ``i``-th shape under ``prefix``."""
    shapes = (
        f"{prefix} Decode batch, #running-req: {1 + i % 9}, #token: {i * 3}, token usage: "
        f"0.{i % 90:02d}, cuda graph: True, gen throughput (token/s): {100 + i}.5, #queue-req: 0, ",
        f"{prefix} Prefill batch, #new-seq: 1, #new-token: {i % 700}, #cached-token: 0, "
        f"token usage: 0.01, #running-req: {i % 4}, #queue-req: 0, ",
        f'{prefix} INFO:     127.0.0.1:{40000 + i % 999} - "POST /generate HTTP/1.1" 200 OK',
        f"{prefix} Decode batch, #running-req: 3, #token: 88, token usage: 0.02, cuda graph: "
        f"{'False' if i % 7 == 0 else 'True'}, gen throughput (token/s): 12.0, #queue-req: 0, ",
        f'INFO:     127.0.0.1:{40000 + i % 999} - "GET /health HTTP/1.1" 200 OK',
    )
    return shapes[i % len(shapes)]


def _variants(lines: list[str], seed: int) -> list[list[str]]:
    """``lines`` with 25 bulk lines after each prefixed line, and with runs of them at random
    places (a traceback's lines included)."""
    rng = random.Random(seed)
    after: list[str] = []
    anywhere: list[str] = []
    prefix, i = "[2026-11-20 14:10:00]", 0
    for line in lines:
        after.append(line)
        anywhere.append(line)
        if m := _PREFIX_RE.match(line):
            prefix = m.group(1)
            after.extend(_bulk(prefix, i + k) for k in range(25))
            i += 25
        if rng.random() < 0.3:
            count = rng.randint(1, 60)
            anywhere.extend(_bulk(prefix, i + k) for k in range(count))
            i += count
    return [after, anywhere]


def _full_outcome(raw: list[str]) -> tuple[RunOutcome, int]:
    """``parse_server_log``'s outcome as it was read before lines were dropped: ``assess`` over
    every line."""
    facts = sglang_facts.parse_server_log(raw)  # the reader's facts (server_args) decide excerpt
    raw_lines = unflatten([x.rstrip("\r\n") for x in raw])
    unwrapper = Unwrapper()
    unwrapper.learn(raw_lines)
    every: list[LogLine] = []
    record = [0]
    current = 0
    for number, text in enumerate(raw_lines, start=1):
        line = split_line(number, text, strict=False, unwrapper=unwrapper)
        every.append(line)
        if line.prefixed or current == 0:
            current = number
        record.append(current)
    bare = not any(x.prefixed for x in every)

    def outcome(uvicorn: bool) -> RunOutcome:
        return assess(
            every,
            is_ready=lambda x: (
                (x.prefixed or bare)
                and (
                    READY in x.message
                    if not uvicorn
                    else bool(sglang_facts._UVICORN_READY_RE.match(x.message.strip()))
                )
            ),
            record_of=lambda x: record[x.number],
            excerpt=bare or not facts.server_args,
            bare=bare,
        )

    out = outcome(False)
    if not any(READY in x.message for x in every) and out.state != "failed":
        out = outcome(True)
    return out, len(every)


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
        facts = sglang_facts.parse_server_log(lines)
        expected, count = _full_outcome(lines)
        assert facts.line_count == count
        assert repr(facts.outcome) == repr(expected), (path, seed)


def test_bulk_lines_are_dropped_and_a_crash_after_them_keeps_its_excerpt() -> None:
    """A served log of 3,000 steps, then a crash: the kept lines are the startup's and the
    crash's (the first ``IGNORED_KEPT`` ignored ones aside), the excerpt and tail are the log's
    own lines, dropped ones among them."""
    startup = _lines(FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log")
    # the prefixed shapes (a line without SGLang's prefix may belong to a traceback: kept)
    served = [_bulk("[2026-11-20 14:20:00 TP0]", i) for i in range(15000) if i % 5 != 4]
    crash = [
        "[2026-11-20 14:30:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/scheduler.py", line 10, in event_loop',
        "    self.run_batch()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        *(_bulk("[2026-11-20 14:30:01 TP1]", i) for i in range(30)),
        "[2026-11-20 14:30:02] Received sigquit from a child process. It usually means the child failed.",
    ]
    lines = startup + served + crash
    facts = sglang_facts.parse_server_log(lines, strict=True)
    expected, count = _full_outcome(lines)
    assert repr(facts.outcome) == repr(expected)
    assert facts.crash is not None and facts.crash.cause == "out-of-memory"
    start = len(startup) + len(served) + 1
    assert facts.crash.traceback == lines[start - 1 :]
    assert facts.crash.tail == lines[-20:]
    assert len(facts.outcome.ignored) == IGNORED_KEPT
    kept = KeptLines(lambda x: False)
    for number, text in enumerate(lines, start=1):
        kept.add(split_line(number, text, strict=False, unwrapper=Unwrapper()), number)
    kept.close()
    # every served line past the first 1,000 ignored ones is dropped: the kept lines do not
    # grow with the served traffic
    assert len(kept.lines) < len(startup) + IGNORED_KEPT + 100 < count


def test_a_bulk_line_above_a_prefixed_frame_is_kept() -> None:
    """A traceback block may start at a prefixed frame line, and the line above it decides its
    head: the bulk line there is kept (dropped, the source line above it would decide: no head)."""
    lines = [
        "[2026-11-20 14:20:00 TP0] server_args=ServerArgs(model_path='m', tp_size=1)",
        *(_bulk("[2026-11-20 14:20:01 TP0]", i) for i in range(0, 40, 5)),
        "[2026-11-20 14:20:02 TP0]     raise RuntimeError(msg)",  # a source line: kept
        _bulk("[2026-11-20 14:20:02 TP0]", 2),  # an access line: set aside, droppable
        '[2026-11-20 14:20:03 TP0] File "/sgl/scheduler.py", line 10, in event_loop',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[2026-11-20 14:20:04 TP0] Received sigquit from a child process.",
    ]
    facts = sglang_facts.parse_server_log(lines)
    expected, _ = _full_outcome(lines)
    assert repr(facts.outcome) == repr(expected)
    assert facts.crash is not None


@pytest.mark.parametrize("path", _logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_runs_backwards_says_what_oldest_first_does(path: Path) -> None:
    """``lines.runs_backwards`` (one pass, no line held) is ``oldest_first``'s decision, on every
    fixture log, turned round, and with its blank lines doubled."""
    lines = [x.rstrip("\r\n") for x in _lines(path)]
    for variant in (lines, lines[::-1], [y for x in lines for y in (x, "")]):
        assert runs_backwards(iter(variant)) == (oldest_first(variant) is not variant)


def test_split_flattened_is_unflatten_of_a_log_that_runs_forward() -> None:
    """The stream's split gives ``unflatten``'s lines on every fixture log that runs forward."""
    for path in _logs():
        lines = [x.rstrip("\r\n") for x in _lines(path)]
        if oldest_first(lines) is lines:
            assert list(split_flattened(iter(lines))) == unflatten(lines), path
