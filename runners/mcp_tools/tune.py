"""``run_tune``: SGLang's fused-MoE Triton kernel tuned on this GPU, as ``tuneledger run tune``.

The tune is described as a ``runners.moe.request.TuneRequest`` and prepared by the same
``prepare`` the CLI calls (shape, seeds, batch sizes, the GPU measurer); every measured config
is recorded as it is timed, so a cancelled tune (or one past its time budget) resumes where it
stopped when called again. Without torch, triton, a CUDA GPU or the kernel: exit 11.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models
from runners.results_json import tune_json


class TuneArgs(Arguments):
    model_config_path: str | None = Field(
        None, description="A model's config.json: E, N (intermediate / tp), K, top-k from it."
    )
    tp: int = Field(1, ge=1, description="Tensor parallel size (N = intermediate / tp).")
    experts: int | None = Field(None, ge=1, description="E, instead of a model config.")
    intermediate: int | None = Field(None, ge=1, description="N, the per-rank intermediate size.")
    hidden: int | None = Field(None, ge=1, description="K, the hidden size.")
    topk: int | None = Field(None, ge=1, description="Experts per token.")
    dtype: Literal["bf16", "fp16", "fp8_w8a8"] = Field(
        "bf16", description="Weights and activations; fp8_w8a8: fp8 e4m3 with block scales."
    )
    block_shape: list[int] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="fp8_w8a8's quantisation block [block_n, block_k] (default [128, 128]).",
    )
    batch_sizes: list[int] | None = Field(None, description="M values (default 1..64).")
    all_batch_sizes: bool = Field(False, description="SGLang's tuner's 18 batch sizes, 1..4096.")
    kernel: Literal["sglang", "reference"] = Field(
        "sglang", description="SGLang's fused_moe_kernel, or tuneledger's own Triton kernel."
    )
    search: Literal["halving", "exhaustive"] = Field(
        "halving", description="Successive halving over the pruned space, or every config."
    )
    sample: float = Field(
        0.2,
        ge=0.001,
        le=1.0,
        description="The first rung's share of the pruned space's GROUP_SIZE_M-folded classes.",
    )
    seed_file: str | None = Field(None, description="A MoE config file to seed and beat.")
    time_budget_s: float | None = Field(None, ge=1, description="Stop cleanly after this long.")
    workers: int = Field(0, ge=0, description="Processes compiling configs in parallel.")
    output_dir: str | None = Field(None, description="Where configs/triton_X_Y_Z/<file> goes.")
    candidate_id: str | None = Field(None, description="The board candidate this tune answers.")
    session_id: str | None = Field(None, description="Default: the server's --session.")


class TuneOut(BaseModel):
    tune_id: str
    outcome: str
    summary: str
    output_file: str | None
    measured: int
    reused: int
    rejected: int
    seconds: float
    results: dict[str, Any] = Field(
        description="Per batch size: default vs tuned, the config kept."
    )


def _tune(args: TuneArgs, call: Call) -> dict[str, Any]:
    from ledger.errors import InvalidInput
    from runners.moe.request import TuneRequest
    from runners.usecases import measure_tune

    if args.block_shape is not None and args.dtype != "fp8_w8a8":
        raise InvalidInput(f"run_tune: block_shape is for dtype fp8_w8a8, not {args.dtype}")
    if args.batch_sizes is not None and (not args.batch_sizes or min(args.batch_sizes) < 1):
        raise InvalidInput("run_tune: batch sizes must be positive")
    request = TuneRequest(
        model_config=Path(args.model_config_path) if args.model_config_path else None,
        tp=args.tp,
        experts=args.experts,
        inter=args.intermediate,
        hidden=args.hidden,
        topk=args.topk,
        dtype=args.dtype,
        block_shape=tuple(args.block_shape)  # type: ignore[arg-type]
        if args.block_shape
        else ((128, 128) if args.dtype == "fp8_w8a8" else None),
        batch_sizes=args.batch_sizes,
        all_batch_sizes=args.all_batch_sizes,
        kernel=args.kernel,
        search=args.search,
        sample=args.sample,
        seed_file=Path(args.seed_file) if args.seed_file else None,
        time_budget_s=args.time_budget_s,
        workers=args.workers,
        output_dir=Path(args.output_dir) if args.output_dir else None,
        session_id=args.session_id or call.seat.session_id,
        candidate_id=args.candidate_id,
    )

    def say(line: str) -> None:
        call.progress(line)
        call.check_cancelled()

    report = measure_tune(
        call.seat.store(), request, say=say, prepare_say=lambda line: call.progress(line)
    )
    return tune_json(report)


def add_tune_tool(toolbox: Toolbox) -> None:
    toolbox.add(
        tool_from_models(
            "run_tune",
            "Tune SGLang's fused-MoE Triton kernel for one shape on this GPU (as `tuneledger run "
            "tune`) and write SGLang's config file: successive halving over the pruned space, the "
            "winner re-timed against SGLang's default and shipped configs. Every timing is "
            "recorded; calling it again resumes. Exit 11 without torch, triton or a CUDA GPU.",
            TuneArgs,
            TuneOut,
            _tune,
            long_running=True,
        )
    )
