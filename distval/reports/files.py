"""The one way a report reaches the disk: whole or not at all, and only ever into a regular file, or into a
stream that a command line names on purpose (``--json /dev/null``, ``--junit /dev/stdout``, a FIFO).

``write_atomically`` follows symbolic links to their final target (the link stays a link). A target that is a
character device (``/dev/null``, a terminal) or a FIFO (a pipe: ``/dev/stdout`` under ``| jq``, ``>(...)``) is
opened and written to directly, never created, truncated or renamed over: replacing ``/dev/null`` with a file
is what a CI script that throws a report away must never cause, and a pipe cannot be renamed over. Anything else
that is not a regular file (a directory, a block device, a socket: ``NotARegularFile``) is refused. A regular
file (or a missing one) gets the text in a new temporary file beside it (same directory, so same filesystem),
flushed to the disk (fsync) and renamed over it: a reader, or a run killed halfway, sees the old file or the
new one, never a part. The new file is distval's own: created with distval's mode (``new_mode``, the umask
applies) and owner, never the replaced file's (a file another user planted with mode 0666 in /tmp must not make
root's report world-writable, nor a report another user can edit before ``attest`` signs it). Missing parent
directories are created. On any failure the temporary file is removed and the old file stays as it was.

A stream is opened with ``O_NONBLOCK``, so a FIFO that no process reads is refused (``NotARegularFile``) instead
of hanging the writer, and a FIFO or device another user owns in a sticky world-writable directory is refused
(``UnsafePath``, the kernel's ``fs.protected_fifos`` rule): a pipe planted in /tmp must not take root's report
away, nor hang it. ``create_new`` writes a file that must not exist (a key): whole, with its mode from the start,
and never over anything, not even over a file that appeared after the caller looked.

distval often runs as root with report paths in shared directories such as /tmp. The kernel's
``fs.protected_symlinks`` refuses to follow a symbolic link in a sticky world-writable directory unless the
link belongs to the follower or to the directory's owner; distval resolves the path itself, so it applies
the same rule (``UnsafePath``): another user's link in /tmp must not make root write, or create
directories, wherever that user wants. Parent directories are not created through another user's link
either, and every directory is opened (and created) one level at a time with ``O_NOFOLLOW``, as is the
temporary file, so that a link swapped in after the check is not followed.

``refusal`` is the same check, for the command line to make before a run starts.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path

# A temporary name no other writer uses (several runs may write reports into one directory).
_TEMPORARY_ATTEMPTS = 16
# The kernel's own limit on symbolic links in one path lookup (MAXSYMLINKS).
_LINKS_MAX = 40
# O_PATH opens a directory that can be searched but not read (mode 0711) as a base for the *at() calls.
_DIRECTORY_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)
# Opened for writing as they are (no O_CREAT: nothing is made; no O_TRUNC: a pipe or a device has nothing to cut);
# O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) rather than waiting for one forever.
_STREAM_FLAGS = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK


class NotARegularFile(OSError):
    """The report's path names something other than a regular file, which a report must never replace."""


class UnsafePath(OSError):
    """The report's path goes through a symbolic link that another user could point anywhere."""


@dataclass(frozen=True)
class _Resolved:
    path: str  # absolute, no symbolic link in it (as far as it exists)
    problem: str | None  # why no report may be written there
    foreign_link: str | None  # a followed symbolic link owned by another user than the caller


def _protected_link(directory: str, link: str, link_stat: os.stat_result) -> str | None:
    """fs.protected_symlinks' rule: in a sticky world-writable directory, follow only a link that belongs to
    the caller or to the directory's owner."""
    parent = _sticky_and_shared(directory)
    if parent is not None and link_stat.st_uid not in (parent.st_uid, os.geteuid()):
        return (
            f"{link} is a symbolic link of uid {link_stat.st_uid} in the sticky world-writable directory {directory}: "
            "a report is never written through another user's link there (as fs.protected_symlinks refuses)"
        )
    return None


def _sticky_and_shared(directory: str) -> os.stat_result | None:
    """The status of ``directory`` when it is sticky and world-writable (as /tmp), else None."""
    try:
        parent = os.stat(directory)
    except OSError:
        return None
    return parent if parent.st_mode & stat.S_ISVTX and parent.st_mode & stat.S_IWOTH else None


def _planted_stream(path: str, status: os.stat_result) -> str | None:
    """fs.protected_fifos' rule: a FIFO or device in a sticky world-writable directory that belongs neither to
    the caller nor to the directory's owner was put there by someone else, for root's report to go into."""
    parent = _sticky_and_shared(os.path.dirname(path) or ".")
    if parent is None or status.st_uid in (parent.st_uid, os.geteuid()):
        return None
    return (
        f"{path} is a stream of uid {status.st_uid} in the sticky world-writable directory {os.path.dirname(path)}: "
        "a report is never written into another user's FIFO or device there (as fs.protected_fifos refuses)"
    )


def _resolve(path: str | os.PathLike[str]) -> _Resolved:
    """``path`` with every symbolic link resolved (as os.path.realpath), checking each link as it is followed."""
    text = os.fspath(path)
    parts = deque(text.split("/") if os.path.isabs(text) else [*os.getcwd().split("/"), *text.split("/")])
    resolved = "/"
    links = 0
    foreign: str | None = None
    missing = False  # past a component that does not exist: nothing further can be a link
    while parts:
        name = parts.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, name)
        if missing:
            resolved = candidate
            continue
        try:
            status = os.lstat(candidate)
        except OSError:
            missing = True
            resolved = candidate
            continue
        if not stat.S_ISLNK(status.st_mode):
            resolved = candidate
            continue
        links += 1
        if links > _LINKS_MAX:
            return _Resolved(candidate, f"{text} is a loop of symbolic links, not a regular file", foreign)
        problem = _protected_link(resolved, candidate, status)
        if problem is not None:
            return _Resolved(candidate, problem, foreign)
        if status.st_uid != os.geteuid() and foreign is None:
            foreign = candidate
        target = os.readlink(candidate)
        if target.startswith("/"):
            resolved = "/"
        parts.extendleft(reversed(target.split("/")))
    return _Resolved(resolved, None, foreign)


def refusal(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot take a report, in words; None when it is a regular file, does not exist yet, is a
    stream (a character device or a FIFO), or is a symbolic link to one of those. Problems only the write itself
    can find (permissions) are left to it."""
    found = _resolve(path)
    if found.problem is not None:
        return found.problem
    if _is_stream(path):
        try:
            return _planted_stream(found.path, os.stat(found.path))
        except OSError:  # /dev/stdout as a pipe: /proc/self/fd/1 resolves to no path of the filesystem
            return None
    return _kind_problem(found.path, path) or _creation_problem(found.path, path)


def _creation_problem(resolved: str, path: str | os.PathLike[str]) -> str | None:
    """Why no file can be created where the report goes, found by creating one: the deepest existing directory of
    the path gets an empty file of a fresh name, removed at once. Permission bits alone cannot say it: root may
    write where the bits forbid, and pseudo-filesystems (/proc, /sys) or a read-only mount refuse what the bits
    allow; a run of many minutes must not end on a report that could never have been written."""
    directory = os.path.dirname(resolved)
    while directory != "/" and not os.path.isdir(directory):
        if os.path.lexists(directory):
            return f"{os.fspath(path)}: {directory} is not a directory"
        directory = os.path.dirname(directory)
    for _ in range(_TEMPORARY_ATTEMPTS):
        probe = os.path.join(directory, f".distval-probe-{secrets.token_hex(8)}")
        try:
            handle = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            return f"{os.fspath(path)}: no file can be created in {directory} ({exc.strerror or exc})"
        os.close(handle)
        try:
            os.unlink(probe)
        except OSError:
            pass
        return None
    return None


def _is_stream(path: str | os.PathLike[str]) -> bool:
    """A character device or a FIFO, as the kernel resolves ``path``: /dev/stdout's /proc/self/fd/1 may name a
    pipe ("pipe:[123]"), which no path of the filesystem names."""
    try:
        return _is_stream_mode(os.stat(path).st_mode)
    except OSError:
        return False


def _status_or_none(path: str, field: str) -> int | None:
    try:
        return int(getattr(os.stat(path), field))
    except OSError:
        return None


def _is_stream_mode(mode: int) -> bool:
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _kind_problem(resolved: str, path: str | os.PathLike[str]) -> str | None:
    """Why the atomic writer cannot replace ``resolved``: anything but a regular file (streams are written
    before this is asked; one seen here was swapped in meanwhile, and is not replaced either)."""
    try:
        mode = os.lstat(resolved).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kind = next((word for test, word in _KINDS if test(mode)), "not a file")
    return (
        f"{os.fspath(path)} is {kind}: a report goes into a regular file, a character device such as /dev/null or "
        "a FIFO, never replaces anything else"
    )


def _write_stream(path: str | os.PathLike[str], resolved: str, data: bytes) -> bool:
    """Write ``data`` into ``path`` when it is a character device or a FIFO that a process reads (a FIFO without
    one is refused at once: NotARegularFile); False, having written nothing, when it is not one (the regular path
    follows). UnsafePath for another user's stream in a sticky world-writable directory."""
    if not _is_stream(path):
        return False
    try:
        fd = os.open(path, _STREAM_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise NotARegularFile(
                errno.ENXIO, f"{os.fspath(path)} is a named pipe (FIFO) that no process reads: nothing was written"
            ) from None
        raise
    try:
        status = os.fstat(fd)
        if not _is_stream_mode(status.st_mode):  # swapped for something else since the stat above
            return False
        if status.st_ino == _status_or_none(resolved, "st_ino") and (problem := _planted_stream(resolved, status)):
            raise UnsafePath(problem)
        # Blocking again for the writes: a slow reader (| jq) is waited for, as by any writer of a pipe.
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return True


def write_atomically(path: str | os.PathLike[str], text: str, new_mode: int = 0o666) -> None:
    """Replace the regular file at ``path`` (or its symbolic link's target) with ``text`` (UTF-8) atomically, or
    write ``text`` into it when it is a character device or a FIFO.

    ``new_mode``: the permission bits the new file is created with (the umask applies), e.g. 0o600 for a private
    key, which is then never readable by others, not even while it is written. A replaced file's bits and owner
    are never kept: the file is distval's.

    Characters UTF-8 cannot encode (lone surrogates from rank output) are written as ``\\udcXX`` escapes.
    """
    found = _resolve(path)
    if found.problem is not None:
        raise (NotARegularFile if "loop of symbolic links" in found.problem else UnsafePath)(found.problem)
    data = text.encode("utf-8", "backslashreplace")
    if _write_stream(path, found.path, data):
        return
    reason = _kind_problem(found.path, path)
    if reason is not None:
        raise NotARegularFile(reason)
    target = Path(found.path)
    if found.foreign_link is not None and not os.path.isdir(target.parent):
        raise UnsafePath(
            f"{os.fspath(path)}: its directory {target.parent} does not exist and the path goes through "
            f"{found.foreign_link}, another user's symbolic link: distval creates no directory there"
        )
    directory = _open_directory(target.parent)
    try:
        _write_in(directory, target, data, new_mode)
        _fsync_directory(directory)
    finally:
        os.close(directory)


def _write_in(directory: int, target: Path, data: bytes, new_mode: int, replace: bool = True) -> None:
    """``data`` into a new temporary file beside ``target``, then renamed over it (``replace``) or linked to its
    name, which fails when anything is there (FileExistsError), then the temporary name removed."""
    temporary: str | None = None
    try:
        temporary, fd = _create_temporary(directory, target.name, new_mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            # By path: the directory has no symbolic link in it (resolved above, opened level by level without
            # following one), and a rename never follows a link at the target's name.
            os.replace(target.parent / temporary, target)
        else:
            os.link(temporary, target.name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            os.unlink(temporary, dir_fd=directory)
    except BaseException:
        if temporary is not None:
            try:
                os.unlink(temporary, dir_fd=directory)
            except FileNotFoundError:
                pass
        raise


def create_new(path: str | os.PathLike[str], text: str, mode: int) -> None:
    """Create ``path`` with ``text`` and ``mode`` (the umask applies) whole, or not at all: never over anything
    that is there (FileExistsError, even for a file or a link another user put there after the caller looked),
    never through another user's link (UnsafePath)."""
    found = _resolve(os.path.dirname(os.path.abspath(os.fspath(path))) or "/")
    if found.problem is not None:
        raise UnsafePath(found.problem)
    if found.foreign_link is not None:
        raise UnsafePath(f"{os.fspath(path)}: its directory goes through {found.foreign_link}, another user's symbolic link")
    target = Path(found.path) / os.path.basename(os.fspath(path))
    directory = _open_directory(target.parent)
    try:
        _write_in(directory, target, text.encode("utf-8"), mode, replace=False)
        _fsync_directory(directory)
    finally:
        os.close(directory)


def _open_directory(directory: Path) -> int:
    """A descriptor of ``directory`` (symbolic-link free, from _resolve), opened from / one level at a time
    without following links, creating the levels that are missing."""
    fd = os.open("/", _DIRECTORY_FLAGS)
    try:
        for name in directory.parts[1:]:
            try:
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile by another writer: opened below like any other
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create_temporary(directory: int, name: str, mode: int) -> tuple[str, int]:
    """A new file beside ``name``, created exclusively with ``mode`` (the umask applies)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMPORARY_ATTEMPTS):
        temporary = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return temporary, os.open(temporary, flags, mode, dir_fd=directory)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {name}")


def _fsync_directory(directory: int) -> None:
    """Make the rename itself durable; a filesystem that cannot open or sync a directory is left as it is."""
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=directory)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
