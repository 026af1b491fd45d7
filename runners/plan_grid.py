"""Candidate grids of a plan: one ``[[candidates]]`` entry with ``grid`` expands into named
configurations, one per combination of values::

    [[candidates]]
    grid = { max-num-seqs = [1, 8, 32] }      # -> max-num-seqs-1, max-num-seqs-8, max-num-seqs-32
    base = "baseline"                         # the configuration the values are set on (default: the baseline)
    hypothesis = "..."

A grid of one flag gives single-flag candidates (each measured verdict becomes a finding about
that flag); several flags give their cartesian product as configuration candidates, named
``flag-value_flag-value``. A name that is already a configuration is refused (no silent
shadowing), and so is an empty grid.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from ledger.errors import InvalidInput
from schemas import normalize_flag

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _value_text(value: Any) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    return _UNSAFE.sub("_", str(value)).strip("_") or "empty"


def expand_grids(
    raw_candidates: list[dict[str, Any]], configs: dict[str, Any], baseline: str, source: str
) -> list[dict[str, Any]]:
    """The candidates with each ``grid`` entry replaced by one entry per combination; the new
    configurations are added to ``configs`` (``runners.server.configs.ServerConfig`` values).

    Raises:
        InvalidInput: an empty grid, an unknown base, a grid entry that also names ``config``
            or ``flag``, or a generated name that is already a configuration.
    """
    out: list[dict[str, Any]] = []
    for index, raw in enumerate(raw_candidates):
        if not isinstance(raw, dict) or "grid" not in raw:
            out.append(raw)
            continue
        where = f"{source}: candidates[{index}]"
        grid = raw["grid"]
        if not isinstance(grid, dict) or not grid:
            raise InvalidInput(f"{where}: grid must be a table of flag = [values]")
        if "config" in raw or "flag" in raw:
            raise InvalidInput(
                f"{where}: a grid names its configurations itself: no config or flag"
            )
        base_name = raw.get("base", baseline)
        base = configs.get(base_name)
        if base is None:
            raise InvalidInput(f"{where}: base: no configuration {base_name!r}")
        flags = {normalize_flag(k): v for k, v in grid.items()}
        for flag, values in flags.items():
            if not isinstance(values, list) or not values:
                raise InvalidInput(f"{where}: grid.{flag}: want a non-empty list of values")
        names = list(flags)
        for combo in itertools.product(*(flags[f] for f in names)):
            setting = dict(zip(names, combo, strict=True))
            name = "_".join(f"{f}-{_value_text(v)}" for f, v in setting.items())
            if name in configs:
                raise InvalidInput(f"{where}: the grid's configuration {name!r} already exists")
            configs[name] = base.with_flags(**setting).model_copy(update={"name": name})
            entry = {k: v for k, v in raw.items() if k not in ("grid", "base")}
            entry["config"] = name
            if len(names) == 1:
                entry["flag"] = names[0]
            entry.setdefault("title", " ".join(f"--{f} {v}" for f, v in setting.items()))
            out.append(entry)
    return out
