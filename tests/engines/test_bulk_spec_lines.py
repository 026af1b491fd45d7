"""``bulk_lines``: the bulk lines of a speculative or eager served log (SGLang's decode lines with
``accept len`` and ``cuda graph: False``, vLLM's ``SpecDecoding metrics`` lines) read by their
shape, one at a time and in runs, give the facts the full way gives: the accept-length series and
its first and last lines, the eager decode lines, the kept lines, the tail (docs/reliability.md,
"Server log import speed and memory").
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ledger import input_files
from ledger.engines import bulk_lines, sglang_facts, vllm_facts
from ledger.engines.lines import LEARN_LINES, Chronology
from ledger.input_files import BulkRun
from tests.engines import test_bulk_lines as plain_bulk
from tests.engines import test_kept_lines as sglang_bulk
from tests.engines import test_vllm_kept_lines as vllm_bulk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _sglang(prefix: str, i: int) -> str:
    """A speculative served SGLang log's bulk line of the ``i``-th shape under ``prefix``: decode
    lines with an accept length (with its rate or not, under CUDA graph or not), without one,
    near shapes the shortcut leaves (an accept length without a decimal point), prefill and
    access lines."""
    accept = 1.25 + i % 11 / 4
    shapes = (
        f"{prefix} Decode batch, #running-req: {1 + i % 70}, #token: {i * 3}, token usage: 0.0"
        f"{i % 10}, accept len: {accept:.2f}, accept rate: {accept / 4:.2f}, cuda graph: "
        f"{i % 70 < 48}, gen throughput (token/s): {100 + i}.5, #queue-req: 0",
        f"{prefix} Decode batch, #running-req: {1 + i % 9}, #token: {i * 3}, token usage: 0.01, "
        f"accept len: {accept:.2f}, cuda graph: True, gen throughput (token/s): 12.0, "
        f"#queue-req: 0, ",
        sglang_bulk._bulk(prefix, i),
        f"{prefix} Prefill batch, #new-seq: 1, #new-token: {i % 700}, #cached-token: 0, "
        f"token usage: 0.01, #running-req: {i % 4}, #queue-req: 0",
        f"{prefix} Decode batch, #running-req: 60, #token: {i}, token usage: 0.01, cuda graph: "
        f"False, gen throughput (token/s): 12.0, #queue-req: 0, ",
    )
    if i % 50 == 49:  # the near shape, now and then
        return (
            f"{prefix} Decode batch, #running-req: 3, #token: 88, token usage: 0.02, accept len: "
            f"3, cuda graph: True, gen throughput (token/s): 12.0, #queue-req: 0, "
        )
    return shapes[i % len(shapes)]


def _vllm(tag: str, stamp: str, i: int) -> str:
    """A speculative served vLLM log's bulk line: the plain shapes and ``SpecDecoding metrics``
    lines of the process ``tag`` (an untagged one's too)."""
    if i % 3:
        return vllm_bulk._bulk(tag, stamp, i)
    return plain_bulk._spec_metrics(f"{tag}INFO", stamp, 1 + i % 13 / 4)


def _with_bulk(lines: list[str], seed: int) -> list[str]:
    """``lines`` with both engines' speculative bulk lines: 2,500 after the first line with a
    prefix (past the kept ones), then 25 after each such line and 1-60 at random places."""
    rng = random.Random(seed)
    out: list[str] = []
    prefix, tag, stamp, i, first = "[2026-11-20 14:10:00]", "", "12-01 14:45:00", 0, True
    for line in lines:
        out.append(line)
        m, v = plain_bulk._SGLANG_PREFIX_RE.match(line), vllm_bulk._STAMP_RE.search(line)
        if m:
            prefix = m.group(1)
        if v:
            tag, stamp = v.group(1) or "", v.group(2)
        count = 0
        if m or v:
            count, first = (2500 if first else 25), False
        if rng.random() < 0.3:
            count += rng.randint(1, 60)
        out.extend(
            _sglang(prefix, k) if k % 2 else _vllm(tag, stamp, k // 2) for k in range(i, i + count)
        )
        i += count
    return out


@pytest.mark.parametrize(
    "path", plain_bulk._logs()[::2], ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_speculative_bulk_lines_one_at_a_time_give_the_facts_of_the_full_way(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _with_bulk(sglang_bulk._lines(path), len(path.name))
    fast = plain_bulk._facts(lines)
    with monkeypatch.context() as patch:
        patch.setattr(bulk_lines, "SGLANG_BULK_RE", plain_bulk._NOTHING)
        patch.setattr(bulk_lines, "VLLM_BULK_RE", plain_bulk._NOTHING)
        full = plain_bulk._facts(lines)
    same = fast == full  # not in the assert: pytest diffs long reprs slowly
    assert same, path


def _runs_of(lines: list[str], seed: int, bulk: str) -> list[str]:
    """``lines`` with one engine's speculative bulk lines: 12,000 after the first line with its
    prefix (times rising), then 1-60 after a third of the lines (tracebacks included)."""
    rng = random.Random(seed)
    out: list[str] = []
    prefix, tag, stamp, i, first = (
        "[2026-11-20 14:10:00]",
        "(APIServer pid=1) ",
        "12-01 14:45:00",
        0,
        True,
    )
    for line in lines:
        out.append(line)
        m = plain_bulk._SGLANG_PREFIX_RE.match(line) if bulk == "sglang" else None
        v = vllm_bulk._STAMP_RE.search(line) if bulk == "vllm" else None
        prefix = m.group(1) if m else prefix
        if v:
            tag, stamp = v.group(1) or "", v.group(2)
        if (m or v) and first:
            first = False
            for k in range(12000):  # times rising, as a served log's
                hms = f"{15 + k // 3600}:{k // 60 % 60:02d}:{k % 60:02d}"
                out.append(
                    _sglang(f"[2026-11-20 {hms}]", k)
                    if bulk == "sglang"
                    else _vllm(tag, f"12-01 {hms}", k)
                )
            continue
        count = rng.randint(1, 60) if rng.random() < 0.3 else 0
        out.extend(
            _sglang(prefix, k) if bulk == "sglang" else _vllm(tag, stamp, k)
            for k in range(i, i + count)
        )
        i += count
    return out


def test_speculative_bulk_lines_in_runs_give_the_facts_of_the_full_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Speculative variants of the fixture logs read as a stream with runs of bulk lines taken
    whole (in small pieces): the facts of the lines read the full way (SGLang strict and not,
    vLLM); most of their lines, accept lengths and eager decodes included, went in runs."""
    monkeypatch.setattr(input_files, "RUN_PIECE", 8192)
    taken = {"sglang": 0, "vllm": 0}
    sglang_run, vllm_run = bulk_lines.SglangBulk.take_run, bulk_lines.vllm_take_run

    def sglang_counting(
        self: bulk_lines.SglangBulk, number: int, run: BulkRun, facts: object
    ) -> int:
        got = sglang_run(self, number, run, facts)
        taken["sglang"] += got
        return got

    def vllm_counting(bulk: bulk_lines.VllmBulk, number: int, run: BulkRun, facts: object) -> int:
        got = vllm_run(bulk, number, run, facts)
        taken["vllm"] += got
        return got

    monkeypatch.setattr(bulk_lines.SglangBulk, "take_run", sglang_counting)
    monkeypatch.setattr(vllm_facts, "vllm_take_run", vllm_counting)
    log = tmp_path / "v.log"
    accepts = eager = 0
    for n, path in enumerate(plain_bulk._logs()[::4]):
        for engine in ("sglang", "vllm"):
            log.write_text("\n".join(_runs_of(sglang_bulk._lines(path), n, engine)) + "\n")
            answers = []
            for runs in (
                (bulk_lines.SGLANG_RUN_RE, None)
                if engine == "sglang"
                else (bulk_lines.VLLM_RUN_RE, None)
            ):
                reads = (
                    [
                        lambda s, strict=strict: sglang_facts.parse_server_log(
                            s, strict=strict, forward=True
                        )
                        for strict in (True, False)
                    ]
                    if engine == "sglang"
                    else [lambda s: vllm_facts.parse_vllm_log(s, forward=True)]
                )
                for read in reads:
                    stream = Chronology().watch(input_files.iter_lines(log, runs, LEARN_LINES))
                    try:
                        facts = read(stream)
                    except sglang_facts.LogFormatError as exc:
                        answers.append(f"error: {exc}")
                        continue
                    answers.append(repr(facts))
                    if engine == "sglang" and runs is not None:
                        accepts += len(facts.accept_series)
                        eager += facts.eager_decodes.count
            half = len(answers) // 2
            same = answers[:half] == answers[half:]  # not in the assert: slow diffs
            assert same, (path, engine)
    assert taken["sglang"] > 100_000 and taken["vllm"] > 10_000
    assert accepts > 50_000 and eager > 20_000
