"""distval_suite/survey.py (torch-free): the survey of the image's files beside the checks gives exactly what reading
everything at check time gives; a file replaced since, a library mapped since, another search path or a survey that
failed is read by the check itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from distval_suite import environment, libraries, survey
from distval_suite.survey import Survey


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A reader library (libgomp: no ELF sections, all of it is read), a library nobody reads, a package reading one name."""
    library = tmp_path / "libgomp.so.1"
    library.write_bytes(b"\0OMP_NUM_THREADS\0xNCCL_ALGO\0OMP_PLACES\0")
    other = tmp_path / "libz.so.1"
    other.write_bytes(b"\0NCCL_ALGO\0")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "reads.py").write_text("import os\nos.environ.get('TORCH_SHOW_CPP_STACKTRACES')\n")
    return library, other, package


def test_the_survey_gives_what_the_checks_would_read(tmp_path: Path) -> None:
    library, other, package = _files(tmp_path)
    mapped = [str(library), str(other)]
    surveyed = Survey(str(package), sys.path, mapped).start()
    surveyed.wait()
    assert surveyed.error is None
    assert surveyed.names_in_libraries(mapped) == environment.names_in_libraries(mapped)
    assert surveyed.python_names(str(package)) == environment.names_in_python(str(package)) == {"TORCH_SHOW_CPP_STACKTRACES"}
    assert surveyed.package_files(sys.path) == libraries.package_files(sys.path)


def test_what_changed_since_the_survey_is_read_again(tmp_path: Path) -> None:
    library, _other, package = _files(tmp_path)
    surveyed = Survey(str(package), sys.path, [str(library)]).start()
    surveyed.wait()
    # The same path, another file (a new inode, another size): its own names, not the surveyed ones.
    replacement = tmp_path / "new"
    replacement.write_bytes(b"\0OMP_DYNAMIC\0")
    os.replace(replacement, library)
    later = tmp_path / "libnccl.so.2"  # mapped after the survey started
    later.write_bytes(b"\0NCCL_DEBUG\0")
    names, scanned = surveyed.names_in_libraries([str(library), str(later)])
    assert names == {"OMP_DYNAMIC", "NCCL_DEBUG"} and scanned == sorted([str(library), str(later)])
    elsewhere = tmp_path / "other-pkg"
    elsewhere.mkdir()
    (elsewhere / "r.py").write_text("os.getenv('NCCL_DEBUG')\n")
    assert surveyed.python_names(str(elsewhere)) == {"NCCL_DEBUG"}
    assert surveyed.package_files([str(tmp_path)]) == libraries.package_files([str(tmp_path)])


def test_a_failed_survey_leaves_everything_to_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library, _other, package = _files(tmp_path)

    def broken(paths: object) -> dict[str, str]:
        raise OSError("unreadable")

    monkeypatch.setattr(survey.libraries, "package_files", broken)
    surveyed = Survey(str(package), sys.path, [str(library)]).start()
    surveyed.wait()
    assert surveyed.error == "OSError: unreadable"
    monkeypatch.undo()
    # The library (read before the failure) is kept; the rest is read now.
    assert surveyed.names_in_libraries([str(library)]) == ({"OMP_NUM_THREADS", "OMP_PLACES"}, [str(library)])
    assert surveyed.python_names(str(package)) == {"TORCH_SHOW_CPP_STACKTRACES"}
    assert surveyed.package_files(sys.path) == libraries.package_files(sys.path)


def test_a_survey_never_started_reads_everything_when_asked(tmp_path: Path) -> None:
    library, _other, package = _files(tmp_path)
    unstarted = Survey("", (), ())
    unstarted.wait()  # returns at once
    assert unstarted.names_in_libraries([str(library)]) == environment.names_in_libraries([str(library)])
    assert unstarted.python_names(str(package)) == {"TORCH_SHOW_CPP_STACKTRACES"}
    assert unstarted.package_files(sys.path) == libraries.package_files(sys.path)


def test_an_unreadable_library_is_not_counted_as_read(tmp_path: Path) -> None:
    empty = tmp_path / "libtorch_cpu.so"
    empty.write_bytes(b"")  # mmap refuses an empty file: unreadable, as at check time
    surveyed = Survey(str(tmp_path), (), [str(empty)]).start()
    surveyed.wait()
    assert surveyed.names_in_libraries([str(empty)]) == (set(), []) == environment.names_in_libraries([str(empty)])
