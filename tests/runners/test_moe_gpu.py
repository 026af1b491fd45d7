"""GPU-only checks of runners/moe/kernels.py and the reference kernel (token alignment, both GEMMs
against torch). They run on the lent H200 (bench/h200_moe_tune.py ran them there, data/
h200_moe_tune.jsonl); on machines without a CUDA GPU and triton they skip, saying so."""

from __future__ import annotations

import pytest

from tests.support import needs

torch = needs.cuda_gpu()

from runners.moe.kernels import (  # noqa: E402 (after the skip: torch/triton may be absent)
    MoeProblem,
    align_tokens,
    check_config,
    load_kernel,
    make_weights,
    time_config,
)
from runners.moe.space import MoeShape, default_config  # noqa: E402

#: The device machine's tier: `make test-engines` selects it, and it skips without a GPU.
pytestmark = pytest.mark.engine("torch")


def test_align_tokens_groups_rows_by_expert_padded_to_the_block():
    ids = torch.tensor([[0, 2], [2, 1], [0, 2]], device="cuda", dtype=torch.int32)
    sorted_ids, expert_ids, total = align_tokens(ids, E=4, block_m=2)
    # rows are token x topk + slot: experts [0, 2, 2, 1, 0, 2]; padding is M x topk = 6
    assert int(total) == 8 and expert_ids.tolist() == [0, 1, 2, 2]
    assert sorted_ids.tolist() == [0, 4, 3, 6, 1, 2, 5, 6]


def test_reference_kernel_matches_torch_and_times():
    shape = MoeShape(E=8, N=256, K=512, topk=2)
    kernel = load_kernel("reference")
    p = MoeProblem(shape, 16, make_weights(shape))
    config = default_config(16, shape)
    assert check_config(kernel, p, config) < 2e-2
    assert time_config(kernel, p, config, 2.0) > 0


def test_sglang_fp8_block_kernel_matches_the_dequantised_reference():
    """fp8 w8a8 block [128, 128]: SGLang's kernel on pre-quantised A (per-token groups) and B
    (blocks) against the dequantised matmul, within FP8_TOLERANCE; a config whose BLOCK_K spans
    two groups is pruned before it runs (tune_space.block_shape_fits)."""
    from runners.moe.kernels import FP8_TOLERANCE, KernelUnavailable
    from runners.moe.space import block_shape_fits

    try:
        kernel = load_kernel("sglang")
    except KernelUnavailable as exc:
        pytest.skip(f"sglang's kernel is not importable here: {exc}")
    shape = MoeShape(E=8, N=256, K=512, topk=2, dtype="fp8_w8a8", block_shape=(128, 128))
    w = make_weights(shape)
    assert w[0].dtype == torch.float8_e4m3fn and tuple(w[2].shape) == (8, 4, 4)
    for M in (1, 16):
        p = MoeProblem(shape, M, w)
        for c in (
            default_config(M, shape),
            dict(
                BLOCK_SIZE_M=16,
                BLOCK_SIZE_N=64,
                BLOCK_SIZE_K=64,
                GROUP_SIZE_M=1,
                num_warps=4,
                num_stages=3,
            ),
        ):
            assert block_shape_fits(c, shape.block_shape) is None
            assert check_config(kernel, p, c) < FP8_TOLERANCE
            assert time_config(kernel, p, c, 2.0) > 0
    with pytest.raises(KernelUnavailable, match="no fp8 path"):
        from runners.moe.kernels import GpuMeasurer

        GpuMeasurer("reference", shape)
