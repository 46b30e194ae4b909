"""Ctrl-C and SIGTERM are honoured at once in every phase of a run, without Docker.

``distval run`` runs as a subprocess against a fake Engine (tests/signal_child.py) that holds the run in one
phase; a real signal is delivered there, and what the run did after it is asserted: the exit code, the cleanup,
and no blocking call of the Engine begun after the handler ran (the seconds are printed). The subprocess starts
with SIGINT *ignored*, as everything started by a non-interactive shell's ``cmd &`` does (a CI script): that
is how CI's distval sat out a Ctrl-C until its deadline. A CPU hog of two busy processes runs beside each test
(the load of a shared CI runner)."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from distval.config import load_config
from distval.config.shipped import DEFAULT_IMAGE
from distval.engine_protocol import ContainerState, ImageInfo
from distval.errors import EngineError, Interrupted
from distval.images.build import image_lock
from distval.images.schedule import WIND_DOWN_S
from distval.plan.model import ScenarioPlan
from distval.run.events import NoEvents
from distval.run.interrupts import Interrupt, install, signals_deferred
from distval.targets.engines.planning import plan_run
from distval.targets.engines.runtime import run_across_hosts
from distval.targets.engines.transfer import same_image
from tests import load
from tests.fake_engine import FakeEngine
from tests.paths import ROOT
from tests.signal_child import PARENT_ENVIRONMENT

# How promptly a signal is acted on is judged in events, not seconds: the child says when distval's handler ran
# (SIGNALLED) and every blocking call of the fake Engine begun after it (LATE: a wait slice, a step of the run); a
# run that went on after the signal shows one. Left alone, a held phase would end at the scenario's deadline (300 s)
# or never (a call held for an hour), and a phase that ends by itself (the removal, the diagnosis at a 1 s deadline)
# ends with another exit code. So the seconds are only a bound against a hang, far from anything the code waits
# for: printed, they were 0.3-2.2 s beside the 2-process hog (load 10); a loaded machine stretches them.
EXIT_BOUND_S = 60.0
# The removing phase: the removal (tests/signal_child.py REMOVAL_S, 2 s) finishes first, then the exit.
REMOVING_BOUND_S = 2.0 + EXIT_BOUND_S
# The building phase: a build step that cannot be cancelled is left after the schedule's wind-down.
BUILDING_BOUND_S = WIND_DOWN_S + EXIT_BOUND_S


def late_calls(stdout: str) -> list[str]:
    """The fake Engine's blocking calls begun after distval's handler ran (tests/signal_child.py)."""
    return [line for line in stdout.splitlines() if line.startswith("LATE ")]


PHASES = [
    "images",
    "building",
    "networks",
    "containers",
    "copying",
    "starting",
    "waiting",
    "collecting",
    "diagnosing",
    "removing",
    "final",
    "reaper",
]


@pytest.fixture
def cpu_hog() -> Iterator[None]:
    with load.cpu_hog():
        yield


def _config(tmp_path: Path, timeout_s: int, scenarios: int = 1) -> Path:
    config = tmp_path / "hang.yaml"
    lines = [f"  - {{name: hang{i}, topology: cross-container, world_size: 2, checks: [env]}}\n" for i in range(scenarios)]
    config.write_text(f"timeout_s: {timeout_s}\nscenarios:\n" + "".join(lines))
    return config


def _run_and_signal(
    tmp_path: Path, phase: str, signum: int, *extra: str, timeout_s: int = 300, reached: str | None = None
) -> tuple[float, str, str, int]:
    """Start the child, wait until it is in ``phase`` (its "IN phase" line; or ``reached``, a text on its stderr),
    signal it; (seconds to exit, stdout, stderr, exit code). The child has a fixture cache of its own: a real
    `distval fixtures build` beside the tests (CI's, on a fresh machine) holds the machine's builders' lock, and a
    run that waits for it never reached "building" (CI, 2026-12-04)."""
    junit = tmp_path / "results.xml"
    argv = [sys.executable, "-m", "tests.signal_child", phase, str(_config(tmp_path, timeout_s, 2 if "--jobs" in extra else 1))]
    image = DEFAULT_IMAGE if phase == "building" else "x/y:z"  # building: a fixture the fake Engine lacks
    argv += ["--image", image, "--junit", str(junit), "--run-id", "sig00001", *extra]
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DISTVAL_CACHE_DIR": str(tmp_path / "cache"), PARENT_ENVIRONMENT: str(os.getpid())},
        preexec_fn=load.sigint_ignored,  # noqa: PLW1509 - a single call, no locks: the test's point
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        seen: list[str] = []
        said: list[str] = []
        readers = [
            threading.Thread(target=lambda: seen.extend(iter(process.stdout.readline, "")), daemon=True),  # type: ignore[union-attr]
            threading.Thread(target=lambda: said.extend(iter(process.stderr.readline, "")), daemon=True),  # type: ignore[union-attr]
        ]
        for reader in readers:
            reader.start()
        until = time.monotonic() + 120
        while (f"IN {phase}\n" not in seen) if reached is None else not any(reached in line for line in said):
            assert process.poll() is None, f"it ended before {phase}: {seen} {''.join(said)}"
            assert time.monotonic() < until, f"the run never reached {phase}: {seen} {''.join(said)}"
            time.sleep(0.02)
        time.sleep(0.3)  # well inside the phase
        signalled = time.monotonic()
        process.send_signal(signum)
        try:
            code = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"distval did not exit within 120 s of {signal.Signals(signum).name} in {phase}")
        took = time.monotonic() - signalled
        for reader in readers:
            reader.join(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return took, "".join(seen), "".join(said), code


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", PHASES)
def test_a_signal_in_each_phase_ends_the_run_within_seconds(cpu_hog: None, tmp_path: Path, phase: str, signum: int) -> None:
    took, stdout, stderr, code = _run_and_signal(
        tmp_path, phase, signum, timeout_s=1 if phase in ("diagnosing", "removing", "final") else 300
    )
    bound = {"removing": REMOVING_BOUND_S, "final": REMOVING_BOUND_S, "building": BUILDING_BOUND_S}.get(phase, EXIT_BOUND_S)
    print(f"{phase} {signal.Signals(signum).name}: exited {took:.2f} s after the signal")
    assert took <= bound, f"{phase}: {took:.1f} s from {signal.Signals(signum).name} to exit\n{stderr}"
    assert code == 128 + signum, stderr
    assert "SIGNALLED\n" in stdout and late_calls(stdout) == [], stdout  # nothing new began after the signal
    assert "Traceback" not in stderr, stderr
    assert "REMOVED\n" in stdout, stdout  # the run's final cleanup ran
    if phase == "removing":
        assert "REMOVED scenario\n" in stdout, stdout  # the signal did not cut the scenario's removal short
    cases = [case.get("name") for case in ET.parse(tmp_path / "results.xml").getroot().iter("testcase")]
    assert "interrupted" in cases, cases  # with the finished scenario's results where it had finished ("final")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_waiting_for_another_fixture_builder_ends_the_run(
    cpu_hog: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """Another process (a `distval fixtures build` in another terminal, CI's beside the tests) is building the image
    the run needs (it holds the image's lock): the run waits for it, and a signal ends that wait at once."""
    monkeypatch.setenv("DISTVAL_CACHE_DIR", str(tmp_path / "cache"))  # the child's cache (_run_and_signal)
    lock_path = image_lock(DEFAULT_IMAGE)
    lock_path.parent.mkdir(parents=True)
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        took, stdout, stderr, code = _run_and_signal(tmp_path, "building", signum, reached="another process is building")
    print(f"waiting for the builders' lock: exited {took:.2f} s after the signal")
    assert took <= EXIT_BOUND_S, stderr
    assert "SIGNALLED\n" in stdout and late_calls(stdout) == [], stdout
    assert (code, "Traceback" in stderr, "IN building\n" in stdout) == (128 + signum, False, False), stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", ["waiting", "diagnosing"])
def test_a_signal_while_two_scenarios_run_in_worker_threads_ends_the_run(
    cpu_hog: None, tmp_path: Path, phase: str, signum: int
) -> None:
    """--jobs 2 (the default on 2 cores): the scenarios run in worker threads, which see the stop request."""
    took, stdout, stderr, code = _run_and_signal(
        tmp_path, phase, signum, "--jobs", "2", timeout_s=1 if phase == "diagnosing" else 300
    )
    print(f"--jobs 2, {phase}: exited {took:.2f} s after the signal")
    assert took <= EXIT_BOUND_S, stderr
    # No LATE check here: a worker thread goes on until the main thread, once the handler ran, sets the stop (a
    # step or a wait may begin meanwhile); that the workers saw it is the exit code and the cleanup's REMOVED.
    assert "SIGNALLED\n" in stdout, stdout
    assert (code, "Traceback" in stderr, "REMOVED\n" in stdout) == (128 + signum, False, True), stderr


# -- in-process: the handler and the deferral --------------------------------------------------------------------


def test_the_handler_is_installed_for_sigint_even_where_it_was_inherited_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        restore = install()
        try:
            with pytest.raises(Interrupt) as raised:
                signal.raise_signal(signal.SIGINT)
            assert raised.value.exit_code == 130
        finally:
            restore()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_deferred_signal_waits_for_the_block_even_with_another_thread_alive() -> None:
    """pthread_sigmask in the main thread deferred nothing once another thread ran: the kernel gave that thread the
    signal and the main thread still raised at once."""
    holder = threading.Event()
    other = threading.Thread(target=holder.wait, daemon=True)
    other.start()
    restore = install()
    finished = False
    try:
        with pytest.raises(Interrupt), signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(20):
                time.sleep(0.01)  # the handler runs here; it must not raise yet
            finished = True
    finally:
        restore()
        holder.set()
    assert finished


def test_a_deferral_that_does_not_raise_hands_the_signal_to_its_caller() -> None:
    restore = install()
    try:
        with signals_deferred(raise_after=False) as late:
            signal.raise_signal(signal.SIGINT)
        assert late.signum == signal.SIGINT
    finally:
        restore()


class _HungOnTwoEngines(FakeEngine):
    """One Engine of several: its ranks never exit."""

    def state(self, container: Any) -> ContainerState:
        return ContainerState("running", None, False)

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        time.sleep(timeout_s)
        return False


def test_a_signal_while_waiting_across_several_engines_removes_the_scenario_from_each() -> None:
    plan = plan_run(load_config("configs/default.yaml"), "0123abcd", "x/y:z").scenarios[1]
    first, second = _HungOnTwoEngines("0123abcd"), _HungOnTwoEngines("0123abcd")
    hosts = {"a": first, "b": second}
    plan = _across(plan, ("a", "b"))
    restore = install()
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        started = time.monotonic()
        timer.start()
        with pytest.raises(Interrupted):
            run_across_hosts(first, plan, NoEvents(), hosts=hosts)
        took = time.monotonic() - started - 1.0
    finally:
        timer.cancel()
        restore()
    assert took <= EXIT_BOUND_S
    assert first.removed == 1 and second.removed == 1


def _across(plan: ScenarioPlan, hosts: tuple[str, str]) -> ScenarioPlan:
    """The plan with its containers alternately on two hosts (the wait asks each container's own Engine)."""
    containers = tuple(dataclasses.replace(c, host=hosts[i % 2]) for i, c in enumerate(plan.containers))
    return dataclasses.replace(plan, containers=containers, hosts=hosts)


def test_an_engine_error_while_interrupted_is_still_the_interrupt() -> None:
    """A NotFound from an Engine being stopped while distval is interrupted must not replace the interrupt."""
    restore = install()
    try:
        with pytest.raises(Interrupt), signals_deferred():
            signal.raise_signal(signal.SIGTERM)
            raise EngineError("host 1 (tcp://x): inspect n1: 404 Not Found")
    finally:
        restore()


class _SlowHost:
    """An ImageHost whose ``docker save`` streams for STREAM_S (a large image on a slow link)."""

    STREAM_S = 30.0

    def __init__(self, where: str, images: dict[str, ImageInfo]) -> None:
        self.where, self.images = where, images

    def image(self, reference: str) -> ImageInfo | None:
        return self.images.get(reference)

    def save_image(self, reference: str) -> Iterator[bytes]:
        until = time.monotonic() + self.STREAM_S
        while time.monotonic() < until:
            time.sleep(0.01)
            yield b"x" * 1024

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        for _ in chunks:
            pass
        return []

    def pull_digest(self, reference: str) -> None:
        raise AssertionError("transfer mode pulls nothing")


def test_a_signal_while_an_image_is_copied_to_other_hosts_ends_the_copy_within_seconds() -> None:
    image = ImageInfo("sha256:" + "ab" * 32, ("img:1",), {})
    hosts = [_SlowHost("h0", {"img:1": image}), _SlowHost("h1", {}), _SlowHost("h2", {})]
    restore = install()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        started = time.monotonic()
        timer.start()
        with pytest.raises(Interrupt):
            same_image(hosts, "img:1", "transfer", lambda line: None)
        took = time.monotonic() - started - 0.5
    finally:
        timer.cancel()
        restore()
    # Left alone, each host's copy streams for STREAM_S; the signal ends it long before (a load stretches the
    # fraction of a second it takes, not to half the stream).
    assert took <= _SlowHost.STREAM_S / 2, f"{took:.1f} s: the copy went on after the signal"


# A parent that starts the signal child and prints its pid, then waits: the test SIGKILLs this parent.
PARENT = """
import subprocess, sys, os
child = subprocess.Popen([sys.executable, "-m", "tests.signal_child", *sys.argv[1:]],
                         env={**os.environ, "DISTVAL_SIGNAL_CHILD_PARENT": str(os.getpid())}, stdout=subprocess.PIPE, text=True)
print(child.pid, flush=True)
child.stdout.readline()  # its first phase: the run is under way
print("running", flush=True)
child.wait()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_signal_child_dies_with_the_test_that_started_it(tmp_path: Path) -> None:
    """A pytest killed mid-test must not leave the child blocked for an hour: the kernel kills it with its parent."""
    argv = ["waiting", str(_config(tmp_path, 300)), "--image", "x/y:z", "--junit", str(tmp_path / "r.xml")]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *argv, "--run-id", "sig00002"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DISTVAL_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert parent.stdout.readline().strip() == "running"
        assert _alive(child)
        parent.kill()
        parent.wait()
        # An upper bound only (the kernel acts on the parent's exit; this is how long the test waits for it).
        until = time.monotonic() + 60
        while _alive(child) and time.monotonic() < until:
            time.sleep(0.05)
        assert not _alive(child), "the signal child outlived the process that started it"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
