"""What is built once per engine build: the functions a walk calls are parsed once, whatever
target or flag asks next (``world.parsed``: parsing them again for every analysis was half of a
one-flag analysis' CPU time on sglang 0.5.23, docs/performance.md), and the index is built once,
and the wheel fetched once, when two asks come at once (``cache.building``, ``cache.held``)."""

from __future__ import annotations

import shutil
import threading
import zipfile
from pathlib import Path

import pytest

from ledger.engines.research import (
    Target,
    analysis,
    cache,
    load_index,
    load_model_config,
    open_engine,
    parse_flag_string,
    research,
)
from ledger.engines.research import world as world_module
from ledger.engines.research.world import World

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"


def _verdicts(source: object, index: object, arch: str, flags: str) -> list[tuple[str, ...]]:
    target = Target.make(
        arch=arch, model=load_model_config(FIXTURES / "models" / "foo_moe_top8.json"), tp=4
    )
    result = research(source, index, target, parse_flag_string(flags), everything=True)  # type: ignore[arg-type]
    return [(r.flag, r.verdict, r.confidence, r.reason) for r in result.reports]


def test_a_second_analysis_of_a_build_parses_no_function_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tree = tmp_path / "sglang_g3"
    shutil.copytree(FIXTURES / "sglang_g3", tree)
    source = open_engine(str(tree), "sglang")
    index = load_index(source, use_cache=False, workers=1)
    parsed: list[tuple[str, int]] = []
    statement = World._statement

    def counted(self: World, module: str, spec: world_module.BindingSpec) -> object:
        parsed.append((module, spec.start))
        return statement(self, module, spec)

    monkeypatch.setattr(World, "_statement", counted)
    first = _verdicts(source, index, "sm120", "--enable-fusion")
    assert parsed, "the first analysis parses the functions it calls"
    parsed.clear()
    # the same build asked again, for another target and flag: the same answers as a fresh
    # process gives, and no function parsed again
    again = _verdicts(source, index, "sm90", "--speculative-algorithm NGRAM --enable-mixed-chunk")
    assert parsed == []
    monkeypatch.setattr(world_module, "_PARSED", type(world_module._PARSED)())
    assert (
        _verdicts(source, index, "sm90", "--speculative-algorithm NGRAM --enable-mixed-chunk")
        == again
    )
    assert _verdicts(source, index, "sm120", "--enable-fusion") == first


def test_the_parsed_builds_kept_are_the_most_recent_few(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_module, "_PARSED", type(world_module._PARSED)())
    first = world_module.parsed("a")
    assert world_module.parsed("a") is first
    world_module.parsed("b")
    world_module.parsed("a")  # used again: the most recent
    world_module.parsed("c")
    assert list(world_module._PARSED) == ["a", "c"]  # "b", the least recent, is let go
    assert world_module.parsed("b") is not None and "a" not in world_module._PARSED


def test_an_index_being_built_is_waited_for_and_read_back_not_built_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TUNELEDGER_RESEARCH_CACHE", str(tmp_path / "cache"))
    source = open_engine(str(FIXTURES / "sglang_g3"), "sglang")
    built = load_index(source, use_cache=False, workers=1)
    builds: list[str] = []

    def build(asked: object, workers: object) -> object:
        builds.append(str(asked))
        return built

    monkeypatch.setattr(analysis, "_build", build)
    got: list[object] = []
    asker = threading.Thread(target=lambda: got.append(load_index(source)))
    # another process's build, as this one holds the lock (flock: a second open of the lock
    # file waits, in this process as in another)
    with cache.building(source.engine, source.version, source.key):
        asker.start()
        asker.join(timeout=0.5)
        assert asker.is_alive()  # waiting for the build, not building
        cache.store(built)
    asker.join(timeout=60)
    assert builds == [] and len(got) == 1  # read back what the other one built
    assert got[0].key == built.key and got[0].definitions.keys() == built.definitions.keys()  # type: ignore[attr-defined]


def test_a_wheel_being_fetched_is_waited_for_and_opened_not_fetched_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TUNELEDGER_RESEARCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TUNELEDGER_WHEELS", raising=False)
    fetched: list[str] = []
    monkeypatch.setattr(analysis, "download_wheel", lambda *asked: fetched.append(str(asked)))
    folder = analysis.wheel_dirs()[-1]
    opened: list[object] = []
    asker = threading.Thread(target=lambda: opened.append(open_engine("sglang==0.5.23")))
    # another process fetching it, as this one holds the lock
    with cache.held(folder / ".sglang-0.5.23.lock"):
        asker.start()
        asker.join(timeout=0.5)
        assert asker.is_alive()  # waiting for the fetch, not fetching
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(folder / "sglang-0.5.23-py3-none-any.whl", "w") as wheel:
            wheel.writestr(
                "sglang-0.5.23.dist-info/METADATA",
                "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n",
            )
            wheel.writestr("sglang/srt/server_args.py", "class ServerArgs:\n    pass\n")
    asker.join(timeout=60)
    assert fetched == [] and len(opened) == 1  # opened what the other one fetched
    assert opened[0].version == "0.5.23"  # type: ignore[attr-defined]
