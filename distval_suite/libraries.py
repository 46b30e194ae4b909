"""What a rank really loaded: the shared libraries mapped into its process, who owns each, and what is wrong.

Version strings and package metadata say what *should* run; ``/proc/self/maps`` says what does. A stray
``LD_LIBRARY_PATH``, a second copy of a library, or a library copied outside every package decides which code runs
(nccl #1240, azurehpc-health-checks #142). This module is torch-free (the ``libraries`` check in
distval_suite/image.py calls it once torch is imported): it reads the maps, each library's ELF ``DT_SONAME``, the
package databases the image has (pip's RECORD files, dpkg's lists, conda's conda-meta), and judges three rules:

- **one copy**: no library (by soname, auditwheel's ``-<8 hex>`` suffix taken off) is mapped from two paths:
  two OpenMP runtimes, or two NCCLs, in one process;
- **the packaged copy**: a library that no package owns is not loaded where a package ships that soname at
  another path (the wheel's or the distro's copy lost to a path searched first);
- **inside the package trees**: no library comes from a directory that holds no packaged file and is neither the
  system's own library directory nor the running Python's own installation, unless the scenario allows it
  (``allow_dirs``).

The running Python's installation counts as a package: a Python built from source (the official ``python:3.x``
images, pyenv) owns its ``lib-dynload`` and ``libpython`` without any package database saying so.

Python 3.9 and the standard library only.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import sysconfig
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from distval_suite import elf

# The system's own library directories (the dynamic loader's defaults, with Debian's and Fedora's multiarch
# ones): a library there is inside the package trees even where no package database says whose it is (an
# image without dpkg, rpm's database is not read).
SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib32", "/usr/lib32")
# The GPU driver's user-space libraries: the container runtime mounts the host's (NVIDIA's container toolkit puts
# them in /usr/local/nvidia/lib64 or the system's directory; measured on an H200 machine: libcuda.so.580.159.04 and
# libnvidia-ml.so.580.159.04 there, owned by no package). They are the host's, never the image's: listed with the
# owner "host driver" and judged only by the one-copy rule.
DRIVER = re.compile(r"^lib(cuda|nvidia-[a-z0-9-]+|nvcuvid|nvoptix)\.so")
DRIVER_OWNER = "host driver"
# auditwheel renames a vendored library libgomp.so.1 -> libgomp-a34b3233.so.1 (soname too): the same library.
_AUDITWHEEL_HASH = re.compile(r"-[0-9a-f]{8}(?=\.so)")
# How many libraries a rank's details list at most (a process maps ~80-300).
MAX_LISTED = 1000


class Library(NamedTuple):
    path: str  # as mapped (the kernel gives the resolved path)
    soname: Optional[str]  # DT_SONAME; None for a file without one (Python's extension modules)
    owner: Optional[str]  # "pip:torch", "dpkg:libgomp1", "conda:…"; None: no package database names it


class Finding(NamedTuple):
    rule: str  # "one copy", "the packaged copy", "inside the package trees"
    library: str  # the soname (or file name)
    expected: str
    seen: str


def _shared_object(path: str) -> bool:
    return re.search(r"\.so($|\.)", os.path.basename(path)) is not None


def mapped_paths(maps_text: str) -> List[str]:
    """The shared objects a process maps, each once, in the order of the maps: files whose name has ``.so``
    (``libx.so``, ``libx.so.1.2``, ``_C.cpython-313-x86_64-linux-gnu.so``)."""
    seen: Dict[str, None] = {}
    for line in maps_text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        path = fields[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        if _shared_object(path):
            seen.setdefault(path, None)
    return list(seen)


def mapped_now() -> List[str]:
    """The shared objects this process maps now (``mapped_paths`` of /proc/self/maps)."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
        return mapped_paths(f.read())


def library_key(soname: str) -> str:
    """The library a soname is, whoever vendored it: auditwheel's hash suffix taken off."""
    return _AUDITWHEEL_HASH.sub("", soname)


def package_files(search_path: Iterable[str]) -> Dict[str, str]:
    """Every shared object a package database lists, by resolved path -> owner: pip's RECORD files in the
    directories of ``search_path`` (sys.path), dpkg's /var/lib/dpkg/info/*.list, conda's conda-meta/*.json. Only
    regular files are read: a FIFO the image put there would block the read until the check's time limit."""
    owners: Dict[str, str] = {}

    def add(path: str, owner: str) -> None:
        if _shared_object(path):
            owners.setdefault(os.path.realpath(path), owner)

    for directory in dict.fromkeys(p for p in search_path if p and os.path.isdir(p)):
        for record in filter(os.path.isfile, glob.glob(os.path.join(directory, "*.dist-info", "RECORD"))):
            name = os.path.basename(os.path.dirname(record)).split("-", 1)[0]
            try:
                with open(record, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        entry = line.split(",", 1)[0]
                        if entry:
                            add(os.path.normpath(os.path.join(directory, entry)), "pip:" + name)
            except OSError:
                continue
    for listing in filter(os.path.isfile, glob.glob("/var/lib/dpkg/info/*.list")):
        package = os.path.basename(listing)[: -len(".list")].split(":", 1)[0]
        try:
            with open(listing, encoding="utf-8", errors="replace") as f:
                for line in f:
                    add(line.rstrip("\n"), "dpkg:" + package)
        except OSError:
            continue
    for prefix in dict.fromkeys([sys.prefix, os.environ.get("CONDA_PREFIX", "")]):
        for meta in filter(os.path.isfile, glob.glob(os.path.join(prefix, "conda-meta", "*.json")) if prefix else []):
            try:
                with open(meta, encoding="utf-8") as f:
                    data = json.load(f)
                for entry in data.get("files") or []:
                    add(os.path.join(prefix, str(entry)), "conda:" + str(data.get("name") or os.path.basename(meta)))
            except (OSError, ValueError, AttributeError):
                continue
    return owners


def describe(paths: List[str], owners: Dict[str, str]) -> List[Library]:
    found = []
    for path in paths:
        soname = elf.soname(path)
        owner = owners.get(os.path.realpath(path))
        if owner is None and DRIVER.match(soname or os.path.basename(path)):
            owner = DRIVER_OWNER
        found.append(Library(path, soname, owner))
    return found


def interpreter_dirs() -> List[str]:
    """The running Python's own installation: its standard library, extension modules and libpython's directory."""
    paths = sysconfig.get_paths()
    found = [paths.get(key, "") for key in ("stdlib", "platstdlib")] + [str(sysconfig.get_config_var("LIBDIR") or "")]
    return sorted({os.path.realpath(p) for p in found if p})


def _inside(path: str, directories: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


def assess(
    libraries: List[Library], owners: Dict[str, str], interpreter: Iterable[str] = (), allow_dirs: Iterable[str] = ()
) -> List[Finding]:
    """The three rules (see the module's docstring) over what was mapped; ``interpreter``: the running Python's
    directories (``interpreter_dirs``). An empty list: nothing wrong."""
    findings: List[Finding] = []
    by_key: Dict[str, List[Library]] = {}
    for library in libraries:
        if library.soname:
            by_key.setdefault(library_key(library.soname), []).append(library)
    for key, copies in sorted(by_key.items()):
        paths = sorted({os.path.realpath(c.path) for c in copies})
        if len(paths) > 1:
            findings.append(Finding("one copy", key, "one copy", " and ".join(paths)))
    shipped: Dict[str, List[Tuple[str, str]]] = {}
    for path, owner in owners.items():
        shipped.setdefault(os.path.basename(path), []).append((path, owner))
    trees = {os.path.dirname(path) for path in owners}
    allowed = [os.path.realpath(d) for d in allow_dirs]
    own = list(interpreter)
    for library in libraries:
        real = os.path.realpath(library.path)
        if library.owner is not None or _inside(real, own):
            continue
        name = library.soname or os.path.basename(real)
        packaged = sorted(
            {(p, o) for base, entries in shipped.items() if base == name or base.startswith(name + ".") for p, o in entries}
        )
        packaged = [(p, o) for p, o in packaged if p != real]
        if packaged and library.soname:
            findings.append(
                Finding(
                    "the packaged copy",
                    name,
                    "; ".join("%s (%s)" % (p, o) for p, o in packaged[:3]),
                    "%s (no package's)" % real,
                )
            )
        elif not _inside(os.path.dirname(real), trees) and not _inside(real, SYSTEM_DIRS) and not _inside(real, allowed):
            findings.append(
                Finding(
                    "inside the package trees",
                    name,
                    "a directory holding packaged files, a system library directory, or one in allow_dirs",
                    "%s (no package's)" % real,
                )
            )
    return findings


# torch's own libraries: a rank that imported torch maps them. Unless a package database owns them, no rule can
# say which copy of a library is the packaged one, and a pass would claim what was never judged.
TORCH_OWN = re.compile(r"^lib(torch|c10)[._-]")


def unjudged(libraries: List[Library]) -> Optional[str]:
    """Why the rules cannot be judged over ``libraries`` (None: they can): torch's own libraries mapped without a
    package database owning any of them (an image with the package databases removed, torch copied in by hand)."""
    own = [lib for lib in libraries if TORCH_OWN.match(os.path.basename(lib.path))]
    if not own:
        return "none of torch's own libraries (libtorch*, libc10*) is mapped: this rank's loaded libraries are not torch's"
    if all(lib.owner is None for lib in own):
        names = ", ".join(sorted({os.path.basename(lib.path) for lib in own})[:3])
        return (
            "no package database (pip's RECORD, dpkg, conda-meta) owns torch's own libraries (%s): which copy of a "
            "library is the packaged one cannot be told" % names
        )
    return None


def finding_text(finding: Finding) -> str:
    return "%s: %s: expected %s; loaded %s" % (finding.rule, finding.library, finding.expected, finding.seen)
