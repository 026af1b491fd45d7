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


def test_paths_in_a_plan_and_its_servers_file_are_read_relative_to_the_file(
    tmp_path: Path, monkeypatch
) -> None:
    """`servers` was read relative to the plan, `tokenizer` and the configurations'
    `model` relative to the working directory: run from another folder, exit 3."""
    root = EXAMPLES.parent
    monkeypatch.chdir(tmp_path)  # another folder
    plan = load_plan(EXAMPLES / "plan.toml")
    assert plan.bench.tokenizer == str(root / "models" / "tiny-qwen3-moe")
    assert {c.model for c in plan.configs.values()} == {str(root / "models" / "tiny-qwen3-moe")}
    # a plan with its own [configs.*] and a tokenizer beside it; a hub id and an absolute path kept
    (tmp_path / "p" / "tok").mkdir(parents=True)
    (tmp_path / "p" / "plan.toml").write_text(
        """
[plan]
baseline = "a"
[[candidates]]
config = "b"
[bench]
tokenizer = "tok"
[configs.a]
engine = "transformers"
model = "Qwen/Qwen3-8B"
[configs.b]
engine = "transformers"
model = "/models/x"
"""
    )
    monkeypatch.chdir(EXAMPLES)
    plan = load_plan(tmp_path / "p" / "plan.toml")
    assert plan.bench.tokenizer == str(tmp_path / "p" / "tok")
    assert plan.configs["a"].model == "Qwen/Qwen3-8B" and plan.configs["b"].model == "/models/x"


def test_run_server_show_of_a_port_0_configuration_says_a_free_port(tmp_path: Path) -> None:
    """`run server show` printed `--port 8000` (the engine's default) for `port = 0`."""
    import json

    from tests.support.cli_inprocess import invoke

    out = invoke(["run", "server", "show", "baseline", "--configs", EXAMPLES / "servers-cpu.toml"])
    assert out.returncode == 0, out.stderr
    argv = json.loads(out.stdout)["argv"]
    assert argv[argv.index("--port") + 1] == "<a free port, picked at start>"
    assert json.loads(out.stdout)["port"] == 0


def test_the_plan_table_explains_its_tau_column() -> None:
    """The plan table's tau column was unexplained."""
    from rich.console import Console

    from runners.plan import PlanResult, verdict_table

    console = Console(width=200, record=True)
    console.print(verdict_table(PlanResult(comparisons=[])))
    text = console.export_text()
    assert (
        "tau: the practical threshold (--threshold, the plan file's threshold, else the metric's"
        in text
    )
