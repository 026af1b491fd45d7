"""The plan file: its sections (``[plan]``, ``[[candidates]]``, ``[bench]``) and ``load_plan``.

The format is described in runners/plan.py (which runs a plan); the server configurations a
plan names are read by ``runners.server.configs``, grids of candidates expanded by
``runners.plan_grid``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ledger.errors import InvalidInput, NotFound
from ledger.input_files import load_toml
from runners.plan_grid import expand_grids


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlanSection(_Strict):
    """``[plan]``: session, arms' names, repeats and load."""

    session: str | None = None
    session_title: str | None = None
    baseline: str = "baseline"
    repeats: int = Field(default=3, ge=1)
    concurrency: list[int] = Field(default_factory=lambda: [1])
    request_rate: float | None = Field(default=None, gt=0)
    servers: str | None = None
    #: Per arm and repeat: how many times a run that failed before measuring (the server did not
    #: start, the warmup failed) is retried on a restarted server before the plan goes on without it.
    retries: int = Field(default=1, ge=0)
    #: Seconds a server may take to exit after SIGINT before SIGTERM (some engines ignore SIGINT).
    stop_wait_s: float = Field(default=30.0, gt=0)
    #: Seconds after which no further arm is started (the runs made so far are compared as usual):
    #: a plan that must end inside a time limit (a lent GPU's call) ends with its comparisons
    #: instead of being killed before it records any.
    time_budget_s: float | None = Field(default=None, gt=0)
    #: The practical threshold (a fraction: 0.05 = 5%): the smallest change the comparisons call
    #: one, for every metric (docs/comparison.md); unset: the metric table's defaults.
    threshold: float | None = Field(default=None, gt=0, lt=1)


class CandidateSpec(_Strict):
    """``[[candidates]]``: a configuration to compare; ``flag`` when it differs by one flag."""

    config: str
    flag: str | None = None
    title: str | None = None
    hypothesis: str | None = None


class BenchSection(_Strict):
    """``[bench]``: the workload (lengths in tokens) and request shape."""

    endpoint: str = "chat"
    model: str | None = None
    input_len: int = Field(default=64, ge=1)
    output_len: int = Field(default=32, ge=1)
    num_prompts: int = Field(default=32, ge=1)
    #: Tokens every prompt shares at its start (``runners.bench.workload``): prefix caching's case.
    shared_prefix_len: int = Field(default=0, ge=0)
    #: When set, a run at concurrency c sends only the first ``min(num_prompts, max(min_prompts,
    #: prompts_per_concurrency x c))`` prompts: a closed loop needs about 5 c prompts to keep its
    #: achieved concurrency >= 0.9 c through the tail (the validity gate), and the same count at
    #: c = 1 would serialise hundreds of requests for nothing. Both arms of a comparison get the
    #: same count at each concurrency; each run's workload records the count it sent.
    prompts_per_concurrency: int | None = Field(default=None, ge=1)
    min_prompts: int = Field(default=1, ge=1)
    warmup: int = Field(default=1, ge=0)
    seed: int = 0
    tokenizer: str | None = None
    ignore_eos: bool = True

    @model_validator(mode="after")
    def _prefix_inside_prompt(self) -> BenchSection:
        if self.shared_prefix_len >= self.input_len:
            raise ValueError(
                f"shared_prefix_len ({self.shared_prefix_len}) must be below input_len ({self.input_len})"
            )
        return self


@dataclass
class Plan:
    """A parsed plan: sections plus the resolved server configurations (``runners.server.configs.ServerConfig``)."""

    plan: PlanSection
    candidates: list[CandidateSpec]
    bench: BenchSection
    configs: dict[str, Any]
    source: str = "<plan>"

    @property
    def arms(self) -> list[str]:
        """Configuration names in run order: baseline first."""
        return [self.plan.baseline, *(c.config for c in self.candidates)]


def read_toml(file: Path, what: str, allowed: set[str]) -> dict[str, Any]:
    """A plan-like TOML file's tables (``what`` names it in errors: ``plan``, ``spec``).

    Raises:
        NotFound: no such file (exit 5, as every missing input file).
        InvalidInput: bad TOML, a top-level key not in ``allowed``.
    """
    try:
        # a regular file of at most 1 MiB (/dev/zero is refused at once), nesting bounded
        data = load_toml(file, "config")
    except NotFound:
        raise NotFound(f"no {what} file {file}") from None
    extra = sorted(set(data) - allowed)
    if extra:
        raise InvalidInput(f"{file}: unknown top-level key(s) {', '.join(extra)}")
    return data


def validated(file: Path, build: Callable[[], Any]) -> Any:
    """``build()``, its first pydantic ValidationError as ``InvalidInput`` naming file and field."""
    try:
        return build()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidInput(
            f"{file}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
        ) from None


def load_plan(path: str | Path) -> Plan:
    """Read a plan file; configurations from its ``[configs.*]`` or from ``plan.servers``.

    Raises:
        InvalidInput: missing file, bad TOML, unknown keys, unknown configuration names.
    """
    from runners.server.configs import load_configs, parse_configs, relative_to

    file = Path(path)
    data = read_toml(file, "plan", {"plan", "candidates", "bench", "defaults", "configs"})
    section, bench = validated(
        file,
        lambda: (
            PlanSection.model_validate(data.get("plan", {})),
            BenchSection.model_validate(data.get("bench", {})),
        ),
    )
    if section.servers:
        configs = load_configs(file.parent / section.servers)
    else:
        configs = parse_configs(
            {k: v for k, v in data.items() if k in ("defaults", "configs")}, str(file), file.parent
        )
    raw = expand_grids(list(data.get("candidates", [])), configs, section.baseline, str(file))
    candidates = validated(file, lambda: [CandidateSpec.model_validate(c) for c in raw])
    # a local tokenizer is read relative to the plan file, as `servers` is
    bench.tokenizer = relative_to(file.parent, bench.tokenizer)
    plan = Plan(section, candidates, bench, configs, str(file))
    if not candidates:
        raise InvalidInput(f"{file}: no [[candidates]]: nothing to compare against the baseline")
    missing = [name for name in plan.arms if name not in configs]
    if missing:
        raise InvalidInput(
            f"{file}: no configuration {', '.join(missing)}; known: {', '.join(sorted(configs))}"
        )
    if len(set(plan.arms)) != len(plan.arms):
        raise InvalidInput(f"{file}: an arm is listed twice: {plan.arms}")
    return plan
