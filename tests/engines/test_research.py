"""Flag research from the engine's source (``ledger.engines.research``) on small synthetic engine
trees (tests/fixtures/research): each flag of a tree exercises one way a flag takes effect or
not, in the engines' own idioms (SGLang's dataclass and namespace generations, vLLM's configs).
The real wheels are in tests/test_research_wheels.py (slow)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ledger.engines.research import (
    Target,
    diff,
    load_index,
    load_model_config,
    load_server_config,
    open_engine,
    parse_flag_string,
    research,
)
from ledger.engines.research.analysis import Research
from ledger.engines.research.index import VersionIndex
from ledger.engines.research.sources import EngineSource, open_wheel
from ledger.engines.research.target import parse_arch
from ledger.errors import InvalidInput, NotFound

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"
MODELS = FIXTURES / "models"


@pytest.fixture(scope="module")
def g1() -> tuple[EngineSource, VersionIndex]:
    source = open_engine(str(FIXTURES / "sglang_g1"), "sglang")
    return source, load_index(source, use_cache=False, workers=1)


@pytest.fixture(scope="module")
def g3() -> tuple[EngineSource, VersionIndex]:
    source = open_engine(str(FIXTURES / "sglang_g3"), "sglang")
    return source, load_index(source, use_cache=False, workers=1)


@pytest.fixture(scope="module")
def vllm() -> tuple[EngineSource, VersionIndex]:
    source = open_engine(str(FIXTURES / "vllm_tiny"), "vllm")
    return source, load_index(source, use_cache=False, workers=1)


def run(
    engine: tuple[EngineSource, VersionIndex],
    flags: str = "",
    *,
    arch: str = "sm120",
    model: str | None = "foo_moe_top8",
    tp: int | None = 4,
    cuda: str | None = None,
    everything: bool = True,
) -> Research:
    source, index = engine
    target = Target.make(
        arch=arch,
        model=load_model_config(MODELS / f"{model}.json") if model else None,
        tp=tp,
        cuda=cuda,
    )
    return research(source, index, target, parse_flag_string(flags), everything=everything)


def line_of(tree: str, path: str, needle: str) -> str:
    """``path:line`` of the first line of a fixture file holding ``needle``."""
    lines = (FIXTURES / tree / path).read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if needle in line)
    return f"{path}:{number}"


def verdicts(result: Research) -> dict[str, str]:
    return {r.flag: r.verdict for r in result.reports}


def report(result: Research, flag: str) -> Any:
    (found,) = [r for r in result.reports if r.flag == flag]
    return found


# --- definitions -------------------------------------------------------------------------


def test_dataclass_generation_definitions(g1: tuple[EngineSource, VersionIndex]) -> None:
    _, index = g1
    assert index.version == "0.0.1"
    tp = index.flag("--tp-size")
    assert tp is not None and tp.field == "tp_size"
    assert tp.options == ("--tensor-parallel-size", "--tp-size")
    assert index.flag("tensor-parallel-size") is tp
    assert tp.default_text == "1" and tp.help == "The tensor parallelism size."
    legacy = index.flag("legacy-metrics")
    assert legacy is not None and legacy.deprecated and "--enable-metrics" in legacy.deprecated
    steps = index.flag("num-decode-steps")
    assert steps is not None
    assert str(steps.site) == line_of("sglang_g1", "sglang/srt/server_args.py", "num_decode_steps:")
    assert str(steps.cli_site).startswith("sglang/srt/server_args.py:")
    assert index.flag("config") is not None  # registered, with no field


def test_namespace_generation_definitions(g3: tuple[EngineSource, VersionIndex]) -> None:
    _, index = g3
    backend = index.flag("fusion-backend")
    assert backend is not None and backend.namespace == "exec.comm"
    assert backend.help == "Fusion backend. Requires SM90 or SM10X."
    # ``Arg(no_cli=True)`` field, registered by hand as a deprecated flag
    fusion = index.flag("enable-fusion")
    assert fusion is not None and fusion.namespace == "exec.comm" and fusion.deprecated
    assert index.flag("spare-comm-knob") is not None  # ``A[T, "help"]``: a CLI flag


def test_vllm_definitions_map_config_fields(vllm: tuple[EngineSource, VersionIndex]) -> None:
    _, index = vllm
    dtype = index.flag("kv-cache-dtype")
    assert dtype is not None and dtype.namespace == "CacheConfig.cache_dtype"
    assert dtype.help == "The KV cache data type (auto, fp8)." and dtype.default_text == "'auto'"
    seqs = index.flag("max-num-seqs")
    assert seqs is not None and seqs.default_text == "128"  # pydantic Field(default=128)
    assert index.access.objects["cache_config"] == {"cache_dtype": "kv_cache_dtype"}


# --- verdicts: each kind, from the conditions in the source ------------------------------


def test_dead_code_even_when_validated(g1: tuple[EngineSource, VersionIndex]) -> None:
    found = report(run(g1, "--num-decode-steps 4"), "num-decode-steps")
    assert found.verdict == "dead-code"
    assert "only checked, at sglang/srt/server_args.py:" in found.reason


def test_read_only_behind_a_lazy_import_gated_by_another_flag(
    g1: tuple[EngineSource, VersionIndex],
) -> None:
    found = report(run(g1, "--triton-reduce-fp32 --attention-backend triton"), "triton-reduce-fp32")
    assert found.verdict == "no-op"
    assert "enable_double_sparsity=False" in found.reason
    backend = "sglang/srt/layers/attention/double_sparsity_backend.py"
    assert line_of("sglang_g1", backend, ".triton_reduce_fp32") in {e.ref for e in found.evidence}
    on = run(g1, "--triton-reduce-fp32 --attention-backend triton --enable-double-sparsity")
    assert report(on, "triton-reduce-fp32").verdict == "effective"


def test_not_activated_on_an_arch_the_code_does_not_check(
    g1: tuple[EngineSource, VersionIndex],
) -> None:
    found = report(run(g1, "--enable-arch-fusion"), "enable-arch-fusion")
    assert found.verdict == "not-activated"
    assert "sm120: compute capability 12.0" in found.reason
    assert "_is_sm90_supported or _is_sm100_supported" in found.conditions
    # on sm90 the CUDA version decides (12.3 or newer): unknown unless given
    hopper = report(run(g1, "--enable-arch-fusion", arch="sm90", tp=2), "enable-arch-fusion")
    assert hopper.verdict == "conditional"
    given = report(
        run(g1, "--enable-arch-fusion", arch="sm90", tp=2, cuda="12.4"), "enable-arch-fusion"
    )
    # there the engine turns it on itself for this model and TP (the resolution's
    # auto-enable): given, the arguments resolve alike, so it changes nothing
    assert given.verdict == "no-op" and "what the engine makes of the default" in given.reason
    assert "_is_sm90_supported or _is_sm100_supported: holds" in given.reason
    single = report(
        run(g1, "--enable-arch-fusion", arch="sm90", tp=1, cuda="12.4"), "enable-arch-fusion"
    )
    assert single.verdict == "conditional" and single.conditions == ["batch_size > 0"]


def test_top_k_conditions_read_the_model_config(g1: tuple[EngineSource, VersionIndex]) -> None:
    no_model = report(run(g1, "--enable-topk-fusion", model=None), "enable-topk-fusion")
    assert no_model.verdict == "conditional"
    assert "topk_ids.shape[1] > 2" in no_model.conditions
    top8 = report(run(g1, "--enable-topk-fusion"), "enable-topk-fusion")
    assert top8.verdict == "conditional" and top8.conditions == ["not no_combine"]
    assert "model top-k (num_experts_per_tok) = 8" in top8.reason
    top2 = report(run(g1, "--enable-topk-fusion", model="foo_moe_top2"), "enable-topk-fusion")
    assert top2.verdict == "not-activated"
    assert "model top-k (num_experts_per_tok) = 2" in top2.reason


def test_model_architecture_gates_a_models_file(g1: tuple[EngineSource, VersionIndex]) -> None:
    assert verdicts(run(g1))["foo-model-knob"] == "effective"
    other = report(run(g1, model="bar"), "foo-model-knob")
    assert other.verdict == "not-activated"
    assert "model architecture BarForCausalLM" in other.reason


def test_overridden_under_eagle_with_the_engines_warning(
    g1: tuple[EngineSource, VersionIndex],
) -> None:
    result = run(g1, "--speculative-algorithm NEXTN --enable-mixed-chunk")
    found = report(result, "enable-mixed-chunk")
    assert found.verdict == "overridden" and found.resolved is False
    assert "Mixed chunked prefill is disabled because of using eagle" in found.reason
    # NEXTN became EAGLE first
    assert line_of("sglang_g1", "sglang/srt/server_args.py", "self.enable_mixed_chunk = False") in (
        found.reason
    )
    assert verdicts(run(g1, "--enable-mixed-chunk"))["enable-mixed-chunk"] == "effective"


def test_refused_combination_is_incompatible(g1: tuple[EngineSource, VersionIndex]) -> None:
    found = report(
        run(g1, "--disable-cuda-graph --speculative-algorithm EAGLE"), "disable-cuda-graph"
    )
    assert found.verdict == "incompatible"
    assert "EAGLE needs CUDA graphs in this engine" in found.reason


def test_deprecated_alias_takes_the_verdict_of_the_flag_it_becomes(
    g1: tuple[EngineSource, VersionIndex], g3: tuple[EngineSource, VersionIndex]
) -> None:
    legacy = report(run(g1, "--legacy-metrics"), "legacy-metrics")
    assert legacy.verdict == "effective" and "--enable-metrics = True" in legacy.reason
    fusion = report(run(g3, "--enable-fusion"), "enable-fusion")
    assert fusion.verdict == "not-activated"
    assert "--fusion-backend = 'auto'" in fusion.reason and "_is_sm90 or _is_sm100" in fusion.reason


def test_namespace_resolution_pipeline(g3: tuple[EngineSource, VersionIndex]) -> None:
    ngram = run(g3, "--speculative-algorithm NGRAM --enable-mixed-chunk")
    assert verdicts(ngram)["enable-mixed-chunk"] == "overridden"
    eagle = run(g3, "--speculative-algorithm EAGLE --enable-mixed-chunk")
    assert verdicts(eagle)["enable-mixed-chunk"] == "effective"  # EAGLE supports it here
    assert verdicts(run(g3))["spare-comm-knob"] == "dead-code"
    # on sm90 with TP > 1 the engine turns the fusion on by itself
    hopper = run(g3, arch="sm90", tp=2, cuda="12.4")
    assert hopper.resolution.state.values["fusion_backend"] == "auto"


def test_a_value_computed_at_publish_gates_as_its_function_says(
    g3: tuple[EngineSource, VersionIndex],
) -> None:
    """SGLang 0.5.23's ``num_dp_ranks = Derived(fn="...num_dp_ranks_of")`` is no flag: the
    engine computes it from the flags (``dp_size * attn_dp_size``), and a read behind
    ``get_parallel().num_dp_ranks > 1`` is off at the defaults, on with two replicas. A
    ``Derived`` without ``fn`` (a rank) is set at run time and stays unknown."""
    _, index = g3
    assert index.access.derived == {"num_dp_ranks": "sglang.srt.runtime_context.num_dp_ranks_of"}
    alone = report(run(g3, "--load-balance-method minimum_tokens"), "load-balance-method")
    assert alone.verdict == "no-op", alone.reason
    assert "dp_size=1 (default)" in alone.reason and "attn_dp_size=1 (default)" in alone.reason
    replicas = run(g3, "--load-balance-method minimum_tokens --dp-size 2")
    assert report(replicas, "load-balance-method").verdict == "effective"


def test_a_json_typed_flag_holds_the_object_its_text_spells(
    g3: tuple[EngineSource, VersionIndex],
) -> None:
    """``Arg(type_parser=json.loads)``: the parser stores the object, so a resolution check
    ``isinstance(config, dict)`` passes for a JSON object and refuses anything else."""
    given = report(run(g3, """--linker-config '{"protocol": "rdma"}'"""), "linker-config")
    assert given.verdict != "incompatible", given.reason
    wrong = report(run(g3, "--linker-config 7"), "linker-config")
    assert wrong.verdict == "incompatible" and "must be a JSON object" in wrong.reason


def test_a_flag_built_into_another_flags_object_is_judged_as_that_flag(
    g3: tuple[EngineSource, VersionIndex],
) -> None:
    """``_set("max_bs", cfg.graph_max_bs)`` writes into the ``config`` that the same resolution
    function declares as ``graph_config``, which the scheduler reads: the flag goes where
    ``--graph-config`` goes (``likely``: which part of the object it sets is not followed)."""
    result = run(g3, "--graph-max-bs 64")
    found, whole = report(result, "graph-max-bs"), report(result, "graph-config")
    assert found.verdict == whole.verdict == "effective", found.reason
    # never surer than the flag it is judged as, and never proven
    assert found.confidence == ("unknown" if whole.confidence == "unknown" else "likely")
    assert "builds --graph-config from it" in found.reason
    assert found.conditions == [] and "graph_hook.py" in found.evidence[1].ref


def test_vllm_exact_and_at_least_capability(vllm: tuple[EngineSource, VersionIndex]) -> None:
    sm120 = run(vllm, "--kv-cache-dtype fp8 --max-num-seqs 64 --old-unused-option")
    assert verdicts(sm120) == {
        "kv-cache-dtype": "not-activated",  # is_device_capability(100): SM100 only
        "max-num-seqs": "effective",  # has_device_capability(90): SM90 and newer
        "old-unused-option": "dead-code",
        "enable-chunked-prefill": "effective",
        "foo-knob": "effective",
        "enable-lora": "unknown",  # read only where the engine decides what to build
        "max-loras": "no-op",  # its config object is built only with --enable-lora
    }
    sm100 = run(vllm, "--kv-cache-dtype fp8", arch="sm100")
    assert verdicts(sm100)["kv-cache-dtype"] == "effective"
    # the tiny registry serves no "bar": the engine refuses that model, whatever the flag does
    (bar,) = [r for r in run(vllm, model="bar").reports if r.flag == "foo-knob"]
    assert bar.verdict == "incompatible" and "(the flag itself: not-activated;" in bar.reason


def test_a_config_object_built_only_under_a_flag(vllm: tuple[EngineSource, VersionIndex]) -> None:
    """``lora_config = LoRAConfig(...) if self.enable_lora else None``: without the flag no read
    of its fields runs, even one in a class nothing names (loaded by its qualified name)."""
    off = report(run(vllm, "--max-loras 4"), "max-loras")
    assert off.verdict == "no-op"
    assert "enable_lora=False (default)" in off.reason
    assert "lora_config is built only when self.enable_lora" in off.reason
    on = report(run(vllm, "--max-loras 4 --enable-lora"), "max-loras")
    assert on.verdict == "effective" and "vllm/lora/punica.py:6" in on.reason


def test_unknown_flag_gets_the_nearest_spelling(g1: tuple[EngineSource, VersionIndex]) -> None:
    result = run(g1, "--enable-topk-fusoin --no-such-thing-at-all")
    assert [(g.spelling, g.nearest[:1]) for g in result.unknown_flags] == [
        ("enable-topk-fusoin", ["enable-topk-fusion"]),
        ("no-such-thing-at-all", []),
    ]


def test_default_listing_is_given_flags_and_no_effect_ones(
    g1: tuple[EngineSource, VersionIndex],
) -> None:
    listed = verdicts(run(g1, "--enable-mixed-chunk", everything=False))
    assert listed["enable-mixed-chunk"] == "effective"
    assert listed["num-decode-steps"] == "dead-code"
    assert listed["enable-arch-fusion"] == "not-activated"
    assert "metrics-bucket" not in listed  # read, behind another flag: shown when given


# --- sources, cache, inputs ----------------------------------------------------------------


def _wheel_of(folder: Path, out: Path) -> Path:
    wheel = out / "sglang-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return wheel


def test_wheel_source_is_cached_by_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    from ledger.engines.research import analysis

    wheel = _wheel_of(FIXTURES / "sglang_g1", tmp_path)
    monkeypatch.setenv("TUNELEDGER_RESEARCH_CACHE", str(tmp_path / "cache"))
    source = open_wheel(wheel)
    assert (source.engine, source.version) == ("sglang", "0.0.1")
    assert source.key == hashlib.sha256(wheel.read_bytes()).hexdigest()
    first = load_index(source, workers=1)
    assert list((tmp_path / "cache").glob("sglang-0.0.1-*.pickle"))

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("analysed again: the cache was not used")

    monkeypatch.setattr(analysis, "build_index", fail)
    again = load_index(open_wheel(wheel), workers=1)
    assert again.key == first.key and again.reads.keys() == first.reads.keys()


def test_site_packages_folder_and_bad_inputs(tmp_path: Path) -> None:
    copy = tmp_path / "site-packages"
    shutil.copytree(FIXTURES / "sglang_g1", copy)
    source = open_engine(str(copy), "sglang")
    assert source.version == "0.0.1" and "sglang/srt/server_args.py" in source
    with pytest.raises(NotFound):
        open_engine(str(tmp_path / "missing.whl"))
    (tmp_path / "bad.whl").write_text("not a zip")
    with pytest.raises(InvalidInput, match="bad.whl"):
        open_engine(str(tmp_path / "bad.whl"))
    with pytest.raises(InvalidInput, match="unknown engine"):
        open_engine("notanengine==1.0")


def test_arch_spellings() -> None:
    assert parse_arch("sm120") == ("sm120", (12, 0))
    assert parse_arch("SM_90a") == ("sm90", (9, 0))
    assert parse_arch("10.0") == ("sm100", (10, 0))
    with pytest.raises(InvalidInput, match="--arch 'hopper'"):
        parse_arch("hopper")


def test_flag_strings_and_server_configs(tmp_path: Path) -> None:
    assert parse_flag_string("--tp 4 --enable-x --mode=a --list a b") == [
        ("tp", "4"),
        ("enable-x", True),
        ("mode", "a"),
        ("list", ["a", "b"]),
    ]
    with pytest.raises(InvalidInput, match="not a flag"):
        parse_flag_string("tp 4")
    config = tmp_path / "servers.toml"
    config.write_text(
        '[configs.base]\nengine = "sglang"\nflags = { tp = 4, enable-metrics = true }\n'
        '[configs.fused]\nbase = "base"\nflags = { enable-metrics = false, enable-x = true }\n'
    )
    assert load_server_config(config, "fused") == ("sglang", [("tp", 4), ("enable-x", True)])
    with pytest.raises(InvalidInput, match="name one of base, fused"):
        load_server_config(config, None)
    with pytest.raises(NotFound, match="no configuration 'nope'"):
        load_server_config(config, "nope")


def test_diff_lists_added_removed_and_changed(
    tmp_path: Path, g1: tuple[EngineSource, VersionIndex]
) -> None:
    newer = tmp_path / "newer"
    shutil.copytree(FIXTURES / "sglang_g1", newer)
    args = newer / "sglang" / "srt" / "server_args.py"
    text = args.read_text()
    text = text.replace('"--num-decode-steps"', '"--num-decode-steps-v2"')  # renamed
    args.write_text(text)
    (newer / "sglang-0.0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.0.2\n"
    )
    # the arch fusion now also runs on SM120
    comm = newer / "sglang" / "srt" / "layers" / "communicator.py"
    comm.write_text(comm.read_text().replace("(_is_sm90_supported or _is_sm100_supported)", "True"))
    source = open_engine(str(newer), "sglang")
    result = diff(run(g1), run((source, load_index(source, use_cache=False, workers=1))))
    assert (result.old, result.new) == ("0.0.1", "0.0.2")
    assert [r.flag for r in result.added] == ["num-decode-steps-v2"]
    assert [(r.flag, renamed) for r, renamed in result.removed] == [
        ("num-decode-steps", ["num-decode-steps-v2"])
    ]
    changed = {a.flag: (a.verdict, b.verdict) for a, b in result.changed}
    assert changed["enable-arch-fusion"] == ("not-activated", "conditional")  # batch_size > 0


def test_json_output_names_version_target_and_evidence(
    g1: tuple[EngineSource, VersionIndex],
) -> None:
    from ledger.engines.research import to_json

    payload = to_json(run(g1, "--enable-arch-fusion", everything=False))
    text = json.dumps(payload)  # every value is JSON
    assert json.loads(text)["version"] == "0.0.1"
    assert payload["target"] == {
        "arch": "sm120",
        "cuda": None,
        "model_architecture": "FooMoeForCausalLM",
        "model_config": str(MODELS / "foo_moe_top8.json"),
        "top_k": 8,
        "num_experts": 64,
        "tp_size": 4,
        "env": {},
    }
    (fusion,) = [f for f in payload["flags"] if f["flag"] == "enable-arch-fusion"]
    assert fusion["verdict"] == "not-activated" and fusion["given"] is True
    read = line_of("sglang_g1", "sglang/srt/layers/communicator.py", ".enable_arch_fusion")
    assert any(e["ref"] == read for e in fusion["evidence"])


def _older_and_newer_vllm_layout(tmp_path: Path) -> Path:
    """The tiny vLLM as two releases lay it out: ``VllmConfig`` in ``vllm/config/__init__.py``
    (0.11), and a model package of its own the registry names in full (``vllm.models.bar``,
    0.34); ``--tensor-parallel-size`` as vLLM spells TP."""
    root = tmp_path / "vllm_layouts"
    shutil.copytree(FIXTURES / "vllm_tiny", root)
    config = root / "vllm" / "config"
    (config / "__init__.py").write_text((config / "vllm.py").read_text())
    (config / "vllm.py").unlink()
    args = root / "vllm" / "engine" / "arg_utils.py"
    text = args.read_text().replace("from vllm.config.vllm import", "from vllm.config import")
    text = text.replace(
        "    old_unused_option: bool = False\n",
        "    old_unused_option: bool = False\n    tensor_parallel_size: int = 1\n",
    )
    text = text.replace(
        '        parser.add_argument(\n            "--old-unused-option"',
        '        parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)\n'
        '        parser.add_argument(\n            "--old-unused-option"',
    )
    args.write_text(text)
    registry = root / "vllm" / "model_executor" / "models" / "registry.py"
    registry.write_text(
        registry.read_text().replace(
            "}", '    "BarForCausalLM": ("vllm.models.bar", "BarForCausalLM"),\n}'
        )
    )
    bar = root / "vllm" / "models" / "bar"
    bar.mkdir(parents=True)
    (root / "vllm" / "models" / "__init__.py").write_text("")
    (bar / "__init__.py").write_text(
        "class BarForCausalLM:\n"
        "    def __init__(self, vllm_config):\n"
        "        self.knob = vllm_config.scheduler_config.foo_knob\n"
    )
    return root


def test_vllm_layouts_of_two_releases(tmp_path: Path) -> None:
    source = open_engine(str(_older_and_newer_vllm_layout(tmp_path)), "vllm")
    engine = (source, load_index(source, use_cache=False, workers=1))
    foo = run(engine, "--max-num-seqs 64 --foo-knob 2")
    # the config objects are still told apart by their holder's name (``scheduler_config``)
    assert verdicts(foo)["max-num-seqs"] == "effective"
    assert foo.resolution.state.values["tensor_parallel_size"] == 4  # the target's TP
    # ``vllm/models/bar`` is Bar's model package: its read never decides for Foo
    (knob,) = [r for r in foo.reports if r.flag == "foo-knob"]
    assert knob.verdict == "effective" and "models/foo.py" in knob.reason
    assert any(
        "vllm/models/bar/__init__.py registers): does not hold" in e.text for e in knob.evidence
    )
    (bar,) = [r for r in run(engine, "--foo-knob 2", model="bar").reports if r.flag == "foo-knob"]
    assert bar.verdict == "effective" and "vllm/models/bar/__init__.py" in bar.reason
