"""CI runs the Docker and host tests as two pytest processes at once (.ci/run): those marked ``waits`` (most of
their time a deadline or timeout running out, the CPU idle: 69 to 96 % idle on 2 cores, /proc/stat sampled every
10 s beside a serial run; and whole files that alone kept under 70 % of the 2 cores busy, which balance the two
processes: tests/budgets.py WAITING_S) beside all the others. The two selections must be the whole Docker and host
suite.

Why two processes and not pytest-xdist's ``--dist loadgroup``: on pytest 9.2 its groups are silently ignored
(it renames node ids, which pytest 9.2 no longer reads; pytest-xdist#1386), and both workers then ran the two
CPU-heavy fault tests at once (load 19 on 2 cores). Two workers taking any test overloaded the 2 cores whenever
two CPU-heavy tests met (a 53-minute run with 5 timing failures, 2026-12-02)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import ROOT


def _collected(expression: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "-m", expression],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: nothing collected
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_every_waiting_test_is_a_docker_or_host_test_and_some_are() -> None:
    """A quick test marked ``waits`` would run in neither of CI's Docker selections, nor in the quick run twice."""
    assert _collected("waits and not (docker or host)") == []
    assert len(_collected("waits")) >= 5


def test_the_waits_marker_is_declared(pytestconfig: pytest.Config) -> None:
    assert any(line.startswith("waits:") for line in pytestconfig.getini("markers"))
