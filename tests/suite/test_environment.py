"""distval_suite/environment.py (torch-free): the image's variables, the names its libraries read, and the findings:
a misspelt name and a harmful one each fail, an unread one is a note, distval's own are never judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from distval_suite import environment
from distval_suite.environment import HARMFUL, Variable, assess, edits, image_variables, intended

KNOWN = {"NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL", "NCCL_ALGO", "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS", "NCCL_IB_HCA"}


def _image(**variables: str) -> list[Variable]:
    return [Variable(name, value, "image") for name, value in variables.items()]


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("NCCL_SOCKET_IFNAM", "NCCL_SOCKET_IFNAME"),  # a dropped letter
        ("CCL_NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL"),  # the prefix's first letter (podman-hpc #136)
        ("GLOO_SOCKET_INFAME", "GLOO_SOCKET_IFNAME"),  # two letters swapped: two edits
        ("OMP_NUM_THREAD", "OMP_NUM_THREADS"),
        ("NCCL_DEBUG_FILE", None),  # far from every known name
        ("PATH", None),  # short
        ("NCCL_IB_HCA", None),  # known: not a misspelling of anything
    ],
)
def test_the_intended_name_is_one_or_two_edits_away(name: str, meant: str | None) -> None:
    assert intended(name, KNOWN - {name}) == meant


def test_a_name_outside_the_families_is_judged_only_one_edit_away() -> None:
    assert intended("CCL_NET_GDR_LEVE", KNOWN) is None  # two edits, no family prefix: no guess
    assert edits("kitten", "sitting", 5) == 3 and edits("abc", "abcdef", 2) == 3


def test_misspelt_and_harmful_variables_fail_unread_ones_are_notes() -> None:
    found = assess(
        _image(NCCL_SOCKET_IFNAM="eth0", NCCL_ALGO="Tree", NCCL_FANCY_NEW_THING="1", OMP_NUM_THREADS="4", LANG="C.UTF-8"),
        KNOWN,
        HARMFUL,
    )
    assert [(f.kind, f.name) for f in found] == [
        ("misspelt", "NCCL_SOCKET_IFNAM"),
        ("harmful", "NCCL_ALGO"),
        ("unread", "NCCL_FANCY_NEW_THING"),
    ]
    assert found[0].text == "NCCL_SOCKET_IFNAM (image) is read by nothing in this image; did you mean NCCL_SOCKET_IFNAME?"
    assert "NCCL_ALGO=Tree (image)" in found[1].text


def test_allowed_variables_are_not_judged() -> None:
    assert assess(_image(NCCL_ALGO="Tree", NCCL_SOCKET_IFNAM="x"), KNOWN, HARMFUL, allow=["NCCL_ALGO", "NCCL_SOCKET_IFNAM"]) == []


def test_the_image_variables_leave_out_distvals_own_and_add_the_config_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("# NCCL's config\nCCL_NET_GDR_LEVEL = PHB\n\nnot a setting\n")
    monkeypatch.setattr(environment, "CONFIG_FILES", (str(conf), str(tmp_path / "absent.conf")))
    found = image_variables(
        {"NCCL_ALGO": "Tree", "DISTVAL_RUN_ID": "r1", "PYTHONUNBUFFERED": "1"}, ["DISTVAL_RUN_ID", "PYTHONUNBUFFERED"]
    )
    assert found == [Variable("NCCL_ALGO", "Tree", "image"), Variable("CCL_NET_GDR_LEVEL", "PHB", str(conf))]
    # Listed in the report: the families, the loader's variables, and whatever a config file sets.
    assert [v.name for v in found if environment.listed(v)] == ["NCCL_ALGO", "CCL_NET_GDR_LEVEL"]
    assert not environment.listed(Variable("LANG", "C", "image"))
    assert environment.listed(Variable("LD_LIBRARY_PATH", "/opt", "image"))


def test_the_first_processs_environment_is_read_from_proc() -> None:
    mine = environment.environ_of("/proc/self/environ")
    assert mine.get("PATH") == __import__("os").environ.get("PATH")


def test_names_come_from_the_libraries_read_only_data_and_from_python_files(tmp_path: Path) -> None:
    """A library's strings name what it reads: here a file named like a reader library (libgomp, which has no ELF
    sections, so all of it is read) and a Python package whose files read the environment."""
    library = tmp_path / "libgomp.so.1"
    library.write_bytes(b"\0OMP_NUM_THREADS\0GOMP_SPINCOUNT\0xNCCL_ALGO\0OMP_PLACES\0")
    names, scanned = environment.names_in_libraries([str(library), str(tmp_path / "libz.so.1")])
    assert names == {"OMP_NUM_THREADS", "OMP_PLACES"} and scanned == [str(library)]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "reads.py").write_text("import os\nos.environ.get('TORCH_SHOW_CPP_STACKTRACES')\n")
    (package / "mentions.py").write_text("# TORCH_NOT_READ_HERE\n")
    assert environment.names_in_python(str(package)) == {"TORCH_SHOW_CPP_STACKTRACES"}


def test_names_are_read_from_a_real_librarys_read_only_sections() -> None:
    """A real ELF reader library: GCC's OpenMP runtime names OMP_NUM_THREADS in its .rodata (the sections are found
    through the section table; the Docker tests read the fixtures' torch, gloo and NCCL)."""
    libgomp = Path("/usr/lib/x86_64-linux-gnu/libgomp.so.1")
    if not libgomp.exists():
        pytest.skip("no libgomp on this machine")
    names, scanned = environment.names_in_libraries([str(libgomp)])
    assert {"OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES"} <= names and scanned == [str(libgomp)]


def test_a_file_a_variable_names_is_described(tmp_path: Path) -> None:
    topology = tmp_path / "topo.xml"
    topology.write_text("<system/>")
    facts = environment.describe_file(str(topology))
    assert facts["exists"] is True and facts["size"] == 9 and len(str(facts["sha256"])) == 64
    assert environment.describe_file(str(tmp_path / "none.xml")) == {"path": str(tmp_path / "none.xml"), "exists": False}


def test_without_torchs_libraries_read_the_names_are_not_judged() -> None:
    assert environment.unread_libraries(["/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so"]) is None
    assert environment.unread_libraries(["/usr/lib/x86_64-linux-gnu/libc10.so.2.6"]) is None
    missing = environment.unread_libraries(["/usr/lib/x86_64-linux-gnu/libgomp.so.1"])
    assert missing is not None and "libgomp.so.1" in missing
    assert "read: nothing" in (environment.unread_libraries([]) or "")


def test_a_name_ending_with_a_star_leaves_out_a_schedulers_family() -> None:
    """Slurm sets SLURM_* in every step: the target names them by prefix (distval/targets/slurm/export.py)."""
    found = image_variables({"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "c1", "NCCL_ALGO": "Tree", "SLURMX": "1"}, ["SLURM_*"])
    assert [v.name for v in found if v.source == "image"] == ["NCCL_ALGO", "SLURMD_NODENAME", "SLURMX"]
