"""What ``distval doctor`` learns of this machine without an Engine: the compose programs on PATH and free disk space."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from distval.escape import terminal_line

# `--version` answers at once; a program that hangs longer than this (a wrapper waiting for something) counts as
# not working.
VERSION_TIMEOUT_S = 5.0
VERSION_MAX_CHARS = 120
# The two ways compose is installed: v1 (and v2's standalone binary) as docker-compose, v2 as a plugin of the CLI.
COMPOSE_COMMANDS: tuple[tuple[str, ...], ...] = (("docker-compose", "--version"), ("docker", "compose", "--version"))

GIB = 2**30
MIB = 2**20


def program_version(argv: Sequence[str], timeout_s: float | None = None) -> str | None:
    """The first line ``argv`` prints (escaped, short) when its program is on PATH and exits 0 within ``timeout_s``
    (default VERSION_TIMEOUT_S); None otherwise."""
    timeout_s = VERSION_TIMEOUT_S if timeout_s is None else timeout_s
    program = shutil.which(argv[0])
    if program is None:
        return None
    try:
        done = subprocess.run([program, *argv[1:]], stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    line = terminal_line(lines[0])
    return line if len(line) <= VERSION_MAX_CHARS else line[:VERSION_MAX_CHARS] + "..."


def compose_versions() -> dict[str, str]:
    """Each compose command found working, by how it is called, with the version line it printed."""
    found = {}
    for argv in COMPOSE_COMMANDS:
        version = program_version(argv)
        if version is not None:
            found[" ".join(argv[:-1])] = version
    return found


def free_bytes(path: str) -> int | None:
    """Free space for an unprivileged user under ``path``; None where it cannot be read."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def size_text(count: int) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB else f"{count / MIB:.0f} MiB"
