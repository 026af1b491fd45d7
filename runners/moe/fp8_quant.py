"""fp8 e4m3 quantisation for the fused-MoE tune, in torch (no triton: tested on the CPU).

Block quantisation of expert weights ([block_n, block_k] blocks, one float32 scale each) and
per-token-group quantisation of activations (groups of block_k along K), scale = absmax / 448:
the layouts SGLang 0.5.23's ``fused_moe_kernel`` reads as ``B_scale`` [E, N/block_n, K/block_k]
and ``A_scale`` [M, K/block_k] (DeepSeek-V3 / Qwen3-FP8 checkpoints, SGLang's
``per_token_group_quant_fp8``). Done once per problem, outside any timed region.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: The largest finite float8_e4m3fn value: scales are a block's absmax / FP8_MAX.
FP8_MAX = 448.0


def quantize_blocks(
    w: torch.Tensor, block_n: int, block_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 e4m3 block quantisation of weights ``[E, rows, cols]`` in blocks [block_n, block_k]:
    returns (``float8_e4m3fn`` [E, rows, cols], float32 scales [E, ceil(rows/block_n),
    ceil(cols/block_k)]), scale = the block's absmax / 448 — the layout SGLang's kernel reads as
    ``B_scale`` (DeepSeek-V3 / Qwen3-FP8 checkpoints)."""
    E, R, C = w.shape
    nr, nc = -(-R // block_n), -(-C // block_k)
    q = torch.empty(E, R, C, device=w.device, dtype=torch.float8_e4m3fn)
    scale = torch.empty(E, nr, nc, device=w.device, dtype=torch.float32)
    # One expert at a time: a whole [E, 2N, K] tensor in float32 is gigabytes, held by every
    # compile worker of the tune at once.
    padded = torch.zeros(nr * block_n, nc * block_k, device=w.device, dtype=torch.float32)
    for e in range(E):
        padded[:R, :C] = w[e].float()
        blocks = padded.view(nr, block_n, nc, block_k)
        s = (blocks.abs().amax(dim=(1, 3)) / FP8_MAX).clamp_min(1e-12)
        scale[e] = s
        qe = (blocks / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
        q[e] = qe.view(nr * block_n, nc * block_k)[:R, :C].to(torch.float8_e4m3fn)
    return q, scale


def quantize_token_groups(a: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 e4m3 per-token-group quantisation of activations ``[T, K]`` in groups of ``group``
    along K: (``float8_e4m3fn`` [T, K], float32 scales [T, ceil(K/group)]), row-major — what
    SGLang's ``per_token_group_quant_fp8`` gives and its kernel reads as ``A_scale``."""
    T, C = a.shape
    nc = -(-C // group)
    padded = torch.zeros(T, nc * group, device=a.device, dtype=torch.float32)
    padded[:, :C] = a.float()
    groups = padded.view(T, nc, group)
    scale = (groups.abs().amax(dim=2) / FP8_MAX).clamp_min(1e-12)
    q = (groups / scale[:, :, None]).clamp(-FP8_MAX, FP8_MAX).view(T, nc * group)[:, :C]
    return q.contiguous().to(torch.float8_e4m3fn), scale.contiguous()


def dequantize_blocks(q: torch.Tensor, scale: torch.Tensor, block: Sequence[int]) -> torch.Tensor:
    """float32 values of block-quantised ``q`` (the last two dims in blocks ``block``; a 2-D
    ``q`` is per-token groups with ``block`` = [1, group])."""
    s = scale
    s = s.repeat_interleave(block[0], dim=-2)[..., : q.shape[-2], :]
    s = s.repeat_interleave(block[1], dim=-1)[..., : q.shape[-1]]
    return q.float() * s
