"""The synthetic engine trees of tests/fixtures/research, opened and judged as the research
tests judge them: one target (sm120, TP 4, a model of tests/fixtures/research/models), every
flag of the version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.engines.research import (
    Target,
    load_index,
    load_model_config,
    open_engine,
    parse_flag_string,
    research,
)
from ledger.engines.research.index import VersionIndex
from ledger.engines.research.sources import EngineSource

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"

Tree = tuple[EngineSource, VersionIndex]


def open_tree(name: str, engine: str) -> Tree:
    """A tree's source and its index, built afresh (never from the cache)."""
    source = open_engine(str(FIXTURES / name), engine)
    return source, load_index(source, use_cache=False, workers=1)


def target(model: str = "foo_moe_top8", arch: str = "sm120") -> Target:
    return Target.make(
        arch=arch, model=load_model_config(FIXTURES / "models" / f"{model}.json"), tp=4
    )


def judged(tree: Tree, flags: str, flag: str, model: str = "foo_moe_top8") -> Any:
    """The report on ``flag`` with ``flags`` given."""
    source, index = tree
    result = research(source, index, target(model), parse_flag_string(flags), everything=True)
    (found,) = [r for r in result.reports if r.flag == flag]
    return found
