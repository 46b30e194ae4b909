"""How a CI runner runs the tests (issue 20): a CPU hog of two busy processes beside a test (the load of a shared
2-core runner, under which every bound on time that a test asserts must still hold), and SIGINT inherited
ignored (everything a non-interactive shell starts with ``cmd &`` gets it so)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

HOG_PROCESSES = 2


@contextmanager
def cpu_hog() -> Iterator[None]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOG_PROCESSES)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def sigint_ignored() -> None:
    """For Popen's preexec_fn: the child starts with SIGINT ignored, as under a CI script's ``cmd &``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
