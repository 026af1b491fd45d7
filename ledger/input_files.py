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

import codecs
import errno
import hashlib
import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator
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


def open_regular(path: str | Path, buffering: int = -1) -> BinaryIO:
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
    return os.fdopen(fd, "rb", buffering=buffering)


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


#: A server log longer than this is read as a stream (``ledger.importers.detect.read_input``)
#: when its first ``HEAD_BYTES`` say it is an SGLang or vLLM one; the block size of a streamed read.
STREAM_FROM = HEAD_BYTES = 8 * MiB
BLOCK_BYTES = 4 * MiB
_BOM = b"\xef\xbb\xbf"


def read_head(path: str | Path) -> str | None:
    """The first ``HEAD_BYTES`` of the regular file at ``path`` up to its last newline, as text (a
    byte-order mark dropped); ``None`` when they are not UTF-8 or hold a NUL byte."""
    with open_regular(path) as handle:
        head = handle.read(HEAD_BYTES)
    cut = head.rfind(b"\n")
    head = head[: cut + 1] if cut >= 0 else head
    try:
        text = head.removeprefix(_BOM).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def digest_text(path: str | Path) -> str:
    """The SHA-256 (hex) of the text file at ``path`` (a byte-order mark dropped, as
    ``read_input`` hashes a file read whole), read in ``BLOCK_BYTES`` blocks: at most one block
    held.

    Raises:
        InvalidInput: bytes that are not UTF-8, or a NUL byte (naming the line).
    """
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines = offset = 0
    with open_regular(path) as handle:
        first = True
        while block := handle.read(BLOCK_BYTES):
            if first:
                block, first = block.removeprefix(_BOM), False
            digest.update(block)
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                where = max(0, min(exc.start, len(block)))
                line = lines + block[:where].count(b"\n") + 1
                raise InvalidInput(
                    f"{path}:{line}: not UTF-8 text (byte {offset + where})"
                ) from None
            if (nul := block.find(b"\x00")) >= 0:
                line = lines + block[:nul].count(b"\n") + 1
                raise InvalidInput(f"{path}:{line}: binary data (NUL byte)")
            lines += block.count(b"\n")
            offset += len(block)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InvalidInput(f"{path}:{lines + 1}: not UTF-8 text (byte {offset})") from None
    return digest.hexdigest()


class BulkRun(str):
    """Consecutive lines of a log, joined by ``\\n`` (no line end after the last), that each
    match the run pattern given to ``iter_lines``: a reader takes them at once or splits them."""

    __slots__ = ()


#: The size of the pieces ``iter_lines`` scans for runs: a run is at most this long, so a reader
#: that cannot take one yet splits little.
RUN_PIECE = 256 << 10


def iter_lines(
    path: str | Path, runs: re.Pattern[str] | None = None, after: int = 0
) -> Iterator[str]:
    """``iter_lines`` with ``runs`` (a pattern matching one or more whole lines, each with its
    ``\\n``, anchored by ``^`` in ``re.MULTILINE``): past the first ``after`` lines, the lines of
    each match come as one ``BulkRun``, the others one at a time as ``iter_lines`` gives them."""
    if runs is None:
        yield from _iter_lines(path)
        return
    emitted = 0
    with open_regular(path) as handle:
        data = handle.read(RUN_PIECE).removeprefix(_BOM)
        while data:
            more = handle.read(RUN_PIECE)
            cut = data.rfind(b"\n") if more else len(data) - 1
            if cut < 0:
                data += more
                continue
            text, data = data[: cut + 1].decode("utf-8"), data[cut + 1 :] + more
            start = 0
            if emitted >= after:
                for m in runs.finditer(text):
                    for line in _split(text[start : m.start()]):
                        yield line
                    yield BulkRun(text[m.start() : m.end() - 1])
                    start = m.end()
            for line in _split(text[start:]):
                emitted += 1
                yield line


def _split(text: str) -> Iterator[str]:
    """The lines of ``text`` (whole lines, the last with or without its ``\\n``) as
    ``_iter_lines`` gives them."""
    if not text:
        return
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for line in lines:
        yield line[:-1] if line.endswith("\r") else line


def _iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of the text file at ``path`` as ``InputFile.lines`` splits a text (at ``\\n``, a
    ``\\r`` before it dropped, a bare ``\\r`` kept), read in blocks: one line held at a time.
    The file was checked by ``digest_text``."""
    with open_regular(path, buffering=BLOCK_BYTES) as handle:
        first = True
        for raw in handle:
            if first:
                raw, first = raw.removeprefix(_BOM), False
            line = raw.decode("utf-8")
            if line.endswith("\n"):
                line = line[:-1]
            yield line[:-1] if line.endswith("\r") else line
