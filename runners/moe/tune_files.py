"""The files of ``tuneledger run tune`` (SGLang's config files it writes, with the
``moe_config_recorded`` of each, and the shipped ones it finds in the installed sglang) and its
progress bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.input_files import load_json
from runners.moe.space import CONFIG_KEYS, Config, MoeShape, config_file_content, config_file_name
from schemas.events import MoeConfigRecorded


def _write(path: Path, configs: dict[int, Config]) -> Path:
    """``configs`` as SGLang's file at ``path``, whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(config_file_content(configs), encoding="utf-8")
    tmp.replace(path)
    return path


def _file_event(
    spec: Any,
    facts: dict[str, Any],
    path: Path,
    configs: dict[int, Config],
    common: dict[str, Any],
) -> MoeConfigRecorded:
    """The ``moe_config_recorded`` of a file the tune wrote (origin ``tuned here``)."""
    shape = spec.shape
    return MoeConfigRecorded(
        session_id=common["session_id"],
        actor=common["actor"],
        host=common["host"],
        file_name=path.name,
        E=shape.E,
        N=shape.N,
        device_name=str(facts["gpu_name"]).replace(" ", "_"),
        dtype=shape.file_dtype,
        block_shape=list(shape.block_shape) if shape.block_shape else None,
        down=path.name.endswith("_down.json"),
        triton_version=facts["triton_version"],
        configs={str(m): dict(c) for m, c in sorted(configs.items())},
        origin=f"tuned here (tune {common['tune_id']})",
    )


def sglang_file_name(shape: MoeShape, device_name: str) -> str:
    """SGLang's own ``get_config_file_name`` when importable (it needs sgl_kernel), else ours
    (``tune_space.config_file_name``, the same documented format)."""
    try:
        from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config import (
            get_config_file_name,
        )

        block = list(shape.block_shape) if shape.block_shape else None
        return str(get_config_file_name(shape.E, shape.N, shape.file_dtype, block))
    except Exception:
        return config_file_name(shape, device_name)


#: Where SGLang's wheel keeps its tuned fused-MoE files (0.5.23), under the ``sglang`` package.
SGLANG_CONFIG_DIR = ("srt", "layers", "moe", "moe_runner", "triton_utils", "configs")


def _version_key(folder: str) -> tuple[int, ...]:
    return tuple(int(x) for x in folder.removeprefix("triton_").split("_") if x.isdigit())


def find_shipped_config(
    shape: MoeShape,
    device_name: str,
    triton_version: str,
    package_dir: Path | None = None,
    *,
    down: bool = False,
) -> tuple[Path, dict[str, Config]] | None:
    """SGLang's shipped tuned file for this shape and GPU, when the installed sglang has one.

    Looks in ``<sglang>/srt/layers/moe/moe_runner/triton_utils/configs/triton_X_Y_Z/`` for the
    file SGLang would load (``tune_space.config_file_name``): the folder of this Triton version
    first, else the newest folder that has it (the H200 files of sglang 0.5.23 are under
    triton_3_1_0 and triton_3_7_1). ``package_dir`` defaults to where ``sglang`` would be imported
    from (found without importing it: its import chain needs CUDA extensions). Returns (path,
    entries) or None; a file that is not a valid MoE config file is ignored (None).
    """
    if package_dir is None:
        import importlib.util

        try:
            spec = importlib.util.find_spec("sglang")
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        package_dir = Path(next(iter(spec.submodule_search_locations)))
    root = package_dir.joinpath(*SGLANG_CONFIG_DIR)
    if not root.is_dir():
        return None
    name = config_file_name(shape, device_name, down=down)
    mine = "triton_" + triton_version.split("+")[0].replace(".", "_")
    folders = sorted(
        (d.name for d in root.iterdir() if d.is_dir() and d.name.startswith("triton_")),
        key=lambda f: (f == mine, _version_key(f)),
        reverse=True,
    )
    for folder in folders:
        path = root / folder / name
        if path.is_file():
            try:
                data = load_json(path)  # a regular file of at most 1 MiB
                return path, {
                    str(int(m)): {k: int(c[k]) for k in CONFIG_KEYS} for m, c in data.items()
                }
            except (LedgerError, ValueError, TypeError, KeyError, AttributeError):
                return None
    return None


def _progress(enabled: bool, total: int):
    """A rich progress bar with ETA on standard error (None when disabled)."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    p = Progress(
        TextColumn("tune"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("batch sizes"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    p.start()
    return p, p.add_task("tune", total=total)
