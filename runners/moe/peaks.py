"""GPU peaks by device: the roofline a kernel tune is measured against.

A tuned kernel's latency says little alone; its fraction of the device's peak memory
bandwidth and peak tensor FLOP/s says which roof it is near (``space.roofline``). Those
peaks are the device's, from its datasheet: dense figures (no 2:4 sparsity), per precision.
A device not in the table, or a precision its datasheet gives no dense figure for, has no
peak here: the tune then records no fraction and says so, rather than measure one GPU
against another's roof.

Each entry names its source. Dense tensor figures are half the datasheets' "with sparsity"
ones where only those are printed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeaks:
    """One device's datasheet peaks: memory bandwidth (bytes/s) and dense tensor-core FLOP/s by
    precision (``bf16``, ``fp8``); a precision missing is unknown."""

    name: str
    memory_bandwidth_Bps: float
    flops: dict[str, float]
    source: str

    def peak_flops(self, precision: str) -> float | None:
        """Dense tensor FLOP/s at ``precision`` (``bf16``, ``fp8``), None when unknown."""
        return self.flops.get(precision)


#: (words every one of which the device name holds, case-insensitive; its peaks), most specific
#: first: "H100 NVL" before "H100 PCIe" before the SXM part ("NVIDIA H100 80GB HBM3").
_TABLE: tuple[tuple[tuple[str, ...], DevicePeaks], ...] = (
    (
        ("H200", "NVL"),
        DevicePeaks(
            "NVIDIA H200 NVL",
            4.8e12,
            {"bf16": 835.5e12, "fp8": 1670.5e12},
            "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL): HBM3e 4.8 TB/s; BF16 1,671 and "
            "FP8 3,341 TFLOPS with sparsity",
        ),
    ),
    (
        ("H200",),
        DevicePeaks(
            "NVIDIA H200 (SXM)",
            4.8e12,
            {"bf16": 989e12, "fp8": 1979e12},
            "NVIDIA H200 Tensor Core GPU datasheet: HBM3e 4.8 TB/s; BF16 1,979 and FP8 3,958 "
            "TFLOPS with sparsity",
        ),
    ),
    (
        ("H100", "NVL"),
        DevicePeaks(
            "NVIDIA H100 NVL",
            3.9e12,
            {"bf16": 835.5e12, "fp8": 1670.5e12},
            "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL): HBM3 3.9 TB/s; BF16 1,671 and "
            "FP8 3,341 TFLOPS with sparsity",
        ),
    ),
    (
        ("H100", "PCIE"),
        DevicePeaks(
            "NVIDIA H100 PCIe",
            2.0e12,
            {"bf16": 756.5e12, "fp8": 1513e12},
            "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe): HBM2e 2 TB/s; BF16 1,513 and "
            "FP8 3,026 TFLOPS with sparsity",
        ),
    ),
    (
        ("H100",),
        DevicePeaks(
            "NVIDIA H100 (SXM)",
            3.35e12,
            {"bf16": 989e12, "fp8": 1979e12},
            "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): HBM3 3.35 TB/s; BF16 1,979 and "
            "FP8 3,958 TFLOPS with sparsity",
        ),
    ),
    (
        ("B200",),
        DevicePeaks(
            "NVIDIA B200",
            8.0e12,
            {"bf16": 2.25e15, "fp8": 4.5e15},
            "NVIDIA HGX B200 datasheet, per GPU: HBM3e 8 TB/s; BF16 4.5 and FP8 9 PFLOPS with "
            "sparsity",
        ),
    ),
    (
        ("RTX PRO 6000", "BLACKWELL"),
        DevicePeaks(
            "NVIDIA RTX PRO 6000 Blackwell",
            1.792e12,
            {},
            "NVIDIA RTX PRO 6000 Blackwell datasheet: GDDR7 1,792 GB/s; its tensor figure is "
            "FP4 with sparsity only (4,000 AI TOPS), so no dense BF16 or FP8 peak is assumed",
        ),
    ),
)


def _words(name: str) -> str:
    """A device name as compared: upper case, underscores (SGLang's config file names) as spaces."""
    return " ".join(name.replace("_", " ").upper().split())


def peaks_for(device_name: str | None) -> DevicePeaks | None:
    """The peaks of the device named ``device_name`` (``torch.cuda.get_device_name``'s words, or
    SGLang's config file spelling ``NVIDIA_H200``), None for a device not in the table."""
    if not device_name:
        return None
    name = _words(device_name)
    for words, peaks in _TABLE:
        if all(word in name for word in words):
            return peaks
    return None


def known_devices() -> list[str]:
    """The devices of the table, as named in their entries."""
    return [peaks.name for _, peaks in _TABLE]
