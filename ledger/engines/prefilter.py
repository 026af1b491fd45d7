"""Which of a set of regexes can match a line, from one Aho-Corasick pass over its lowercase text.

``failure.classify`` runs a cascade of case-insensitive alternations (dozens of branches each)
on every level-less line; Python's ``re`` finds no literal prefix in such an alternation, so
each search tries every branch at every position (~30-60 µs per regex on a 140-byte line:
docs/reliability.md). Every branch of those regexes contains a literal, so a regex can only
match a line holding one of its branches' literals. ``Prefilter`` reads those literals from
the compiled patterns themselves (``re``'s own parser: nothing to keep in step by hand),
lowercases them, and finds them all in one pass (pyahocorasick, already a dependency for the
secret scan); a regex none of whose literals occur is not searched. The answer is exact: a
regex whose literals occur is still searched, and a line that is not ASCII (where a
case-insensitive match may pair characters that ``str.lower`` does not, e.g. the Kelvin sign
and ``k``) marks every regex possible. ``tests/engines/test_failure_prefilter.py`` checks
that ``classify`` with and without it agree on every fixture line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# re's own parser (the module ``sre_parse`` re-exports it with a DeprecationWarning).
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import ahocorasick

_LITERAL = sre_parse.LITERAL
_SUBPATTERN = sre_parse.SUBPATTERN
_BRANCH = sre_parse.BRANCH
_REPEATS = (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT)


def _best(candidates: list[frozenset[str]]) -> frozenset[str] | None:
    """The most selective of several sets each of which a match must hit (longest shortest needle)."""
    usable = [c for c in candidates if c and all(c)]
    if not usable:
        return None
    return max(usable, key=lambda c: (min(len(n) for n in c), -len(c)))


def needles(items: Sequence[Any]) -> frozenset[str] | None:
    """Lowercase literals one of which every match of the parsed pattern ``items`` contains;
    ``None`` when the pattern has no such set (it could match without any literal)."""
    candidates: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            candidates.append(frozenset({"".join(run).lower()}))
            run.clear()

    for op, av in items:
        if op is _LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is _SUBPATTERN:
            found = needles(av[-1])
            if found is not None:
                candidates.append(found)
        elif op is _BRANCH:
            alternatives = [needles(alternative) for alternative in av[1]]
            if all(a is not None for a in alternatives):
                candidates.append(frozenset().union(*(a for a in alternatives if a is not None)))
        elif op in _REPEATS and av[0] >= 1:
            found = needles(av[2])
            if found is not None:
                candidates.append(found)
    flush()
    return _best(candidates)


class Prefilter:
    """The regexes of ``patterns`` (bit ``1 << i`` for the i-th) that can match a text."""

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.all = (1 << len(patterns)) - 1
        self._always = 0
        bits: dict[str, int] = {}
        for i, pattern in enumerate(patterns):
            found = needles(sre_parse.parse(pattern.pattern, pattern.flags))
            if found is None:
                self._always |= 1 << i
                continue
            for needle in found:
                bits[needle] = bits.get(needle, 0) | 1 << i
        self._automaton = ahocorasick.Automaton()
        for needle, mask in bits.items():
            self._automaton.add_word(needle, mask)
        if bits:  # an automaton without a word cannot be searched
            self._automaton.make_automaton()

    def possible(self, text: str) -> int:
        """The bits of the regexes that may match ``text`` (every bit for non-ASCII text)."""
        if not text.isascii():
            return self.all
        mask = self._always
        if self._automaton.kind != ahocorasick.AHOCORASICK:
            return mask
        for _, bits in self._automaton.iter(text.lower()):
            mask |= bits
        return mask


_DIGIT_CODES = frozenset(range(ord("0"), ord("9") + 1))
_SET_OPS = (
    sre_parse.LITERAL,
    sre_parse.NOT_LITERAL,
    sre_parse.NEGATE,
    sre_parse.CATEGORY,
    sre_parse.RANGE,
    sre_parse.RANGE_UNI_IGNORE,
)


def _set_digits(items: Sequence[Any], seen: set[int]) -> bool:
    """Add to ``seen`` the digits a character set (``[...]``) names apart from the others (a
    literal digit, a range that holds some digits but not all); False for an unknown item."""
    for op, av in items:
        if op not in _SET_OPS:
            return False
        if op in (sre_parse.LITERAL, sre_parse.NOT_LITERAL) and av in _DIGIT_CODES:
            seen.add(av)
        elif op in (sre_parse.RANGE, sre_parse.RANGE_UNI_IGNORE):
            covered = _DIGIT_CODES & set(range(av[0], av[1] + 1))
            if covered != _DIGIT_CODES:
                seen |= covered
    return True


def _named_digits(items: Sequence[Any], seen: set[int]) -> bool:
    """Add to ``seen`` the ASCII digits the parsed pattern ``items`` tells apart from other
    digits; False when it has a construct that may tell any two apart (a back-reference
    compares the digits it captured) or one this walk does not know."""
    for op, av in items:
        if op in (sre_parse.LITERAL, sre_parse.NOT_LITERAL):
            if av in _DIGIT_CODES:
                seen.add(av)
        elif op is sre_parse.IN:
            if not _set_digits(av, seen):
                return False
        elif op in (sre_parse.ANY, sre_parse.AT, sre_parse.CATEGORY):
            continue
        elif op is _SUBPATTERN:
            if not _named_digits(av[3], seen):
                return False
        elif op is _BRANCH:
            if not all(_named_digits(branch, seen) for branch in av[1]):
                return False
        elif op in _REPEATS:
            if not _named_digits(av[2], seen):
                return False
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            if not _named_digits(av[1], seen):
                return False
        elif op is sre_parse.ATOMIC_GROUP:
            if not _named_digits(av, seen):
                return False
        else:
            return False
    return True


def digit_shape(patterns: Sequence[re.Pattern[str]]) -> dict[int, str] | None:
    """A ``str.translate`` table that writes every ASCII digit none of ``patterns`` names as
    one digit (the smallest such), so that each pattern matches a text exactly when it matches
    the text so translated; ``None`` when there is no such table (a back-reference, a construct
    unknown here, every digit named).

    Why it holds: the digits no pattern names (no literal, no set holding some digits but not
    all of them) are seen alike by every construct left (``\\d``, ``\\w``, ``\\b``, ``.``, a
    set holding all digits or none, case-insensitivity, which leaves digits alone), so
    replacing one by another changes no step of a match. A served log's batch lines differ
    only in their numbers: translated, a few texts stand for all of them."""
    named: set[int] = set()
    for pattern in patterns:
        if not _named_digits(sre_parse.parse(pattern.pattern, pattern.flags), named):
            return None
    free = sorted(_DIGIT_CODES - named)
    if len(free) < 2:
        return None
    return {code: chr(free[0]) for code in free[1:]}
