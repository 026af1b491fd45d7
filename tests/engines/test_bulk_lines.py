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

from ledger import input_files
from ledger.engines import bulk_lines, sglang_facts, vllm_facts
from ledger.engines.lines import LEARN_LINES, Chronology
from ledger.input_files import BulkRun
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
        same = fast == full  # not in the assert: pytest diffs long reprs slowly
        assert same, path


def test_the_shortcut_takes_the_bulk_shapes() -> None:
    """The shapes a served log repeats are the shortcut's (a near one is not)."""
    taken = [
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "cuda graph: True, gen throughput (token/s): 12.0, #queue-req: 0, ",
        "[2026-11-20 14:10:00 TP1] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, "
        "token usage: 0.01, #running-req: 0, #queue-req: 0",
        '[2026-11-20 14:10:00] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK',
        # speculative decoding's accept length, with its rate or not; a decode without graph
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "cuda graph: False, gen throughput (token/s): 12.0, #queue-req: 0, ",
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "accept len: 2.50, cuda graph: True, gen throughput (token/s): 12.0, #queue-req: 0, ",
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "accept len: 2.50, accept rate: 0.62, cuda graph: False, gen throughput (token/s): 12.0, "
        "#queue-req: 0",
    ]
    left = [
        # an accept length without a decimal point, a field the shape does not know
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "accept len: 3, cuda graph: False, gen throughput (token/s): 12.0, #queue-req: 0, ",
        "[2026-11-20 14:10:00 TP0] Decode batch, #running-req: 3, #token: 88, token usage: 0.02, "
        "accept len: 2.50, accept rate: 0.62, #retracted-req: 1, cuda graph: True, "
        "gen throughput (token/s): 12.0, #queue-req: 0",
        '[2026-11-20 14:10:00] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK x',
    ]
    assert all(bulk_lines.SGLANG_BULK_RE.match(x) for x in taken)
    assert not any(bulk_lines.SGLANG_BULK_RE.match(x) for x in left)
    vllm_taken = [vllm_bulk._bulk("(APIServer pid=1) ", "12-01 14:45:00", i) for i in (0, 1, 3)]
    vllm_taken.append(_spec_metrics("(APIServer pid=1) INFO", "12-01 14:45:00", 2.5))
    assert all(bulk_lines.VLLM_BULK_RE.match(x) for x in vllm_taken)
    assert not bulk_lines.VLLM_BULK_RE.match(vllm_bulk._bulk("", "12-01 14:45:00", 2))
    # another level; an older vLLM's metrics (no mean acceptance length)
    assert not bulk_lines.VLLM_BULK_RE.match(_spec_metrics("WARNING", "12-01 14:45:00", 2.5))
    assert not bulk_lines.VLLM_BULK_RE.match(
        "INFO 12-01 14:45:00 [metrics.py:120] SpecDecoding metrics: Draft acceptance rate: 0.61, "
        "System efficiency: 0.52, Number of speculative tokens: 3, Number of accepted tokens: 9"
    )


def _spec_metrics(head: str, stamp: str, accept: float) -> str:
    """vLLM 0.32's ``SpecDecoding metrics`` line (``vllm_cpu/spec-start.log``'s shape)."""
    return (
        f"{head} {stamp} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
        f"{accept:.2f}, Accepted throughput: 18.00 tokens/s, Drafted throughput: 19.69 tokens/s, "
        f"Accepted: 180 tokens, Drafted: 197 tokens, Per-position acceptance rate: 0.935, 0.727, "
        f"0.675, Avg Draft acceptance rate: 91.4%"
    )


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


def _expanded(items: list[str]) -> list[str]:
    return [x for item in items for x in (item.split("\n") if type(item) is BulkRun else [item])]


def test_a_file_read_with_runs_gives_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``input_files.iter_lines`` with runs gives the lines it gives without, a run being its
    lines: served variants of the fixture logs, with a byte-order mark, CRLF line ends and no
    last newline, read in small pieces (runs cut at their ends)."""
    monkeypatch.setattr(input_files, "RUN_PIECE", 4096)
    for n, path in enumerate(_logs()[::4]):
        text = "\n".join(_served(sglang_bulk._lines(path), n)) + "\n"
        for variant in (text, "\ufeff" + text, text.replace("\n", "\r\n"), text.rstrip("\n")):
            log = tmp_path / "v.log"
            log.write_text(variant, encoding="utf-8", newline="")
            plain = list(input_files.iter_lines(log))
            items = list(input_files.iter_lines(log, bulk_lines.SGLANG_RUN_RE, 100))
            assert _expanded(items) == plain, path
            assert items[:100] == plain[:100]
    assert any(type(x) is BulkRun for x in items)


def _served_runs(lines: list[str], seed: int) -> list[str]:
    """``lines`` with SGLang's bulk lines: 12,000 after the first line with its prefix (past the
    kept ones and ``LEARN_LINES``, their times rising), then 1-60 after a third of the lines
    (tracebacks included)."""
    rng = random.Random(seed)
    out: list[str] = []
    prefix, i, first = "[2026-11-20 14:10:00]", 0, True
    for line in lines:
        out.append(line)
        if m := _SGLANG_PREFIX_RE.match(line):
            prefix = m.group(1)
        if m and first:  # times rising, as a served log's
            out.extend(
                sglang_bulk._bulk(
                    f"[2026-11-20 {15 + k // 3600}:{k // 60 % 60:02d}:{k % 60:02d}]", k
                )
                for k in range(12000)
            )
            first = False
            continue
        count = rng.randint(1, 60) if rng.random() < 0.3 else 0
        out.extend(sglang_bulk._bulk(prefix, k) for k in range(i, i + count))
        i += count
    return out


def test_a_log_read_with_runs_gives_the_facts_of_the_full_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Served variants of every fixture log read as a stream with runs of bulk lines taken whole
    (past ``LEARN_LINES``, in small pieces): the facts of the lines read the full way; and one
    whose bulk lines have a time that cannot be (Feb 30) refuses it at its line, as before."""
    monkeypatch.setattr(input_files, "RUN_PIECE", 8192)
    taken = 0
    original = bulk_lines.SglangBulk.take_run

    def counting(self: bulk_lines.SglangBulk, number: int, run: BulkRun, facts: object) -> int:
        nonlocal taken
        got = original(self, number, run, facts)
        taken += got
        return got

    monkeypatch.setattr(bulk_lines.SglangBulk, "take_run", counting)
    for n, path in enumerate(_logs()[::3]):
        lines = _served_runs(sglang_bulk._lines(path), n)
        log = tmp_path / "v.log"
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        answers = []
        for runs in (bulk_lines.SGLANG_RUN_RE, None):
            for strict in (True, False):
                stream = Chronology().watch(input_files.iter_lines(log, runs, LEARN_LINES))
                try:
                    answers.append(
                        repr(sglang_facts.parse_server_log(stream, strict=strict, forward=True))
                    )
                except sglang_facts.LogFormatError as exc:
                    answers.append(f"error: {exc}")
        same = answers[:2] == answers[2:]  # not in the assert: pytest diffs long reprs slowly
        assert same, path
    assert taken > 100_000
    # a crash, then the other ranks' bulk lines: the tail is the log's last lines, a run's
    startup = sglang_bulk._lines(FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log")
    crashed = _served_runs(startup, 1) + [
        "[2026-11-20 19:30:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/scheduler.py", line 10, in event_loop',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        *(
            x
            for x in (sglang_bulk._bulk("[2026-11-20 19:30:01 TP1]", k) for k in range(60))
            if x[0] == "["
        ),
    ]
    log.write_text("\n".join(crashed) + "\n", encoding="utf-8")
    facts = [
        sglang_facts.parse_server_log(
            Chronology().watch(input_files.iter_lines(log, runs, LEARN_LINES)), forward=True
        )
        for runs in (bulk_lines.SGLANG_RUN_RE, None)
    ]
    assert facts[0].crash is not None and facts[0].crash.tail == crashed[-20:]
    assert repr(facts[0]) == repr(facts[1])
    served = [sglang_bulk._bulk("[2026-02-27 14:20:00 TP0]", i) for i in range(20000) if i % 5 < 3]
    bad = [x.replace("2026-02-27", "2026-02-30") for x in served[:10]]
    startup = sglang_bulk._lines(FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log")
    log = tmp_path / "bad.log"
    log.write_text("\n".join(startup + served + bad + served) + "\n", encoding="utf-8")
    stream = Chronology().watch(input_files.iter_lines(log, bulk_lines.SGLANG_RUN_RE, LEARN_LINES))
    with pytest.raises(
        sglang_facts.LogFormatError, match=f"line {len(startup) + len(served) + 1}:"
    ):
        sglang_facts.parse_server_log(stream, strict=True, forward=True)


def _served_vllm_runs(lines: list[str], seed: int) -> list[str]:
    """``lines`` with vLLM's bulk lines: 12,000 after the first line with vLLM's prefix (its
    process's and untagged ones, throughput lines repeating a header), then 1-60 after a third of
    the lines (tracebacks included), of the process and time of the line before."""
    rng = random.Random(seed)
    out: list[str] = []
    tag, stamp, i, first = "(APIServer pid=21521) ", "12-01 14:45:00", 0, True
    for line in lines:
        out.append(line)
        if v := vllm_bulk._STAMP_RE.search(line):
            tag, stamp = v.group(1) or "", v.group(2)
        count = 12000 if v and first else rng.randint(1, 60) if rng.random() < 0.3 else 0
        first = first and not v
        out.extend(vllm_bulk._bulk(tag, stamp, k) for k in range(i, i + count))
        i += count
    return out


def test_a_vllm_log_read_with_runs_gives_the_facts_of_the_full_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for SGLang: served variants of every fixture log read as a stream with runs of vLLM's
    bulk lines taken whole give the facts of the lines read the full way."""
    monkeypatch.setattr(input_files, "RUN_PIECE", 8192)
    taken = 0
    original = bulk_lines.vllm_take_run

    def counting(bulk: bulk_lines.VllmBulk, number: int, run: BulkRun, facts: object) -> int:
        nonlocal taken
        got = original(bulk, number, run, facts)
        taken += got
        return got

    monkeypatch.setattr(vllm_facts, "vllm_take_run", counting)
    for n, path in enumerate(_logs()[::2]):
        log = tmp_path / "v.log"
        log.write_text("\n".join(_served_vllm_runs(vllm_bulk._lines(path), n)) + "\n")
        answers = [
            repr(
                vllm_facts.parse_vllm_log(
                    Chronology().watch(input_files.iter_lines(log, runs, LEARN_LINES)),
                    forward=True,
                )
            )
            for runs in (bulk_lines.VLLM_RUN_RE, None)
        ]
        same = (
            answers[0] == answers[1]
        )  # not compared in the assert: pytest diffs long reprs slowly
        assert same, path
    assert taken > 20_000
