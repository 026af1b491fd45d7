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
from dataclasses import dataclass
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


#: Archs where Triton pipelines a tile with BLOCK_SIZE_M >= 64 through Hopper's asynchronous
#: warp-group MMA (wgmma): there the loads of every stage are in flight at once and it holds
#: ``num_stages`` A and B tiles; a smaller tile takes the mma.sync pipeline below.
WGMMA_ARCHS = frozenset({"sm90"})
#: Archs without wgmma (Ampere, Ada, consumer and workstation Blackwell): Triton's mma.sync
#: pipeline holds ``num_stages - 1`` stages (the one being computed is read from registers).
#: Measured for BLOCK_SIZE_M = 32 on the H200 (docs/engines.md); inferred for these archs, and it
#: fits the public SM120 crash ("Required: 147456" = (4 - 1) x 49,152 for 64/128/128 at 4 stages).
MMA_SYNC_ARCHS = frozenset({"sm80", "sm86", "sm89", "sm120", "sm121"})


@dataclass(frozen=True)
class SharedMemoryNeed:
    """What one fused-MoE Triton kernel block needs in shared memory, in bytes: ``low`` and
    ``high`` bound it (equal when the arch's pipeline is known), ``stage`` is one stage's A and
    B tiles, ``rule`` says which count of stages applies."""

    low: int
    high: int
    stage: int
    rule: str

    @property
    def known(self) -> bool:
        return self.low == self.high


def moe_stage_bytes(entry: dict[str, Any], element_bytes: int = 2) -> int:
    """One pipeline stage of a fused-MoE config: an A tile (BLOCK_SIZE_M x BLOCK_SIZE_K) and a B
    tile (BLOCK_SIZE_K x BLOCK_SIZE_N), ``element_bytes`` each."""
    return (
        int(entry["BLOCK_SIZE_M"]) * int(entry["BLOCK_SIZE_K"])
        + int(entry["BLOCK_SIZE_K"]) * int(entry["BLOCK_SIZE_N"])
    ) * element_bytes


def moe_shared_memory(
    entry: dict[str, Any], arch: str | None, element_bytes: int = 2
) -> SharedMemoryNeed:
    """The shared memory Triton allocates for one fused-MoE config on ``arch`` (Triton 3.x, SGLang's
    ``fused_moe_kernel``; measured on the H200 with Triton 3.6.0, docs/engines.md):

    - ``arch`` in ``WGMMA_ARCHS`` and BLOCK_SIZE_M >= 64: ``num_stages x stage``
      (128/256/128 at 3 stages: "Required: 294912" = 3 x 98,304);
    - BLOCK_SIZE_M < 64 there, or ``arch`` in ``MMA_SYNC_ARCHS``: ``(num_stages - 1) x stage``
      (32/256/256 at 2 stages runs on the H200 although 2 x 147,456 B exceed its 232,448 B);
    - any other arch (datacenter Blackwell's tcgen05 pipeline, an unknown GPU): between the two.
    """
    stage = moe_stage_bytes(entry, element_bytes)
    stages = int(entry["num_stages"])
    many, fewer = stages * stage, max(stages - 1, 1) * stage
    if arch in WGMMA_ARCHS and int(entry["BLOCK_SIZE_M"]) >= 64:
        return SharedMemoryNeed(many, many, stage, "num_stages x stage (wgmma)")
    if arch in WGMMA_ARCHS or arch in MMA_SYNC_ARCHS:
        return SharedMemoryNeed(fewer, fewer, stage, "(num_stages - 1) x stage (mma.sync)")
    return SharedMemoryNeed(
        fewer, many, stage, "(num_stages - 1) to num_stages x stage (arch's pipeline unknown)"
    )


def moe_config_shared_memory(
    entry: dict[str, Any], element_bytes: int = 2, arch: str | None = None
) -> int:
    """Bytes of shared memory one fused-MoE block needs with ``entry``'s config on ``arch``
    (``moe_shared_memory``); for an arch whose pipeline is not known, the larger count."""
    return moe_shared_memory(entry, arch, element_bytes).high


@dataclass(frozen=True)
class Overrun:
    """A config entry (batch size ``m``) that needs more shared memory than ``limit``: ``need``
    bytes under the arch's rule; ``certain`` when every rule that may apply exceeds the limit
    (Triton raises ``OutOfResources``), else it only may."""

    m: Any
    need: int
    limit: int
    certain: bool
    rule: str

    @property
    def verdict(self) -> str:
        return (
            "Triton raises OutOfResources at the first launch"
            if self.certain
            else "it may exceed it (this arch's pipeline is not known: Triton raises OutOfResources "
            "if it holds num_stages stages)"
        )


def moe_config_overruns(
    configs: dict[str, Any], arch: str, dtype: str | None = None
) -> list[Overrun]:
    """The entries of a tuned MoE config file (batch size -> config) that need, or may need, more
    shared memory than ``arch`` has (``moe_shared_memory``).

    Raises:
        KeyError: an arch not in ``SHARED_MEMORY_PER_BLOCK``.
    """
    limit = SHARED_MEMORY_PER_BLOCK[arch]
    element_bytes = 1 if dtype and dtype.startswith(("fp8", "int8")) else 2
    out = []
    for m, entry in configs.items():
        need = moe_shared_memory(entry, arch, element_bytes)
        if need.high > limit:
            certain = need.low > limit
            out.append(
                Overrun(str(m), need.low if certain else need.high, limit, certain, need.rule)
            )
    return out
