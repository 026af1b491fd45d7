"""tuneledger's own fused-MoE Triton kernel (``run tune --kernel reference``), for machines where
SGLang is not importable. Written here, not taken from SGLang: a grouped GEMM over tokens sorted
by expert (each block of BLOCK_SIZE_M sorted rows belongs to one expert, padded rows carry an id
past the last token), optionally scaled by the routing weight; the weighted combine (sum over the
top-k outputs of the second GEMM) is done by the caller. It takes the same six tuning parameters as
SGLang's ``fused_moe_kernel`` but is a different kernel: configs tuned on it are recorded with
``kernel_source = "reference"`` and are not SGLang configs.

Needs triton (a @triton.jit function must live in a file); imported only on a GPU machine.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def grouped_moe_gemm(
    a_ptr,
    b_ptr,
    c_ptr,
    w_ptr,
    sorted_ids_ptr,
    expert_ids_ptr,
    EM,
    N,
    K,
    num_valid,
    stride_am,
    stride_ak,
    stride_be,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    TOP_K: tl.constexpr,
    MUL_WEIGHT: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    """C[row] = A[row // TOP_K] @ B[expert].T (x weight[row]) for the sorted rows of one block.

    A: [tokens, K]; B: [E, N, K]; C: [tokens x TOP_K, N]; ``sorted_ids``: padded row ids grouped
    by expert (EM of them); ``expert_ids``: one expert per BLOCK_SIZE_M rows.
    """
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    # Grouped launch order (GROUP_SIZE_M row blocks share the same B tiles while they are in L2).
    in_group = GROUP_SIZE_M * num_pid_n
    first_m = (pid // in_group) * GROUP_SIZE_M
    group_m = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + ((pid % in_group) % group_m)
    pid_n = (pid % in_group) // group_m

    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rows = tl.load(sorted_ids_ptr + offs_m, mask=offs_m < EM, other=num_valid)
    valid = rows < num_valid
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (rows[:, None] // TOP_K) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None] * stride_bk
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if MUL_WEIGHT:
        w = tl.load(w_ptr + rows, mask=valid, other=0.0)
        acc = acc * w[:, None]
    c_ptrs = c_ptr + rows[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < N))


def launch(
    A, B, C, weights, sorted_ids, expert_ids, *, top_k: int, mul_weight: bool, config: dict
) -> None:
    """Run ``grouped_moe_gemm`` with one tuning config (the six SGLang fields)."""
    EM = sorted_ids.shape[0]
    N, K = B.shape[1], B.shape[2]
    bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
    grid = (triton.cdiv(EM, bm) * triton.cdiv(N, bn),)
    grouped_moe_gemm[grid](
        A,
        B,
        C,
        weights,
        sorted_ids,
        expert_ids,
        EM,
        N,
        K,
        C.shape[0],
        A.stride(0),
        A.stride(1),
        B.stride(0),
        B.stride(1),
        B.stride(2),
        C.stride(0),
        C.stride(1),
        TOP_K=top_k,
        MUL_WEIGHT=mul_weight,
        BLOCK_SIZE_M=bm,
        BLOCK_SIZE_N=bn,
        BLOCK_SIZE_K=config["BLOCK_SIZE_K"],
        GROUP_SIZE_M=config["GROUP_SIZE_M"],
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
