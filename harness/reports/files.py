"""The one way a report reaches the disk: whole or not at all, and only ever into a regular file.

``write_atomically`` follows symbolic links to their final target (the link stays a link), refuses a
target that is not a regular file (a directory, a device, a FIFO, a socket: ``NotARegularFile``), writes
the text to a new temporary file beside the target (same directory, so same filesystem), flushes it to
the disk (fsync) and renames it over the target: a reader, or a run killed halfway, sees the old file or
the new one, never a part. An existing target keeps its permission bits; parent directories are created.
On any failure the temporary file is removed and the old file stays as it was.

``refusal`` is the same check, for the command line to make before a run starts.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

# A temporary name no other writer uses (several runs may write reports into one directory).
_TEMPORARY_ATTEMPTS = 16
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


class NotARegularFile(OSError):
    """The report's path names something other than a regular file, which a report must never replace."""


def refusal(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot take a report, in words; None when it is a regular file, does not exist yet, or is a
    symbolic link to one of those. Problems only the write itself can find (permissions) are left to it."""
    try:
        mode = os.stat(path).st_mode  # through symbolic links
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{os.fspath(path)} is a loop of symbolic links, not a regular file"
        return None
    if stat.S_ISREG(mode):
        return None
    kind = next((word for test, word in _KINDS if test(mode)), "not a file")
    return f"{os.fspath(path)} is {kind}, not a regular file: a report never replaces it"


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Replace the regular file at ``path`` (or its symbolic link's target) with ``text`` (UTF-8) atomically.

    Characters UTF-8 cannot encode (lone surrogates from rank output) are written as ``\\udcXX`` escapes.
    """
    reason = refusal(path)
    if reason is not None:
        raise NotARegularFile(reason)
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", "backslashreplace")
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    temporary: Path | None = None
    try:
        temporary, fd = _create_temporary(target)
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def _create_temporary(target: Path) -> tuple[Path, int]:
    """A new file beside ``target``, created exclusively with the mode a plain open() would give it (umask applies)."""
    for _ in range(_TEMPORARY_ATTEMPTS):
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; a filesystem that cannot open or sync a directory is left as it is."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
