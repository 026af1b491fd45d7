"""The kinds of path the research got wrong on flags read by hand (docs/research.md), each on
the synthetic tree tests/fixtures/research/sglang_kinds (SGLang's dataclass generation): which model files run,
the conditions of a read's callers, refusals anywhere on the start path, what is not a read,
and the confidence each verdict carries. Each flag there is one kind; none is special-cased."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ledger.engines.research import (
    Target,
    load_index,
    load_model_config,
    open_engine,
    parse_flag_string,
    research,
    to_json,
    to_text,
)
from ledger.engines.research.analysis import Research
from ledger.engines.research.gates import GateEvaluator
from ledger.engines.research.index import VersionIndex
from ledger.engines.research.model import Site
from ledger.engines.research.records import Budget, Frame, Refusal
from ledger.engines.research.resolve import new_interpreter, walk
from ledger.engines.research.sources import MAX_MEMBER_BYTES, EngineSource, import_names
from ledger.engines.research.values import truth
from ledger.engines.research.world import World, parse_expression
from ledger.errors import InvalidInput
from tests.support.cli_inprocess import invoke

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"
KINDS = FIXTURES / "sglang_kinds"
MODELS = FIXTURES / "models"
FUSED = "sglang/srt/layers/fused.py"
SCHEDULER = "sglang/srt/managers/scheduler.py"


@pytest.fixture(scope="module")
def kinds() -> tuple[EngineSource, VersionIndex]:
    source = open_engine(str(KINDS), "sglang")
    return source, load_index(source, use_cache=False, workers=1)


def run(
    engine: tuple[EngineSource, VersionIndex],
    flags: str = "",
    *,
    arch: str = "sm120",
    model: str = "foo_moe_top8",
) -> Research:
    source, index = engine
    target = Target.make(arch=arch, model=load_model_config(MODELS / f"{model}.json"), tp=4)
    return research(source, index, target, parse_flag_string(flags), everything=True)


def report(result: Research, flag: str) -> Any:
    (found,) = [r for r in result.reports if r.flag == flag]
    return found


def line_of(path: str, needle: str) -> str:
    lines = (KINDS / path).read_text().splitlines()
    return f"{path}:{next(i for i, line in enumerate(lines, 1) if needle in line)}"


# --- 1. model scope ------------------------------------------------------------------------


def test_another_models_file_never_decides(kinds: tuple[EngineSource, VersionIndex]) -> None:
    # other_oss.py reads the backend next to an assert on its own layer types, and a generic
    # layer imports that file for a type: for FooMoe it is another model's file.
    found = report(run(kinds, "--attention-backend triton"), "attention-backend")
    assert found.verdict == "effective"
    assert found.reason.startswith("--attention-backend is read at sglang/srt/models/foo_moe.py:")
    other = [e for e in found.evidence if e.ref.startswith("sglang/srt/models/other_oss.py")]
    assert other and "is another model's file" in other[0].text
    # for the model that file serves, its read is the model's own
    oss = report(run(kinds, "--attention-backend triton", model="other_oss"), "attention-backend")
    assert oss.reason.startswith("--attention-backend is read at sglang/srt/models/other_oss.py:")


def test_an_override_registered_for_another_architecture_never_runs(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``@register_for("OtherOssForCausalLM")`` on an argument override: it runs for that
    model only (0.5.23's Kimi-K3 override reading ``--speculative-dspark-block-size`` was
    "not followed" for every model)."""
    foo = report(run(kinds, "--oss-draft-block-knob 6"), "oss-draft-block-knob")
    assert (foo.verdict, foo.confidence) == ("no-op", "likely")
    assert "@register_for runs it for OtherOssForCausalLM only" in foo.reason
    oss = report(run(kinds, "--oss-draft-block-knob 6", model="other_oss"), "oss-draft-block-knob")
    assert oss.verdict not in ("no-op", "not-activated")


def test_a_flag_only_another_model_reads(kinds: tuple[EngineSource, VersionIndex]) -> None:
    foo = report(run(kinds, "--oss-sinks-knob 1"), "oss-sinks-knob")
    assert (foo.verdict, foo.confidence) == ("not-activated", "likely")
    assert "model architecture FooMoeForCausalLM" in foo.reason
    assert "sglang/srt/models/other_oss.py is another model's file" in foo.reason
    oss = report(run(kinds, "--oss-sinks-knob 1", model="other_oss"), "oss-sinks-knob")
    assert oss.verdict == "effective"


def test_a_model_no_file_of_the_version_serves_refuses_every_flag(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # An architecture no EntryClass (or registry table) names: the engine refuses the model at
    # start, so no flag takes effect; the flag's own reading stays in the reason.
    result = run(kinds, "--attention-backend triton", model="bar_unserved")
    found = report(result, "attention-backend")
    assert (found.verdict, found.confidence) == ("incompatible", "likely")
    assert found.reason.startswith("sglang")
    assert "serves no BarUnservedForCausalLM" in found.reason
    assert "(the flag itself: effective;" in found.reason
    assert all(r.verdict == "incompatible" for r in result.reports)
    assert any("(the flag itself: dead-code;" in r.reason for r in result.reports)


# --- 2. interprocedural gates --------------------------------------------------------------


def test_the_only_callers_condition_gates_the_read(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    found = report(run(kinds), "aiter-fusion-knob")
    assert (found.verdict, found.confidence) == ("not-activated", "likely")
    caller = line_of(FUSED, "return _fused_add_aiter(x)")
    assert f"_use_aiter and x is not None (caller {caller})" in found.reason


def test_an_object_built_only_under_a_flag(kinds: tuple[EngineSource, VersionIndex]) -> None:
    off = report(run(kinds, "--eplb-rebalance-iters 10"), "eplb-rebalance-iters")
    assert off.verdict == "no-op" and "enable_eplb=False" in off.reason
    assert f"(caller {line_of(SCHEDULER, 'EPLBManager(server_args) if')})" in off.reason
    on = report(run(kinds, "--eplb-rebalance-iters 10 --enable-eplb"), "eplb-rebalance-iters")
    assert on.verdict == "effective"


def test_a_copy_of_a_copy_of_a_flag_gates_a_read_in_the_class_and_in_its_mixin(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``self.try_preempt = self.enable_prio`` (itself ``server_args.enable_prio``) gates a read
    in the scheduler and one in a mixin that never assigns it (the classes mixing it in do)."""
    for flag, where in (
        ("prio-window-knob", SCHEDULER),
        ("preempt-threshold-knob", "sglang/srt/managers/scheduler_pp_mixin.py"),
    ):
        off = report(run(kinds, f"--{flag} 5"), flag)
        assert (off.verdict, off.confidence) == ("no-op", "proven")
        assert "enable_prio=False (default)" in off.reason
        on = report(run(kinds, f"--{flag} 5 --enable-prio"), flag)
        assert on.verdict == "effective" and where in on.reason


def test_an_attribute_a_mixin_sets_gates_a_read_in_the_class_that_mixes_it_in(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``SchedulerDllmMixin.init_dllm`` sets ``self.dllm_cfg`` from ``--dllm-algo``; the
    scheduler reads ``--dllm-block-knob`` only when it is set."""
    off = report(run(kinds, "--dllm-block-knob 8"), "dllm-block-knob")
    assert off.verdict == "no-op" and "dllm_algo=None (default)" in off.reason
    on = report(run(kinds, "--dllm-block-knob 8 --dllm-algo llada"), "dllm-block-knob")
    assert on.verdict == "effective"


def test_a_module_imported_inside_a_function_only_a_flag_calls(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``SpecAlgorithm.draft_kernel`` imports ``eagle_kernels`` inside the method; only a
    configured speculative algorithm calls it: the module's reads are off without one."""
    off = report(run(kinds, "--draft-tile-knob 8"), "draft-tile-knob")
    assert off.verdict == "no-op" and "speculative_algorithm=None (default)" in off.reason
    assert f"(caller {line_of(SCHEDULER, 'self.spec_algorithm.draft_kernel()')})" in off.reason
    on = report(run(kinds, "--draft-tile-knob 8 --speculative-algorithm eagle"), "draft-tile-knob")
    assert on.verdict != "no-op"


def test_an_environment_variable_declared_as_a_descriptor_gates_by_its_default(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``envs.SGLANG_FAST_PATH.get()``: an ``EnvBool(False)`` field of ``Envs`` that learns
    its name from ``__set_name__`` and answers its default when the variable is unset."""
    off = report(run(kinds, "--fast-path-knob 4"), "fast-path-knob")
    assert off.verdict == "no-op" and "SGLANG_FAST_PATH unset" in off.reason
    source, index = kinds
    model = load_model_config(MODELS / "foo_moe_top8.json")
    target = Target.make(arch="sm120", model=model, tp=4, env={"SGLANG_FAST_PATH": "1"})
    on = report(
        research(source, index, target, parse_flag_string("--fast-path-knob 4")), "fast-path-knob"
    )
    assert on.verdict == "effective"


def test_an_enum_member_read_twice_is_the_same_member(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``mode is not VerifyMode.STATIC``, the mode read from an environment variable at its
    declared default ``"static"``: the member looked up twice is one object in the engine,
    so the refusal under it is not reached (0.5.23's ``--enable-linear-replayssm-spec`` was
    called ``incompatible``, ``proven``, on this)."""
    found = report(run(kinds, "--enable-ring-verify"), "enable-ring-verify")
    assert found.verdict == "effective" and not found.refusals
    source, index = kinds
    model = load_model_config(MODELS / "foo_moe_top8.json")
    target = Target.make(arch="sm120", model=model, tp=4, env={"SGLANG_VERIFY_MODE": "ragged"})
    refused = report(
        research(source, index, target, parse_flag_string("--enable-ring-verify")),
        "enable-ring-verify",
    )
    assert refused.verdict == "incompatible"
    assert "needs SGLANG_VERIFY_MODE=static" in refused.reason


def test_a_callers_condition_on_an_attribute_its_class_sets_from_a_flag(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``dispatch(scheduler: Scheduler)`` choosing the loop on ``scheduler.disaggregation_mode``,
    which ``Scheduler.__init__`` sets once from the flag: a flag's value, not a run-time one."""
    off = report(run(kinds, "--decode-polling-interval 5"), "decode-polling-interval")
    assert off.verdict == "no-op"
    assert "disaggregation_mode='null' (default)" in off.reason
    on = run(kinds, "--decode-polling-interval 5 --disaggregation-mode decode")
    assert report(on, "decode-polling-interval").verdict == "effective"


def test_a_method_many_classes_define_is_followed_through_self(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``load_model`` is defined by four classes, so a call ``x.load_model()`` cannot be told
    apart by name; ``self.load_model()`` in ModelRunner's own ``initialize`` can, and the path
    (``__init__`` -> ``initialize`` -> ``load_model``, built by the scheduler) decides it."""
    off = report(run(kinds, "--weights-mmap-knob 1"), "weights-mmap-knob")
    assert off.verdict == "no-op" and "enable_eplb=False" in off.reason
    on = report(run(kinds, "--weights-mmap-knob 1 --enable-eplb"), "weights-mmap-knob")
    assert on.verdict == "effective"
    assert on.reason.startswith(
        "--weights-mmap-knob is read at sglang/srt/model_executor/runner.py:"
    )


def test_a_factory_branch_is_conditional_never_effective(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``elif self.is_ngram(): return NgramWorker`` in a file that names no flag
    found = report(run(kinds, "--ngram-corpus-max-tokens 8"), "ngram-corpus-max-tokens")
    assert found.verdict == "conditional"
    assert "self.is_ngram()" in found.conditions


def test_a_class_built_only_by_the_backend_a_registry_selects(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    triton = run(kinds, "--attention-backend triton --flashinfer-workspace-mb 256")
    found = report(triton, "flashinfer-workspace-mb")
    assert found.verdict == "no-op" and "attention_backend='triton'" in found.reason
    chosen = run(kinds, "--attention-backend flashinfer --flashinfer-workspace-mb 256")
    assert report(chosen, "flashinfer-workspace-mb").verdict == "effective"
    unset = report(run(kinds, "--flashinfer-workspace-mb 256"), "flashinfer-workspace-mb")
    assert unset.verdict == "conditional"  # the engine picks a backend at run time
    # the per-phase override unset beside --attention-backend triton (above: no-op) takes its
    # choice; set, it selects the backend itself
    prefill = run(
        kinds,
        "--attention-backend triton --prefill-attention-backend flashinfer"
        " --flashinfer-workspace-mb 256",
    )
    assert report(prefill, "flashinfer-workspace-mb").verdict == "effective"
    # --sampling-backend's choices hold "flashinfer" too, but not the table's other keys: it
    # does not choose from this table
    sampling = run(
        kinds,
        "--attention-backend triton --sampling-backend flashinfer --flashinfer-workspace-mb 256",
    )
    assert report(sampling, "flashinfer-workspace-mb").verdict == "no-op"


def test_a_registry_key_no_resolved_value_can_be_is_not_chosen(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``page_backend = "paged" if is_sm90_supported() else "ragged"``: on sm90 the CUDA
    version decides, which the source does not give, but neither value is "flat", so the
    table's "flat" entry never runs (0.5.9's ``--nsa-prefill-backend`` on sm90, whose
    ``--attention-backend`` is "fa3" or "flashinfer" by ``is_hopper_with_cuda_12_3()``)."""
    sm90 = report(run(kinds, "--flat-page-knob 3", arch="sm90"), "flat-page-knob")
    assert sm90.verdict == "no-op"
    assert "page_backend='paged' or 'ragged' (by is_sm90_supported())" in sm90.reason
    chosen = run(kinds, "--flat-page-knob 3 --page-backend flat", arch="sm90")
    assert report(chosen, "flat-page-knob").verdict not in ("no-op", "not-activated")


def test_a_function_the_http_server_runs_as_it_starts(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``FastAPI(lifespan=lifespan)``: handed over by name, run when the server starts
    found = report(run(kinds, "--warmup-knob fast"), "warmup-knob")
    assert found.verdict == "effective"
    assert "by name" not in found.reason and "entrypoints/http_server.py" in found.reason


def test_a_capability_table_keyed_by_the_major_version(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    sm120 = report(run(kinds, "--symm-mem-max-size 32"), "symm-mem-max-size")
    assert (sm120.verdict, sm120.confidence) == ("not-activated", "proven")
    assert "sm120: compute capability 12.0" in sm120.reason and "sizes is None" in sm120.reason
    hopper = report(run(kinds, "--symm-mem-max-size 32", arch="sm90"), "symm-mem-max-size")
    assert hopper.verdict != "not-activated"


# --- 3. refusals anywhere on the start path; what is not a read -----------------------------


def test_a_validation_hooks_raise_through_a_view(kinds: tuple[EngineSource, VersionIndex]) -> None:
    found = report(run(kinds, "--enable-aux-capture"), "enable-aux-capture")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "--enable-aux-capture needs --speculative-algorithm EAGLE3" in found.reason
    assert (
        line_of("sglang/srt/arg_groups/validation_hook.py", "needs --speculative-algorithm")
        in found.reason
    )
    fine = run(kinds, "--enable-aux-capture --speculative-algorithm EAGLE3")
    assert report(fine, "enable-aux-capture").verdict != "incompatible"


def test_a_config_dataclass_post_init_raise(kinds: tuple[EngineSource, VersionIndex]) -> None:
    for flags in ("--redundant-experts 2", "--redundant-experts 2 --attention-backend triton"):
        found = report(run(kinds, flags), "redundant-experts")
        assert found.verdict == "incompatible", flags
        assert "redundant experts need EPLB" in found.reason
    with_eplb = run(kinds, "--redundant-experts 2 --enable-eplb")
    assert report(with_eplb, "redundant-experts").verdict != "incompatible"


def test_hash_and_log_echo_are_not_reads(kinds: tuple[EngineSource, VersionIndex]) -> None:
    result = run(kinds, "--hashed-only-knob 3 --echo-only-knob 3")
    for flag in ("hashed-only-knob", "echo-only-knob"):
        found = report(result, flag)
        assert (found.verdict, found.confidence) == ("dead-code", "proven"), flag


# --- 5. writes and reads of the wrong kind -------------------------------------------------


def test_a_write_through_a_local_helper_is_not_a_no_op(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # the only coupling found does not apply (TP <= 8); the _set(...) write is not followed
    found = report(run(kinds, "--disable-prefill-graph"), "disable-prefill-graph")
    assert (found.verdict, found.confidence) == ("unknown", "unknown")
    assert "does more there than set flags" in found.reason


def test_a_value_the_resolution_builds_into_another_flag_is_not_a_no_op(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``--decode-graph-bs``: read directly only by the n-gram worker (off here), and put by
    the resolution into ``decode_graph_config``, which the model runner reads: the flag goes
    where that one goes (0.5.23's ``--cuda-graph-bs-decode`` was called a no-op)."""
    found = report(run(kinds, "--decode-graph-bs 1 2 4"), "decode-graph-bs")
    assert found.verdict == "effective"
    assert "builds --decode-graph-config from it" in found.reason


def test_a_model_config_attribute_sharing_the_flags_name_is_not_its_reader(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    found = report(run(kinds, "--mamba-ssm-dtype float32"), "mamba-ssm-dtype")
    assert found.verdict == "dead-code"
    assert not any(e.ref.startswith("sglang/srt/models/") for e in found.evidence)


# --- 4. confidence in every output ---------------------------------------------------------


def test_confidence_in_json_text_and_the_recorded_event(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    from ledger.engines.research import researched_event

    result = run(kinds, "--aiter-fusion-knob --hashed-only-knob 1")
    payload = json.loads(json.dumps(to_json(result)))
    flags = {f["flag"]: f for f in payload["flags"]}
    assert flags["aiter-fusion-knob"]["confidence"] == "likely"
    assert flags["hashed-only-knob"]["confidence"] == "proven"
    assert all(f["confidence"] in ("proven", "likely", "unknown") for f in payload["flags"])
    assert isinstance(flags["ngram-corpus-max-tokens"]["unresolved"], list)
    assert sum(payload["confidence_counts"].values()) == len(payload["flags"])
    assert "--hashed-only-knob  dead-code (proven) (given 1)" in to_text(result)
    event = researched_event(result, report(result, "aiter-fusion-knob"))
    assert (event.schema_version, event.verdict_confidence) == (4, "likely")


# --- 6. input --------------------------------------------------------------------------------


def test_unknown_flag_exit_0_and_strict_exit_3(tmp_path: Path) -> None:
    argv: list[str | Path] = ["research", "--engine", KINDS, "--arch", "sm120", "--tp", "4"]
    argv += ["--model-config", MODELS / "foo_moe_top8.json", "--flags", "--enable-eplbb"]
    env = {"TUNELEDGER_RESEARCH_CACHE": str(tmp_path / "cache")}
    plain = invoke(argv, env=env)
    assert plain.returncode == 0 and "--enable-eplbb  not defined" in plain.stdout
    strict = invoke([*argv, "--strict"], env=env)
    assert strict.returncode == 3
    assert strict.stderr.strip().splitlines() == [
        "tuneledger: error: --enable-eplbb: not a flag of sglang 0.0.4 (nearest: --enable-eplb)"
    ]


def _wheel(folder: Path, out: Path, version: str) -> Path:
    wheel = out / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return wheel


def test_a_wheel_whose_metadata_is_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _wheel(KINDS, tmp_path, "0.5.23")  # named 0.5.23, its METADATA says 0.0.4
    monkeypatch.setenv("TUNELEDGER_WHEELS", str(tmp_path))
    monkeypatch.setenv("TUNELEDGER_RESEARCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(
        InvalidInput, match=r"METADATA says version 0\.0\.4, sglang==0\.5\.23 was asked"
    ):
        open_engine("sglang==0.5.23", download=False)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("missing", "no sglang/srt/server_args.py: not an SGLang server"),
        ("broken", "sglang/srt/server_args.py does not parse (line 1"),
    ],
)
def test_unreadable_argument_files_are_one_line_errors(
    tmp_path: Path, change: str, message: str
) -> None:
    copy = tmp_path / "tree"
    shutil.copytree(KINDS, copy)
    args = copy / "sglang" / "srt" / "server_args.py"
    if change == "missing":
        args.unlink()
    else:
        args.write_text("def (:\n")
    done = invoke(
        ["research", "--engine", copy, "--arch", "sm120", "--flags", "--tp 2"],
        env={"TUNELEDGER_RESEARCH_CACHE": str(tmp_path / "cache")},
    )
    assert done.returncode == 3
    (line,) = done.stderr.strip().splitlines()
    assert message in line and "Traceback" not in done.stderr


def test_overdeep_files_land_in_unparsed_files(tmp_path: Path) -> None:
    copy = tmp_path / "tree"
    shutil.copytree(KINDS, copy)
    deep = "x = " + "(" * 5000 + "get_global_server_args().enable_eplb" + ")" * 5000 + "\n"
    (copy / "sglang" / "srt" / "deep.py").write_text(deep)
    source = open_engine(str(copy), "sglang")
    index = load_index(source, use_cache=False, workers=1)
    assert list(index.errors) == ["sglang/srt/deep.py"]
    assert index.errors["sglang/srt/deep.py"].split(":")[0] in (
        "RecursionError",
        "MemoryError",
        "SyntaxError",
    )
    payload = to_json(run((source, index), "--enable-eplb"))
    assert payload["unparsed_files"] == ["sglang/srt/deep.py"]
    assert {f["flag"]: f["verdict"] for f in payload["flags"]}["enable-eplb"] == "effective"


# --- 4. calibrated: what the walk assumed is not a verdict -----------------------------------


def test_a_read_reached_only_through_a_table_is_never_effective(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``KERNELS = {"table": _build_table_kernel}``: no call of the builder by name, so whether
    # it runs here is not known, and the read's own conditions holding decide nothing
    found = report(run(kinds, "--table-kernel-knob 4"), "table-kernel-knob")
    assert (found.verdict, found.confidence) == ("conditional", "unknown")
    assert "_build_table_kernel() runs here" in found.conditions
    assert "called through a table or by name" in found.reason


def test_effective_is_never_proven(kinds: tuple[EngineSource, VersionIndex]) -> None:
    # measured: "effective" on a fully followed path was still wrong on flags read by hand
    result = run(kinds, "--attention-backend flashinfer --flashinfer-workspace-mb 256")
    effective = [r for r in result.reports if r.verdict == "effective"]
    assert effective and all(r.confidence in ("likely", "unknown") for r in effective)


def test_a_deprecated_spelling_with_an_action_and_no_field_is_dead_code(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    found = report(run(kinds, "--old-pool-ratio"), "old-pool-ratio")
    assert (found.verdict, found.confidence) == ("dead-code", "likely")
    assert "registered without a field" in found.reason


def test_a_source_file_past_the_member_bound_is_left_out_and_named(tmp_path: Path) -> None:
    """A wheel member (or a folder's file) past ``MAX_MEMBER_BYTES`` once
    inflated is never read: left out, named in the research's notes, the rest analysed (a
    planted 3 GiB member held 6.2 GB). The member is 17 MiB of one comment, 17 KB deflated."""
    size = MAX_MEMBER_BYTES + (1 << 20)
    wheel = _wheel(KINDS, tmp_path, "0.0.4")
    with zipfile.ZipFile(wheel, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("sglang/srt/huge.py", b"#" * size)
    assert wheel.stat().st_size < 1 << 20
    folder = tmp_path / "tree"
    shutil.copytree(KINDS, folder)
    with (folder / "sglang" / "srt" / "huge.py").open("wb") as sparse:
        sparse.truncate(size)
    for spec in (wheel, folder):
        source = open_engine(str(spec), "sglang")
        assert "sglang/srt/huge.py" not in source.paths() and len(source) > 5
        assert source.notes == [
            f"{spec}: sglang/srt/huge.py left out: {size:,} bytes, past the 16 MiB a source "
            "file may hold"
        ]
        index = load_index(source, use_cache=False, workers=1)
        result = run((source, index), "--enable-eplb")
        result.notes = list(source.notes)  # as research_spec carries them
        payload = to_json(result)
        assert payload["notes"] == source.notes and payload["unparsed_files"] == []
        assert {f["flag"]: f["verdict"] for f in payload["flags"]}["enable-eplb"] == "effective"
        assert f"note: {spec}: sglang/srt/huge.py left out" in to_text(result)


DEEP_FORMS = {
    "sum": "x = " + " + ".join(["1"] * 1_000_000) + "\n",
    "calls": "x = f" + "()" * 100_000 + "\n",
    "attributes": "x = a" + ".b" * 100_000 + "\n",
    "lambdas": "x = " + "lambda: " * 5_000 + "0\n",
    "elif": "if a == 0:\n    pass\n"
    + "".join(f"elif a == {i}:\n    pass\n" for i in range(1, 10_000)),
}


@pytest.mark.parametrize("form", sorted(DEEP_FORMS))
def test_each_deep_form_of_the_issue_lands_in_unparsed_files(tmp_path: Path, form: str) -> None:
    """The five deep forms of a wheel's Python that failed the whole research
    (10^6-term sums, 10^5 chained calls or attributes, 5,000 nested lambdas: RecursionError;
    a 10^4-branch elif: MemoryError) leave the research whole: the file is analysed or named
    in ``unparsed_files``, the other files analysed."""
    copy = tmp_path / "tree"
    shutil.copytree(KINDS, copy)
    # the flag read in the same file: the scan parses it (a file naming no flag is skipped)
    (copy / "sglang" / "srt" / "deep.py").write_text(
        "y = get_global_server_args().enable_eplb\n" + DEEP_FORMS[form]
    )
    source = open_engine(str(copy), "sglang")
    index = load_index(source, use_cache=False, workers=1)
    (error,) = index.errors.values()
    assert list(index.errors) == ["sglang/srt/deep.py"] and "\n" not in error
    assert error.split(":")[0] in ("RecursionError", "MemoryError", "SyntaxError")
    payload = to_json(run((source, index), "--enable-eplb"))
    assert payload["unparsed_files"] == sorted(index.errors)
    assert {f["flag"]: f["verdict"] for f in payload["flags"]}["enable-eplb"] == "effective"


def test_what_the_wheel_requires_is_installed_and_nothing_else() -> None:
    """``importlib.util.find_spec(X)``: found where the engine's METADATA requires X on a Linux
    x86-64 host (pip installs it with the engine); an extra, another platform's requirement or
    a package it does not name stays unknown."""
    requires = [
        "flashinfer_python==0.6.3",  # imported as ``flashinfer``
        "sgl-kernel==0.3.1",
        'av; sys_platform == "linux" and platform_machine == "aarch64"',
        'vllm>=0.6; extra == "srt"',
        "not a requirement ===",
    ]
    installed = import_names(requires)
    assert {"flashinfer", "sgl_kernel"} <= installed
    assert installed.isdisjoint({"av", "vllm"})
    source = open_engine(str(KINDS), "sglang")
    index = load_index(source, use_cache=False, workers=1)
    world = World(source.read_or_none, index.paths, index.tables, installed)
    target = Target.make(arch="sm120", model=None, tp=4)
    interp = new_interpreter(world, index, target)
    frame = Frame("sglang.srt.utils.common")  # imports importlib.util, as the engine does
    for expression, expected in [
        ('importlib.util.find_spec("flashinfer") is not None', True),
        ('importlib.util.find_spec("sglang") is not None', True),
        ('importlib.util.find_spec("av") is not None', None),
    ]:
        value, facts = interp.with_facts(
            lambda e=expression: interp.eval(parse_expression(e), frame)
        )
        assert truth(value) is expected, expression
        installed_fact = any("installed with the engine" in f.text for f in facts)
        assert installed_fact is (expression.count("flashinfer") == 1), expression


def test_a_raise_reached_after_the_resolution_is_not_its_refusal(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """The resolution's refusals are what its walk reached: a raise a later evaluation reaches
    (a condition that builds an object, a reader probed with unknown arguments) is not one of
    them, so it cannot make a flag ``incompatible (proven)`` on a path nobody walked."""
    source, index = kinds
    world = World(source.read_or_none, index.paths, index.tables)
    target = Target.make(arch="sm120", model=load_model_config(MODELS / "foo_moe_top8.json"), tp=4)
    interp = new_interpreter(world, index, target)
    resolution = walk(interp, index)
    walked = list(resolution.refusals)
    module = "sglang.srt.layers.fused"
    interp.eval(parse_expression("_fused_add_aiter(1) + undefined_name"), Frame(module))
    interp.refusals.append(Refusal("raised later", Site("sglang/srt/layers/fused.py", 8), ()))
    assert resolution.refusals == walked


# --- values the walk reads across files ---------------------------------------------------


def test_an_attribute_of_the_flags_name_derived_with_another_condition(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``self.enable_dyn_chunking = server_args.enable_dyn_chunking and self.pp_size > 1``: the
    # mixin's ``self.enable_dyn_chunking`` is that derived value, not the flag
    found = report(run(kinds, "--enable-dyn-chunking"), "enable-dyn-chunking")
    assert found.verdict == "no-op"
    assert "pp_size=1 (default)" in found.reason
    assert "scheduler_pp_mixin" not in found.reason
    with_pp = report(run(kinds, "--enable-dyn-chunking --pp-size 2"), "enable-dyn-chunking")
    assert with_pp.verdict == "effective"


def test_a_parameter_no_caller_of_this_model_passes_keeps_its_default(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # Foo builds ``SparseMoeBlock(config)``; OtherOss passes ``cuda_fusion=True``
    foo = report(run(kinds, "--shared-fusion-knob"), "shared-fusion-knob")
    assert foo.verdict == "not-activated"
    assert "cuda_fusion=False (no caller passes it)" in foo.reason
    assert foo.confidence == "likely"  # the callers found may not be all: never proven
    # OtherOss's one call passes ``cuda_fusion=True``: the read holds for that model
    # (``passed.passed_value``), where it was a run-time value before
    other = report(run(kinds, "--shared-fusion-knob", model="other_oss"), "shared-fusion-knob")
    assert other.verdict == "effective"
    assert other.confidence != "proven"


def test_a_limit_on_a_count_made_while_serving_is_conditional(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # copied (``self.x = server_args.x``, a returned tuple), checked for ``None``, and then
    # compared with ``len(self.waiting_queue) + 1``: what it changes depends on the load
    found = report(run(kinds, "--max-waiting-reqs 64"), "max-waiting-reqs")
    assert found.verdict == "conditional"
    assert "only as a limit on a run-time value" in found.reason
    assert line_of(SCHEDULER, "len(self.waiting_queue) + 1") in found.reason


def test_a_value_kept_under_its_own_name_is_off_where_every_use_is(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``self.default_prio_knob = server_args.default_prio_knob`` runs, but the attribute is used
    # only under --enable-prio: keeping a value is no effect
    off = report(run(kinds, "--default-prio-knob 1"), "default-prio-knob")
    assert off.verdict == "no-op"
    assert "enable_prio=False (default)" in off.reason
    on = report(run(kinds, "--default-prio-knob 1 --enable-prio"), "default-prio-knob")
    assert on.verdict in ("effective", "conditional")


def test_a_value_handed_to_a_function_takes_the_conditions_where_it_is_used(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``check_length(req, n, server_args.truncate_knob)`` truncates only a prompt longer than
    # ``n``: the call runs for every request, the flag changes one that long
    handed = report(run(kinds, "--truncate-knob"), "truncate-knob")
    assert handed.verdict == "conditional"
    where = line_of("sglang/srt/managers/requests.py", "if len(req.input_ids) >= max_len")
    assert f"len(req.input_ids) >= max_len (where check_length() uses it, {where})" in handed.reason
    # a function that uses its parameter whatever the request: handing the value is a use
    assert report(run(kinds, "--token-cap-knob 8"), "token-cap-knob").verdict == "effective"
    # kept on an object built in a branch's own import, used by one kind of request only
    kept = report(run(kinds, "--grammar-ws-knob 2"), "grammar-ws-knob")
    assert kept.verdict == "conditional"
    where = line_of("sglang/srt/managers/grammar_impl.py", 'if key == "$$ANY$$"')
    assert f"not (key == '$$ANY$$') (where GrammarBackend() uses it, {where})" in kept.reason


def test_a_value_kept_under_its_own_name_and_used_per_request_is_conditional(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``self.prompt_trim_knob = server_args.prompt_trim_knob`` runs at start; the copy changes a
    # request only when the prompt reaches the context length
    found = report(run(kinds, "--prompt-trim-knob"), "prompt-trim-knob")
    assert found.verdict == "conditional"
    assert "len(req.input_ids) >= self.context_len" in found.reason


def test_a_probe_after_a_spent_walk_has_a_budget_of_its_own() -> None:
    # vLLM 0.34's --quantization-config: the walk before had spent the interpreter's steps,
    # and looking up the reading function's annotated parameter raised ``Budget`` out of
    # ``research`` (a traceback in the CLI)
    source = open_engine(str(KINDS), "sglang")
    index = load_index(source, use_cache=False, workers=1)
    world = World(source.read_or_none, index.paths, index.tables, set())
    interp = new_interpreter(world, index, Target.make(arch="sm120", model=None, tp=4))
    (read,) = index.reads["budget_scale_knob"]
    evaluator = GateEvaluator(interp, index)
    interp.allow(0)
    with pytest.raises(Budget):
        interp.eval(parse_expression("1 + 1"), Frame("sglang.srt.managers.requests"))
    assert evaluator.probe(read) is None  # no raise on its path, and no Budget out of it


def test_a_function_whose_every_way_returns_a_constant_is_one_of_them(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``if is_sm90_supported(): return "wide"`` and every other branch ``return "narrow"``: on
    sm90 the CUDA version decides, which the source does not give, and an ``if`` whose sides
    both return made the value unknown outright; it is
    one of the two, neither "ring", so a read under ``lane_backend == "ring"`` is off (0.5.23's
    ``get_default_attn_backend`` never returns "dsa": ``--dsa-prefill-backend`` on a model
    without sparse attention, docs/research.md, the eighteenth round)."""
    sm90 = report(run(kinds, "--ring-lane-knob 4", arch="sm90"), "ring-lane-knob")
    assert sm90.verdict == "no-op"
    assert "lane_backend='wide' or 'narrow'" in sm90.reason
    chosen = run(kinds, "--ring-lane-knob 4 --lane-backend ring", arch="sm90")
    assert report(chosen, "ring-lane-knob").verdict == "effective"
