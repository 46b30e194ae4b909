"""``distval run`` against a fake Engine that holds the run in one phase, for tests/run/test_signals.py (run as
``python -m tests.signal_child PHASE CONFIG JUNIT [distval options]`` from the repository root).

The Engine prints ``IN <phase>`` on stdout when the run reaches the phase and then blocks there the way the real
Engine does (a call that does not return; a rank that never exits; a slow removal), so that the parent can
deliver a real signal in that phase and measure the time to exit. ``REMOVED`` is printed once the run's
cleanup has removed its resources. ``SIGNALLED`` is printed when distval's handler first runs, and ``LATE <call>``
for each blocking call of the Engine begun after it (a wait slice, a diagnosis, a held step): how promptly a
signal is acted on, in events rather than seconds (a loaded machine stretches the seconds)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

import distval.cli.main
import distval.run.interrupts as interrupts
from distval.config.shipped import DEFAULT_IMAGE
from distval.engine_protocol import ContainerState, ExecResult, ImageInfo
from distval.errors import EngineError
from tests.fake_engine import FakeEngine

# The sample image's top layer: in the "building" phase it is missing, so the run builds it.
SAMPLE_LAYER = DEFAULT_IMAGE
# How long the cleanup's removal takes in the "removing" phase: the signal must not cut it short.
REMOVAL_S = 2.0
# Far beyond any test's bound: a hook that is not interrupted holds the run this long.
FOREVER_S = 3600.0


_PRINTING = threading.Lock()
# Set when distval's signal handler first runs (in the main thread).
SIGNALLED = threading.Event()


def say(line: str) -> None:
    # One write under a lock: print() from two diagnosis threads interleaved "IN xIN x\n\n", a line the test
    # never matched, so it failed as "ended before diagnosing".
    with _PRINTING:
        sys.stdout.write(f"{line}\n")
        sys.stdout.flush()


def entered(phase: str) -> None:
    say(f"IN {phase}")


def late(call: str) -> None:
    """A blocking call begins: after the signal, say so."""
    if SIGNALLED.is_set():
        say(f"LATE {call}")


_handler = interrupts.on_signal


def _noting(signum: int, frame: FrameType | None) -> None:
    """distval's handler, first saying that it ran (install() installs whatever on_signal is then)."""
    if not SIGNALLED.is_set():
        SIGNALLED.set()
        say("SIGNALLED")
    _handler(signum, frame)


class HoldingEngine(FakeEngine):
    """FakeEngine whose call in phase ``PHASE`` (sys.argv[1]) blocks; its ranks never exit (a hung all_reduce)."""

    phase = ""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.exited: set[Any] = set()
        # A real run always has another thread (the reaper's): the kernel may deliver a signal to it.
        threading.Thread(target=time.sleep, args=(FOREVER_S,), daemon=True).start()

    def _hold(self, phase: str) -> None:
        if phase not in ("images", "collecting", "diagnosing"):  # the cleanup and the reports ask for images again;
            late(phase)  # the diagnosis' threads may reach their exec after the signal, begun before it
        if self.phase == phase:
            entered(phase)
            time.sleep(FOREVER_S)  # the main thread blocked in a call, as in a socket read

    def image(self, reference: str) -> ImageInfo | None:
        self._hold("images")
        if self.phase == "building" and reference == SAMPLE_LAYER:
            return None  # missing: the run builds it (its parent, a root filesystem, is there)
        return super().image(reference)

    def build(
        self,
        context: bytes,
        tag: str,
        labels: Mapping[str, str],
        log: Callable[[str], None],
        buildargs: Mapping[str, str] | None = None,
    ) -> str:
        # In a build thread of distval.images.schedule; like a step of the Engine's builder that prints
        # nothing, it does not see the stop: the main thread must not wait for it past the wind-down.
        self._hold("building")
        raise EngineError(f"build {tag}: not in this fake")

    def import_rootfs(self, tar_path: str, repository: str, tag: str, changes: list[str]) -> str:
        raise EngineError(f"import {repository}:{tag}: not in this fake")

    def create_network(self, network: Any) -> None:
        self._hold("networks")
        super().create_network(network)

    def create_container(self, container: Any) -> Any:
        self._hold("containers")
        return super().create_container(container)

    def put_archive(self, container: Any, path: str, data: bytes) -> None:
        self._hold("copying")
        super().put_archive(container, path, data)

    def start(self, container: Any) -> None:
        self._hold("starting")
        super().start(container)

    def state(self, container: Any) -> ContainerState:
        if self.phase == "collecting" or container in self.exited:
            return ContainerState("exited", 0, False)
        return ContainerState("running", None, False)

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        if self.phase == "collecting":
            return True
        if self.phase == "waiting" and not getattr(self, "_said_waiting", False):
            self._said_waiting = True
            entered("waiting")
        late("wait")
        time.sleep(timeout_s)  # the Engine's wait API for a rank that never exits: the slice passes
        return False

    def read_files(self, container: Any, path: str) -> dict[str, bytes]:
        self._hold("collecting")
        return {}

    def exec_run(self, container: Any, argv: Any) -> ExecResult:
        # The diagnosis at the deadline: each container's exec, from the diagnosis' threads.
        self._hold("diagnosing")
        return ExecResult(1, "")

    def kill(self, container: Any) -> None:
        super().kill(container)
        self.exited.add(container)

    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        if self.phase == "removing" and extra_label is not None:
            entered("removing")
            time.sleep(REMOVAL_S)
        if self.phase == "final" and extra_label is None:  # the run's own cleanup at its end
            entered("final")
            time.sleep(REMOVAL_S)
        result = super().remove_labelled(extra_label)
        print("REMOVED" if extra_label is None else "REMOVED scenario", flush=True)
        return result


class ReaperHoldingEngine(HoldingEngine):
    """An Engine with a reaper whose start blocks (the reaper's container being created)."""

    holds_reaper = True  # it has start_reaper: a run on it starts a reaper

    def bridge_interface(self) -> str | None:
        return None

    def start_reaper(self, *args: Any, **kwargs: Any) -> tuple[str, int | None, list[str]]:
        entered("reaper")
        threading.Event().wait(REMOVAL_S)
        raise EngineError("start the reaper: the Engine did not answer")

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        return 0, 0


# prctl(2)'s option: the signal the kernel sends this process when the thread that forked it exits.
PR_SET_PDEATHSIG = 1
# The test's pid, set by the test: to tell whether it died before the request below was made.
PARENT_ENVIRONMENT = "DISTVAL_SIGNAL_CHILD_PARENT"


def die_with_the_test() -> None:
    """SIGKILL this process when the pytest that started it dies: the child blocks for FOREVER_S by design, and a
    pytest killed mid-test (a CI timeout, Ctrl-C twice) left it running. A parent already gone before the request
    (so nothing would deliver it) ends the child at once."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    expected = os.environ.get(PARENT_ENVIRONMENT)
    if expected is not None and os.getppid() != int(expected):
        os._exit(3)


def main() -> int:
    die_with_the_test()
    phase, *argv = sys.argv[1:]
    interrupts.on_signal = _noting  # type: ignore[assignment] # the parent reads what happened after the signal
    HoldingEngine.phase = phase
    engine_class = ReaperHoldingEngine if phase == "reaper" else HoldingEngine
    distval.cli.main.Engine = engine_class  # type: ignore[attr-defined] # cli._engine's stand-in hook
    return distval.cli.main.main(["run", *argv])


if __name__ == "__main__":
    sys.exit(main())
