"""Reading ELF shared objects without any tool from the image: a library's ``DT_SONAME`` (which library it is, for
distval_suite/libraries.py) and where its read-only strings lie (the names it reads, for distval_suite/environment.py).

Only what those two need: the program headers' dynamic section and the section headers' ``.rodata*``/``.dynstr``.
Anything that is not a well-formed ELF file gives None or the whole file, never an exception.

Python 3.9 and the standard library only.
"""

from __future__ import annotations

import mmap
import struct
from typing import List, Optional, Tuple


def soname(path: str) -> Optional[str]:
    """The DT_SONAME of an ELF shared object, or None (not ELF, no dynamic section, no soname, unreadable)."""
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if header[:4] != b"\x7fELF" or header[4] not in (1, 2) or header[5] not in (1, 2):
                return None
            wide, order = header[4] == 2, "<" if header[5] == 1 else ">"
            if wide:
                phoff, phentsize, phnum = struct.unpack(order + "32xQ14xHH", header[:58])
            else:
                phoff, phentsize, phnum = struct.unpack(order + "28xI10xHH", header[:46])
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            loads: List[Tuple[int, int, int]] = []  # (vaddr, offset, filesz)
            dynamic: Optional[Tuple[int, int]] = None
            for i in range(phnum):
                entry = table[i * phentsize : (i + 1) * phentsize]
                if wide:
                    kind, _flags, offset, vaddr, _paddr, filesz = struct.unpack(order + "IIQQQQ", entry[:40])
                else:
                    kind, offset, vaddr, _paddr, filesz = struct.unpack(order + "IIIII", entry[:20])
                if kind == 1:
                    loads.append((vaddr, offset, filesz))
                elif kind == 2:
                    dynamic = (offset, filesz)
            if dynamic is None:
                return None
            f.seek(dynamic[0])
            raw = f.read(min(dynamic[1], 1 << 20))
            size = 16 if wide else 8
            strtab = soname = None
            for i in range(len(raw) // size):
                tag, value = struct.unpack(order + ("qQ" if wide else "iI"), raw[i * size : (i + 1) * size])
                if tag == 0:
                    break
                if tag == 5:
                    strtab = value
                elif tag == 14:
                    soname = value
            if strtab is None or soname is None:
                return None
            for vaddr, offset, filesz in loads:
                if vaddr <= strtab < vaddr + filesz:
                    f.seek(offset + (strtab - vaddr) + soname)
                    name = f.read(256).split(b"\0", 1)[0]
                    return name.decode("utf-8", "replace") or None
            return None
    except (OSError, struct.error):
        return None


def read_only_data(f: "mmap.mmap") -> List[Tuple[int, int]]:
    """(offset, size) of an ELF64 file's .rodata* and .dynstr sections; the whole file when it has no section table."""
    header = f[:64]
    if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] not in (1, 2):
        return [(0, len(f))]
    order = "<" if header[5] == 1 else ">"
    (shoff,) = struct.unpack(order + "Q", header[40:48])
    entsize, count, strndx = struct.unpack(order + "HHH", header[58:64])
    if not shoff or not count or strndx >= count or shoff + entsize * count > len(f):
        return [(0, len(f))]
    try:
        headers = [struct.unpack(order + "IIQQQQ", f[shoff + i * entsize : shoff + i * entsize + 40]) for i in range(count)]
    except struct.error:  # a section header cut short: not a well-formed file
        return [(0, len(f))]
    names_at, names_size = headers[strndx][4], headers[strndx][5]
    names = f[names_at : names_at + names_size]
    found = []
    for name_at, _kind, _flags, _addr, offset, size in headers:
        name = names[name_at : names.find(b"\0", name_at)]
        if (name == b".dynstr" or name == b".rodata" or name.startswith(b".rodata.")) and offset + size <= len(f):
            found.append((offset, size))
    return found or [(0, len(f))]
