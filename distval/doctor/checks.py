"""What every kind's ``distval doctor`` shares: a check as declared (its name, what it looks at), its finding, a line
of the output, the exit code, how free disk space is judged (the report directory's check is every kind's), and the
table of docs/doctor.md. Each kind of target that has a doctor declares its own checks, with their functions, in its
``doctor`` (distval/targets/kind.py's DoctorCommand, in its own folder); nothing here knows a kind.

Each check returns one Finding: ok, warn (a run can go on, with less), fail (a run cannot: exit 3) or skip (it could
not look, and says why). A finding says what was found and, when not ok, what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from distval.doctor import machine
from distval.errors import EXIT_ENVIRONMENT, EXIT_PASSED

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")

# Free space in the report directory (the current one): a report is at most REPORT_MAX_BYTES (256 MiB,
# distval/bounded_read.py) but usually kilobytes; below the first a large run's reports may not fit, below the
# second not even a small one's JUnit, JSON and Markdown.
REPORT_DISK_WARN_BYTES = 256 * machine.MIB
REPORT_DISK_FAIL_BYTES = 16 * machine.MIB


@dataclass(frozen=True)
class Finding:
    status: Status
    found: str
    todo: str = ""  # what to do; empty when ok


@dataclass(frozen=True, kw_only=True)
class DoctorCheck:
    """A check as the output and the docs name it; a kind's own check adds the function that looks."""

    name: str
    what: str  # what it looks at, for the docs
    per: str = ""  # what it runs once for each of ("Engine": its lines name the Engine); empty: once


@dataclass(frozen=True)
class Line:
    """One line of the doctor's output: a check, what it looked at when it runs once per thing ("" for none; the
    Engine), its finding."""

    check: str
    engine: str
    finding: Finding


def exit_code(lines: Sequence[Line]) -> int:
    """3 (the environment is unusable) when a check failed; else 0. A doctor that checked nothing fails too."""
    if not lines or any(line.finding.status == "fail" for line in lines):
        return EXIT_ENVIRONMENT
    return EXIT_PASSED


def disk_finding(where: str, free: int, warn_below: int, fail_below: int, todo: str) -> Finding:
    found = f"{machine.size_text(free)} free in {where}"
    if free < fail_below:
        return Finding("fail", f"{found} (a run needs {machine.size_text(fail_below)} at least)", todo)
    if free < warn_below:
        return Finding("warn", f"{found} (less than {machine.size_text(warn_below)})", todo)
    return Finding("ok", found)


REPORT_DISK = DoctorCheck(
    name="report-disk",
    what=f"free space of the report directory, the current one (warn below {machine.size_text(REPORT_DISK_WARN_BYTES)}, "
    f"fail below {machine.size_text(REPORT_DISK_FAIL_BYTES)})",
)


def check_report_disk(report_dir: str) -> Finding:
    """REPORT_DISK: every kind writes its reports here."""
    path = str(Path(report_dir).resolve())
    free = machine.free_bytes(path)
    if free is None:
        return Finding("fail", f"cannot read the free space of the report directory {path}", "run distval where it can write")
    todo = "free space there, or write the reports elsewhere (--junit, --json, --markdown PATH)"
    return disk_finding(f"the report directory {path}", free, REPORT_DISK_WARN_BYTES, REPORT_DISK_FAIL_BYTES, todo)


def reference_markdown(declared: Sequence[tuple[str, Sequence[DoctorCheck]]]) -> str:
    """The table of docs/doctor.md from each kind's doctor (where its checks run, as the table says it, and its
    checks in order): a check that several kinds run (by its name) is one row, where it first comes."""
    rows = ["| check | runs | what it looks at |", "|---|---|---|"]
    order: dict[str, DoctorCheck] = {}
    runs: dict[str, list[str]] = {}
    for where, checks in declared:
        for check in checks:
            first = order.setdefault(check.name, check)
            if (first.what, first.per) != (check.what, check.per):
                raise ValueError(f"doctor check {check.name}: two kinds declare it differently")
            runs.setdefault(check.name, []).append(where)
    for name, check in order.items():
        per = f", per {check.per}" if check.per else ""
        rows.append(f"| `{name}` | {' and '.join(runs[name])}{per} | {check.what} |")
    return "\n".join(rows) + "\n"
