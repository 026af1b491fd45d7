"""Kinds of path met on blind flag sets L and M (docs/research.md, the eighth round), each on the
synthetic tree tests/fixtures/research/sglang_kinds: a check the launch runs on the resolved
arguments, a class a dispatch table selects by a flag, a module's ``__main__`` block that is a
program of its own, and which module's ``get_model`` is the configuration's getter."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.engines.research import open_engine
from ledger.engines.research.access import AccessModel
from ledger.engines.research.index import VersionIndex
from ledger.engines.research.sglang_defs import _with_getter_modules
from ledger.engines.research.sources import EngineSource
from tests.engines.test_research_kinds import kinds, line_of, report, run

__all__ = ["kinds"]  # the module-scoped fixture, shared with the kinds tests


def test_a_raise_in_the_check_the_launch_runs_refuses_the_start(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    found = report(run(kinds, "--retract-policy-knob priority"), "retract-policy-knob")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "--retract-policy-knob priority needs --enable-prio" in found.reason
    assert line_of("sglang/srt/server_args.py", "needs --enable-prio") in found.reason
    allowed = run(kinds, "--retract-policy-knob priority --enable-prio")
    assert report(allowed, "retract-policy-knob").verdict != "incompatible"
    # the check runs for every start: a flag it does not refuse is not refused by it
    assert report(run(kinds, "--enable-prio"), "enable-prio").verdict != "incompatible"


def test_a_private_class_a_dispatch_table_selects_by_a_flag(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    default = report(run(kinds, "--recorder-buffer-knob 500"), "recorder-buffer-knob")
    assert default.verdict == "no-op"
    assert "recorder_mode == 'stat'" in default.reason
    assert "recorder_mode='detail' (default)" in default.reason
    chosen = run(kinds, "--recorder-buffer-knob 500 --recorder-mode stat")
    assert report(chosen, "recorder-buffer-knob").verdict == "effective"


def test_another_modules_main_block_is_not_this_servers_start(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    off = report(run(kinds, "--daemon-timeout-knob 600"), "daemon-timeout-knob")
    assert off.verdict == "no-op"
    assert "daemon_mode='off' (default)" in off.reason
    on = run(kinds, "--daemon-timeout-knob 600 --daemon-mode on")
    assert report(on, "daemon-timeout-knob").verdict == "effective"


def test_the_getter_home_is_the_module_defining_the_namespaces_getters(
    tmp_path: Path,
) -> None:
    # ``get_model`` is also the model loader's name, in a file read before the getters' own
    loader = tmp_path / "sglang/srt/model_loader/__init__.py"
    context = tmp_path / "sglang/srt/runtime_context.py"
    for path, text in (
        (tmp_path / "sglang/__init__.py", ""),
        (tmp_path / "sglang/srt/__init__.py", ""),
        (tmp_path / "sglang/srt/server_args.py", "class ServerArgs:\n    pass\n"),
        (loader, "def get_model(config):\n    return config\n"),
        (context, "def get_model():\n    return 1\n\n\ndef get_exec():\n    return 2\n"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    source = open_engine(str(tmp_path), "sglang")
    found = _with_getter_modules(AccessModel(objects={}), source, {"model.load", "exec.offload"})
    assert found.getter_modules == {
        "get_model": "sglang.srt.runtime_context",
        "get_exec": "sglang.srt.runtime_context",
    }


@pytest.mark.parametrize("flag", ["recorder-mode", "daemon-mode", "retract-policy-knob"])
def test_the_new_flags_at_their_defaults_are_not_refused(
    kinds: tuple[EngineSource, VersionIndex], flag: str
) -> None:
    assert report(run(kinds), flag).verdict != "incompatible"


def test_a_read_deep_under_the_schedulers_construction_runs(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # eight calls below ``Scheduler.__init__``: with the scheduler's own callers on top the
    # path was past the callers followed, so "conditional"; the process builds it regardless
    found = report(run(kinds, "--deep-knob 3"), "deep-knob")
    assert found.verdict == "effective"
    assert line_of("sglang/srt/deep_chain.py", "server_args.deep_knob") in found.reason


def test_a_wrapper_asks_the_runners_properties_and_imports_its_check_lazily(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``runner: "ModelRunner"`` (imported for type checkers only): the runner's property asks
    # the model config's class (its ``model_type``), and the hardware check is imported inside
    # the function; each is decided on the target, not left a run-time value
    sm120 = report(run(kinds, "--wrapper-split-knob 4"), "wrapper-split-knob")
    assert sm120.verdict in ("no-op", "not-activated")
    assert "is_sm100_supported()" in sm120.reason
    sm100 = report(run(kinds, "--wrapper-split-knob 4", arch="sm100"), "wrapper-split-knob")
    assert sm100.verdict == "effective"
    # a model type the package declares no class for is one of transformers' configs: not Foo's
    other = report(
        run(kinds, "--wrapper-split-knob 4", arch="sm100", model="other_oss"),
        "wrapper-split-knob",
    )
    assert other.verdict in ("no-op", "not-activated")
    assert "runner.family_config is not None" in other.reason


def test_a_wrappers_assert_on_an_annotated_runner_refuses_the_value(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    refused = report(run(kinds, "--wrapper-mode flat"), "wrapper-mode")
    assert refused.verdict == "incompatible"
    assert "the Foo family needs --wrapper-mode paged or ragged" in refused.reason
    assert report(run(kinds, "--wrapper-mode ragged"), "wrapper-mode").verdict != "incompatible"
    # the runner's model is not of the family: the assert is not reached
    other = report(run(kinds, "--wrapper-mode flat", model="other_oss"), "wrapper-mode")
    assert other.verdict != "incompatible"


def test_a_value_kept_in_a_module_global_is_used_where_the_global_is_read(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``global SPEC_BACKEND; SPEC_BACKEND = server_args.spec_backend_knob ...`` at start; only
    # the speculative worker's context reads it back (through a getter)
    off = report(run(kinds, "--spec-backend-knob triton"), "spec-backend-knob")
    assert off.verdict == "no-op"
    assert "the global SPEC_BACKEND it sets is read by get_spec_backend()" in off.reason
    assert "speculative_algorithm=None (default)" in off.reason
    on = run(kinds, "--spec-backend-knob triton --speculative-algorithm eagle")
    assert report(on, "spec-backend-knob").verdict == "effective"


def test_the_model_configs_derived_attention_arch_picks_a_value_whose_check_refuses_the_start(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``ModelConfig._derive_model_shapes`` sets ``attention_arch`` by the architecture; the
    # resolution picks ``--kernel-backend`` by it (``use_mla_backend()``), as SGLang 0.5.9 picks
    # its attention backend; the family's wrapper asserts against that pick on sm120
    mha = run(kinds, "--wrapper-split-knob 4")
    assert report(mha, "kernel-backend").resolved == "dense"
    assert report(mha, "wrapper-split-knob").verdict in ("no-op", "not-activated")
    mla = run(kinds, "--wrapper-split-knob 4", model="foo_mla")
    assert report(mla, "kernel-backend").resolved == "mla_kernel"
    refused = report(mla, "wrapper-split-knob")
    assert refused.verdict == "incompatible"
    assert refused.confidence == "likely"
    assert "does not start this target" in refused.reason
    assert "--kernel-backend resolves to 'mla_kernel'" in refused.reason
    assert "no MLA kernel for the Foo family on sm120" in refused.reason
    assert "(the flag itself: " in refused.reason  # its own reading kept
    # the value given instead of the pick: the start is not refused
    given = run(kinds, "--wrapper-split-knob 4 --kernel-backend dense", model="foo_mla")
    assert report(given, "wrapper-split-knob").verdict in ("no-op", "not-activated")
    # another arch: the check is not reached
    sm100 = run(kinds, "--wrapper-split-knob 4", arch="sm100", model="foo_mla")
    assert report(sm100, "wrapper-split-knob").verdict == "effective"


def test_a_check_of_the_models_architecture_through_a_dict_or_object_helper_refuses(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    # ``isinstance(config, dict)`` of the model's config is False (a transformers config object
    # is none of Python's containers): the helper reads ``config.architectures`` and the check
    # refuses a model of another family (sglang 0.5.23's ``--enable-hisparse``)
    refused = report(run(kinds, "--enable-sparse-cache"), "enable-sparse-cache")
    assert refused.verdict == "incompatible"
    assert refused.confidence == "proven"
    assert "--enable-sparse-cache needs a sparse-attention model" in refused.reason


def test_a_global_the_start_sets_from_a_flag_holds_that_value_where_it_is_read(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``global A2A_BACKEND; A2A_BACKEND = A2AKnob(server_args.a2a_knob)`` in the start-up
    function: a getter's ``is_deep()`` was "a run-time value" (the global's first value, None,
    says nothing), so a read under it was taken as running: SGLang 0.5.9's ``--deepep-mode``
    was ``effective`` without ``--moe-a2a-backend deepep`` (docs/research.md, the eighteenth
    round). The getter's own default for an unset global is not what it holds after the start."""
    off = report(run(kinds, "--deep-mode-knob low"), "deep-mode-knob")
    assert off.verdict == "no-op"
    assert "a2a_knob='none' (default)" in off.reason
    on = report(run(kinds, "--deep-mode-knob low --a2a-knob deep"), "deep-mode-knob")
    assert on.verdict == "effective"


def test_a_value_the_resolution_makes_of_the_default_changes_nothing(
    kinds: tuple[EngineSource, VersionIndex],
) -> None:
    """``--buffer-strategy-knob no_buffer`` where the resolution turns the default ``auto``
    into ``no_buffer``: the resolved arguments are the same with and without it, so its reads
    see what they would have seen (SGLang 0.5.9's ``--mamba-scheduler-strategy no_buffer``,
    ``effective`` before: docs/research.md, the eighteenth round)."""
    same = report(run(kinds, "--buffer-strategy-knob no_buffer"), "buffer-strategy-knob")
    assert (same.verdict, same.confidence) == ("no-op", "likely")
    assert "what the engine makes of the default" in same.reason
    assert "_handle_missing_default_values" in same.reason
    other = report(run(kinds, "--buffer-strategy-knob extra_buffer"), "buffer-strategy-knob")
    assert other.verdict == "effective"
