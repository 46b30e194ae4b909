"""A virtual environment with torch from PyPI for this host's Python: the local torch that the host-mode
tests run distval against (``distval run --host --python <venv>/bin/python``).

On Linux, PyPI's torch is the CUDA build, with its nvidia-* wheels. The wheels are downloaded once into
the distval cache (``~/.cache/distval/wheels/host-<key>``), reusing the interpreter-independent wheels
(``py3-none``: the nvidia-* ones) that the torch 2.15 fixture image already downloaded, and installed
into ``~/.cache/distval/host-venvs/<key>``. The key is the content of the request (Python version,
machine, requirements), so later sessions reuse both; a lock file serialises concurrent builders.

Run as a script (``python -m tests.host_venv``) it builds the environment and prints its python.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# The distval cache, which the fixture wheels live under (distval.images imports no docker-py).
from distval.images import cache_dir

REQUIREMENTS = ("torch==2.15.0", "numpy")  # numpy: torch's object collectives need it
FORMAT = 1  # bump when the layout of what is built changes
Progress = Callable[[str], None]


def _glibc_minor() -> int:
    version = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 2.17"  # e.g. "glibc 2.36"
    return int(version.split()[-1].split(".")[1])


def _platforms() -> list[str]:
    # Every manylinux tag this host's glibc accepts: torch >= 2.13 pins nvidia-* wheels that are
    # published under several of them, and the mirror resolves the pins only when all are allowed.
    machine = platform.machine()
    return [f"linux_{machine}", f"manylinux2014_{machine}"] + [
        f"manylinux_2_{minor}_{machine}" for minor in range(17, max(_glibc_minor(), 17) + 1)
    ]


def key() -> str:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    payload = [FORMAT, python, sys.implementation.name, platform.machine(), _platforms(), *REQUIREMENTS]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:12]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # another session building the same key: wait for it
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: list[str], progress: Progress) -> None:
    progress("$ " + " ".join(command))
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} ... failed (exit {result.returncode}): {result.stdout[-2000:]}")


def _seed_from_other_downloads(target: Path, progress: Progress) -> None:
    """Hard-link interpreter-independent wheels already in the cache (the 2.15 fixture's nvidia-*):
    pip download then finds them in --dest and does not download them again."""
    seeded = 0
    for other in sorted((cache_dir() / "wheels").glob("*/*-py3-none-*.whl")):
        if other.parent == target or (target / other.name).exists():
            continue
        try:
            os.link(other, target / other.name)
        except OSError:
            shutil.copy2(other, target / other.name)
        seeded += 1
    if seeded:
        progress(f"reusing {seeded} cached interpreter-independent wheel(s)")


def download_wheels(progress: Progress) -> Path:
    target = cache_dir() / "wheels" / f"host-{key()}"
    if (target / ".complete").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    _seed_from_other_downloads(target, progress)
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--implementation", "cp"]
    command += ["--python-version", f"{sys.version_info.major}.{sys.version_info.minor}", "--dest", str(target)]
    for name in _platforms():
        command += ["--platform", name]
    _run(command + list(REQUIREMENTS), progress)
    (target / ".complete").write_text("\n".join(REQUIREMENTS) + "\n")
    return target


def torch_venv(progress: Progress = lambda line: None) -> Path:
    """The venv's python, built when missing (downloads: a few GB the first time)."""
    root = cache_dir() / "host-venvs" / key()
    python = root / "bin" / "python"
    done = root / ".complete"
    if done.exists():
        return python
    with _locked(root.with_name(root.name + ".lock")):
        if done.exists():
            return python
        started = time.monotonic()
        wheels = download_wheels(progress)
        if root.exists():  # a build cut short: start again
            shutil.rmtree(root)
        # Built in place (a venv is not relocatable); .complete is written last.
        _run([sys.executable, "-m", "venv", str(root)], progress)
        _run([str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), *REQUIREMENTS], progress)
        done.write_text(f"built in {time.monotonic() - started:.0f} s\n")
    return python


if __name__ == "__main__":
    print(torch_venv(lambda line: print(line, file=sys.stderr, flush=True)))
