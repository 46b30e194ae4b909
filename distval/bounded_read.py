"""Reading a file that someone else wrote (a report, a pod log, a scenario file): a regular file of bounded size.

A path given on the command line can name anything: ``/dev/zero`` (read until memory runs out), a FIFO (an
``open`` that waits forever for a writer), a directory, a file that grows while it is read. Every reader of
such a path goes through ``read_regular_file``: it opens without blocking and without following into a
controlling terminal, refuses whatever is not a regular file, refuses a file over the limit before reading it,
and reads at most ``limit + 1`` bytes, so that a file that grew past the limit is refused too.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Collection, Iterable
from pathlib import Path

MIB = 2**20
_CHUNK = 4 * MIB
# distval's own JSON report (compare, --baseline): 10,000 scenarios with capped messages stay far below this.
REPORT_MAX_BYTES = 256 * MIB
# One pod's log or one log file given to collect kubernetes: records, their pieces and the output around them.
LOG_MAX_BYTES = 256 * MIB
# A container's results directory as the Engine's archive of it: records, stacks, flight-recorder dumps.
RESULTS_MAX_BYTES = 256 * MIB
# A container's stdout (or stderr) as kept: its end, where a failure shows.
CONTAINER_LOG_MAX_BYTES = 8 * MIB


class FileRefused(Exception):
    """A file that is not read: not a regular file, over the limit, or not readable. The message is one line
    saying what was expected and what was found (without the path: callers name the file their own way).
    ``found``: what the file is, when it is there but not taken ("got a FIFO (named pipe)", "it has N bytes"),
    for callers that say what they expected in their own words; ``missing``: there is no such file."""

    def __init__(self, message: str, found: str | None = None, missing: bool = False) -> None:
        super().__init__(message)
        self.found = found
        self.missing = missing


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def size_text(size: int) -> str:
    """A byte count for a message: 64 MiB, 3 KiB, 12 bytes."""
    for unit, name in ((2**30, "GiB"), (MIB, "MiB"), (2**10, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def foreign_writer(status: os.stat_result, owners: Collection[int]) -> str | None:
    """Who else than ``owners`` could have written the file or directory of ``status``: its owner when another
    user, the group or everyone when they may write it; None when only ``owners`` could."""
    if status.st_uid not in owners:
        return f"it belongs to uid {status.st_uid}, expected {' or '.join(map(str, sorted(set(owners))))}"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if status.st_mode & stat.S_IWOTH else "its group"
        return f"its mode {stat.S_IMODE(status.st_mode):04o} lets {who} write it"
    return None


def _open_regular(path: str | Path, follow_links: bool, owners: Collection[int] | None = None) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file at ``path`` and its status; FileRefused otherwise (nothing left open).
    ``owners``: the file must belong to one of them and be writable by no one else (``foreign_writer``)."""
    if "\x00" in str(path):
        raise FileRefused("a path holds no NUL")
    # O_NONBLOCK: opening a FIFO for reading waits for a writer without it; it is cleared before reading.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise FileRefused("expected a regular file; got a symbolic link", "got a symbolic link") from None
        raise FileRefused(exc.strerror or str(exc), missing=isinstance(exc, FileNotFoundError)) from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            found = f"got {_kind(status.st_mode)}"
            raise FileRefused(f"expected a regular file; {found}", found)
        other = foreign_writer(status, owners) if owners is not None else None
        if other is not None:
            raise FileRefused(f"expected a file only its owner writes; {other}", other)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def read_regular_file(path: str | Path, limit: int, follow_links: bool = True, owners: Collection[int] | None = None) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them; FileRefused otherwise.
    ``follow_links``: False for a path in a directory that the image under test writes. ``owners``: the uids one
    of which the file must belong to, writable by no one else (a shared filesystem's results)."""
    fd, status = _open_regular(path, follow_links, owners)
    try:
        if status.st_size > limit:
            found = f"it has {status.st_size} bytes, more than {size_text(limit)}"
            raise FileRefused(f"expected a file of at most {size_text(limit)}; {found}", found)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            found = f"it grew past {size_text(limit)} while read"
            raise FileRefused(f"expected a file of at most {size_text(limit)}; {found}", found)
        return b"".join(chunks)
    except OSError as exc:
        raise FileRefused(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def joined_within(chunks: Iterable[bytes], limit: int) -> bytes:
    """The chunks of a stream joined, at most ``limit`` bytes; FileRefused as soon as it holds more (the rest
    is never read)."""
    kept: list[bytes] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            found = f"it holds more than {size_text(limit)}"
            raise FileRefused(f"expected at most {size_text(limit)}; {found}", found)
        kept.append(chunk)
    return b"".join(kept)


def end_of(chunks: Iterable[bytes], limit: int) -> tuple[bytes, int]:
    """The last ``limit`` bytes of a stream, and how many bytes it had: memory stays within the limit however
    much the stream holds (a container's log is the image's output)."""
    kept: deque[bytes] = deque()
    kept_bytes = total = 0
    for chunk in chunks:
        total += len(chunk)
        kept.append(chunk)
        kept_bytes += len(chunk)
        while kept_bytes - len(kept[0]) >= limit:
            kept_bytes -= len(kept.popleft())
    data = b"".join(kept)
    return data[-limit:] if len(data) > limit else data, total


def end_of_file(path: str | Path, limit: int, owners: Collection[int] | None = None) -> tuple[bytes, int]:
    """The last ``limit`` bytes of the regular file at ``path`` (not followed if a link), and its size. ``owners``:
    as for ``read_regular_file``."""
    fd, status = _open_regular(path, follow_links=False, owners=owners)
    try:
        os.lseek(fd, max(0, status.st_size - limit), os.SEEK_SET)
        chunks: list[bytes] = []
        total = 0
        while total < limit:
            chunk = os.read(fd, min(_CHUNK, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks), max(status.st_size, total)
    except OSError as exc:
        raise FileRefused(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def kept_end(data: bytes, total: int) -> str:
    """The end of a log as text, saying how much was cut before it."""
    text = data.decode("utf-8", "replace")
    return text if total <= len(data) else f"[... cut: {total} bytes in all, the last {len(data)} kept]\n{text}"
