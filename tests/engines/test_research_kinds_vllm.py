"""The kinds of path the research got wrong on vLLM 0.34 flags read by hand (docs/research.md,
the sixth round), each on the synthetic tree tests/fixtures/research/vllm_kinds: config classes
made by a decorator declared with ``dataclass_transform`` (their ``__post_init__`` and
pydantic after-validators refuse and rewrite values), ``envs`` variables read through the
module's ``__getattr__``, and model packages of their own (``vllm/models/<model>/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.engines.research import (
    Target,
    load_model_config,
    parse_flag_string,
    research,
)
from ledger.engines.research.index import VersionIndex
from ledger.engines.research.sources import EngineSource
from tests.support.research_trees import Tree, judged, open_tree

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"
KINDS = FIXTURES / "vllm_kinds"


def line_of(path: str, needle: str) -> str:
    lines = (KINDS / path).read_text().splitlines()
    return f"{path}:{next(i for i, line in enumerate(lines, 1) if needle in line)}"


@pytest.fixture(scope="module")
def engine() -> Tree:
    return open_tree("vllm_kinds", "vllm")


def verdict_of(engine: Tree, flags: str, flag: str) -> Any:
    return judged(engine, flags, flag)


def test_a_decorated_config_class_runs_its_post_init_refusal(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    found = verdict_of(engine, "--enable-elastic-ep", "enable-elastic-ep")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "Elastic EP is only supported with enable_eplb=True." in found.reason
    assert line_of("vllm/config/parallel.py", "Elastic EP is only") in found.reason
    fine = verdict_of(engine, "--enable-elastic-ep --enable-eplb", "enable-elastic-ep")
    assert fine.verdict != "incompatible"


def test_a_post_init_that_replaces_the_given_value(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    found = verdict_of(engine, "--elastic-ep-max-dp-size 4", "elastic-ep-max-dp-size")
    assert found.verdict == "overridden"
    at = line_of("vllm/config/parallel.py", "self.elastic_ep_max_dp_size = (")
    assert f"to 1 at {at}" in found.reason


def test_a_post_init_that_turns_another_field_on(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # ``numa_bind_cpus`` given sets ``numa_bind``: the read behind ``if not numa_bind`` runs
    found = verdict_of(engine, "--numa-bind-cpus 0-7", "numa-bind-cpus")
    assert found.verdict == "effective"
    assert (
        line_of("vllm/v1/worker/numa.py", "return parallel_config.numa_bind_cpus") in found.reason
    )


def test_an_after_validator_refuses_on_an_environment_default(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # ``envs.VLLM_WORKER_BACKEND`` is answered by the module's ``__getattr__``: "mp" unset
    found = verdict_of(engine, "--trace-workers", "trace-workers")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "Unable to trace workers unless they run with Ray." in found.reason


def test_an_environment_variable_read_through_a_function_its_helper_made(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``env_with_choices(name, default, choices)`` returns a nested function reading its
    ``env_name`` and ``default``: called, it answers the default when the variable is unset."""
    found = verdict_of(engine, "--enable-microbatch", "enable-microbatch")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "Microbatching needs the deepep backend." in found.reason
    source, index = engine
    model = load_model_config(FIXTURES / "models" / "foo_moe_top8.json")
    target = Target.make(arch="sm120", model=model, tp=4, env={"VLLM_A2A_BACKEND": "deepep"})
    result = research(source, index, target, parse_flag_string("--enable-microbatch"))
    (set_right,) = [r for r in result.reports if r.flag == "enable-microbatch"]
    assert set_right.verdict != "incompatible"


def test_another_models_package_is_out_of_scope_though_a_warm_up_imports_it(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    found = verdict_of(engine, "--bar-knob 3", "bar-knob")
    assert found.verdict == "not-activated"
    assert "vllm/models/bar/nvidia/kda.py is another model's file" in found.reason


def test_a_refusal_the_walk_cannot_decide_leaves_the_verdict_unknown(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # ``profile_workers and not os.path.exists(...)``: the engine may not start at all
    found = verdict_of(engine, "--profile-workers", "profile-workers")
    assert found.verdict == "not-activated"  # its only reader is another model's file
    assert found.confidence == "unknown"
    at = line_of("vllm/config/parallel.py", "Profiling needs")
    assert f"the engine may refuse it: 'Profiling needs a running Ray session.' ({at})" in (
        found.unresolved
    )
    assert verdict_of(engine, "--bar-knob 3", "bar-knob").confidence == "likely"


def test_a_refusal_a_given_flag_causes_is_its_own_not_the_targets_tp(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # the refusing method reads ``tensor_parallel_size`` too: the target's TP=4 sets it, the
    # user did not; the refusal is ``--data-parallel-rank``'s (it turns external LB on)
    found = verdict_of(engine, "--data-parallel-rank 0", "data-parallel-rank")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "data_parallel_external_lb can only be set when data_parallel_size > 1" in found.reason
    assert (
        verdict_of(
            engine, "--data-parallel-rank 0 --data-parallel-size 2", "data-parallel-rank"
        ).verdict
        != "incompatible"
    )


def test_a_field_read_only_by_the_resolution_behind_an_unset_switch_is_a_no_op(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``VllmConfig._post_init_offload`` returns unless ``offload_size`` is set: the backend it
    reads past that is read by nothing that runs (``likely``: the branch is not walked)."""
    off = verdict_of(engine, "--offload-backend lmcache", "offload-backend")
    assert (off.verdict, off.confidence) == ("no-op", "likely")
    assert "offload_size=None (default)" in off.reason
    assert line_of("vllm/config/vllm.py", "backend = self.cache_config") in off.reason
    on = verdict_of(engine, "--offload-backend lmcache --offload-size 4", "offload-backend")
    assert on.verdict == "unknown"


def test_a_whole_config_of_the_vllm_config_is_read_where_it_is_used(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``--watermark-config`` fills ``VllmConfig.watermark_config``: ``vllm_config.
    watermark_config`` in the scheduler is its read, not "read only by the resolution"."""
    found = verdict_of(engine, '--watermark-config {"key":1}', "watermark-config")
    assert found.verdict == "effective"
    assert "is read at vllm/v1/core/scheduler.py:" in found.reason


def test_a_raise_the_reading_function_meets_with_the_flag_at_its_default_is_not_its_refusal(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``build_stats`` reads the flag, then refuses an unset ``bucket_max`` (a field the engine
    fills in later): the same walk with the flag at its default meets the raise too."""
    found = verdict_of(engine, '--watermark-config {"key":1}', "watermark-config")
    assert found.verdict != "incompatible"
    assert "bucket_max is required" not in found.reason


def test_a_flag_handed_to_a_config_by_keyword_is_read_where_the_config_is(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # ``queue_depth_knob: int = 0`` names no config; ``SchedulerConfig(...,
    # queue_depth_knob=self.queue_depth_knob)`` makes ``scheduler_config.queue_depth_knob`` it
    found = verdict_of(engine, "--queue-depth-knob 8", "queue-depth-knob")
    assert found.verdict == "effective"
    assert line_of("vllm/v1/core/scheduler.py", "queue_depth_knob") in found.reason


def test_a_refusal_after_a_loop_that_may_raise_and_an_init_false_default_is_certain(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # vLLM 0.34's ``--return-sampling-mask``: ``VllmConfig.__post_init__`` returns early for a
    # derived view (``is_submodel_config = field(default=False, init=False)``: never set by the
    # constructor) and, before it, a loop over the platform's ops may raise; the replay check
    # refuses whichever way that loop goes
    refused = verdict_of(engine, "--replay-mask", "replay-mask")
    assert refused.verdict == "incompatible"
    assert refused.confidence == "proven"
    assert "sampling replay needs --logprobs-mode processed" in refused.reason
    allowed = verdict_of(engine, "--replay-mask --logprobs-mode processed", "replay-mask")
    assert allowed.verdict != "incompatible"


def test_nested_defaults_set_through_setattr_by_a_recursive_helper_are_followed(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    # vLLM's optimization-level defaults: a literal nested table walked by a function that calls
    # itself per nested config (``is_dataclass``) and ``setattr``s each unset field; the check
    # after it ("must be set after the level defaults") does not refuse
    found = verdict_of(engine, "--foo-knob 3", "prefetch-depth")
    assert found.resolved == 4
    assert "must be set after the level defaults" not in found.reason
    assert verdict_of(engine, "--foo-knob 3", "foo-knob").verdict != "incompatible"


def test_the_api_servers_flags_are_flags_and_their_reads_are_reads(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``vllm serve``'s frontend flags (``FrontendArgs`` and its bases, ``make_arg_parser``'s
    own ``add_argument``s) were no flags at all: ``--response-role`` was "defines no such
    flag", or dead code. ``args.response_tone`` in the server is the flag's read."""
    _, index = engine
    for name in ("response-tone", "enable-tool-pick", "probe-timeout-knob", "headless-knob"):
        definition = index.flag(name)
        assert definition is not None and definition.options == (f"--{name}",)
    found = verdict_of(engine, "--response-tone model", "response-tone")
    assert found.verdict == "effective"
    assert line_of("vllm/entrypoints/api_server.py", "args.response_tone") in found.reason


def test_the_serve_launchs_checks_refuse_before_the_engine_is_built(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``validate_parsed_serve_args(args)`` raises for ``--enable-auto-tool-choice`` without
    ``--tool-call-parser`` (vLLM 0.34): a refusal, walked as the resolution's are."""
    found = verdict_of(engine, "--enable-tool-pick", "enable-tool-pick")
    assert (found.verdict, found.confidence) == ("incompatible", "proven")
    assert "--enable-tool-pick requires --tool-parser-knob" in found.reason
    fine = verdict_of(engine, "--enable-tool-pick --tool-parser-knob hermes", "enable-tool-pick")
    assert fine.verdict != "incompatible"


def test_what_vllm_serve_runs_is_walked_from_its_subcommand(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``ServeSubcommand.cmd`` is where ``vllm serve`` starts, though nothing calls it by name
    and four classes define a ``cmd``: the API server's reads under it were "conditional: only
    if cmd() runs here" (docs/research.md, the seventeenth round). The serve command fills in
    ``args.server_count_knob`` before testing it, so the test is not decided from the value
    parsed (``None``), and the path is followed."""
    found = verdict_of(engine, "--served-docs-knob", "served-docs-knob")
    assert found.verdict == "effective"
    assert line_of("vllm/entrypoints/launch.py", "args.served_docs_knob") in found.reason
    assert not any("cmd()" in note for note in found.unresolved)


def test_a_text_generation_model_serves_the_generate_task(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``"generate" in supported_tasks``, where ``supported_tasks`` is what the engine client
    answers (an RPC), holds for a ``...ForCausalLM`` model run as a generator; with a pooling
    ``--runner`` it is not known."""
    found = verdict_of(engine, "--chat-usage-knob", "chat-usage-knob")
    assert found.verdict == "effective"
    assert line_of("vllm/entrypoints/launch.py", "args.chat_usage_knob") in found.reason
    pooled = verdict_of(engine, "--chat-usage-knob --runner pooling", "chat-usage-knob")
    assert pooled.verdict == "conditional"
    assert any("supported_tasks" in c for c in pooled.conditions)


def test_another_subcommand_of_the_cli_never_runs_in_the_server(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """``RenderSubcommand.cmd`` is ``vllm render``'s, a program of its own: its read of a flag
    was taken as running, since nothing in the package calls it."""
    found = verdict_of(engine, "--render-knob", "render-knob")
    assert found.verdict != "effective"
    assert "a program of its own" in found.reason


def test_a_value_handed_to_the_http_library_takes_the_librarys_condition(
    engine: tuple[EngineSource, VersionIndex],
) -> None:
    """Values handed to uvicorn (through the ``**uvicorn_kwargs`` the engine forwards) and to
    Starlette's CORS middleware were ``effective``, the call being reached: vLLM's
    ``--ssl-ciphers`` without a certificate, ``--allowed-headers`` for requests that are not
    cross-origin (docs/research.md, the eighteenth round). uvicorn builds a TLS context only
    with a key or a certificate; the middleware acts on cross-origin requests only."""
    off = verdict_of(engine, "--tls-ciphers-knob ECDHE", "tls-ciphers-knob")
    assert off.verdict == "no-op"
    assert "uvicorn uses ssl_ciphers only with a TLS key or certificate" in off.reason
    on = verdict_of(
        engine, "--tls-ciphers-knob ECDHE --tls-certfile-knob c.pem", "tls-ciphers-knob"
    )
    assert on.verdict == "effective"
    cors = verdict_of(engine, "--cors-headers-knob X-Trace", "cors-headers-knob")
    assert cors.verdict == "conditional"
    assert any("a cross-origin request" in c for c in cors.conditions)
