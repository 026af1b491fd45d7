"""``run tune --arch sm120``: configs for a GPU that is not here (RTX PRO 6000 Blackwell), not
measured.

Nothing runs: per batch size the entry of SGLang's shipped file for that GPU (its ``_down`` file
for the down GEMM) is the seed where one exists, else SGLang's default; a seed that cannot launch
on the arch — its shared memory over the arch's per-block limit under the arch's pipeline rule
(``ledger.engines.gpu_arch``: 101,376 B on SM120, where mma.sync holds ``num_stages - 1`` stages,
docs/engines.md "The MoE kernel's shared memory") — is replaced by the same tiles with fewer
stages, else a smaller BLOCK_SIZE_K, else SGLang's default. The files carry SGLang's names and
content (SGLang reads every key as a batch size, so no marker goes inside them); the ledger's
``moe_config_recorded`` of each says "not measured on this arch", until a tune on that GPU
replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.engines.gpu_arch import SHARED_MEMORY_PER_BLOCK
from runners.moe.space import (
    Config,
    MoeShape,
    block_shape_fits,
    config_file_content,
    config_file_name,
    default_config,
    nearest_config,
    shared_memory_bytes,
)
from schemas import Actor, Host
from schemas.events import MoeConfigRecorded

#: The GPU each arch's offline files are named for (SGLang's ``device_name``: torch's name).
ARCH_DEVICES = {"sm120": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}

NOT_MEASURED = "not measured on this arch"


@dataclass
class OfflineResult:
    """The configs per batch size (up/gate and down), where each came from, the files written."""

    up: dict[int, Config] = field(default_factory=dict)
    down: dict[int, Config] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def fits(config: Config, shape: MoeShape, arch: str) -> bool:
    """Whether ``config`` can launch on ``arch`` by the shared-memory rule and the block shape."""
    need = shared_memory_bytes(config, shape.element_bytes, shape.block_shape, arch)
    return (
        need <= SHARED_MEMORY_PER_BLOCK[arch]
        and block_shape_fits(config, shape.block_shape) is None
    )


def fitted(seed: Config, shape: MoeShape, arch: str, M: int) -> tuple[Config, str]:
    """``seed`` made to fit ``arch``: as is, with fewer stages, with a smaller BLOCK_SIZE_K,
    else SGLang's default (with fewer stages if need be); (config, how)."""
    if fits(seed, shape, arch):
        return dict(seed), "fits as is"
    for k in (int(seed["BLOCK_SIZE_K"]), 64, 32):
        for stages in range(int(seed["num_stages"]), 1, -1):
            c = dict(seed, BLOCK_SIZE_K=min(k, int(seed["BLOCK_SIZE_K"])), num_stages=stages)
            if fits(c, shape, arch):
                return c, f"num_stages {seed['num_stages']}->{stages}" + (
                    f", BLOCK_SIZE_K {seed['BLOCK_SIZE_K']}->{c['BLOCK_SIZE_K']}"
                    if c["BLOCK_SIZE_K"] != seed["BLOCK_SIZE_K"]
                    else ""
                )
    d = default_config(M, shape)
    for stages in range(int(d["num_stages"]), 1, -1):
        if fits(dict(d, num_stages=stages), shape, arch):
            return dict(d, num_stages=stages), "SGLang's default (the seed cannot fit)"
    raise ValueError(f"no config of M={M} fits {arch}'s shared memory")


def offline_configs(
    shape: MoeShape,
    arch: str,
    batch_sizes: Sequence[int],
    shipped: dict[str, Config] | None = None,
    shipped_down: dict[str, Config] | None = None,
) -> OfflineResult:
    """Per batch size, the up/gate and down configs for ``arch`` (module docstring); the down
    one keeps the up one's BLOCK_SIZE_M (SGLang forces it)."""
    if arch not in SHARED_MEMORY_PER_BLOCK:
        raise ValueError(f"arch {arch!r}: its shared memory per block is not known")
    res = OfflineResult()
    for M in batch_sizes:
        seed = nearest_config(shipped, M) if shipped else default_config(M, shape)
        res.up[M], how = fitted(seed, shape, arch, M)
        res.origins[f"{M}"] = ("shipped " if shipped else "default ") + how
        dseed = nearest_config(shipped_down, M) if shipped_down else res.up[M]
        dseed = dict(dseed, BLOCK_SIZE_M=res.up[M]["BLOCK_SIZE_M"])
        res.down[M], how_d = fitted(dseed, shape, arch, M)
        res.origins[f"{M}_down"] = ("shipped _down " if shipped_down else "up config ") + how_d
    return res


def write_offline(
    res: OfflineResult,
    shape: MoeShape,
    arch: str,
    output_dir: Path,
    triton_version: str,
    *,
    session_id: str | None,
    record: Callable[[MoeConfigRecorded], object],
    seeded_from: str,
) -> None:
    """SGLang's file pair under ``output_dir/configs/triton_X_Y_Z/`` and a ``moe_config_recorded``
    of each, its origin saying it was not measured on ``arch``."""
    device = ARCH_DEVICES.get(arch, arch)
    folder = output_dir / "configs" / ("triton_" + triton_version.replace(".", "_"))
    folder.mkdir(parents=True, exist_ok=True)
    for down, configs in ((False, res.up), (True, res.down)):
        path = folder / config_file_name(shape, device, down=down)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(config_file_content(configs), encoding="utf-8")
        tmp.replace(path)
        res.files.append(path)
        record(
            MoeConfigRecorded(
                session_id=session_id,
                actor=Actor(kind="runner", name="moe-tune"),
                host=Host(gpu_name=device, compute_capability=arch),
                file_name=path.name,
                E=shape.E,
                N=shape.N,
                device_name=device.replace(" ", "_"),
                dtype=shape.file_dtype,
                block_shape=list(shape.block_shape) if shape.block_shape else None,
                down=down,
                triton_version=triton_version,
                configs={str(m): dict(c) for m, c in sorted(configs.items())},
                origin=f"{NOT_MEASURED} ({arch}): {seeded_from}, pruned by "
                f"{SHARED_MEMORY_PER_BLOCK[arch]:,} B shared memory per block and the mma.sync "
                "(num_stages - 1) stage rule; a tune on that GPU replaces it",
            )
        )


def describe(res: OfflineResult) -> list[str]:
    """One line per batch size: the configs and where they came from."""
    from runners.moe.tune import short

    return [
        f"M={m}: up {short(res.up[m])} ({res.origins[str(m)]}), down {short(res.down[m])} "
        f"({res.origins[f'{m}_down']})"
        for m in res.up
    ]


def shipped_for(shape: MoeShape, arch: str, package_dir: Path | None = None) -> dict[str, Any]:
    """SGLang's shipped files for ``arch``'s GPU and this shape: {"up": .., "down": .., "from":
    the file names}, the entries empty where SGLang ships none."""
    from runners.moe.tune import find_shipped_config

    device = ARCH_DEVICES.get(arch, arch)
    out: dict[str, Any] = {"up": {}, "down": {}, "from": []}
    for key, down in (("up", False), ("down", True)):
        found = find_shipped_config(shape, device, "0", package_dir, down=down)
        if found is not None:
            out[key] = found[1]
            out["from"].append(str(found[0]))
    return out
