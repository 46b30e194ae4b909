"""The wait before the kill (distval/targets/docker/stacks.py ``WAIT_SCRIPT``), run here against real processes:
a rank's stacks count as collected only once its main thread has left the signal's handler, so the kill that
follows never cuts a dump that is still being written (CI, stop 29)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distval.targets.docker.stacks import WAIT_SCRIPT

SIGNAL = str(int(signal.SIGUSR1))
# A stand-in worker: SIGUSR1 blocked in its main thread, as it is while faulthandler's handler writes the stacks,
# or not blocked, as after the handler returned.
WORKER = (
    "import signal, sys, time\n"
    "if sys.argv[1] == 'in-handler':\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results directory with rank 0's stacks begun and its flight-recorder dump fresh: its mtime an hour ahead,
    so it is newer than any wait's start (a thread that touched it every 20 ms raced the wait on a loaded machine)."""
    (tmp_path / "stacks-rank-0.txt").write_text('Thread 0x00007f (most recent call first):\n  File "')
    dump = tmp_path / "flight-recorder-rank-0.json"
    dump.write_text("{}")
    ahead = time.time() + 3600
    os.utime(dump, (ahead, ahead))
    return tmp_path


def wait_for(results: Path, state: str, limit_s: float) -> tuple[dict[str, object], float]:
    worker = subprocess.Popen([sys.executable, "-c", WORKER, state], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-S",
                "-c",
                WAIT_SCRIPT,
                str(results),
                f"0:{worker.pid}",
                str(limit_s),
                "0",
                str(int(signal.SIGUSR1)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1]), time.monotonic() - started
    finally:
        worker.kill()
        worker.wait()


def test_stacks_of_a_worker_still_in_the_handler_are_not_collected(results: Path) -> None:
    report, took_s = wait_for(results, "in-handler", 1.5)
    assert report["stacks"] == [] and report["flight_recorder"] == [0], report
    assert took_s >= 1.5


def test_stacks_of_a_worker_out_of_the_handler_are_collected_at_once(results: Path) -> None:
    report, took_s = wait_for(results, "out-of-handler", 30.0)
    assert report["stacks"] == [0] and report["flight_recorder"] == [0], report
    assert took_s < 25.0  # the bound is 30 s; at once on a quiet machine


def test_a_worker_that_exited_is_not_waited_for(results: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-c", WAIT_SCRIPT, str(results), "0:999999999", "30", "0", SIGNAL],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1])["stacks"] == [0]
