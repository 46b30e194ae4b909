"""What the benchmark scripts share: the docker CLI, labels, and finding the distval executable.

The benchmarks launch containers by hand with the docker CLI (the baseline distval is compared with);
imported as ``common`` because each script runs as ``python benchmarks/<script>.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.plan import LABEL_MANAGED, LABEL_RUN

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKER_CALL_TIMEOUT_S = 120.0


class BenchError(RuntimeError):
    """A benchmark step failed: the numbers would be meaningless, so the benchmark stops."""


def docker(*args: str, stdin_data: bytes | None = None, timeout: float = DOCKER_CALL_TIMEOUT_S) -> bytes:
    """Run one docker CLI command; its stdout, or BenchError with its stderr."""
    try:
        proc = subprocess.run(["docker", *args], input=stdin_data, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"docker {' '.join(args)}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise BenchError(f"docker {' '.join(args)} exited {proc.returncode}: {message}")
    return proc.stdout


def label_args(labels: Sequence[tuple[str, str]], run_id: str) -> list[str]:
    merged = dict(labels)
    # The plan already carries both; make sure regardless, so that nothing can leak unlabelled.
    merged[LABEL_MANAGED] = "true"
    merged[LABEL_RUN] = run_id
    args: list[str] = []
    for key, value in merged.items():
        args += ["--label", f"{key}={value}"]
    return args


def distval_executable(explicit: str | None) -> str:
    """The distval console script next to this interpreter (no pyenv shim in between), else the one on PATH."""
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "distval"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("distval")
    if found is None:
        raise BenchError("no distval executable: install the project (pip install -e .) or pass --distval")
    return found
