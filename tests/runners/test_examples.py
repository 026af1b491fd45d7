"""The files in examples/ load as shipped (examples/plan.toml once sent a model name its
server answered with HTTP 400). tests/project/test_readme_walkthrough.py runs examples/plan.toml for real."""

from __future__ import annotations

from pathlib import Path

from runners.bench.metrics import prompts_warning
from runners.plan import load_plan
from runners.server.configs import load_configs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_example_plan_loads_and_passes_the_prompt_count_check() -> None:
    plans = sorted(EXAMPLES.glob("plan*.toml"))
    assert plans
    for path in plans:
        plan = load_plan(path)
        assert prompts_warning(plan.bench.num_prompts, plan.plan.concurrency) is None, path


def test_the_cpu_example_asks_the_server_for_its_model_and_binds_a_free_port() -> None:
    plan = load_plan(EXAMPLES / "plan.toml")
    assert plan.bench.model is None  # the runner asks GET /v1/models (runners/bench/discovery.py)
    assert all(config.port == 0 for config in plan.configs.values())
    assert plan.configs["continuous-batching"].flags["continuous-batching"] is True


def test_every_example_server_file_loads() -> None:
    for path in sorted(EXAMPLES.glob("servers*.toml")):
        assert load_configs(path), path
