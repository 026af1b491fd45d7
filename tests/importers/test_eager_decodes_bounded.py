"""An SGLang log's decode lines logged with ``cuda graph: False`` are kept as a count and the
first lines per ``#running-req`` value (``eager_decodes.EagerDecodes``), not one object a line
(docs/reliability.md, "Server log import speed and memory"): the decode-eager finding is the one
the lines themselves give, whatever their number."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger import input_files
from ledger.engines import bulk_lines, sglang_facts
from ledger.engines.eager_decodes import EAGER_LINES_QUOTED, EagerDecodes
from ledger.engines.lines import LEARN_LINES, Chronology, LogLine
from ledger.importers import detect, import_file
from tests.importers.test_server_log_spec_shapes import _counting

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STARTUP = FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log"  # graphs up to bs 48
LARGEST = 48
#: the batch sizes the eager lines cycle through: two at or below the largest captured one; the
#: last from half-way on only (its first lines are taken in runs, long after the kept ones)
SIZES = (40, 48, 52, 60, 64, 57, 70, 75)
EAGER_LINES = 100_000


def _write(path: Path) -> list[tuple[int, int]]:
    """A real startup, then ``EAGER_LINES`` decode lines without CUDA graph (every fourth with an
    accept length) at ``SIZES`` by turns (the last from half-way on), every eighth followed by a decode line under CUDA graph
    and an access line; the (line number, ``#running-req``) of each eager line."""
    out = [
        line
        for line in STARTUP.read_text(encoding="utf-8").splitlines()
        if "Decode batch" not in line and "Prefill batch" not in line
    ]
    clock = datetime(2026, 11, 20, 14, 10, 0)
    eager = []
    for i in range(EAGER_LINES):
        stamp = clock.strftime("%Y-%m-%d %H:%M:%S")
        sizes = len(SIZES) if i >= EAGER_LINES // 2 else len(SIZES) - 1
        running = SIZES[(i * 3 + i // 11) % sizes]
        spec = "accept len: 2.50, accept rate: 0.62, " if i % 4 == 0 else ""
        out.append(
            f"[{stamp} TP{i % 4}] Decode batch, #running-req: {running}, #token: {running * 90}, "
            f"token usage: 0.{i % 90:02d}, {spec}cuda graph: False, gen throughput (token/s): "
            f"{100 + i % 3000}.50, #queue-req: 0"
        )
        eager.append((len(out), running))
        if i % 8 == 7:
            out.append(
                f"[{stamp} TP0] Decode batch, #running-req: 8, #token: 700, token usage: 0.01, "
                f"cuda graph: True, gen throughput (token/s): 90.00, #queue-req: 0"
            )
            out.append(
                f'[{stamp}] INFO:     127.0.0.1:{40000 + i % 20000} - "POST /generate HTTP/1.1" '
                f"200 OK"
            )
            clock += timedelta(milliseconds=250)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return eager


def test_many_eager_lines_keep_a_bounded_aggregate_and_the_same_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "eager.log"
    eager = _write(log)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert all("cuda graph: False" in lines[n - 1] for n, _ in eager)
    assert sum("cuda graph: False" in x for x in lines) == EAGER_LINES
    taken = _counting(monkeypatch)
    stream = Chronology().watch(input_files.iter_lines(log, bulk_lines.SGLANG_RUN_RE, LEARN_LINES))
    facts = sglang_facts.parse_server_log(stream, strict=True, forward=True)
    kept = facts.eager_decodes.kept()
    assert taken["sglang"] > 0.9 * len(lines)  # in runs: all but the head and the kept ones
    assert facts.eager_decodes.count == EAGER_LINES
    assert len(facts.eager_decodes.groups) == len(SIZES)
    assert len(kept) <= len(SIZES) * EAGER_LINES_QUOTED
    assert [(line.number, value) for value, line in kept] == sorted(
        next_three
        for size in SIZES
        for next_three in [x for x in eager if x[1] == size][:EAGER_LINES_QUOTED]
    )
    # the finding, as the lines give it: every eager line above 48, the largest, the first three
    above = [(n, running) for n, running in eager if running > LARGEST]
    monkeypatch.setattr(detect, "STREAM_FROM", 1 << 20)
    assert detect.read_input(log).streamed
    (finding,) = [
        e
        for e in import_file(log).events
        if getattr(e, "kind", None) == "decode-without-cuda-graph"
    ]
    assert finding.message.startswith(
        f"{len(above)} decode batch line(s) ran without CUDA graph at #running-req up to "
        f"{max(SIZES)}, above the largest captured batch size {LARGEST}"
    )
    assert [x.ref for x in finding.evidence[1:]] == [f"eager.log:{n}" for n, _ in above[:3]]


def _as_a_list(values: list[Any], largest: int) -> tuple[int, Any, list[int]] | None:
    """The finding's count, peak and first three lines (their places) read from every line kept,
    as the reader read them when it kept each eager line."""
    eager = [(place, value) for place, value in enumerate(values) if (value or 0) > largest]
    if not eager:
        return None
    return len(eager), max(value or 0 for _, value in eager), [place for place, _ in eager[:3]]


@pytest.mark.parametrize("seed", range(40))
def test_the_aggregate_answers_as_every_line_would(seed: int) -> None:
    """Values as a batch line's parse gives them (ints, floats, booleans, none, a NaN), in any
    order: the same count, peak (its type too: ``70`` and ``70.0`` print apart, the first line's is the peak) and
    lines."""
    rng = random.Random(seed)
    pool: list[Any] = [None, 0, 1, True, False, 47, 48, 49, 49.0, 52, 70, 70.0, 0.0, float("nan")]
    values = [rng.choice(pool[: rng.randint(3, len(pool))]) for _ in range(rng.randint(0, 60))]
    aggregate = EagerDecodes()
    for place, value in enumerate(values):
        aggregate.add(value, lambda place=place: LogLine(place, "", ""))
    assert aggregate.count == len(values)
    # a group per distinct value (``70`` and ``70.0`` are one), none for a NaN
    assert len(aggregate.groups) == len({v or 0 for v in values if (v or 0) == (v or 0)})
    for largest in (-1, 0, 1, 47, 48, 49, 69, 70):
        expected = _as_a_list(values, largest)
        got = aggregate.above(largest)
        if expected is None:
            assert got is None
            continue
        assert got is not None
        count, peak, places = expected
        assert (got.count, repr(got.peak), [x.number for x in got.lines]) == (
            count,
            repr(peak),
            places,
        )
