"""Flag research from the engine's own source: for one engine version (a wheel, a folder, an
installed package), which flags are read, under which conditions (hardware, model, other flags),
which the engine overrides or refuses, evaluated for a GPU arch, a model and the flags given.

Nothing here imports or runs the engine (``ast`` only, CPU only). See docs/research.md.

    source = open_engine("sglang==0.5.23")
    index = load_index(source)                    # cached by the wheel's sha256
    result = research(source, index, Target.make(arch="sm120", model=load_model_config(p), tp=4),
                      parse_flag_string("--enable-mixed-chunk --speculative-algorithm EAGLE"))
    print(to_text(result))
"""

from __future__ import annotations

from .analysis import LISTED, Research, load_index, open_engine, research, research_spec
from .diff import VersionDiff, diff
from .diff import to_json as diff_json
from .diff import to_text as diff_text
from .flags_given import given_flags, load_server_config, parse_flag_string
from .report import to_json, to_text
from .reports import FlagReport
from .target import Target, load_model_config


def __getattr__(name: str) -> object:
    # The ledger events need the event models (pydantic): imported when a caller records.
    if name in ("researched_event", "researched_events"):
        from . import events

        return getattr(events, name)
    raise AttributeError(name)


__all__ = [
    "LISTED",
    "FlagReport",
    "Research",
    "Target",
    "VersionDiff",
    "diff",
    "diff_json",
    "diff_text",
    "load_index",
    "load_model_config",
    "load_server_config",
    "given_flags",
    "open_engine",
    "parse_flag_string",
    "research",
    "research_spec",
    "to_json",
    "to_text",
]
