"""GPU name -> CUDA compute capability (``smNN``), from a small table.

The table is NVIDIA's "CUDA GPUs" compute-capability list, reduced to the GPUs
inference servers run on. Names come from ``torch.cuda.get_device_name()`` or
nvidia-smi, or from an sglang MoE config file name (spaces written as ``_``);
matching ignores case, ``_`` and ``-`` and tolerates memory/form-factor suffixes
(``NVIDIA H100 80GB HBM3``, ``NVIDIA A100-SXM4-80GB``).

Arch gating in SGLang is per family: ``sm90`` (Hopper), ``sm100``/``sm103``
(datacenter Blackwell, "SM10X"), ``sm120``/``sm121`` (consumer and workstation
Blackwell, ~99 KiB shared memory per block), ``sm89`` (Ada), ``sm80``/``sm86`` (Ampere).
"""

from __future__ import annotations

import re
from typing import Any

# Ordered: the first pattern that matches wins, so longer / more specific names
# come before names they contain (GH200 before H200 before H20, A10G before A10).
_TABLE: tuple[tuple[str, str], ...] = (
    # Blackwell workstation / consumer (GB20x dies): compute capability 12.0; DGX Spark GB10: 12.1.
    (r"RTX PRO \d{4} BLACKWELL", "sm120"),
    (r"RTX 50[5-9]0", "sm120"),
    (r"\bGB10\b", "sm121"),
    # Datacenter Blackwell: B200/GB200 10.0, B300/GB300 10.3 (Blackwell Ultra).
    (r"\bG?B300\b", "sm103"),
    (r"\bG?B[12]00\b", "sm100"),
    # Hopper: 9.0.
    (r"\bGH200\b", "sm90"),
    (r"\bH(100|200|800|20)\b", "sm90"),
    # Ada: 8.9.
    (r"\bL40S?\b", "sm89"),
    (r"\bL(4|20)\b", "sm89"),
    (r"RTX 40[5-9]0", "sm89"),
    (r"RTX (\d{4} )?ADA", "sm89"),
    # Ampere: GA100 8.0, GA10x 8.6.
    (r"\bA(100|800|30)\b", "sm80"),
    (r"\bA(10G|10|40|16|2)\b", "sm86"),
    (r"RTX A\d{4}", "sm86"),
    (r"RTX 30[5-9]0", "sm86"),
    # Older parts still seen in CI: Turing 7.5, Volta 7.0.
    (r"\bT4\b", "sm75"),
    (r"RTX 20[6-8]0", "sm75"),
    (r"\bV100\b", "sm70"),
)

_COMPILED = tuple((re.compile(pattern), sm) for pattern, sm in _TABLE)


def normalize_gpu_name(name: str) -> str:
    """Upper-case a GPU name and write ``_`` and ``-`` as spaces (``NVIDIA_A100-SXM4`` -> ``NVIDIA A100 SXM4``)."""
    return " ".join(re.sub(r"[_\-]", " ", name).upper().split())


def compute_capability_for(gpu_name: str | None) -> str | None:
    """The compute capability (``"sm120"``, ``"sm90"``, ...) of a GPU named ``gpu_name``.

    Returns ``None`` for an unknown or non-NVIDIA GPU (AMD parts have gfx
    targets, not ``smNN``) and for ``None``. Never raises.
    """
    if not gpu_name:
        return None
    text = normalize_gpu_name(gpu_name)
    for pattern, sm in _COMPILED:
        if pattern.search(text):
            return sm
    return None


def is_sm90_or_sm10x(compute_capability: str | None) -> bool:
    """True for Hopper (``sm90``) and datacenter Blackwell (``sm100``..``sm103``).

    These are the archs SGLang's flashinfer allreduce fusion supports
    (0.5.23: "requires SM90 or SM10X").
    """
    return compute_capability in {"sm90", "sm100", "sm101", "sm103"}


#: Shared memory per block in bytes, by arch (CUDA's opt-in maximum, what Triton's
#: ``max_shared_mem`` reports: 232,448 on the H200, seen 2026-11-30; 101,376 on SM120 parts,
#: the "Hardware limit" of the seeds' crash).
SHARED_MEMORY_PER_BLOCK: dict[str, int] = {
    "sm80": 166_912,
    "sm86": 101_376,
    "sm89": 101_376,
    "sm90": 232_448,
    "sm100": 232_448,
    "sm103": 232_448,
    "sm120": 101_376,
    "sm121": 101_376,
}


def moe_config_shared_memory(entry: dict[str, Any], element_bytes: int = 2) -> int:
    """Bytes of shared memory one fused-MoE Triton kernel block needs with ``entry``'s config:
    ``num_stages x (BLOCK_SIZE_M x BLOCK_SIZE_K + BLOCK_SIZE_K x BLOCK_SIZE_N) x element_bytes``
    (one A and one B tile per pipeline stage; Triton adds a little for barriers). The seeds' SM120
    crash, "Required: 147456, Hardware limit: 101376", is 3 x (64x128 + 128x128) x 2."""
    return (
        int(entry["num_stages"])
        * (
            int(entry["BLOCK_SIZE_M"]) * int(entry["BLOCK_SIZE_K"])
            + int(entry["BLOCK_SIZE_K"]) * int(entry["BLOCK_SIZE_N"])
        )
        * element_bytes
    )


def moe_config_overruns(
    configs: dict[str, Any], arch: str, dtype: str | None = None
) -> list[tuple[str, int, int]]:
    """The entries of a tuned MoE config file (batch size -> config) that need more shared memory
    than ``arch`` has: ``[(batch size, bytes needed, bytes per block)]``.

    Raises:
        KeyError: an arch not in ``SHARED_MEMORY_PER_BLOCK``.
    """
    limit = SHARED_MEMORY_PER_BLOCK[arch]
    element_bytes = 1 if dtype and dtype.startswith(("fp8", "int8")) else 2
    out = []
    for m, entry in configs.items():
        need = moe_config_shared_memory(entry, element_bytes)
        if need > limit:
            out.append((m, need, limit))
    return out
