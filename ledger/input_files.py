"""Every file the program reads whole goes through here: regular files only, each kind bounded.

The user's files (a servers TOML, a plan or spec, a model config, a MoE config, a benchmark's
result file, a JSONL of events) and the files an MCP agent names are input like any other: a
path to ``/dev/zero`` was read without bound until the kernel's OOM killer fired (on a GPU
host it may pick the engine). So:

- a device, FIFO or socket where a regular file is meant is refused at once ("not a regular
  file", exit 3): opened without waiting (a FIFO with no writer does not hang), then
  ``fstat``; symlinks are followed;
- a file past its kind's bound (``LIMITS``) is refused at once, exit 3, naming the file, its
  size and the bound; the size is checked before reading (``st_size``) and again while reading
  (a file in ``/proc`` says 0 bytes, a file may grow), so no more than the bound plus one byte
  is ever held;
- a text is UTF-8 (one line naming the first bad byte), and TOML and JSON nested past the
  parser's recursion limit are one line ("nested too deep"), not a ``RecursionError``.

What is read as a stream (a server log: ``open_regular`` gives the handle, the importer reads
it in chunks) gets the special-file check without a bound. The bounds are in
docs/reliability.md; a bigger file is a mistake or an attack, not a use.

This module depends on ``ledger.errors`` only, so every layer (the engines' research, the
importers, the runners, the MCP tools) can read through it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, BinaryIO, Literal

from ledger.errors import InvalidInput, NotFound, StorageError

MiB = 1 << 20

#: What a file is, for its bound.
Kind = Literal["config", "result"]

#: The largest file of each kind that is read whole, in bytes (docs/reliability.md):
#: ``config`` — a servers TOML, a plan, a spec, a research flags file, a model's
#: ``config.json``, a MoE kernel config (the largest real ones are tens of KB);
#: ``result`` — a benchmark's result file (JSON, JSONL, CSV, YAML) or a JSONL of events to
#: append (the H200 campaign's largest is a few MB; parsing costs several times the size).
LIMITS: dict[str, int] = {"config": 1 * MiB, "result": 256 * MiB}

#: errno values that are about the file system, not about the input (exit 15).
_STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EACCES, errno.EPERM}
)


class FileTooLarge(InvalidInput):
    """A file past its kind's bound (``LIMITS``): refused before it is read (exit 3)."""


def describe_os_error(
    path: str | Path, exc: OSError, doing: str
) -> InvalidInput | NotFound | StorageError:
    """The one-line ledger error for an ``OSError`` met while ``doing`` something to ``path``.

    ``doing`` is a verb phrase ("read", "write"); the message is ``PATH: cannot DOING: CAUSE``.
    """
    cause = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT:
        return NotFound(f"{path}: no such file")
    if exc.errno == errno.ELOOP:
        return InvalidInput(f"{path}: cannot {doing}: symlink loop")
    if exc.errno in _STORAGE_ERRNOS:
        return StorageError(f"{path}: cannot {doing}: {cause}")
    return InvalidInput(f"{path}: cannot {doing}: {cause}")


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a FIFO")."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size_words(size: int) -> str:
    return f"{size / MiB:.1f} MiB" if size >= MiB else f"{size} bytes"


def open_regular(path: str | Path) -> BinaryIO:
    """The regular file at ``path`` open for reading in binary (symlinks followed), for a
    caller that reads it as a stream.

    Raises:
        NotFound: no such file.
        InvalidInput: a directory, a FIFO, a device, a socket ("not a regular file"),
            a symlink loop, or a file we may not open.
        StorageError: an I/O error.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EACCES:
            raise InvalidInput(f"{path}: cannot read: permission denied") from None
        raise describe_os_error(path, exc, "read") from None
    # fstat before fdopen: fdopen refuses a directory with an OSError of its own.
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise InvalidInput(f"{path}: is a directory, not a file")
        raise InvalidInput(f"{path}: not a regular file ({file_kind(mode)})")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: str | Path, kind: Kind) -> bytes:
    """The bytes of the regular file at ``path``, at most ``LIMITS[kind]`` of them.

    Raises:
        NotFound: no such file.
        FileTooLarge: the file is past the bound (exit 3).
        InvalidInput: not a regular file (see ``open_regular``).
        StorageError: an I/O error while reading.
    """
    limit = LIMITS[kind]
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise _too_large(path, kind, size)
        try:
            data = handle.read(limit + 1)  # /proc files say 0 bytes; a file may grow meanwhile
        except OSError as exc:
            raise describe_os_error(path, exc, "read") from None
    if len(data) > limit:
        raise _too_large(path, kind, None)
    return data


def _too_large(path: str | Path, kind: str, size: int | None) -> FileTooLarge:
    what = f" ({_size_words(size)})" if size is not None else ""
    return FileTooLarge(
        f"{path}: too large{what}: a {kind} file is read up to "
        f"{_size_words(LIMITS[kind])} (docs/reliability.md)"
    )


def read_text(path: str | Path, kind: Kind) -> str:
    """``read_regular`` decoded as UTF-8 (a byte-order mark dropped).

    Raises:
        InvalidInput: as ``read_regular``, or bytes that are not UTF-8 (naming the line).
    """
    data = read_regular(path, kind).removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidInput(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None


def parse_toml(text: str, name: str | Path) -> dict[str, Any]:
    """``tomllib.loads`` with its failures as one line naming ``name``.

    Raises:
        InvalidInput: not TOML, or nested past the parser's recursion limit.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{name}: not valid TOML: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"{name}: not valid TOML: nested too deep") from None


def parse_json(text: str | bytes, name: str | Path) -> Any:
    """``json.loads`` with its failures as one line naming ``name``.

    Raises:
        InvalidInput: not JSON, or nested past the parser's recursion limit.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{name}: not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{name}: not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise InvalidInput(f"{name}: not valid JSON: nested too deep") from None


def load_toml(path: str | Path, kind: Kind = "config") -> dict[str, Any]:
    """The TOML file at ``path``, read through ``read_text``; every failure one line."""
    return parse_toml(read_text(path, kind), path)


def load_json(path: str | Path, kind: Kind = "config") -> Any:
    """The JSON file at ``path``, read through ``read_text``; every failure one line."""
    return parse_json(read_text(path, kind), path)


def read_stream(stream: BinaryIO, name: str, kind: Kind = "result") -> bytes:
    """All of ``stream`` (standard input), refused past ``LIMITS[kind]`` as a file would be:
    at most the bound plus one byte is held (``yes | tuneledger append`` ends in one line).

    Raises:
        FileTooLarge: more than the bound (exit 3).
    """
    data = stream.read(LIMITS[kind] + 1)
    if len(data) > LIMITS[kind]:
        raise _too_large(name, kind, None)
    return bytes(data)
