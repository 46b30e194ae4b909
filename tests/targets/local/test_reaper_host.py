"""Host mode's watchdog (distval/targets/local/watchdog.py): a distval killed with SIGKILL leaves no local process behind.

The first tests need no torch: a stand-in for distval starts its LocalSession's watchdog and a process tree
like torchrun's (a worker in a session of its own), then is SIGKILLed. The last one is marked ``host``: a real
``distval run --host`` with torch 2.15 from PyPI (tests/host_venv.py), SIGKILLed mid-run.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distval.targets.local.runtime import LocalSession
from distval.targets.local.watchdog import SESSION_MARKER, processes_with
from tests.docker_helpers import unavailable
from tests.paths import ROOT

# From SIGKILL to no process of the run: the watchdog reads EOF at once, then one scan of /proc and the kills; nothing
# of it waits on a timer. Measured 2026-12-06 on 2 cores with the stand-in: 0.05 s at load 14, 0.03 s at load 23 (the
# real host-mode run: 0.07-0.13 s at load 30); the wait ends when no process is left.
KILL_BOUND_S = 10.0

STAND_IN = """\
import subprocess, sys, time
from distval.targets.local.runtime import LocalSession, process_environment
from distval.run.steps import KILL_SETTLE_S
from distval.targets.local.watchdog import SESSION_MARKER, kill_all
session = LocalSession(sys.argv[1], None)
session._start_watchdog()
# Like torchrun: the launcher in a session of its own, its worker in yet another one.
environment = process_environment((), "node0", session.session)
subprocess.Popen(["sh", "-c", "setsid sleep 300 & exec sleep 300"], env=environment, start_new_session=True)
print(session.session, flush=True)
if sys.argv[2] == "close":  # a normal end: the runtime kills the scenario's processes, then the session closes
    time.sleep(1)
    kill_all(SESSION_MARKER, session.session, KILL_SETTLE_S)
    session.close()
    print(f"watchdog exited {session._watchdog.returncode}", flush=True)
else:
    time.sleep(300)
"""


def with_prefix(prefix: str) -> list[int]:
    """Processes whose environment carries a session marker starting with ``prefix``."""
    needle = f"{SESSION_MARKER}={prefix}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if not any(item.startswith(needle) for item in handle.read().split(b"\0")):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def sessions(session: str) -> set[int]:
    """The sessions of the processes carrying the run's session marker."""
    found = set()
    for pid in processes_with(SESSION_MARKER, session):
        try:
            found.add(os.getsid(pid))
        except ProcessLookupError:
            pass
    return found


def wait_for(condition: object, bound_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < bound_s:
        if condition():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def run_id() -> Iterator[str]:
    value = "th" + secrets.token_hex(4)
    yield value
    for pid in with_prefix(value + "-"):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def stand_in(run_id: str, mode: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, run_id, mode], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    session = process.stdout.readline().strip()
    assert session.startswith(run_id + "-"), (session, process.stderr.read() if process.stderr else "")
    return process, session


def test_sigkill_of_distval_kills_its_local_processes_in_their_own_sessions(run_id: str) -> None:
    process, session = stand_in(run_id, "kill")
    # Until its setsid() the worker is a fork of the launcher's shell, in the launcher's session: wait for both.
    waited = wait_for(lambda: len(sessions(session)) == 2, 10)
    tree = processes_with(SESSION_MARKER, session)
    assert len(tree) == 2, f"expected the launcher and its worker to run after {waited:.1f} s; found {tree}"
    assert len(sessions(session)) == 2, "expected the worker in a session of its own, as torchrun starts it"
    process.kill()
    process.wait()
    elapsed = wait_for(lambda: not processes_with(SESSION_MARKER, session), KILL_BOUND_S)
    left = processes_with(SESSION_MARKER, session)
    print(f"SIGKILL to no local process: {elapsed:.2f} s (load {os.getloadavg()[0]:.1f})")
    assert left == [], f"expected no process of the run {KILL_BOUND_S:g} s after distval's SIGKILL; still running: {left}"


def test_a_normal_end_stops_the_watchdog(run_id: str) -> None:
    process, session = stand_in(run_id, "close")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.strip() == "watchdog exited 0", out + err
    assert with_prefix(run_id + "-") == []


def test_the_session_holds_no_watchdog_before_its_first_scenario() -> None:
    session = LocalSession("th-none", None)
    assert session._watchdog is None
    session.close()


@pytest.mark.host
def test_sigkill_of_a_host_mode_run_leaves_no_local_process(pytestconfig: pytest.Config, run_id: str, tmp_path: Path) -> None:
    from tests.host_venv import torch_venv

    try:
        python = torch_venv(lambda line: print(line, flush=True))
    except (OSError, RuntimeError) as exc:
        unavailable(pytestconfig, f"cannot build the venv with torch from PyPI for host mode: {exc}")
    config = tmp_path / "config.yaml"
    config.write_text(
        "version: 1\ntimeout_s: 400\nscenarios:\n"
        # The timeout check keeps the ranks busy for a minute: without the watchdog they would outlive the bound
        # (measured before it existed: all 4 processes still ran 10 s after distval's SIGKILL).
        "  - {name: across, topology: cross-container, world_size: 2,\n"
        "     checks: [env, {name: timeout, args: {deadline_s: 60, margin_s: 5}}]}\n",
        encoding="utf-8",
    )
    command = [
        sys.executable,
        "-m",
        "distval",
        "run",
        str(config),
        "--local",
        "--python",
        str(python),
        "--run-id",
        run_id,
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The workers are up: torchrun's agents and their workers, each carrying the run's session marker.
    waited = wait_for(lambda: len(with_prefix(run_id + "-")) >= 4, 300)
    running = with_prefix(run_id + "-")
    assert len(running) >= 4, f"expected 2 agents and 2 workers after {waited:.0f} s; found {running}"
    process.kill()
    process.wait()
    elapsed = wait_for(lambda: not with_prefix(run_id + "-"), KILL_BOUND_S)
    left = with_prefix(run_id + "-")
    print(f"host mode: SIGKILL to no local process: {elapsed:.2f} s (load {os.getloadavg()[0]:.1f})")
    assert left == [], f"expected no process of run {run_id} {KILL_BOUND_S:g} s after SIGKILL; still running: {left}"
