"""Conditions the target decides that the research took as run-time values (docs/research.md,
the sixteenth round), each on the synthetic tree tests/fixtures/research/sglang_kinds: the
model-config object a dataclass field holds, a parameter every call passes the same fact, the
platform object a module's ``__getattr__`` resolves, the config namespaces of SGLang 0.5.1x,
a lazy ``import ... as`` alias, a class named as a table's key, choices named in another
module, an alias option storing a constant, and which verdict names the reason."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.engines.research.records import Frame
from ledger.engines.research.resolve import new_interpreter
from ledger.engines.research.world import World, parse_expression
from tests.support.research_trees import Tree, judged, open_tree, target


@pytest.fixture(scope="module")
def kinds() -> Tree:
    return open_tree("sglang_kinds", "sglang")


def report(tree: Tree, flags: str, flag: str) -> Any:
    return judged(tree, flags, flag)


def test_a_dataclass_field_of_the_model_config_class_is_the_models_config(
    kinds: Tree,
) -> None:
    """``make_pool(planner: PoolPlanner)`` builds ``SparsePool`` only under
    ``is_sparse_family(planner.model_config.hf_config)``, ``model_config: ModelConfig`` a field
    of the dataclass: the test is the model's (DeepSeek-V4's pool configurator, sglang 0.5.23).
    The pool's class is also a key of a module-level table, which builds nothing."""
    found = report(kinds, "--sparse-rows-knob 2", "sparse-rows-knob")
    assert found.verdict == "not-activated"
    assert "model config.architectures = ['FooMoeForCausalLM']" in found.reason
    assert "is_sparse_family(planner.model_config.hf_config)" in found.reason


def test_a_parameter_every_call_passes_the_same_fact(
    kinds: Tree,
) -> None:
    """``_page_width(..., is_sparse=is_sparse_family(self.model_config.hf_config))``: the
    callee's ``if is_sparse:`` is the model's test, evaluated where the call is."""
    found = report(kinds, "--sparse-page-knob 4", "sparse-page-knob")
    assert found.verdict == "not-activated"
    assert "is_sparse=False (as every call passes it: sglang/srt/mem_cache/sparse_pool.py:" in (
        found.reason
    )


def test_a_function_called_under_an_alias_of_a_lazy_import(
    kinds: Tree,
) -> None:
    """``from ...sparse_pool import make_sparse_backend as SparseBackend`` inside the model's
    branch: ``SparseBackend()`` is a call of ``make_sparse_backend``, under that branch (it was
    "nothing calls it", so taken as running: effective)."""
    found = report(kinds, "--sparse-backend-knob 1", "sparse-backend-knob")
    assert found.verdict == "not-activated"
    assert "is_sparse_family(self.model_config.hf_config)" in found.reason


def test_sglangs_platform_object_is_cuda_on_an_nvidia_target(
    kinds: Tree,
) -> None:
    """``current_platform`` is resolved by the package's ``__getattr__`` on first use; on an
    NVIDIA target it is CUDA, never an out-of-tree plugin."""
    source, index = kinds
    world = World(source.read_or_none, index.paths, index.tables, source.installed)
    interp = new_interpreter(world, index, target())
    frame = Frame("sglang.srt.model_executor.runner")
    for text, wanted in (
        ("current_platform.is_out_of_tree()", False),
        ("current_platform.is_cuda()", True),
        ("current_platform.is_rocm()", False),
    ):
        assert interp.eval(parse_expression(text), frame) is wanted
    found = report(kinds, "--oot-knob 1", "oot-knob")
    assert (found.verdict, found.confidence) == ("not-activated", "proven")


def test_a_namespace_named_in_a_fields_annotation_is_read_through_its_getter(
    kinds: Tree,
) -> None:
    """SGLang 0.5.1x: ``enable_balance: A[bool, "...", NS("exec.moe")]``, read at run time as
    ``get_exec().moe.enable_balance``. Without the namespace the getter was no read at all: the
    window was dead code, and 0.5.18's EPLB check refused every flag on every target."""
    found = report(kinds, "--balance-window-knob 0", "balance-window-knob")
    assert found.verdict == "no-op"
    assert "enable_balance=False (default)" in found.reason
    assert found.verdict != "incompatible"


def test_choices_named_in_another_module_make_the_registry_a_gate(
    kinds: Tree,
) -> None:
    """``graph_kind: A[..., Arg(choices=GRAPH_KIND_CHOICES)]``, the list in
    ``arg_groups/choices.py`` (SGLang 0.5.2x's ``ATTENTION_BACKEND_CHOICES``): the functions
    ``@register_graph_backend("fast")`` registers run only when the flag chooses "fast"."""
    source, index = kinds
    assert index.definitions["graph_kind"].choices == ("fast", "safe")
    found = report(kinds, "--fast-graph-knob 3", "fast-graph-knob")
    assert found.verdict == "conditional"
    assert "graph_kind == 'fast' (registered by @register_graph_backend)" in found.reason


def test_an_alias_option_stores_its_constant(kinds: Tree) -> None:
    """``--enable-fast-graph`` (``action=..., dest="graph_kind", const_value="fast"``) sets
    ``graph_kind`` to "fast", not True (sglang 0.5.18's ``--enable-breakable-cuda-graph``)."""
    found = report(kinds, "--enable-fast-graph", "graph-kind")
    assert found.resolved == "fast"
    assert found.verdict != "overridden"
    chosen = report(kinds, "--enable-fast-graph --fast-graph-knob 3", "fast-graph-knob")
    assert "graph_kind == 'fast'" not in " ".join(chosen.conditions)


def test_a_read_another_flag_turns_off_is_a_no_op_beside_another_models_file(
    kinds: Tree,
) -> None:
    """One read in another model's file, one under ``--enable-eplb``: the flag is a no-op
    here (sglang 0.5.18's ``--speculative-dflash-draft-window-size``), not "not activated"."""
    found = report(kinds, "--draft-window-knob 2", "draft-window-knob")
    assert found.verdict == "no-op"
    assert "enable_eplb=False (default)" in found.reason


def test_a_registered_backend_runs_where_its_table_is_looked_up(
    kinds: Tree,
) -> None:
    """``@register_adapter_backend("chunked")`` is chosen by ``--adapter-backend``'s default,
    but the table is looked up (``backend_from_name``) only in the adapter manager, which
    ``--enable-adapters`` builds: the chunk size is a no-op without it (sglang 0.5.23's
    ``--max-lora-chunk-size``, docs/research.md, the seventeenth round). The index keeps no
    call of the lookup: its callers are found in the modules that import the registry."""
    found = report(kinds, "--adapter-chunk-knob 32", "adapter-chunk-knob")
    assert found.verdict == "no-op"
    assert "server_args.enable_adapters" in found.reason
    on = report(kinds, "--adapter-chunk-knob 32 --enable-adapters", "adapter-chunk-knob")
    assert on.verdict == "effective"


def test_a_context_dataclass_field_is_what_every_construction_passes(
    kinds: Tree,
) -> None:
    """``build_cache(ctx: CacheBuildContext)`` sets host tiers up under ``ctx.enable_tiered``,
    a field of a dataclass the engine builds once, from ``--enable-tiered-cache``: the test is
    that flag's (it was a run-time value, and the tiers' policy ``effective``)."""
    found = report(kinds, "--tier-policy-knob write_back", "tier-policy-knob")
    assert found.verdict in ("no-op", "not-activated")
    assert "ctx.enable_tiered" in found.reason
    on = report(kinds, "--tier-policy-knob write_back --enable-tiered-cache", "tier-policy-knob")
    assert on.verdict == "effective"


def test_a_parameter_the_calls_that_run_here_pass_alike(
    kinds: Tree,
) -> None:
    """``load_weights(server_args)`` for the model, ``load_weights(server_args,
    is_draft=True)`` only with speculative decoding: without it, every call that runs passes
    the default, and the draft's quantization is a no-op (sglang 0.5.23's
    ``--speculative-draft-model-quantization``, docs/research.md, the seventeenth round)."""
    found = report(kinds, "--draft-quant-knob fp8", "draft-quant-knob")
    assert found.verdict in ("no-op", "not-activated")
    assert "is_draft=False (as every call passes it" in found.reason
