"""What a kernel tune is asked for, turned into a ``TuneSpec`` and a measurer on this GPU.

``tuneledger run tune`` (``runners.cli.gpu``) and the MCP server's ``run_tune``
(``runners.mcp_tools``) both describe a tune as a ``TuneRequest`` and call ``prepare``: the shape
from a model's config.json (and TP) or from E, N, K, top-k; the kernel's refusal of a shape it
cannot run; the seed configs (a file, else SGLang's shipped file for this shape and GPU); the
batch sizes; the output folder; then the GPU measurer (exit 11 without torch, triton, a CUDA GPU
or the kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import InvalidInput, LedgerError
from ledger.input_files import load_json
from runners.moe.space import (
    INTERACTIVE_BATCH_SIZES,
    SGLANG_BATCH_SIZES,
    MoeShape,
    kernel_refusal,
    shape_from_model_config,
)


class TuneUnavailable(LedgerError):
    """No torch or triton, no CUDA GPU, or the kernel cannot be imported here (exit 11, as a
    missing engine)."""

    exit_code = 11


@dataclass
class TuneRequest:
    """A tune as asked (the options of ``tuneledger run tune``). ``block_shape``: fp8_w8a8's
    quantisation block (block_n, block_k), already checked; ``batch_sizes`` None: the
    interactive ones (1..64), or SGLang's 18 with ``all_batch_sizes``."""

    model_config: Path | None = None
    tp: int = 1
    experts: int | None = None
    inter: int | None = None
    hidden: int | None = None
    topk: int | None = None
    dtype: str = "bf16"
    block_shape: tuple[int, int] | None = None
    batch_sizes: list[int] | None = None
    all_batch_sizes: bool = False
    kernel: str = "sglang"
    search: str = "halving"
    sample: float = 0.2
    seed_file: Path | None = None
    time_budget_s: float | None = None
    workers: int = 0
    output_dir: Path | None = None
    session_id: str | None = None
    candidate_id: str | None = None
    #: Two configs per shape (the up/gate and down GEMMs tuned separately, SGLang's file pair);
    #: False: one config for both GEMMs.
    split: bool = True


def resolve_shape(req: TuneRequest) -> MoeShape:
    """The MoE shape to tune.

    Raises:
        InvalidInput: an unreadable model config, neither a config nor all of E, N, K and
            top-k, or a shape the kernel refuses (exit 3).
    """
    block = req.block_shape
    try:
        if req.model_config is not None:
            try:
                data = load_json(req.model_config)  # a regular file of at most 1 MiB
            except (OSError, ValueError) as exc:
                raise InvalidInput(
                    f"{req.model_config}: not a readable JSON model config ({exc})"
                ) from None
            shape = shape_from_model_config(data, req.tp, req.dtype)
            if shape.dtype == "fp8_w8a8" and shape.block_shape is None and block is not None:
                shape = MoeShape(
                    E=shape.E,
                    N=shape.N,
                    K=shape.K,
                    topk=shape.topk,
                    dtype=req.dtype,
                    block_shape=block,
                )
        elif req.experts is None or req.inter is None or req.hidden is None or req.topk is None:
            raise InvalidInput(
                "give a model config.json (--model-config, and --tp), or all of E, N, K and top-k "
                "(-E, -N, -K, --topk)"
            )
        else:
            shape = MoeShape(
                E=req.experts,
                N=req.inter,
                K=req.hidden,
                topk=req.topk,
                dtype=req.dtype,
                block_shape=block,
            )
    except ValueError as exc:
        raise InvalidInput(f"{req.model_config or 'shape'}: {exc}") from None
    refusal = kernel_refusal(req.kernel, shape)
    if refusal:
        raise InvalidInput(f"{shape.describe()}: {refusal}")
    return shape


def seed_file_configs(path: Path | None) -> dict[str, Any]:
    """The configs of a seed file (``--seed-file``), none without one.

    Raises:
        InvalidInput: the file is not a readable MoE config file (exit 3).
    """
    if path is None:
        return {}
    from ledger.importers.moe_config import validate_configs

    try:
        configs: dict[str, Any] = validate_configs(
            load_json(path),
            str(path),  # a regular file of at most 1 MiB
        )
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: not a readable MoE config file ({exc})") from None
    return configs


def prepare(req: TuneRequest, ledger: Path, *, say: Callable[[str], None]) -> tuple[Any, Any]:
    """``(TuneSpec, measurer)`` for ``req`` on this GPU; the caller closes the measurer.

    Inputs are checked before the GPU is touched (a bad shape is exit 3 on any machine).

    Raises:
        InvalidInput: as ``resolve_shape`` and ``seed_file_configs``.
        TuneUnavailable: no torch/triton, no CUDA GPU, or the kernel is not importable (exit 11).
    """
    shape = resolve_shape(req)
    seeds = seed_file_configs(req.seed_file)
    sizes = (
        list(SGLANG_BATCH_SIZES)
        if req.all_batch_sizes
        else (list(req.batch_sizes) if req.batch_sizes else list(INTERACTIVE_BATCH_SIZES))
    )
    try:
        import torch

        from runners.moe.kernels import GpuMeasurer, KernelUnavailable
    except ImportError as exc:
        raise TuneUnavailable(f"run tune needs torch and triton with a GPU ({exc})") from None
    if not torch.cuda.is_available():
        raise TuneUnavailable("run tune needs a CUDA GPU: torch sees none here")
    from runners.moe.tune import TuneSpec, find_shipped_config

    try:
        measurer = GpuMeasurer(req.kernel, shape, workers=req.workers)
    except KernelUnavailable as exc:
        raise TuneUnavailable(str(exc)) from None
    if req.seed_file is None and req.kernel == "sglang":
        shipped = find_shipped_config(
            shape, measurer.facts["gpu_name"], measurer.facts["triton_version"]
        )
        if shipped is not None:
            seeds = shipped[1]
            say(f"seeded with SGLang's shipped file {shipped[0]}")
    seeds_down: dict[str, Any] = {}
    if req.split and req.seed_file is None and req.kernel == "sglang":
        shipped_down = find_shipped_config(
            shape, measurer.facts["gpu_name"], measurer.facts["triton_version"], down=True
        )
        if shipped_down is not None:
            seeds_down = shipped_down[1]
            say(f"seeded the down GEMM with SGLang's shipped file {shipped_down[0]}")
    spec = TuneSpec(
        shape=shape,
        batch_sizes=sizes,
        search=req.search,
        sample=req.sample,
        time_budget_s=req.time_budget_s,
        seed_configs=seeds,
        seed_down_configs=seeds_down,
        split=req.split and req.kernel == "sglang",
        output_dir=req.output_dir or Path(str(ledger) + ".artifacts") / "moe_configs",
        session_id=req.session_id,
        candidate_id=req.candidate_id,
    )
    return spec, measurer
