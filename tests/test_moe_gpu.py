"""GPU-only checks of runners/moe_kernels.py and the reference kernel (token alignment, both GEMMs
against torch). They run on the lent H200 (bench/h200_moe_tune.py ran them there, data/
h200_moe_tune.jsonl); on machines without a CUDA GPU and triton they skip, saying so."""

from __future__ import annotations

import pytest

torch = pytest.importorskip(
    "torch", reason="needs torch (and a CUDA GPU): run on the device machine"
)
if not torch.cuda.is_available():
    pytest.skip(
        "needs a CUDA GPU with triton: the kernels are Triton GPU code (run on the device machine)",
        allow_module_level=True,
    )
pytest.importorskip("triton", reason="needs triton")

from runners.moe_kernels import (  # noqa: E402 (after the skips: torch/triton may be absent)
    MoeProblem,
    align_tokens,
    check_config,
    load_kernel,
    make_weights,
    time_config,
)  # noqa: E402
from runners.tune_space import MoeShape, default_config  # noqa: E402


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
