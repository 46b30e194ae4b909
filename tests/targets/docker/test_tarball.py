"""distval.tarball: the archives the harness gives the Engine and reads back from it."""

from __future__ import annotations

import io
import tarfile

import pytest

from distval.tarball import Directory, Entry, File, build_tar, read_entries, regular_files

SUITE_LIKE: list[Entry] = [
    Directory("distval", 0o755),
    Directory("distval/suite", 0o755),
    Directory("distval/results", 0o777),
    File("distval/suite/main.py", b"print('hello')\n"),
    File("distval/spec.json", b'{"checks": []}'),
]


def members(tar_bytes: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as archive:
        return archive.getmembers()


def test_build_tar_keeps_order_types_modes_and_contents() -> None:
    found = members(build_tar(SUITE_LIKE))
    assert [(m.name, m.isdir(), m.mode) for m in found] == [
        ("distval", True, 0o755),
        ("distval/suite", True, 0o755),
        ("distval/results", True, 0o777),
        ("distval/suite/main.py", False, 0o644),
        ("distval/spec.json", False, 0o644),
    ]
    assert [m.size for m in found if m.isfile()] == [15, 14]


def test_build_tar_is_reproducible_and_owned_by_root() -> None:
    first = build_tar(SUITE_LIKE)
    assert build_tar(list(SUITE_LIKE)) == first
    for member in members(first):
        assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (0, 0, 0, "", "")


def test_build_tar_gives_the_bytes_tarfile_gives_for_the_same_entries() -> None:
    """What the harness built by hand with tarfile before this module existed: the Engine sees no change."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for entry in SUITE_LIKE:
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            if isinstance(entry, Directory):
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    assert build_tar(SUITE_LIKE) == buffer.getvalue()


def test_executable_file_mode_is_kept() -> None:
    (member,) = members(build_tar([File("run.sh", b"#!/bin/sh\n", 0o755)]))
    assert member.mode == 0o755 and member.isfile()


def test_empty_archive_is_a_valid_tar_with_nothing_in_it() -> None:
    assert members(build_tar([])) == []
    assert regular_files(build_tar([])) == {}


@pytest.mark.parametrize("path", ["", "/etc/passwd", "../outside", "a/../../b"])
def test_paths_that_would_land_outside_the_target_are_refused(path: str) -> None:
    with pytest.raises(ValueError, match="relative"):
        build_tar([File(path, b"x")])


def test_read_entries_round_trips_to_the_same_bytes() -> None:
    archive = build_tar(SUITE_LIKE)
    entries = read_entries(archive)
    assert entries == SUITE_LIKE
    assert build_tar(entries) == archive


def test_read_entries_refuses_links_rather_than_dropping_them() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("latest")
        info.type = tarfile.SYMTYPE
        info.linkname = "rank-0.jsonl"
        archive.addfile(info)
    with pytest.raises(ValueError, match="'latest'"):
        read_entries(buffer.getvalue())


def test_regular_files_by_base_name_leaving_out_directories_and_links() -> None:
    """The shape of ``get_archive('/distval/results')``: the directory itself, then its files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        directory = tarfile.TarInfo("results")
        directory.type = tarfile.DIRTYPE
        archive.addfile(directory)
        for name, data in (("results/rank-0.jsonl", b'{"rank": 0}\n'), ("results/rank-1.jsonl", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("results/latest")
        link.type = tarfile.SYMTYPE
        link.linkname = "rank-0.jsonl"
        archive.addfile(link)
    assert regular_files(buffer.getvalue()) == {"rank-0.jsonl": b'{"rank": 0}\n', "rank-1.jsonl": b""}


def test_regular_files_keeps_the_last_of_two_files_with_one_base_name() -> None:
    archive = build_tar([File("a/x.txt", b"first"), File("b/x.txt", b"second"), Directory("c")])
    assert regular_files(archive) == {"x.txt": b"second"}


def test_regular_files_reads_what_the_engine_sends_even_compressed() -> None:
    """tarfile detects compression on reading; an Engine (or a docker cp) that gzips is still read."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("results.xml")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"<a>"))
    assert regular_files(buffer.getvalue()) == {"results.xml": b"<a>"}


@pytest.mark.parametrize("garbled", [b"not a tar archive at all", b"\x1f\x8b" + b"\x00" * 64])
def test_bytes_that_are_no_archive_raise_tar_error_for_the_caller_to_name(garbled: bytes) -> None:
    with pytest.raises(tarfile.TarError):
        regular_files(garbled)
    with pytest.raises(tarfile.TarError):
        read_entries(garbled)


def test_a_truncated_archive_raises_tar_error_rather_than_returning_part_of_a_file() -> None:
    archive = build_tar([File("rank-0.jsonl", b"x" * 5000)])
    with pytest.raises(tarfile.TarError):
        regular_files(archive[:1500])
