"""Fused-MoE Triton config file (sglang's or vLLM's) -> one ``MoeConfigRecorded`` event.

File name (docs/engines.md, "SGLang's fused-MoE kernel configs"; sglang's ``get_config_file_name``):
``E={E},N={N},device_name={name}[,dtype={dtype}][,block_shape=[a, b]][,per_channel_quant=True][_down].json``,
kept in a ``triton_X_Y_Z`` folder for the Triton version it was tuned with.
Content: batch size M (a string) -> ``{BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K,
GROUP_SIZE_M, num_warps, num_stages}`` (``_down`` files may add ``USE_TMA``).
vLLM's tuner (``benchmarks/kernels/benchmark_moe.py``) writes the same name (its
block shape spelled ``[128,128]``, without sglang's space) and content plus a
top-level ``"triton_version": "3.6.0"`` key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.engines.gpu_arch import compute_capability_for
from ledger.errors import InvalidInput
from ledger.write.input_checks import loads
from schemas import Actor, Host, MoeConfigRecorded

from .detect import (
    MOE_NAME_RE,
    ImportContext,
    Importer,
    InputFile,
    ReadResult,
    Sniffed,
    looks_like_moe,
)

_NAME_RE = re.compile(
    r"^E=(?P<E>\d+),N=(?P<N>\d+),device_name=(?P<device>[^,]+?)"
    r"(?:,dtype=(?P<dtype>\w+))?"
    r"(?:,block_shape=\[(?P<bn>\d+), ?(?P<bk>\d+)\])?"
    r"(?:,per_channel_quant=(?P<pcq>True|False))?"
    r"(?P<down>_down)?\.json$"
)
_TRITON_DIR_RE = re.compile(r"^triton_(\d+)_(\d+)_(\d+)$")

#: vLLM's tuner writes the Triton version it tuned with as a top-level string key.
TRITON_VERSION_KEY = "triton_version"

#: Kernel parameters every entry must have, as integers.
REQUIRED_INT_KEYS = (
    "BLOCK_SIZE_M",
    "BLOCK_SIZE_N",
    "BLOCK_SIZE_K",
    "GROUP_SIZE_M",
    "num_warps",
    "num_stages",
)


@dataclass(frozen=True)
class MoeFileName:
    """The parts of a MoE config file name; ``device_name`` keeps its ``_`` for spaces."""

    E: int
    N: int
    device_name: str
    dtype: str | None
    block_shape: list[int] | None
    per_channel_quant: bool
    down: bool

    @property
    def gpu_name(self) -> str:
        """``device_name`` as ``torch.cuda.get_device_name()`` spells it (spaces)."""
        return self.device_name.replace("_", " ")


def parse_moe_file_name(name: str) -> MoeFileName | None:
    """Split ``E=..,N=..,device_name=..[...].json`` into its parts; ``None`` if it is not such a name."""
    m = _NAME_RE.match(name)
    if not m:
        return None
    return MoeFileName(
        E=int(m.group("E")),
        N=int(m.group("N")),
        device_name=m.group("device"),
        dtype=m.group("dtype"),
        block_shape=[int(m.group("bn")), int(m.group("bk"))] if m.group("bn") else None,
        per_channel_quant=m.group("pcq") == "True",
        down=bool(m.group("down")),
    )


def triton_version_of(path: Path) -> str | None:
    """``"3.5.1"`` from the nearest ``triton_3_5_1`` folder above ``path``, else ``None``."""
    for parent in path.parents:
        m = _TRITON_DIR_RE.match(parent.name)
        if m:
            return ".".join(m.groups())
    return None


def validate_configs(data: Any, label: str) -> dict[str, dict[str, Any]]:
    """Check the file content: batch size -> kernel parameters, all integers (``USE_TMA`` a bool).

    Raises:
        InvalidInput: ``label: field 'M.KEY': ...`` for the first bad entry.
    """
    if not isinstance(data, dict) or not data:
        raise InvalidInput(f"{label}: expected a JSON object mapping batch sizes to kernel configs")
    for m, entry in data.items():
        try:
            int(m)
        except ValueError:
            raise InvalidInput(
                f"{label}: field '{m}': batch size must be an integer string"
            ) from None
        if not isinstance(entry, dict):
            raise InvalidInput(f"{label}: field '{m}': expected an object of kernel parameters")
        for key in REQUIRED_INT_KEYS:
            if key not in entry:
                raise InvalidInput(f"{label}: field '{m}.{key}' is required")
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(
                    f"{label}: field '{m}.{key}': expected an integer, got {json.dumps(value)[:40]}"
                )
        if "USE_TMA" in entry and not isinstance(entry["USE_TMA"], bool):
            raise InvalidInput(
                f"{label}: field '{m}.USE_TMA': expected true or false, got {json.dumps(entry['USE_TMA'])[:40]}"
            )
    return data


def _key_line(text: str, key: str) -> int:
    """The 1-based line of the first ``"key"`` in ``text`` (1 when absent)."""
    index = text.find(f'"{key}"')
    return text.count("\n", 0, index) + 1 if index >= 0 else 1


def import_moe_config(
    file: InputFile, *, session_id: str | None, host: Host | None, actor: Actor
) -> MoeConfigRecorded:
    """The ``MoeConfigRecorded`` of one config file.

    The Triton version is the file's ``"triton_version"`` key (vLLM's tuner), else the
    nearest ``triton_X_Y_Z`` folder (sglang's layout). The host's GPU name and compute capability come from the file's
    ``device_name`` (the config is for that GPU, whatever machine imports it);
    other host fields from ``host``.

    Raises:
        InvalidInput: a file name not of the sglang form, JSON that does not parse, or a bad entry.
    """
    parts = parse_moe_file_name(file.name)
    if parts is None:
        raise InvalidInput(
            f"{file.label}: looks like an sglang MoE config, but the name is not "
            "E=<experts>,N=<size>,device_name=<gpu>[,dtype=..][,block_shape=[a, b]][_down].json"
        )
    try:
        data = loads(file.text, file.label)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{file.label}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    folder_version = triton_version = triton_version_of(file.path.resolve())
    if isinstance(data, dict) and TRITON_VERSION_KEY in data:
        data = dict(data)
        version = data.pop(TRITON_VERSION_KEY)
        if not isinstance(version, str) or not re.fullmatch(r"\d+(\.\d+)*\S*", version):
            raise InvalidInput(
                f"{file.label}:{_key_line(file.text, TRITON_VERSION_KEY)}: field '{TRITON_VERSION_KEY}': "
                f'expected a version string such as "3.6.0", got {json.dumps(version)[:40]}'
            )
        triton_version = version  # what the tuner ran with beats the folder it was copied into
    configs = validate_configs(data, file.label)
    file_host = Host(
        gpu_name=parts.gpu_name, compute_capability=compute_capability_for(parts.gpu_name)
    )
    merged = (host or Host()).model_copy(
        update={k: v for k, v in file_host.model_dump().items() if v is not None}
    )
    return MoeConfigRecorded(
        # The file's identity is part of the id: two files with the same JSON under other
        # names (or Triton folders) are two configs; the same path imported again is a no-op.
        event_id=file.event_id(f"moe-config:{folder_version or '-'}:{file.name}"),
        source=file.name,
        session_id=session_id,
        host=merged,
        actor=actor,
        file_name=file.name,
        E=parts.E,
        N=parts.N,
        device_name=parts.device_name,
        dtype=parts.dtype,
        block_shape=parts.block_shape,
        per_channel_quant=parts.per_channel_quant,
        down=parts.down,
        triton_version=triton_version,
        configs=configs,
    )


def _sniff(sniffed: Sniffed) -> float:
    """0.9 for a MoE config file name (a broken content is then this format's error), 0.8 for
    content of batch size -> kernel parameters under another name."""
    if MOE_NAME_RE.match(sniffed.file.name):
        return 0.9
    return 0.8 if looks_like_moe(sniffed.json) else 0.0


def _sniff_vllm(sniffed: Sniffed) -> float:
    """1 for a MoE config with vLLM's top-level ``"triton_version"`` key (its tuner,
    ``benchmark_moe.py``, writes it; sglang's configs keep the version in their folder name)."""
    obj = sniffed.json
    if isinstance(obj, dict) and isinstance(obj.get(TRITON_VERSION_KEY), str) and _sniff(sniffed):
        return 1.0
    return 0.0


def _read(file: InputFile, ctx: ImportContext) -> ReadResult:
    return [import_moe_config(file, session_id=ctx.session_id, host=ctx.host, actor=ctx.actor)], {}


IMPORTER = Importer(
    kind="sglang-moe-config", description="sglang MoE config JSON", sniff=_sniff, read=_read
)
VLLM_IMPORTER = Importer(
    kind="vllm-moe-config",
    description="vLLM MoE config JSON (with triton_version)",
    sniff=_sniff_vllm,
    read=_read,
)
