"""Reading and writing the user's files without replacing special files or hanging on them.

``read_regular`` (``ledger.input_files``, kept here by name) is how importers and JSONL loaders
read a file: a regular file only, bounded by its kind.

``write_file`` is how exports are written, with the rule that ``-o FILE`` may do nothing
``> FILE`` could not (docs/reliability.md):

- a name for one of this process's open descriptors (``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N``, ``/proc/self/fd/N``) is written to that descriptor, at its offset and with
  its flags, as the shell's ``>`` to it would (``export -o /dev/stdout >> log`` appends to
  ``log``; a pipe works). Resolving the name to the file behind it and replacing that file
  would have wiped it;
- a new file, or a regular file owned by us with one name, is replaced whole — a temporary
  file beside it, then a rename — so a reader never sees half a file; its permissions and
  group are kept;
- a regular file we may not write (``0444``, another's ``0644``) is refused, exit 15, even
  where the folder would let a rename replace it;
- a regular file with other names (hard links), owned by someone else, or in a folder where no
  temporary file can be made is written in place, so every name sees the new text and the
  owner stays: the new length is reserved first (``posix_fallocate``: a full disk fails before
  a byte of the old text is overwritten), then written and cut to length;
- a symlink is written through to its target (the link stays a link); a character or block
  device (``/dev/null``) or a FIFO with a reader is written in place, never replaced (as root,
  renaming over ``/dev/null`` would replace the system's node). A FIFO without a reader, a
  socket or a directory is refused.

Errors are one line naming the file: ``InvalidInput`` (exit 3) for what the file is,
``StorageError`` (exit 15) for what the file system said (no space left, read-only).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import sys
from contextlib import suppress
from pathlib import Path

from ledger.errors import InvalidInput
from ledger.input_files import describe_os_error, file_kind, read_regular

__all__ = ["describe_os_error", "descriptor_of", "file_kind", "read_regular", "write_file"]

#: ``/proc/PID/fd`` or ``/proc/PID/task/TID/fd``: the folder of a process's open descriptors.
_FD_FOLDER = re.compile(r"/proc/(?P<pid>\d+)(?:/task/\d+)?/fd")


def descriptor_of(path: str | Path) -> int | None:
    """The descriptor of this process that ``path`` names, or None for any other path.

    ``/dev/stdout`` is a symlink to ``/proc/self/fd/1``, itself a "magic" link to whatever
    descriptor 1 is: a file, a pipe, a terminal. Following the links by hand up to the
    ``fd`` folder tells the descriptor apart from the file behind it (``os.path.realpath``
    goes on to the file, or to ``pipe:[N]``, which is no path at all).
    """
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on symlinks in one lookup
        head, name = os.path.split(current)
        real_head = os.path.realpath(head)
        folder = _FD_FOLDER.fullmatch(real_head)
        if folder and int(folder["pid"]) == os.getpid() and name.isdigit():
            return int(name)
        try:
            link = os.readlink(os.path.join(real_head, name))
        except OSError:  # not a symlink (or no such file): a plain path
            return None
        current = os.path.normpath(os.path.join(real_head, link))
    return None


def write_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` whole, as the module docstring says.

    Returns the path written (a symlink's target; ``path`` itself for a descriptor).
    Creates missing parent folders of a new file.

    Raises:
        InvalidInput: a directory, a socket, a FIFO with no reader, a symlink loop.
        StorageError: no space left, read-only file system, permission denied (a file we may
            not write), I/O error (a temporary file is removed; the old file is untouched).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    given = Path(path)
    fd = descriptor_of(given)
    if fd is not None:
        _write_descriptor(given, fd, payload)
        return given
    try:
        target = Path(os.path.realpath(given, strict=False))
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    if info is None:
        _replace(given, target, None, payload)
        return target
    if stat.S_ISDIR(info.st_mode):
        raise InvalidInput(f"{given}: is a directory")
    if not stat.S_ISREG(info.st_mode):
        _write_in_place(given, target, info.st_mode, payload)
        return target
    if not os.access(target, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
        # What ``> FILE`` says; a rename in a writable folder would have replaced it anyway.
        raise describe_os_error(given, PermissionError(errno.EACCES, "Permission denied"), "write")
    if (
        info.st_nlink > 1
        or info.st_uid != os.geteuid()
        or not _replace(given, target, info, payload)
    ):
        _overwrite(given, target, payload)
    return target


def _replace(given: Path, target: Path, info: os.stat_result | None, payload: bytes) -> bool:
    """``target`` replaced by a temporary file holding ``payload`` (``info``: the file it
    replaces, whose permissions and group the new one gets). False, with nothing changed,
    when that cannot be done with the old file's group or in its folder (the caller then
    writes in place)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        if info is None:
            target.parent.mkdir(parents=True, exist_ok=True)
        # 0o666 less the umask for a new file, as a plain open() would give it.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if info is not None and exc.errno in (errno.EACCES, errno.EPERM):
            return False  # a folder we may not create in, a file we may write: in place
        raise describe_os_error(given, exc, "write") from None
    try:
        if info is not None and os.fstat(fd).st_gid != info.st_gid:
            try:
                os.fchown(fd, -1, info.st_gid)
            except PermissionError:  # not a member of the file's group: keep it by writing in place
                os.close(fd)
                os.unlink(tmp)
                return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if info is not None:
                os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
            os.fsync(handle.fileno())
        os.replace(tmp, target)  # whole file or nothing
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise describe_os_error(given, exc, "write") from None
    return True


def _overwrite(given: Path, target: Path, payload: bytes) -> None:
    """A regular file's text replaced in place (every hard link sees it; owner kept)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    try:
        if payload:
            try:
                # The new length's blocks first: no space fails here, the old text intact.
                os.posix_fallocate(fd, 0, len(payload))
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        _write_all(fd, payload)
        os.ftruncate(fd, len(payload))
        os.fsync(fd)
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    finally:
        os.close(fd)


def _write_descriptor(given: Path, fd: int, payload: bytes) -> None:
    """``payload`` to this process's descriptor ``fd``. Standard output and error go through
    ``sys.stdout``/``sys.stderr``: the command's streams (the same descriptors in a process;
    the caller's in an in-process call)."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    buffer = getattr(stream, "buffer", None)
    try:
        if buffer is not None:
            stream.flush()  # type: ignore[union-attr]
            buffer.write(payload)
            buffer.flush()
            return
        _write_all(fd, payload)
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise InvalidInput(f"{given}: descriptor {fd} is not open for writing") from None
        raise describe_os_error(given, exc, "write") from None


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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
        _write_all(fd, payload)
    except OSError as exc:
        raise describe_os_error(given, exc, "write") from None
    finally:
        os.close(fd)
