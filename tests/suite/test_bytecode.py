"""distval_suite.bytecode on real .pyc files that py_compile writes: each header kind, fresh and stale, and the
verdict. Torch-free, so it runs on the host (the Docker test runs the check on the fixture images)."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distval_suite import bytecode
from distval_suite.bytecode import FRESH, MISSING, RECOMPILED, STALE, UNREADABLE
from tests.paths import ROOT

TIMESTAMP = py_compile.PycInvalidationMode.TIMESTAMP
CHECKED = py_compile.PycInvalidationMode.CHECKED_HASH
UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH
# A source mtime well in the past, so that the .pyc files written now are "after" it.
SOURCE_MTIME = 1_700_000_000


def source(directory: Path, name: str = "mod.py", text: str = "x = 1\n") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (SOURCE_MTIME, SOURCE_MTIME))
    return path


def compiled(path: Path, mode: py_compile.PycInvalidationMode = TIMESTAMP) -> Path:
    pyc = py_compile.compile(str(path), doraise=True, invalidation_mode=mode)
    assert pyc == importlib.util.cache_from_source(str(path))
    return Path(pyc)


def state_of(path: Path, written_since: float | None = None) -> bytecode.PycState:
    return bytecode.classify(str(path), written_since)


@pytest.mark.parametrize("mode", [TIMESTAMP, CHECKED, UNCHECKED], ids=["timestamp", "checked-hash", "unchecked-hash"])
def test_a_freshly_compiled_pyc_is_fresh(tmp_path: Path, mode: py_compile.PycInvalidationMode) -> None:
    path = source(tmp_path)
    compiled(path, mode)
    assert state_of(path).state == FRESH


def test_a_timestamp_pyc_is_stale_once_its_source_mtime_changes(tmp_path: Path) -> None:
    path = source(tmp_path)
    compiled(path)
    clamped = SOURCE_MTIME + 86400  # what mtime clamping or touch does to the source after compiling
    os.utime(path, (clamped, clamped))
    state = state_of(path)
    assert (state.state, state.reason, state.source_mtime, state.header_mtime) == (STALE, "mtime", clamped, SOURCE_MTIME)
    assert bytecode.describe(state) == (
        f"{path} (stale: source mtime 2023-11-15 22:13:20 UTC, its .pyc header says 2023-11-14 22:13:20 UTC)"
    )


def test_a_timestamp_pyc_is_stale_when_only_the_size_changed(tmp_path: Path) -> None:
    path = source(tmp_path)
    compiled(path)
    path.write_text("x = 12\n", encoding="utf-8")
    os.utime(path, (SOURCE_MTIME, SOURCE_MTIME))
    state = state_of(path)
    assert (state.state, state.reason) == (STALE, "its source's size differs from the one in the .pyc header")


def test_a_checked_hash_pyc_is_stale_when_the_source_bytes_change_and_fresh_whatever_the_mtime(tmp_path: Path) -> None:
    path = source(tmp_path)
    compiled(path, CHECKED)
    os.utime(path, (SOURCE_MTIME + 86400, SOURCE_MTIME + 86400))
    assert state_of(path).state == FRESH  # the point of hash-based .pyc: mtimes do not matter
    path.write_text("x = 2\n", encoding="utf-8")  # same size, other bytes
    state = state_of(path)
    assert (state.state, state.reason) == (STALE, "its source's hash differs from the one in the .pyc header")


def test_an_unchecked_hash_pyc_is_fresh_even_when_the_source_changed(tmp_path: Path) -> None:
    # Python uses it as it is (the default --check-hash-based-pycs): nothing is compiled again.
    path = source(tmp_path)
    compiled(path, UNCHECKED)
    path.write_text("x = 2\n", encoding="utf-8")
    assert state_of(path).state == FRESH


def test_a_source_without_pyc_is_missing(tmp_path: Path) -> None:
    path = source(tmp_path)
    state = state_of(path)
    assert (state.state, state.reason) == (MISSING, f"no {Path(importlib.util.cache_from_source(str(path))).name}")


@pytest.mark.parametrize(
    ("header", "state", "reason"),
    [
        (b"", UNREADABLE, "its header is 0 bytes, not 16"),
        (importlib.util.MAGIC_NUMBER + b"\0\0", UNREADABLE, "its header is 6 bytes, not 16"),
        (importlib.util.MAGIC_NUMBER + (4).to_bytes(4, "little") + bytes(8), UNREADABLE, "its header has invalid flags 0x4"),
        # check_source without hash_based: importlib reads it as timestamp-based (mtime 0 here)
        (importlib.util.MAGIC_NUMBER + (2).to_bytes(4, "little") + bytes(8), STALE, "mtime"),
        (b"garbage header!!", STALE, "compiled by another Python"),
    ],
    ids=["empty", "short", "unknown-flag", "check-source-only", "bad-magic"],
)
def test_a_garbage_header_is_never_fresh(tmp_path: Path, header: bytes, state: str, reason: str) -> None:
    path = source(tmp_path)
    pyc = compiled(path)
    pyc.write_bytes(header + b"\0" * 32 if len(header) == 16 else header)
    found = state_of(path)
    assert found.state == state and found.reason.startswith(reason), found


def test_an_unreadable_pyc(tmp_path: Path) -> None:
    # A directory where the .pyc should be: open() fails for root too (a mode of 0 would not).
    path = source(tmp_path)
    pyc = compiled(path)
    pyc.unlink()
    pyc.mkdir()
    found = state_of(path)
    assert found.state == UNREADABLE and found.reason.startswith(f"cannot read {pyc.name}: "), found


def test_a_pyc_written_after_the_launch_started_counts_as_recompiled(tmp_path: Path) -> None:
    path = source(tmp_path)
    pyc = compiled(path)
    written = pyc.stat().st_mtime
    assert state_of(path, written_since=written - 1).state == RECOMPILED
    assert state_of(path, written_since=written + 1).state == FRESH
    assert state_of(path, written_since=None).state == FRESH


def test_python_itself_agrees_stale_is_recompiled_and_fresh_is_not(tmp_path: Path) -> None:
    """The classification is what the interpreter does: it rewrites the stale .pyc and keeps the fresh one."""
    stale, fresh = source(tmp_path, "stale_mod.py"), source(tmp_path, "fresh_mod.py")
    stale_pyc, fresh_pyc = compiled(stale), compiled(fresh)
    os.utime(stale, (SOURCE_MTIME + 60, SOURCE_MTIME + 60))
    # Both .pyc files look old, so a rewrite shows in their mtimes.
    for pyc in (stale_pyc, fresh_pyc):
        os.utime(pyc, (SOURCE_MTIME, SOURCE_MTIME))
    assert (state_of(stale).state, state_of(fresh).state) == (STALE, FRESH)
    before = time.time() - 1
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run([sys.executable, "-c", "import stale_mod, fresh_mod"], cwd=tmp_path, env=environment, check=True, timeout=60)
    assert (state_of(stale, before).state, state_of(fresh, before).state) == (RECOMPILED, FRESH)


def package(tmp_path: Path) -> Path:
    """pkg/ with 20 modules: 17 fresh, one of each other state; a stray .pyc-only module and a data file."""
    root = tmp_path / "pkg"
    for index in range(17):
        compiled(source(root, f"sub{index % 3}/fresh{index}.py"))
    compiled(source(root, "__init__.py"))  # the 18th fresh one
    stale = source(root, "sub0/stale.py")
    compiled(stale)
    os.utime(stale, (SOURCE_MTIME + 3600, SOURCE_MTIME + 3600))
    source(root, "sub1/missing.py")
    (root / "data.json").write_text("{}", encoding="utf-8")
    (root / "__pycache__" / "orphan.cpython-39.pyc").write_bytes(b"x")
    return root


def test_survey_counts_every_module_once(tmp_path: Path) -> None:
    root = package(tmp_path)
    result = bytecode.survey(str(root))
    assert result.counts == {FRESH: 18, STALE: 1, MISSING: 1, UNREADABLE: 0, RECOMPILED: 0}
    assert (result.total, result.not_fresh, result.mtime_stale) == (20, 2, 1)
    assert [s.source for s in result.examples[STALE]] == [os.path.join("pkg", "sub0", "stale.py")]
    assert [s.source for s in result.examples[MISSING]] == [os.path.join("pkg", "sub1", "missing.py")]


def test_verdict_passes_at_the_limit_and_fails_above_it(tmp_path: Path) -> None:
    result = bytecode.survey(str(package(tmp_path)))  # 2 of 20 not fresh: 10%
    assert bytecode.verdict(result, "pkg", 0.10) is None
    assert bytecode.summary(result, "pkg").startswith(
        "18 of 20 pkg .pyc fresh (1 stale (their source's mtime differs), 1 missing: pkg/sub0/stale.py (stale: source mtime "
        "2023-11-14 23:13:20 UTC, its .pyc header says 2023-11-14 22:13:20 UTC)) in "
    )
    message = bytecode.verdict(result, "pkg", 0.05)
    assert message == (
        "expected pkg's bytecode to match its sources (at most 5% stale or missing); 2 of 20 .pyc files are not: "
        "1 stale (their source's mtime differs), 1 missing; e.g. pkg/sub0/stale.py (stale: source mtime "
        "2023-11-14 23:13:20 UTC, its .pyc header says 2023-11-14 22:13:20 UTC): every fresh container compiles pkg's "
        "Python again on import"
    )
    unwritable = bytecode.verdict(result, "pkg", 0.0, "PYTHONDONTWRITEBYTECODE is set")
    assert unwritable == message.replace("5%", "0%") + " (here every process does: PYTHONDONTWRITEBYTECODE is set)"


def test_unwritable_reason_names_the_setting_and_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    assert bytecode.unwritable_reason(str(tmp_path)) is None
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode.unwritable_reason(str(tmp_path)) == "sys.dont_write_bytecode"
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert bytecode.unwritable_reason(str(tmp_path)) == "PYTHONDONTWRITEBYTECODE is set"
    missing = tmp_path / "gone"  # os.access is False for a directory that is not there, for root too
    assert bytecode.unwritable_reason(str(missing)) == f"PYTHONDONTWRITEBYTECODE is set, {missing} is not writable"


def test_verdict_counts_recompiled_ones_as_not_fresh(tmp_path: Path) -> None:
    root = package(tmp_path)
    result = bytecode.survey(str(root), written_since=time.time() - 3600)  # every .pyc was written "since"
    assert result.counts[RECOMPILED] == 18 and result.counts[FRESH] == 0
    message = bytecode.verdict(result, "pkg", 0.5)
    assert message is not None and "20 of 20 .pyc files are not: 1 stale (their source's mtime differs), 1 missing, " in message
    assert "18 recompiled by this launch's own imports (stale or missing in the image)" in message


def test_an_empty_directory_fails(tmp_path: Path) -> None:
    result = bytecode.survey(str(tmp_path))
    assert bytecode.verdict(result, "pkg", 1.0) == (f"expected pkg's Python sources under {tmp_path}; found no .py file")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_launch_started_at_is_before_this_process_wrote_anything(tmp_path: Path) -> None:
    started = bytecode.launch_started_at()
    assert started is not None
    # This process (pytest) started before the test, and not before the machine booted.
    with open("/proc/uptime", encoding="ascii") as handle:
        booted = time.time() - float(handle.read().split()[0])
    assert booted - 1 <= started <= time.time()
    written = tmp_path / "now"
    written.write_bytes(b"")
    assert written.stat().st_mtime >= started


# A parent that waits, then starts a child that says when its launch started: the parent's own start
# counts only when it is a torch launcher (its script is named torchrun), as torchrun's agent is.
PARENT = """
import subprocess, sys, time
print(time.time(), flush=True)
time.sleep(1.5)
child = "import sys; sys.path.insert(0, sys.argv[1]); from distval_suite import bytecode; print(bytecode.launch_started_at())"
subprocess.run([sys.executable, "-c", child, sys.argv[1]], check=True)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("script", ["torchrun", "other"])
def test_launch_started_at_is_the_launchers_start(tmp_path: Path, script: str) -> None:
    (tmp_path / script).write_text(PARENT, encoding="utf-8")
    root = str(ROOT)
    before = time.time()
    output = subprocess.run(
        [sys.executable, str(tmp_path / script), root], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    parent_started, launch_started = float(output[0]), float(output[1])
    if script == "torchrun":
        # The parent's start: after this test spawned it (at the clock tick's 10 ms resolution), and before its
        # first line ran (however long the interpreter took to get there on a loaded machine).
        assert before - 0.02 <= launch_started <= parent_started, output
    else:
        assert launch_started >= parent_started + 1.4, output
