"""Reading and writing the user's files without replacing special files or hanging on them.

``read_regular`` is how importers and JSONL loaders read a file: it opens without
waiting (a FIFO with no writer does not hang) and refuses anything but a regular file
(``/dev/zero`` would be read without bound, a FIFO would block), following symlinks.

``write_file`` is how exports are written. A regular file (or a new one) is replaced
whole — a temporary file beside it, then a rename — so a reader never sees half a file.
A symlink is written through to its target (the link stays a link). A character or block
device (``/dev/null``, ``/dev/stdout``) or a FIFO with a reader is written in place,
never replaced (as root, renaming over ``/dev/null`` would replace the system's node).
A FIFO without a reader, a socket or a directory is refused.

Errors are one line naming the file: ``InvalidInput`` (exit 3) for what the file is,
``StorageError`` (exit 15) for what the file system said (no space left, read-only).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from ledger.errors import InvalidInput, NotFound, StorageError

#: errno values that are about the file system, not about the input (exit 15).
_STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EACCES, errno.EPERM}
)


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


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed).

    Raises:
        NotFound: no such file.
        InvalidInput: a directory, a FIFO, a device, a socket ("not a regular file"),
            a symlink loop, or a file we may not open.
        StorageError: an I/O error while reading.
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
        raise InvalidInput(f"{path}: not a regular file ({_kind(mode)})")
    with os.fdopen(fd, "rb") as handle:
        os.set_blocking(fd, True)
        try:
            return handle.read()
        except OSError as exc:
            raise describe_os_error(path, exc, "read") from None


def write_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` whole, without replacing a special file.

    Returns the path written (a symlink's target). Creates missing parent folders.

    Raises:
        InvalidInput: a directory, a socket, a FIFO with no reader, a symlink loop.
        StorageError: no space left, read-only file system, permission denied, I/O error
            (a temporary file is removed; the old file is untouched).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    given = Path(path)
    try:
        target = Path(os.path.realpath(given, strict=False))
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise InvalidInput(f"{given}: is a directory")
    if mode is not None and not stat.S_ISREG(mode):
        _write_in_place(given, target, mode, payload)
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # 0o666 less the umask for a new file, as a plain open() would give it.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, stat.S_IMODE(mode))  # the replaced file's permissions
        os.replace(tmp, target)  # whole file or nothing
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise describe_os_error(given, exc, "write") from None
    return target


def _write_in_place(given: Path, target: Path, mode: int, payload: bytes) -> None:
    if stat.S_ISSOCK(mode):
        raise InvalidInput(f"{given}: not a regular file (a socket); give a file path")
    flags = os.O_WRONLY | os.O_CLOEXEC
    if stat.S_ISFIFO(mode):
        flags |= os.O_NONBLOCK  # no reader: ENXIO at once instead of waiting forever
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise InvalidInput(f"{given}: a FIFO with no reader") from None
        raise describe_os_error(given, exc, "write") from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    finally:
        os.close(fd)
