"""``failure.classify`` searches only the regexes its literal prefilter (``ledger.engines.prefilter``)
allows: the verdict must be the one of the full cascade on every line (docs/reliability.md,
the log import's speed)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.engines import failure, identify
from ledger.engines import lines as lines_module
from ledger.engines.lines import strip_layers, unflatten
from ledger.engines.prefilter import Prefilter, needles

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEVELS = (None, "ERROR", "CRITICAL")


def _messages() -> list[str]:
    """Every line of every fixture log, raw and with its launchers' layers off."""
    seen: set[str] = set()
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix not in (".log", ".txt") or not path.is_file():
            continue
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            seen.add(raw.strip())
            seen.add(strip_layers(raw)[0].strip())
    return sorted(seen)


def _full(text: str, level: str | None) -> failure.Verdict:
    return failure.cascade(text.strip(), level, failure._PREFILTER.all)


def test_classify_with_the_prefilter_agrees_with_the_full_cascade_on_every_fixture_line() -> None:
    messages = _messages()
    assert len(messages) > 2_000
    kinds: set[str] = set()
    for text in messages:
        for level in LEVELS:
            verdict = failure.classify(text, level)
            assert verdict == _full(text, level), (text, level)
            kinds.add(verdict.kind)
    assert {"fatal", "harmless", "handled", "error", "warning", "ignored", "none"} <= kinds


# Fragments of the cascade's own branches, in any case, glued with noise: lines close to a match.
_FRAGMENTS = sorted(
    {
        needle
        for pattern in failure._CASCADE
        for needle in needles(re._parser.parse(pattern.pattern, pattern.flags)) or ()  # type: ignore[attr-defined]
    }
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_FRAGMENTS).flatmap(
                lambda f: st.sampled_from([f, f.upper(), f.title(), f[:-1], f[1:]])
            ),
            st.text(alphabet=" :-_.()[]#0123456789aeKkſ\u212a", max_size=6),
        ),
        max_size=8,
    ),
    st.sampled_from(LEVELS),
)
def test_classify_agrees_with_the_full_cascade_on_lines_built_from_its_literals(
    parts: list[str], level: str | None
) -> None:
    text = "".join(parts)
    assert failure.classify(text, level) == _full(text, level)


def test_a_regex_is_searched_only_when_one_of_its_literals_is_in_the_line() -> None:
    cues = Prefilter(
        [re.compile(r"out of memory|\bOOM\b", re.I), re.compile(r"Decode (?:batch|step)")]
    )
    assert cues.possible("Decode batch, #running-req: 3") == 0b10
    assert cues.possible("torch.OutOfMemoryError: CUDA OUT OF MEMORY") == 0b01
    assert cues.possible("all fine") == 0
    assert cues.possible("\u212a all fine") == cues.all  # not ASCII: every regex is searched
    # A pattern that can match without a literal is always searched.
    assert Prefilter([re.compile(r"\d+")]).possible("abc") == 0b1


def _identify_searching_every_sign(lines: list[str], scan: int = 20000) -> identify.Identified:
    """``identify`` as it was before its prefilter: every unseen sign searched on every line."""
    totals = {"sglang": 0, "vllm": 0}
    first: dict[str, int] = {}
    seen: set[int] = set()
    for number, raw in enumerate(unflatten(lines[:scan]), start=1):
        text = strip_layers(raw)[0]
        for i, (engine, weight, rx) in enumerate(identify._SIGNS):
            if i not in seen and rx.search(text):
                seen.add(i)
                totals[engine] += weight
                first.setdefault(engine, number)
    best = max(totals, key=lambda e: totals[e])
    if totals[best] < identify.MIN_WEIGHT or totals["sglang"] == totals["vllm"]:
        return identify.Identified(None)
    return identify.Identified(best, totals[best], first[best])


def test_identify_with_the_prefilter_agrees_with_searching_every_sign_on_every_fixture_log() -> (
    None
):
    engines: set[str | None] = set()
    logs = [p for p in sorted(FIXTURES.rglob("*")) if p.suffix in (".log", ".txt") and p.is_file()]
    assert len(logs) > 100
    for path in logs:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        got = identify.identify(lines)
        assert got == _identify_searching_every_sign(lines), path
        engines.add(got.engine)
    assert engines == {"sglang", "vllm", None}


def test_unflatten_skipping_lines_with_fewer_than_two_prefix_cues_splits_as_the_full_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logs = [p for p in sorted(FIXTURES.rglob("*")) if p.suffix in (".log", ".txt") and p.is_file()]
    texts = [p.read_text(encoding="utf-8", errors="replace").splitlines() for p in logs]
    fast = [unflatten(lines) for lines in texts]
    monkeypatch.setattr(lines_module, "_PREFIX_CUES", ("", ""))  # every line counts 2+: searched
    full = [unflatten(lines) for lines in texts]
    assert fast == full
    assert sum(len(a) for a in full) > sum(len(t) for t in texts)  # some fixtures are flattened


def test_a_cached_timestamp_reads_as_strptime_and_a_bad_one_still_raises() -> None:
    assert lines_module.parse_stamp("2026-11-20 14:10:00") == datetime(2026, 11, 20, 14, 10)
    for _ in range(2):  # the second call is not answered from the cache
        with pytest.raises(ValueError):
            lines_module.parse_stamp("2026-13-20 14:10:00")
