"""distval_suite/elf.py on files that are not well-formed ELF: the image supplies them, so a cut or forged header
gives None or the whole file, never an exception."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from distval_suite import elf


def _mapped(path: Path) -> mmap.mmap:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def test_a_section_table_past_the_end_is_the_whole_file(tmp_path: Path) -> None:
    header = bytearray(b"\x7fELF\x02\x01" + bytes(58))
    header[40:48] = struct.pack("<Q", 64)  # the section table right after the header ...
    header[58:64] = struct.pack("<HHH", 64, 3, 1)  # ... with three entries that are not there
    cut = tmp_path / "libcut.so"
    cut.write_bytes(bytes(header) + bytes(100))
    with _mapped(cut) as data:
        assert elf.read_only_data(data) == [(0, len(data))]
    assert elf.soname(str(cut)) is None
    # Entries narrower than an ELF64 section header: the table fits in the file, an entry read from it does not.
    header[40:48] = struct.pack("<Q", 140)
    header[58:64] = struct.pack("<HHH", 8, 2, 0)
    cut.write_bytes(bytes(header) + bytes(100))
    with _mapped(cut) as data:
        assert elf.read_only_data(data) == [(0, len(data))]


def test_a_file_that_is_not_elf_has_no_soname_and_is_read_whole(tmp_path: Path) -> None:
    text = tmp_path / "libtext.so"
    text.write_bytes(b"NCCL_ALGO not an ELF file" * 10)
    with _mapped(text) as data:
        assert elf.read_only_data(data) == [(0, len(data))]
    assert elf.soname(str(text)) is None
