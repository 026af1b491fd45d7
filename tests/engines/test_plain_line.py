"""The log reader's shortcuts for the bulk of a served log give the full way's answer
(docs/reliability.md, "Server log import speed and memory"):

- ``sglang_lines._plain_line``: a line with SGLang's dated prefix and no launcher layer is split
  without looking for every layer; it must equal ``split_in_full`` (or decline);
- ``sglang_lines.batch_kind``: a ``Decode batch`` / ``Prefill batch`` message goes to its
  handler without trying the rules before it; it must be the handler ``_RULES`` gives (or decline);
- ``lines.Unwrapper.unwrap`` gives a line that starts with a process tag and holds nothing a
  layer needs back as it is (``plain_of_layers``); it must equal ``unwrap_in_full``;
- ``failure.classify`` writes an ASCII line's digits alike by a byte table: the text ``str``'s
  translate gives;
- ``lines.head_lines``: a sniff's first lines of a log, without splitting all of it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.engines import failure, sglang_facts
from ledger.engines.lines import (
    LAYER_MARKS,
    Unwrapper,
    has_layer_mark,
    head_lines,
    plain_of_layers,
)
from ledger.engines.sglang_lines import LogFormatError, _plain_line, batch_kind, split_in_full

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _fixture_lines() -> list[str]:
    """Every line of every fixture log, as ``InputFile.lines`` splits it."""
    seen: set[str] = set()
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix not in (".log", ".txt") or not path.is_file():
            continue
        for raw in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            seen.add(raw[:-1] if raw.endswith("\r") else raw)
    return sorted(seen)


def _agree(raw: str, number: int = 7) -> bool:
    """``_plain_line`` declines ``raw`` or says what the full way says, strict or not; returns
    whether it took it."""
    plain = _plain_line(number, raw)
    for strict in (False, True):
        try:
            full = split_in_full(number, raw, strict=strict, unwrapper=Unwrapper())
        except LogFormatError:
            assert plain is None, raw  # the full way refuses it: the shortcut must not read it
            continue
        assert plain is None or plain == full, raw
    return plain is not None


def _shortcut(msg: str) -> object:
    """The handler ``_Reader.read`` gives ``msg`` by ``batch_kind`` (``None``: the rules read it)."""
    kind = batch_kind(msg)
    return (
        None
        if kind is None
        else {"decode": sglang_facts._decode, "prefill": sglang_facts._prefill}[kind]
    )


def _rules_handler(msg: str) -> object:
    """The handler the rules give ``msg`` in order (what ``_Reader.read`` did before the shortcut)."""
    for match, handle in sglang_facts._RULES:
        if match(msg):
            return handle
    return None


def test_the_plain_line_shortcut_agrees_with_the_full_split_on_every_fixture_line() -> None:
    lines = _fixture_lines()
    taken = sum(_agree(raw) for raw in lines)
    assert len(lines) > 2000 and taken > 200  # the fixtures exercise both ways


_PREFIXES = (
    "[2026-11-20 14:10:00 TP0] ",
    "[2026-11-20 14:10:00 TP3 EP3] ",
    "[2026-11-20 14:10:00 DP1 TP3 EP2] ",
    "[2026-11-20 14:10:00] ",
    "[2026-11-20 14:10:00.123 TP0] ",
    "[2026-11-20 14:10:00 TP0]",
    "[2026-02-30 14:10:00 TP0] ",
    "[2026-11-20 24:10:00] ",
    "[0000-01-01 00:00:00 TP0] ",
    "[23:17:01 TP7] ",
    "sglang-1  | [2026-11-20 14:10:00 TP0] ",
    "[rank0]: [2026-11-20 14:10:00 TP0] ",
    "\x1b[32m[2026-11-20 14:10:00 TP0] ",
    "",
    " ",
)
_PIECES = (
    "Decode batch, #running-req: 33, #token: 36300, token usage: 0.45, ",
    "Prefill batch. #new-seq: 1, #new-token: 128, ",
    "cuda graph: True, gen throughput (token/s): 1123.11, #queue-req: 0",
    'INFO:     127.0.0.1:40001 - "POST /generate HTTP/1.1" 200 OK',
    "WARNING scheduler.py:12: ",
    "ERROR:    ",
    "INFO ",
    "WARN ",
    "[ERROR] ",
    "[E1201 02:07:08.408271 123 ProcessGroupNCCL.cpp:607] ",
    "[2026-11-20 14:10:01 TP1] ",
    "[12m",
    "\x1b[0m",
    "`",
    "```",
    "~~~",
    "](tel:2026-11-20 14)",
    "\r",
    "\n",
    "\t",
    "  ",
    "Traceback (most recent call last):",
    "The server is fired up and ready to roll!",
    "é",
)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(_PREFIXES),
    st.lists(st.sampled_from(_PIECES) | st.text(max_size=8), max_size=5),
)
def test_the_plain_line_shortcut_agrees_on_built_lines(prefix: str, pieces: list[str]) -> None:
    _agree(prefix + "".join(pieces))


def test_the_batch_shortcut_gives_the_rules_handler_on_every_fixture_message() -> None:
    taken = 0
    for number, raw in enumerate(_fixture_lines(), start=1):
        msg = split_in_full(number, raw, strict=False, unwrapper=Unwrapper()).message
        for text in (msg, raw):
            shortcut = _shortcut(text)
            if shortcut is not None:
                taken += 1
                assert shortcut is _rules_handler(text), text
    assert taken > 10


#: Every rule before the batch rules that reads a message by a pattern (not by its start).
_EARLIER_PATTERNS = (
    sglang_facts._ATTN_DEFAULT_RE,
    sglang_facts._MLA_ATTN_RE,
    sglang_facts._LOAD_WEIGHT_RE,
    sglang_facts._CG_BS_RE,
    sglang_facts._CG_TOKENS_RE,
    sglang_facts._CG_PHASE_RE,
    sglang_facts._PIECEWISE_DISABLE_RE,
    *sglang_facts._PREFILL_GRAPH_DISABLE_RES,
    sglang_facts._MOE_FOUND_RE,
    sglang_facts._MOE_FALLBACK_RE,
    sglang_facts._MOE_DEFAULT_RE,
    sglang_facts._MOE_DOWN_REUSE_RE,
    re.compile(re.escape(sglang_facts.READY)),
)


@pytest.mark.parametrize("pattern", _EARLIER_PATTERNS, ids=lambda rx: rx.pattern[:30])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_batch_message_that_an_earlier_rule_reads_goes_the_full_way(
    pattern: re.Pattern[str], data: st.DataObject
) -> None:
    """A batch line holding what an earlier rule matches (built from that rule's own pattern)
    is declined by the shortcut, or given the handler the rules give."""
    start = data.draw(st.sampled_from(("Decode batch. ", "Decode batch, ", "Prefill batch, ")))
    inside = data.draw(st.from_regex(pattern, fullmatch=True))
    msg = start + "#running-req: 3, " + inside.replace("\n", " ")
    shortcut = _shortcut(msg)
    assert shortcut is None or shortcut is _rules_handler(msg)
    if pattern.search(msg):
        assert shortcut is None  # every such rule's literal is one of the cues


def test_the_batch_shortcut_reads_the_common_lines() -> None:
    decode = "Decode batch, #running-req: 33, #token: 36300, token usage: 0.45, cuda graph: True"
    prefill = "Prefill batch. #new-seq: 1, #new-token: 128, #cached-token: 0, #queue-req: 0,"
    assert _shortcut(decode) is sglang_facts._decode
    assert _shortcut(prefill) is sglang_facts._prefill
    assert _shortcut("Decode batch, Load weight end. elapsed=3 s") is None
    assert _shortcut("Decode batches were slow") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_the_byte_digit_shape_is_the_str_one(text: str) -> None:
    """``failure.classify`` shapes an ASCII text's digits by a byte table: the same text as
    ``str.translate`` with ``_SHAPE`` gives."""
    shaped = text.encode("ascii").translate(failure._SHAPE_BYTES).decode("ascii")
    assert failure._SHAPE is not None and shaped == text.translate(failure._SHAPE)


def test_the_byte_digit_shape_is_the_str_one_on_every_fixture_line() -> None:
    for raw in _fixture_lines():
        if raw.isascii():
            shaped = raw.encode("ascii").translate(failure._SHAPE_BYTES).decode("ascii")
            assert shaped == raw.translate(failure._SHAPE or {})


def test_unwrap_of_a_tagged_line_agrees_with_the_full_way_on_every_fixture_line() -> None:
    unwrapper = Unwrapper()
    lines = _fixture_lines()
    tagged = [raw for raw in lines if raw.startswith("(")]
    for raw in lines:
        assert unwrapper.unwrap(raw) == unwrapper.unwrap_in_full(raw), raw
    assert len(tagged) > 200 and sum(plain_of_layers(raw) for raw in tagged) > 200


_TAGS = (
    "(APIServer pid=21521) ",
    "(EngineCore_DP0 pid=1) ",
    "(VllmWorker rank=1 pid=7) ",
    "(WorkerDict pid=281552, ip=10.0.0.1) ",
    "(",
)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(_TAGS),
    st.lists(
        st.sampled_from(
            (
                "INFO 12-01 14:45:00 [loggers.py:257] ",
                "ERROR 12-01 14:45:00 [core.py:12] ",
                'INFO:     127.0.0.1:40001 - "POST /v1/completions HTTP/1.1" 200 OK',
                "[rank0]: ",
                "[0] ",
                *_PIECES,
            )
        )
        | st.text(max_size=8),
        max_size=5,
    ),
)
def test_unwrap_of_a_tagged_line_agrees_on_built_lines(tag: str, pieces: list[str]) -> None:
    raw = tag + "".join(pieces)
    assert Unwrapper().unwrap(raw) == Unwrapper().unwrap_in_full(raw)


@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=6), max_size=6))
def test_has_layer_mark_is_any_mark(pieces: list[str]) -> None:
    raw = "".join(pieces)
    assert has_layer_mark(raw) == any(mark in raw for mark in LAYER_MARKS)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(("\n", "\r\n", "\r", "\x0b", "\x1c", "\u2028", "\x85", "a", "[x] ", ""))
        | st.text(max_size=5),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=12),
)
def test_head_lines_is_the_first_lines_of_splitlines(pieces: list[str], count: int) -> None:
    """The sniffs read a log's first lines without splitting all of it: the same lines."""
    text = "".join(pieces)
    assert head_lines(text, count) == text.splitlines()[:count]


def test_head_lines_on_every_fixture_log() -> None:
    for path in sorted(FIXTURES.rglob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for count in (1, 7, 5000):
            assert head_lines(text, count) == text.splitlines()[:count]
