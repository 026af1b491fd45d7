"""A wheel fetched or found by version is the version asked for: a wheel under
``sglang-0.5.23-….whl`` whose METADATA says 9.9.9 (planted in ``TUNELEDGER_WHEELS``, or
renamed) is refused, not recorded as 9.9.9 (docs/reliability.md)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from ledger.engines.research.analysis import open_engine
from ledger.errors import InvalidInput


def fake_wheel(folder: Path, file_version: str, metadata_version: str) -> Path:
    wheel = folder / f"sglang-{file_version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            f"sglang-{file_version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: sglang\nVersion: {metadata_version}\n",
        )
        archive.writestr("sglang/__init__.py", "")
        archive.writestr("sglang/srt/server_args.py", "class ServerArgs:\n    pass\n")
    return wheel


def test_a_wheel_whose_metadata_names_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = fake_wheel(tmp_path, "0.5.23", "9.9.9")
    monkeypatch.setenv("TUNELEDGER_WHEELS", str(tmp_path))
    with pytest.raises(InvalidInput, match="METADATA says version 9.9.9, sglang==0.5.23 was asked"):
        open_engine("sglang==0.5.23", download=False)
    planted.unlink()
    fake_wheel(tmp_path, "0.5.23", "0.5.23.0")  # the same release, written otherwise
    assert open_engine("sglang==0.5.23", download=False).version == "0.5.23.0"
