"""Host fingerprint: which GPUs, driver, CUDA and library versions this machine has.

Sources, cheapest first: ``nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version
--format=csv,noheader`` (one line per GPU, e.g. ``NVIDIA H200, 9.0, 143771 MiB, 580.159.04``) and
the plain ``nvidia-smi`` header for the driver's CUDA version (``CUDA Version: 13.0``); when
nvidia-smi is absent, ``torch.cuda`` (imported lazily, and only when torch is installed, since
the import takes seconds). Versions of torch, triton and the engines come from package metadata
(no import). A machine without GPUs is recorded as ``cpu_only=True, gpu_count=0``.

The parsers are pure functions over text so they are tested with captured output.
``TUNELEDGER_NVIDIA_SMI`` names another nvidia-smi program (tests use a fake one).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ledger.engines.gpu_arch import compute_capability_for
from schemas import Actor, Host, HostObserved
from schemas.envelope import normalize_compute_capability

#: Packages whose versions are recorded (``other_versions``) when installed.
VERSION_PACKAGES = (
    "sglang",
    "sgl-kernel",
    "vllm",
    "transformers",
    "flashinfer-python",
    "flashinfer",
    "xformers",
)

_QUERY = "--query-gpu=name,compute_cap,memory.total,driver_version"
_QUERY_OLD = "--query-gpu=name,memory.total,driver_version"  # drivers before 510 lack compute_cap
_CUDA_RE = re.compile(r"CUDA Version:\s*([\d.]+)")
_MIB_RE = re.compile(r"([\d.]+)\s*(MiB|GiB)?", re.IGNORECASE)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi lists it; ``memory_mib`` in MiB, ``compute_capability`` as ``smNN``."""

    name: str
    compute_capability: str | None
    memory_mib: int | None
    driver: str | None


def _memory_mib(text: str) -> int | None:
    match = _MIB_RE.search(text)
    if not match:
        return None
    value = float(match.group(1))
    return int(value * 1024) if (match.group(2) or "").lower() == "gib" else int(value)


def parse_gpu_query(text: str, *, with_compute_cap: bool = True) -> list[GpuInfo]:
    """Parse ``nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader``.

    Without ``compute_cap`` (old drivers, ``with_compute_cap=False``) the
    capability is looked up from the GPU name. Blank and malformed lines
    (fewer fields) are skipped; ``[N/A]`` values become ``None``.
    """
    gpus = []
    want = 4 if with_compute_cap else 3
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < want or not parts[0]:
            continue
        values = [None if p in ("[N/A]", "N/A", "[Not Supported]") else p for p in parts]
        name = values[0] or ""
        if with_compute_cap:
            cap_text, mem, driver = values[1], values[2], values[3]
        else:
            cap_text, mem, driver = None, values[1], values[2]
        try:
            cap = (
                normalize_compute_capability(cap_text) if cap_text else compute_capability_for(name)
            )
        except ValueError:
            cap = compute_capability_for(name)
        gpus.append(
            GpuInfo(
                name=name,
                compute_capability=cap,
                memory_mib=_memory_mib(mem) if mem else None,
                driver=driver,
            )
        )
    return gpus


def parse_cuda_version(header: str) -> str | None:
    """The ``CUDA Version: X.Y`` of plain ``nvidia-smi`` output (the driver's CUDA), or ``None``."""
    match = _CUDA_RE.search(header)
    return match.group(1) if match else None


@dataclass(frozen=True)
class HostFingerprint:
    """What the host is: ``host`` is the envelope ``Host`` of every runner event; the rest
    goes into ``host_observed``. Memory per GPU in MiB."""

    host: Host
    cpu_only: bool
    gpu_names: list[str] = field(default_factory=list)
    torch_version: str | None = None
    triton_version: str | None = None
    python_version: str | None = None
    other_versions: dict[str, str] = field(default_factory=dict)
    notes: str | None = None

    def key(self) -> str:
        """A short stable hash of the whole fingerprint (same machine and software -> same key)."""
        data = {
            "host": self.host.model_dump(mode="json"),
            "cpu_only": self.cpu_only,
            "gpu_names": self.gpu_names,
            "torch": self.torch_version,
            "triton": self.triton_version,
            "python": self.python_version,
            "other": self.other_versions,
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def with_engine(self, engine: str | None, version: str | None) -> HostFingerprint:
        """A copy whose ``host`` names the engine (and its version, where known)."""
        host = self.host.model_copy(
            update={"engine": engine, "engine_version": version or self.host.engine_version}
        )
        return HostFingerprint(**{**self.__dict__, "host": host})

    def to_event(self, *, session_id: str | None, actor: Actor) -> HostObserved:
        """The ``host_observed`` event of this fingerprint."""
        return HostObserved(
            session_id=session_id,
            actor=actor,
            host=self.host,
            cpu_only=self.cpu_only,
            gpu_names=self.gpu_names,
            torch_version=self.torch_version,
            triton_version=self.triton_version,
            python_version=self.python_version,
            other_versions=self.other_versions,
            notes=self.notes,
        )


def from_gpus(
    gpus: Sequence[GpuInfo],
    *,
    cuda: str | None = None,
    hostname: str | None = None,
    versions: dict[str, str] | None = None,
    notes: str | None = None,
) -> HostFingerprint:
    """Build a fingerprint from parsed GPUs (pure: tests feed captured nvidia-smi text).

    ``versions`` maps package names to versions; ``torch``/``triton``/``python``
    fill their own fields, the rest ``other_versions``. Mixed GPUs: ``host`` names
    the first (``gpu_names`` lists all).
    """
    versions = dict(versions or {})
    torch_v, triton_v, python_v = (
        versions.pop("torch", None),
        versions.pop("triton", None),
        versions.pop("python", None),
    )
    first = gpus[0] if gpus else None
    host = Host(
        gpu_name=first.name if first else None,
        compute_capability=first.compute_capability if first else None,
        gpu_count=len(gpus),
        gpu_memory_mib=first.memory_mib if first else None,
        driver=first.driver if first else None,
        cuda=cuda,
        hostname=hostname,
    )
    return HostFingerprint(
        host=host,
        cpu_only=not gpus,
        gpu_names=[g.name for g in gpus],
        torch_version=torch_v,
        triton_version=triton_v,
        python_version=python_v,
        other_versions=versions,
        notes=notes,
    )


def package_versions(
    packages: Sequence[str] = ("torch", "triton", *VERSION_PACKAGES),
) -> dict[str, str]:
    """Installed versions (package metadata; nothing is imported), plus ``python``."""
    found = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


Runner = Callable[[list[str]], str | None]


def _run(argv: list[str]) -> str | None:
    """Output of a short command, or ``None`` when it is missing, fails or hangs."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


#: Device files of a loaded GPU driver (NVIDIA; AMD's ROCm, which torch.cuda also serves).
_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")


def gpu_driver_present() -> bool:
    """True when a GPU driver's device files exist (without one torch.cuda can find nothing)."""
    return any(os.path.exists(p) for p in _DRIVER_PATHS)


def _torch_gpus() -> tuple[list[GpuInfo], str | None]:
    """GPUs through torch.cuda: only when a GPU driver is loaded and torch is installed
    (imported here, lazily: the import takes seconds, wasted on a CPU-only host)."""
    if not gpu_driver_present() or importlib.util.find_spec("torch") is None:
        return [], None
    try:
        import torch  # noqa: PLC0415  (seconds to import: only on hosts without nvidia-smi)

        if not torch.cuda.is_available():
            return [], None
        gpus = []
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append(
                GpuInfo(
                    name=props.name,
                    compute_capability=f"sm{props.major}{props.minor}",
                    memory_mib=int(props.total_memory // (1024 * 1024)),
                    driver=None,
                )
            )
        return gpus, torch.version.cuda
    except Exception:  # a broken CUDA install must not stop a run: the host is then unknown
        return [], None


def fingerprint(*, nvidia_smi: str | None = None, run: Runner = _run) -> HostFingerprint:
    """Fingerprint this machine (see the module doc). Never raises: unknowns stay ``None``.

    Args:
        nvidia_smi: the nvidia-smi program (default ``$TUNELEDGER_NVIDIA_SMI`` or ``nvidia-smi``).
        run: runs an argv and returns its stdout or ``None`` (tests pass a fake).
    """
    program = nvidia_smi or os.environ.get("TUNELEDGER_NVIDIA_SMI") or "nvidia-smi"
    versions = package_versions()
    hostname = socket.gethostname()
    gpus: list[GpuInfo] = []
    cuda = None
    notes = None
    if shutil.which(program):
        text = run([program, _QUERY, "--format=csv,noheader"])
        if text is not None:
            gpus = parse_gpu_query(text)
        else:
            text = run([program, _QUERY_OLD, "--format=csv,noheader"])
            gpus = parse_gpu_query(text, with_compute_cap=False) if text else []
        cuda = parse_cuda_version(run([program]) or "")
        if not gpus:
            notes = f"{program} found but listed no GPU"
    else:
        gpus, cuda = _torch_gpus()
        notes = None if gpus else "no nvidia-smi and no CUDA device through torch: CPU only"
    return from_gpus(gpus, cuda=cuda, hostname=hostname, versions=versions, notes=notes)
