"""What the evaluator knows of the world outside the engine: the GPU (from the arch given),
``torch``'s device queries, vLLM's ``current_platform``, the environment, and Python's builtins.

Only questions whose answer follows from the arch (and the CUDA version, when given) are
answered, and whether a package the engine's wheel requires is there (pip installs it with the
engine); everything else (device memory, another library being installed, an environment
variable) is ``Unknown`` and makes a verdict ``conditional`` rather than a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .records import KindView
from .values import (
    ENV,
    HARDWARE,
    DeviceCapability,
    External,
    Fact,
    Instance,
    Unknown,
)

if TYPE_CHECKING:
    from .interpreter import Interpreter


#: The oldest CUDA each GPU generation runs on: a lower bound of the version when not given.
CUDA_FLOOR: dict[int, tuple[int, int]] = {
    12: (12, 8),
    11: (12, 8),
    10: (12, 8),
    9: (11, 8),
    8: (11, 0),
}


class CudaVersion:
    """``torch.version.cuda`` on an NVIDIA GPU: known when given (``--cuda``), else only its
    floor, the oldest CUDA the arch runs on (12.8 for Blackwell). Splitting, slicing and
    ``int``-mapping it keep it whole, so ``tuple(map(int, v.split(".")[:2])) >= (12, 3)``
    is decided by the floor where the floor decides it."""

    __slots__ = ("value", "floor")

    def __init__(self, value: str | None, floor: tuple[int, int] = (0, 0)) -> None:
        self.value = value
        self.floor = floor


def _capability(interp: Any) -> DeviceCapability | Unknown:
    target = interp.target
    if target.capability is None:
        return Unknown("the GPU arch (give --arch)")
    interp.note(
        Fact(
            HARDWARE,
            "arch",
            f"{target.arch}: compute capability {target.capability[0]}.{target.capability[1]}",
        )
    )
    return DeviceCapability(*target.capability)


def _capability_tuple(interp: Any, *_: Any, **__: Any) -> Any:
    cap = _capability(interp)
    return (cap.major, cap.minor) if isinstance(cap, DeviceCapability) else cap


def _on_nvidia(interp: Any) -> bool | Unknown:
    if interp.target.capability is None:
        return Unknown("the GPU arch (give --arch)")
    interp.note(Fact(HARDWARE, "vendor", f"{interp.target.arch}: an NVIDIA GPU (CUDA)"))
    return True


def _find_spec(interp: Any, name: Any = None, *_: Any, **__: Any) -> Any:
    """``importlib.util.find_spec(name)``: found for the engine itself and for what its wheel
    requires (pip installs it with the engine); anything else may or may not be installed."""
    if not isinstance(name, str):
        return Unknown("whether a package is installed")
    top = name.split(".")[0]
    if top == interp.world.package:
        return True
    if top in interp.world.installed:
        interp.note(Fact(HARDWARE, "package", f"{top}: installed with the engine (it requires it)"))
        return True
    return Unknown(f"whether {name} is installed")


def _not_vendor(interp: Any, *_: Any, **__: Any) -> bool | Unknown:
    on = _on_nvidia(interp)
    return False if on is True else on


def _cuda_version(interp: Any) -> Any:
    on = _on_nvidia(interp)
    if on is not True:
        return on
    if interp.target.cuda is not None:
        return interp.target.cuda
    major = interp.target.capability[0] if interp.target.capability else 0
    return CudaVersion(None, CUDA_FLOOR.get(major, (0, 0)))


def _device_name(interp: Any, *_: Any, **__: Any) -> Any:
    if interp.target.gpu_name:
        interp.note(Fact(HARDWARE, "gpu", f"GPU {interp.target.gpu_name}"))
        return interp.target.gpu_name
    return Unknown("the GPU's name")


def _env(interp: Any, *args: Any, **keywords: Any) -> Any:
    """An environment variable: as given (``--env``), else unset: the engine's own default."""
    name = args[0] if args and isinstance(args[0], str) else None
    default = args[1] if len(args) > 1 else keywords.get("default")
    if name is not None and name in interp.target.env:
        value = interp.target.env[name]
        interp.note(Fact(ENV, name, f"environment variable {name}={value!r} (given)"))
        return value
    label = name or "an environment variable"
    interp.note(Fact(ENV, label, f"{label} unset (taken at its default)"))
    return default


# -- vLLM's and SGLang's current_platform -----------------------------------------------------------------


def _as_int_capability(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]) * 10 + int(value[1])
    if isinstance(value, DeviceCapability):
        return value.major * 10 + value.minor
    return None


def _is_device_capability(interp: Any, *args: Any, **_: Any) -> Any:
    cap = _capability(interp)
    wanted = _as_int_capability(args[0]) if args else None
    if isinstance(cap, Unknown) or wanted is None:
        return cap if isinstance(cap, Unknown) else Unknown("a device capability")
    return cap.major * 10 + cap.minor == wanted


def _has_device_capability(interp: Any, *args: Any, **_: Any) -> Any:
    cap = _capability(interp)
    wanted = _as_int_capability(args[0]) if args else None
    if isinstance(cap, Unknown) or wanted is None:
        return cap if isinstance(cap, Unknown) else Unknown("a device capability")
    return cap.major * 10 + cap.minor >= wanted


def _is_device_capability_family(interp: Any, *args: Any, **_: Any) -> Any:
    cap = _capability(interp)
    wanted = _as_int_capability(args[0]) if args else None
    if isinstance(cap, Unknown) or wanted is None:
        return cap if isinstance(cap, Unknown) else Unknown("a device capability")
    return cap.major == wanted // 10


def _device_capability(interp: Any, *_: Any, **__: Any) -> Any:
    return _capability(interp)


def _is_dataclass(interp: Any, *args: Any, **_: Any) -> Any:
    """``dataclasses.is_dataclass(x)``: an object holding flags under its own names is one of
    the engine's config dataclasses, and so is an object of a class built as one."""
    if args and isinstance(args[0], KindView):
        return True
    if args and isinstance(args[0], Instance) and interp._makes_dataclass(args[0].cls):
        return True
    return Unknown("is_dataclass")


Primitive = Callable[..., Any]

#: Calls answered from the target, by the dotted name the engine imports them under.
CALLS: dict[str, Primitive] = {
    "torch.cuda.is_available": lambda interp, *a, **k: _on_nvidia(interp),
    # Whichever way an engine asks the GPU for its capability (torch once CUDA is up, NVML
    # before), the answer is the arch given: take the torch way.
    "torch.cuda.is_initialized": lambda interp, *a, **k: _on_nvidia(interp),
    "torch.cuda.get_device_capability": _capability_tuple,
    "torch.cuda.get_device_name": _device_name,
    "torch.xpu.is_available": _not_vendor,
    "torch.npu.is_available": _not_vendor,
    "torch.musa.is_available": _not_vendor,
    "torch.hpu.is_available": _not_vendor,
    "torch.backends.mps.is_available": _not_vendor,
    "torch.mps.is_available": _not_vendor,
    "importlib.util.find_spec": _find_spec,
    "dataclasses.is_dataclass": _is_dataclass,
    "os.environ.get": _env,
    "os.getenv": _env,
    "vllm.platforms.current_platform.is_cuda": lambda interp, *a, **k: _on_nvidia(interp),
    "vllm.platforms.current_platform.is_cuda_alike": lambda interp, *a, **k: _on_nvidia(interp),
    "vllm.platforms.current_platform.is_rocm": _not_vendor,
    "vllm.platforms.current_platform.is_cpu": _not_vendor,
    "vllm.platforms.current_platform.is_tpu": _not_vendor,
    "vllm.platforms.current_platform.is_xpu": _not_vendor,
    "vllm.platforms.current_platform.is_out_of_tree": _not_vendor,
    "vllm.platforms.current_platform.is_device_capability": _is_device_capability,
    "vllm.platforms.current_platform.has_device_capability": _has_device_capability,
    "vllm.platforms.current_platform.is_device_capability_family": _is_device_capability_family,
    "vllm.platforms.current_platform.get_device_capability": _device_capability,
    "vllm.platforms.current_platform.get_device_name": _device_name,
    # SGLang's (0.5.2x) platform object, resolved on first use: CUDA on an NVIDIA target
    "sglang.srt.platforms.current_platform.is_cuda": lambda interp, *a, **k: _on_nvidia(interp),
    "sglang.srt.platforms.current_platform.is_cuda_alike": lambda i, *a, **k: _on_nvidia(i),
    **{
        f"sglang.srt.platforms.current_platform.is_{other}": _not_vendor
        for other in ("rocm", "cpu", "xpu", "musa", "npu", "tpu", "mps", "sail", "out_of_tree")
    },
    "sglang.srt.platforms.current_platform.get_device_capability": _device_capability,
}

#: Attributes answered from the target.
VALUES: dict[str, Callable[[Interpreter], Any]] = {
    "torch.version.cuda": _cuda_version,
    "torch.version.hip": lambda interp: None if _on_nvidia(interp) is True else Unknown("ROCm"),
}

#: Modules whose absence on an NVIDIA machine is certain: ``hasattr(torch, "npu")``.
ABSENT_ATTRIBUTES = {"torch.npu", "torch.musa", "torch.hpu", "torch_npu"}
#: ... and whose presence is: ``hasattr(torch, "cuda")``.
PRESENT_ATTRIBUTES = {"torch.cuda", "torch.version", "torch.backends", "torch.xpu", "torch.cpu"}


def external_value(interp: Any, dotted: str) -> Any:
    getter = VALUES.get(dotted)
    return getter(interp) if getter is not None else External(dotted)
