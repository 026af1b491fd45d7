"""What the research is about: the GPU arch, the CUDA version if known, the model's
``config.json``, the tensor-parallel size and the flags the user means to set.

Everything here is what a person gives on the command line; nothing is probed on the GPU.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import InvalidInput, NotFound
from ledger.input_files import load_json

_ARCH = re.compile(r"^sm_?(\d{2,3})[a-z]?$", re.IGNORECASE)

#: Names a model config gives its top-k (experts per token) by, in order of preference.
TOPK_KEYS = ("num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k", "moe_top_k")
EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")


def parse_arch(text: str) -> tuple[str, tuple[int, int]]:
    """``sm120`` / ``sm_90a`` / ``12.0`` -> (``sm120``, (12, 0))."""
    value = text.strip()
    match = _ARCH.match(value)
    if match:
        digits = match.group(1)
        major, minor = int(digits[:-1]), int(digits[-1])
        return f"sm{major}{minor}", (major, minor)
    parts = value.split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        major, minor = int(parts[0]), int(parts[1])
        return f"sm{major}{minor}", (major, minor)
    raise InvalidInput(f"--arch {text!r}: not a GPU arch (sm90, sm100, sm120, or 12.0)")


@dataclass
class ModelFacts:
    """The parts of a model's ``config.json`` the engines branch on."""

    config: dict[str, Any]
    source: str

    @property
    def text_config(self) -> dict[str, Any]:
        nested = self.config.get("text_config")
        return nested if isinstance(nested, dict) else self.config

    @property
    def architecture(self) -> str | None:
        archs = self.config.get("architectures") or self.text_config.get("architectures")
        return str(archs[0]) if isinstance(archs, list) and archs else None

    def first(self, keys: tuple[str, ...]) -> Any:
        for where in (self.text_config, self.config):
            for key in keys:
                if key in where and where[key] is not None:
                    return where[key]
        return None

    @property
    def top_k(self) -> int | None:
        value = self.first(TOPK_KEYS)
        return value if isinstance(value, int) else None

    @property
    def num_experts(self) -> int | None:
        value = self.first(EXPERT_KEYS)
        return value if isinstance(value, int) else None


def load_model_config(path: Path) -> ModelFacts:
    file = path / "config.json" if path.is_dir() else path
    if not file.exists():  # a device or FIFO is refused by load_json: not a regular file
        raise NotFound(f"{file}: no such model config")
    try:
        data = load_json(file)  # a regular file of at most 1 MiB, nesting bounded
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{file}: not a JSON model config: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{file}: a model config is a JSON object")
    return ModelFacts(data, str(file))


@dataclass
class Target:
    arch: str | None = None  # sm120
    capability: tuple[int, int] | None = None
    cuda: str | None = None  # "12.8": the CUDA version the engine would see, when known
    gpu_name: str | None = None
    model: ModelFacts | None = None
    tp: int | None = None
    flags: dict[str, Any] = field(default_factory=dict)  # field name -> value as given
    env: dict[str, str] = field(default_factory=dict)  # environment variables set for the server

    @classmethod
    def make(
        cls,
        arch: str | None = None,
        model: ModelFacts | None = None,
        tp: int | None = None,
        flags: dict[str, Any] | None = None,
        cuda: str | None = None,
        gpu_name: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Target:
        name, capability = parse_arch(arch) if arch else (None, None)
        return cls(name, capability, cuda, gpu_name, model, tp, dict(flags or {}), dict(env or {}))

    def describe(self) -> str:
        parts = [self.arch or "any arch"]
        if self.model and self.model.architecture:
            parts.append(self.model.architecture)
        if self.tp:
            parts.append(f"TP={self.tp}")
        return ", ".join(parts)
