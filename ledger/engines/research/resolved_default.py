"""A value the engine picks itself: ``--mamba-scheduler-strategy no_buffer`` where the argument
resolution turns the default ``auto`` into ``no_buffer`` on this target. Given or not, the
resolved arguments are the same, so every read after the resolution sees what it would have
seen without it: the flag set so changes nothing (blind set AC, the eighteenth round of
docs/research.md), where its reads alone said ``effective``.

Only where the argument layer assigns the flag (a rewritten default), when both walks are
complete, the flag and every flag the resolution sets from it come out known and equal, and
the rest alike: one walk more, without the flag. A final value unknown in both walks is not
"the same" (``--chunked-prefill-size 4096``, where a model check may replace either: set G)."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING

from .records import Change, _same
from .reports import Evidence, FlagReport
from .resolve import Resolution, new_interpreter, walk
from .values import Unknown

if TYPE_CHECKING:
    from .index import VersionIndex
    from .target import Target
    from .world import World

#: Verdicts a value the engine would pick itself does not replace: a refusal, no read at all,
#: a value the engine replaces in turn.
_KEPT = frozenset({"incompatible", "dead-code", "overridden", "no-op", "not-activated"})


def picked_anyway(
    world: World, index: VersionIndex, target: Target, resolution: Resolution, field: str
) -> Change | None:
    """The resolution's assignment that gives ``field``'s default the value given, where the
    arguments resolve alike without the flag; None otherwise."""
    state = resolution.state
    stores = index.stores.get(field, [])
    if field not in state.given or not resolution.complete:
        return None
    given = state.values.get(field)
    if not any(_may_write(store.value_text, given) for store in stores):
        return None  # the resolution never writes this value: no second walk to find out
    bare = replace(target, flags={k: v for k, v in target.flags.items() if k != field})
    baseline = walk(new_interpreter(world, index, bare), index)
    if not baseline.complete or field not in baseline.state.changed:
        return None
    # what the flag's value decides must come out known and equal: its own final value and
    # every flag the resolution sets from it; the rest alike (unknown for one same reason)
    decided = {field} | {
        c.flag for c in (*resolution.changes, *baseline.changes) if field in c.flags_read()
    }
    for name in set(state.values) | set(baseline.state.values):
        a, b = state.values.get(name), baseline.state.values.get(name)
        if not (_same(a, b) if name in decided else _alike(a, b)):
            return None
    changes = [c for c in baseline.changes if c.flag == field]
    return changes[-1] if changes else None


def _may_write(value_text: str, given: object) -> bool:
    """Whether an assignment of the flag may give it ``given``: a constant that is it, or a
    value computed there (the walk decides)."""
    try:
        written = ast.literal_eval(value_text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return True
    return type(written) is type(given) and written == given


def _alike(a: object, b: object) -> bool:
    """One value in both walks: equal, or unknown for the same reason."""
    if _same(a, b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list | dict | set):
        try:
            return bool(a == b)
        except Exception:  # an engine object inside: not compared
            return False
    return isinstance(a, Unknown) and a.why == b.why  # type: ignore[attr-defined]


def mark_picked_anyway(report: FlagReport, change: Change, cli_name: str, value: object) -> None:
    """``report`` for a value the engine would pick itself: ``no-op``, citing the assignment."""
    if report.verdict in _KEPT:
        return
    report.reason = (
        f"{cli_name} {value} is what the engine makes of the default on this target "
        f"({change.site}, in {change.function}): the arguments resolve alike without it "
        f"(the flag's own reading: {report.verdict}; {report.reason})"
    )
    report.verdict = "no-op"
    report.confidence = "likely"
    report.evidence.insert(0, Evidence(str(change.site), f"{change.flag} = {value!r}"))
