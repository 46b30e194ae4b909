"""In-memory tar archives: the one format the Docker Engine takes files in and gives them back in.

The harness builds small archives (the suite copied into containers, a fixture's build context) and reads
the ones the Engine returns (a container's results directory). Everything is in memory: these archives
are kilobytes, and the Engine API takes and returns bytes anyway.

Archives built here are reproducible: every entry has mtime 0 and owner root (uid/gid 0, no names), so the
same entries give the same bytes, whatever the host, the clock or the user running distval.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class File:
    """A regular file: its path inside the archive (relative, '/'-separated), its bytes and permission bits."""

    path: str
    data: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Directory:
    """A directory entry: needed where its permission bits matter (a results directory any user may write)."""

    path: str
    mode: int = 0o755


Entry = File | Directory


def build_tar(entries: Iterable[Entry]) -> bytes:
    """An uncompressed tar holding these entries, in this order (list a directory before what it holds)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in entries:
            info = tarfile.TarInfo(_checked_path(entry.path))
            info.mode = entry.mode
            if isinstance(entry, Directory):
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def read_entries(tar_bytes: bytes) -> list[Entry]:
    """The files and directories of an archive, in archive order; ValueError on anything else (links,
    devices), which these archives never hold and which a caller copying entries would silently lose."""
    entries: list[Entry] = []
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as archive:
        for member in archive.getmembers():
            if member.isdir():
                entries.append(Directory(member.name, member.mode))
            elif member.isfile():
                entries.append(File(member.name, _read(archive, member), member.mode))
            else:
                raise ValueError(f"tar entry {member.name!r} is neither a regular file nor a directory")
    return entries


def regular_files(tar_bytes: bytes) -> dict[str, bytes]:
    """Every regular file of an archive by base name (what ``get_archive`` of a flat directory holds);
    directories, links and other entries are left out. A base name seen twice keeps its last file.
    Bytes that are no readable archive raise tarfile.TarError: the caller knows whose bytes they were."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as archive:
        for member in archive.getmembers():
            if member.isfile():
                files[posixpath.basename(member.name)] = _read(archive, member)
    return files


def _read(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = archive.extractfile(member)
    assert handle is not None, member.name  # extractfile returns None only for non-files
    return handle.read()


def _checked_path(path: str) -> str:
    # The Engine extracts archives relative to a target directory: an absolute or escaping path would
    # land somewhere else (or be refused) inside the container, so it is a bug in the caller.
    parts = path.split("/")
    if not path or path.startswith("/") or ".." in parts:
        raise ValueError(f"tar entry path must be relative and stay inside the archive: {path!r}")
    return path
