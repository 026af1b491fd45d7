"""``bulk_lines``: a served log's bulk lines read by their shape give the facts the full way gives
(docs/reliability.md, "Server log import speed and memory").

Every fixture log, and variants of it with a served log's bulk lines (both engines' shapes, those
the shortcut takes and near ones it must not: ``cuda graph: False``, other fields, other levels)
put in past the reader's kept ones (2,500 after its first line with the engine's prefix, then 25
after each such line and runs at random places, tracebacks included), read by
``parse_server_log`` (strict and not) and ``parse_vllm_log`` with the shortcut and without it
(its regexes matching nothing): the same facts, ``repr`` for ``repr``, or the same error.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ledger.engines import bulk_lines, sglang_facts, vllm_facts
from tests.engines import test_kept_lines as sglang_bulk
from tests.engines import test_vllm_kept_lines as vllm_bulk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_NOTHING = re.compile(r"(?!)")
_SGLANG_PREFIX_RE = re.compile(r"^(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]{2}\d+)*\]) ")


def _served(lines: list[str], seed: int) -> list[str]:
    """``lines`` with both engines' bulk lines: 2,500 after the first line with a prefix, then
    25 after each such line and runs of 1-60 at random places."""
    rng = random.Random(seed)
    out: list[str] = []
    prefix, tag, stamp, i, first = "[2026-11-20 14:10:00]", "", "12-01 14:45:00", 0, True

    def bulk(count: int) -> list[str]:
        nonlocal i
        made = []
        for k in range(i, i + count):
            made.append(
                sglang_bulk._bulk(prefix, k) if k % 2 else vllm_bulk._bulk(tag, stamp, k // 2)
            )
        i += count
        return made

    for line in lines:
        out.append(line)
        m, v = _SGLANG_PREFIX_RE.match(line), vllm_bulk._STAMP_RE.search(line)
        if m:
            prefix = m.group(1)
        if v:
            tag, stamp = v.group(1) or "", v.group(2)
        if m or v:
            out.extend(bulk(2500 if first else 25))
            first = False
        if rng.random() < 0.3:
            out.extend(bulk(rng.randint(1, 60)))
    return out


def _facts(lines: list[str]) -> list[str]:
    answers = []
    for read in (
        lambda: sglang_facts.parse_server_log(lines),
        lambda: sglang_facts.parse_server_log(lines, strict=True),
        lambda: sglang_facts.parse_server_log(iter(lines), forward=True),
        lambda: vllm_facts.parse_vllm_log(lines),
        lambda: vllm_facts.parse_vllm_log(iter(lines), forward=True),
    ):
        try:
            answers.append(repr(read()))
        except sglang_facts.LogFormatError as exc:
            answers.append(f"error: {exc}")
    return answers


def _logs() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.log") if p.is_file())


@pytest.mark.parametrize("path", _logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_shortcut_gives_the_facts_of_the_full_way(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = sglang_bulk._lines(path)
    for lines in (plain, _served(plain, len(path.name))):
        fast = _facts(lines)
        with monkeypatch.context() as patch:
            patch.setattr(bulk_lines, "SGLANG_BULK_RE", _NOTHING)
            patch.setattr(bulk_lines, "VLLM_BULK_RE", _NOTHING)
            full = _facts(lines)
        assert fast == full, path


def test_the_shortcut_takes_the_bulk_shapes() -> None:
    """The shapes a served log repeats are the shortcut's (a near one is not)."""
    taken = [
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "cuda graph: True, gen throughput (token/s): 12.0, #queue-req: 0, ",
        "[2026-11-20 14:10:00 TP1] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, "
        "token usage: 0.01, #running-req: 0, #queue-req: 0",
        '[2026-11-20 14:10:00] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK',
    ]
    left = [
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "cuda graph: False, gen throughput (token/s): 12.0, #queue-req: 0, ",
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "accept len: 2.50, cuda graph: True, gen throughput (token/s): 12.0, #queue-req: 0, ",
        '[2026-11-20 14:10:00] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK x',
    ]
    assert all(bulk_lines.SGLANG_BULK_RE.match(x) for x in taken)
    assert not any(bulk_lines.SGLANG_BULK_RE.match(x) for x in left)
    vllm_taken = [vllm_bulk._bulk("(APIServer pid=1) ", "12-01 14:45:00", i) for i in (0, 1, 3)]
    assert all(bulk_lines.VLLM_BULK_RE.match(x) for x in vllm_taken)
    assert not bulk_lines.VLLM_BULK_RE.match(vllm_bulk._bulk("", "12-01 14:45:00", 2))


def test_a_served_log_read_by_the_shortcut_keeps_its_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both engines' served logs past the kept batch lines, a crash among the bulk lines: most
    lines go the shortcut, and the facts (the crash, its excerpt and tail) are the full way's."""
    sglang = sglang_bulk._lines(FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log")
    served = [sglang_bulk._bulk("[2026-11-20 14:20:00 TP0]", i) for i in range(15000)]
    crash = [
        "[2026-11-20 14:30:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/scheduler.py", line 10, in event_loop',
        *(sglang_bulk._bulk("[2026-11-20 14:30:01 TP1]", i) for i in range(30)),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        *(sglang_bulk._bulk("[2026-11-20 14:30:01 TP1]", i) for i in range(30)),
    ]
    vllm = vllm_bulk._lines(FIXTURES / "vllm_cpu" / "good-start.log")
    core = "(EngineCore_DP0 pid=2211) ERROR 12-01 15:10:00 [core.py:710]"
    vllm_crash = [
        f"{core} EngineCore encountered a fatal error.",
        f"{core} Traceback (most recent call last):",
        *vllm_bulk._served("12-01 15:10:00", 30),
        f"{core} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        *vllm_bulk._served("12-01 15:10:01", 30),
    ]
    # a process's own stderr traceback, untagged, right after the API server's bulk lines: its
    # record is the last line's (the records the shortcut keeps)
    api = "(APIServer pid=21521) INFO 12-01 14:45:00 [api_server.py:1]"
    stderr = [
        f"{api} vLLM API server version 0.32.0",
        f"{api} non-default args: {{'model': 'm', 'max_num_seqs': 8}}",
        *(x for x in vllm_bulk._served("12-01 14:50:00", 3000) if x.startswith("(APIServer")),
        "Traceback (most recent call last):",
        '  File "/vllm/entrypoints/api_server.py", line 9, in main',
        "RuntimeError: boom",
    ]
    for lines in (
        sglang + served + crash,
        vllm + vllm_bulk._served("12-01 14:50:00", 15000) + vllm_crash,
        stderr,
    ):
        fast = _facts(lines)
        with monkeypatch.context() as patch:
            patch.setattr(bulk_lines, "SGLANG_BULK_RE", _NOTHING)
            patch.setattr(bulk_lines, "VLLM_BULK_RE", _NOTHING)
            assert _facts(lines) == fast
        assert ("out-of-memory" if lines is not stderr else "boom") in (
            fast[0] if lines[0] == sglang[0] else fast[3]
        )
