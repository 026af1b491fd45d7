"""``detect_format`` asks a sniff's scanned score (``Later``: an excerpt claimed by the engine its
lines name, ``identify`` over up to 20,000 lines) only where that score could still win: every
fixture file gets the importer that asking every score gives, and a vLLM server log is not
scanned for SGLang's excerpt score (docs/reliability.md, "Server log import speed and memory")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.engines.vllm_log import is_vllm_log
from ledger.errors import LedgerError
from ledger.importers import detect, server_log, vllm_server_log
from ledger.importers.detect import (
    Importer,
    InputFile,
    Later,
    Sniffed,
    detect_format,
    read_input,
    registered_importers,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
EVERY = sorted(p for p in FIXTURES.rglob("*") if p.is_file())


def _every_score_asked(file: InputFile) -> Importer | None:
    """The importer of the highest score, the first registered on a tie, every score asked."""
    sniffed = Sniffed(file)
    best, best_score = None, 0.0
    for importer in registered_importers():
        score = importer.sniff(sniffed)
        if isinstance(score, Later):
            score = score.score()
        if score > best_score:
            best, best_score = importer, score
    return best


def test_every_fixture_file_gets_the_importer_every_score_gives() -> None:
    later = 0
    for path in EVERY:
        try:
            file = read_input(path)
        except LedgerError:
            continue  # not text (both ways alike)
        if file.streamed:
            file = InputFile(path=file.path, text=file.text, sha256=file.sha256)
        try:
            kind = detect_format(file).kind
        except LedgerError:
            kind = None
        best = _every_score_asked(file)
        assert kind == (best.kind if best is not None else None), path
        later += kind in ("sglang-server-log", "vllm-server-log")
    assert len(EVERY) > 1000 and later > 100


def test_a_vllm_log_is_not_scanned_for_sglang_s_excerpt_score_and_an_excerpt_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scanned: list[int] = []
    identify = detect.identify

    def counted(lines: list[str]) -> object:
        scanned.append(len(lines))
        return identify(lines)

    monkeypatch.setattr(detect, "identify", counted)
    log = FIXTURES / "vllm_cpu" / "good-start.log"
    assert detect_format(read_input(log)).kind == "vllm-server-log"
    assert scanned == []
    excerpt = tmp_path / "tail.txt"
    excerpt.write_text(
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 9, in f\n'
        "RuntimeError: CUDA error: out of memory\n"
        "Scheduler hit an exception\n",
        encoding="utf-8",
    )
    assert detect_format(read_input(excerpt)).kind == "sglang-server-log"
    assert scanned == [4]


_SCORES = st.sampled_from([0.0, 0.4, 0.5, 0.9])


@given(st.lists(st.tuples(st.booleans(), _SCORES, _SCORES), min_size=1, max_size=5))
def test_scores_asked_later_pick_what_asking_every_score_picks(
    sniffs: list[tuple[bool, float, float]],
) -> None:
    """Any registry of plain scores and ``Later`` ones (``at_most`` never below the score it
    gives), ties included: the same importer as asking every score, and no ``Later`` asked
    whose ``at_most`` is below a plain score (a vLLM log's 0.9 against SGLang's excerpt 0.5)."""
    asked: list[float] = []

    def sniff(later: bool, at_most: float, score: float) -> Callable[[Sniffed], float | Later]:
        if not later:
            return lambda _: score

        def ask() -> float:
            asked.append(at_most)
            return min(score, at_most)

        return lambda _: Later(at_most, ask)

    fakes = [
        Importer(kind=f"k{i}", description="", sniff=sniff(*s), read=lambda f, c: ([], {}))
        for i, s in enumerate(sniffs)
    ]
    file = InputFile(path=Path("x.txt"), text="text", sha256="")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(detect, "_LOADED", fakes)
        expected = _every_score_asked(file)
        asked.clear()
        try:
            kind = detect_format(file).kind
        except LedgerError:
            kind = None
    assert kind == (expected.kind if expected is not None else None)
    plain = max([s for later, _, s in sniffs if not later], default=0.0)
    assert all(at_most >= plain for at_most in asked)


def test_a_streamed_head_is_scanned_once_for_each_engine_s_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A log read as a stream: its head's SGLang and vLLM line scans, made to decide whether it
    is streamed, are the ones its sniffs read (not run again on the 8 MiB head)."""
    scans: list[str] = []
    for name, scan in (("is_server_log", detect.is_server_log), ("is_vllm_log", is_vllm_log)):
        # wherever a sniff may look it up
        for module in (detect, server_log, vllm_server_log):
            monkeypatch.setattr(
                module,
                name,
                lambda text, scan=scan, name=name: scans.append(name) or scan(text),
                raising=False,
            )
    monkeypatch.setattr(detect, "STREAM_FROM", 1)
    for log, kind, scanned in (
        (FIXTURES / "vllm_cpu" / "good-start.log", "vllm-server-log", 2),
        (FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log", "sglang-server-log", 1),
    ):
        scans.clear()
        file = read_input(log)
        assert file.streamed and detect_format(file).kind == kind
        assert len(scans) == len(set(scans)) == scanned, scans
