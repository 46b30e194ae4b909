"""The local kind's ``distval doctor`` (``--local``): the local Python (--python, else python3 on PATH) and its torch,
probed by ``distval_suite/image_probe.py`` run by that Python, and the report directory's disk. Its checks are
declared once in CHECKS; what every kind's doctor shares is distval/doctor/'s."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from distval.config.keys import DEFAULT_PYTHON
from distval.doctor.checks import REPORT_DISK, DoctorCheck, Finding, Line, check_report_disk
from distval.doctor.torch_probe import PROBE_MODULE, PROBE_TIMEOUT_S, TorchFacts, quoted, read_answer, torch_finding
from distval.errors import EnvironmentUnusable
from distval.targets.docker.runtime import suite_dir
from distval.targets.kind import FLAG, DoctorCommand, DoctorEngine, TargetOption, TargetOptions
from distval.targets.local.runtime import find_python


def probe_local(python: str, timeout_s: float = PROBE_TIMEOUT_S) -> TorchFacts | str:
    """The probe run by a local Python, from the directory that holds distval_suite (``-m`` puts it first on the path;
    the user's PYTHONPATH stays, as a local run keeps it)."""
    try:
        done = subprocess.run(
            [python, "-m", PROBE_MODULE],
            cwd=Path(suite_dir()).parent,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"{python} -m {PROBE_MODULE} did not finish within {timeout_s:g} s"
    except OSError as exc:
        return f"cannot run {python}: {quoted(exc.strerror or str(exc))}"
    return read_answer(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


@dataclass
class Doctor:
    """What the local kind's ``distval doctor`` looks at."""

    python: str | None = None  # --python
    report_dir: str = "."
    _local: TorchFacts | str | None = field(default=None, repr=False)
    _python: str | None = field(default=None, repr=False)

    def local_probe(self) -> tuple[str, TorchFacts | str]:
        """(the local Python, its probe's facts or why there are none), measured once; EnvironmentUnusable when
        no Python is found."""
        if self._python is None:
            self._python = find_python(self.python or DEFAULT_PYTHON, "--python" if self.python else "the python")
        if self._local is None:
            self._local = probe_local(self._python)
        return self._python, self._local


@dataclass(frozen=True, kw_only=True)
class LocalCheck(DoctorCheck):
    function: Callable[[Doctor], Finding]


def check_python(doctor: Doctor) -> Finding:
    try:
        python, answer = doctor.local_probe()
    except EnvironmentUnusable as exc:
        return Finding("fail", str(exc), "give the Python whose torch should run the scenarios: --python PATH")
    if isinstance(answer, str):
        return Finding("fail", f"{python}: {answer}", "give a working Python: --python PATH")
    return Finding("ok", f"{python} (Python {answer.python_version})")


def check_python_torch(doctor: Doctor) -> Finding:
    try:
        python, answer = doctor.local_probe()
    except EnvironmentUnusable:
        return Finding("skip", "no Python (see the python check)")
    return torch_finding(answer, f"in {python}", python)


CHECKS: tuple[LocalCheck, ...] = (
    LocalCheck(name=REPORT_DISK.name, what=REPORT_DISK.what, function=lambda doctor: check_report_disk(doctor.report_dir)),
    LocalCheck(name="python", function=check_python, what="--local: the Python found (--python, else python3 on PATH)"),
    LocalCheck(
        name="python-torch",
        function=check_python_torch,
        what="--local: import torch in that Python: its version, CUDA build, gloo and nccl",
    ),
)


def lines(options: TargetOptions, _connect: DoctorEngine) -> Iterator[Line]:
    """Every check once, in CHECKS' order (no Engine is reached)."""
    doctor = Doctor(options.get("python"))
    for check in CHECKS:
        yield Line(check.name, "", check.function(doctor))


DOCTOR = DoctorCommand(
    runs="--local",
    heading=lambda _options: "without Docker (--local)",
    checks=CHECKS,
    lines=lines,
    options=(
        TargetOption(
            "--local",
            "local",
            "check running without Docker instead: the local Python and its torch",
            kind=FLAG,
            default=False,
        ),
        TargetOption("--python", "python", "with --local: the Python to check (default: python3 on PATH)", metavar="PATH"),
    ),
    refuses=(
        (("image",), "doctor --local checks the local Python: --image and --hosts go without --local"),
        (("hosts",), "doctor --local checks the local Python: --image and --hosts go without --local"),
    ),
    needs_it=(("python", "doctor --python goes with --local (in an image, the python is the scenarios' python3)"),),
)
