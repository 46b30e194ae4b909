"""distval_suite/libraries.py (torch-free): the maps, the ELF soname, the package databases and the three rules, on
this machine's own libraries and on made-up ones. Each rule is shown failing with the defect it names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distval_suite import libraries
from distval_suite.elf import soname as elf_soname
from distval_suite.libraries import Library, assess, library_key, mapped_paths

MAPS = """\
7f0000000000-7f0000001000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
7f0000001000-7f0000002000 r-xp 00001000 08:01 1234 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
7f0000003000-7f0000004000 r--p 00000000 08:01 99 /usr/lib/python3/dist-packages/torch/_C.cpython-313-x86_64-linux-gnu.so
7f0000005000-7f0000006000 r--p 00000000 08:01 77 /opt/shadow/libgomp.so.1 (deleted)
7f0000007000-7f0000008000 rw-p 00000000 00:00 0 [heap]
7f0000009000-7f000000a000 r--p 00000000 08:01 55 /usr/lib/locale/C.utf8/LC_CTYPE
7f000000b000-7f000000c000 r--s 00000000 00:05 3 /dev/shm/nccl-abc
"""


def test_the_maps_give_each_shared_object_once_in_order() -> None:
    assert mapped_paths(MAPS) == [
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0",
        "/usr/lib/python3/dist-packages/torch/_C.cpython-313-x86_64-linux-gnu.so",
        "/opt/shadow/libgomp.so.1",
    ]


def test_the_soname_is_read_from_the_elf_dynamic_section() -> None:
    libc = next(p for p in mapped_paths(Path("/proc/self/maps").read_text()) if os.path.basename(p).startswith("libc.so"))
    assert elf_soname(libc) == "libc.so.6"
    assert elf_soname(sys.executable) is None or not elf_soname(sys.executable).startswith("libc")  # type: ignore[union-attr]
    assert elf_soname(__file__) is None  # not ELF
    assert elf_soname("/nonexistent/libx.so") is None


def test_auditwheels_hash_suffix_is_the_same_library() -> None:
    assert library_key("libgomp-a34b3233.so.1") == library_key("libgomp.so.1") == "libgomp.so.1"
    assert library_key("libnccl.so.2") == "libnccl.so.2"


def test_this_processs_libraries_pass_the_rules() -> None:
    owners = libraries.package_files(sys.path)
    found = libraries.describe(mapped_paths(Path("/proc/self/maps").read_text()), owners)
    assert found and assess(found, owners, libraries.interpreter_dirs()) == []


OWNERS = {
    "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0": "dpkg:libgomp1",
    "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.6.0": "dpkg:python3-torch",
    "/venv/site-packages/torch/lib/libgomp-a34b3233.so.1": "pip:torch",
}


def _lib(path: str, soname: str | None) -> Library:
    return Library(path, soname, OWNERS.get(path))


def test_a_library_first_on_the_search_path_is_not_the_packaged_copy() -> None:
    found = [
        _lib("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.6.0", "libtorch_cpu.so.2.6"),
        _lib("/opt/shadow/libgomp.so.1", "libgomp.so.1"),
    ]
    (finding,) = assess(found, OWNERS)
    assert finding.rule == "the packaged copy" and finding.library == "libgomp.so.1"
    assert "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0 (dpkg:libgomp1)" in finding.expected
    assert finding.seen == "/opt/shadow/libgomp.so.1 (no package's)"


def test_two_copies_of_one_library_are_one_finding_whoever_vendored_them() -> None:
    found = [
        _lib("/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "libgomp.so.1"),
        _lib("/venv/site-packages/torch/lib/libgomp-a34b3233.so.1", "libgomp-a34b3233.so.1"),
    ]
    (finding,) = assess(found, OWNERS)
    assert (finding.rule, finding.library) == ("one copy", "libgomp.so.1")
    assert "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0 and /venv/site-packages/torch/lib/libgomp-a34b3233.so.1" in finding.seen


def test_a_library_from_outside_the_package_trees_fails_unless_allowed() -> None:
    found = [_lib("/opt/hpcx/ucx/lib/libucs.so.0.0.0", "libucs.so.0")]
    (finding,) = assess(found, OWNERS)
    assert finding.rule == "inside the package trees"
    assert assess(found, OWNERS, allow_dirs=["/opt/hpcx"]) == []
    # The system's own directories and the running Python's installation are package trees without a database.
    assert assess([_lib("/usr/lib64/libucs.so.0", "libucs.so.0")], OWNERS) == []
    assert assess([_lib("/usr/local/lib/libpython3.12.so.1.0", "libpython3.12.so.1.0")], OWNERS, ["/usr/local/lib"]) == []


SECOND_COPY = """
import ctypes, os, shutil, sys
sys.path.insert(0, sys.argv[1])
from distval_suite import libraries as l
original = next(p for p in l.mapped_paths(open("/proc/self/maps").read()) if os.path.basename(p).startswith("libffi"))
copy = os.path.join(sys.argv[2], os.path.basename(original))
shutil.copy(original, copy)
ctypes.CDLL(copy)
owners = l.package_files(sys.path)
found = l.describe(l.mapped_paths(open("/proc/self/maps").read()), owners)
print(bool(owners.get(os.path.realpath(original))))
print("\\n".join(f.rule for f in l.assess(found, owners, l.interpreter_dirs())))
"""


def test_the_rules_find_a_real_second_copy_loaded_by_path(tmp_path: Path) -> None:
    """A real process: a copy of a library ctypes mapped (libffi), loaded again by its path, is a second copy (glibc
    shares a library by soname only for names without a slash) and is not the packaged copy."""
    done = subprocess.run(
        [sys.executable, "-c", SECOND_COPY, str(Path(__file__).parents[2]), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    owned, *rules = done.stdout.splitlines()
    assert "one copy" in rules, done.stdout
    if owned == "True":  # a package database owns libffi here: the copy is not the packaged one either
        assert "the packaged copy" in rules, done.stdout


def test_the_gpu_drivers_libraries_are_the_hosts() -> None:
    """The container runtime mounts the host driver's libcuda and libnvidia-ml (measured on an H200 machine, in
    /usr/local/nvidia/lib64, no package's): listed as the host driver's, not judged as the image's."""
    paths = ["/usr/local/nvidia/lib64/libcuda.so.580.159.04", "/usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04"]
    found = libraries.describe(paths, {})
    assert [lib.owner for lib in found] == ["host driver", "host driver"]
    assert assess(found, {}) == []
    assert libraries.describe(["/opt/x/libcudart.so.13"], {})[0].owner is None  # the CUDA runtime is the image's


def test_the_rules_are_not_judged_without_torchs_libraries_owned() -> None:
    owned = Library("/usr/lib/python3/dist-packages/torch/lib/libc10.so", "libc10.so", "dpkg:libtorch2.6")
    unowned = owned._replace(owner=None)
    other = Library("/usr/lib/x86_64-linux-gnu/libgomp.so.1", "libgomp.so.1", "dpkg:libgomp1")
    assert libraries.unjudged([other, owned]) is None
    assert "no package database" in (libraries.unjudged([other, unowned]) or "")
    assert "libc10.so" in (libraries.unjudged([other, unowned]) or "")
    assert "none of torch's own libraries" in (libraries.unjudged([other]) or "")


def test_this_processs_torch_libraries_are_judged() -> None:
    # The guard can pass: this venv's torch is pip's, its RECORD owns libtorch* and libc10*.
    torch = pytest.importorskip("torch")
    assert torch is not None
    with open("/proc/self/maps", encoding="utf-8") as f:
        found = libraries.describe(mapped_paths(f.read()), libraries.package_files(sys.path))
    assert libraries.unjudged(found) is None
