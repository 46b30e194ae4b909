"""distval/targets/docker/processes.py: the worker-finding script, run here against real processes (as exec would run it
in a container), and the parsing of what it prints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from distval.engine_protocol import ExecResult
from distval.errors import EngineError
from distval.targets.docker import beside as beside_container
from distval.targets.docker.processes import find_workers, parse_workers, signal_workers, signal_workers_beside
from tests.fake_engine import FakeEngine


class LocalExec(FakeEngine):
    """Runs exec_run's argv on this machine: /proc here is what /proc is inside a container."""

    def exec_run(self, container: Any, argv: Sequence[str]) -> ExecResult:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
        return ExecResult(done.returncode, done.stdout + done.stderr)


def _sleeper(*argv: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv], env={**os.environ, **env})


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes = [
        _sleeper("-m", "distval_suite.main", "/distval/spec.json", env={"RANK": "2", "LOCAL_RANK": "0"}),
        _sleeper("-m", "distval_suite.main", "/distval/spec.json", env={"RANK": "3", "LOCAL_RANK": "1"}),
        # torchrun's agent names distval_suite.main too; it is not a worker.
        _sleeper("-m", "torch.distributed.run", "-m", "distval_suite.main", env={"RANK": "9"}),
        # Without RANK a process is not a rank.
        _sleeper("-m", "distval_suite.main", env={}),
    ]
    time.sleep(0.3)
    yield processes
    for process in processes:
        process.kill()
        process.wait()


def _mine(found: Sequence[Any], processes: list[subprocess.Popen[bytes]]) -> list[tuple[int, int, int]]:
    pids = {p.pid for p in processes}
    return [(w.pid, w.rank, w.local_rank) for w in found if w.pid in pids]


def test_finds_the_workers_by_rank_and_not_the_agent(workers: list[subprocess.Popen[bytes]]) -> None:
    found = find_workers(LocalExec("r"), None, sys.executable)
    assert _mine(found, workers) == [(workers[0].pid, 2, 0), (workers[1].pid, 3, 1)]


def test_signals_only_the_chosen_ranks(workers: list[subprocess.Popen[bytes]]) -> None:
    signalled = signal_workers(LocalExec("r"), None, sys.executable, signal.SIGTERM, ranks=[3])
    assert _mine(signalled, workers) == [(workers[1].pid, 3, 1)]
    assert workers[1].wait(timeout=10) == -signal.SIGTERM
    assert workers[0].poll() is None


class LocalBeside(FakeEngine):
    """Runs the beside-helper's fixed entrypoint (distval/targets/docker/beside.py) on this machine, under this
    python instead of the reaper image's: /proc here is the shared PID namespace there."""

    def run_beside(self, container: Any, arguments: Sequence[str], timeout_s: float) -> ExecResult:
        argv = [sys.executable, *beside_container.ENTRYPOINT[1:], *arguments]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PYTHONPATH": "/nonexistent"})
        return ExecResult(done.returncode, done.stdout + done.stderr)


def test_the_beside_helpers_isolated_script_finds_every_worker(workers: list[subprocess.Popen[bytes]]) -> None:
    # Signal 0: "all" would reach any other suite worker on this machine; finding them is the script's part.
    found = signal_workers_beside(LocalBeside("r"), None, 0)
    assert _mine(found, workers) == [(workers[0].pid, 2, 0), (workers[1].pid, 3, 1)]


def test_a_script_that_cannot_run_is_an_engine_error_with_its_output() -> None:
    with pytest.raises(EngineError, match=r"exit 127\): .*no such file"):
        parse_workers(127, 'OCI runtime exec failed: exec: "python9": no such file or directory')


@pytest.mark.parametrize("output", ["", "Traceback ...\nKeyError: 'x'", '[{"pid": 1}]'])
def test_output_that_is_not_a_worker_list_is_an_engine_error(output: str) -> None:
    with pytest.raises(EngineError, match="listing the worker processes"):
        parse_workers(0, output)


# A worker that blocks SIGUSR1 in every thread (so it stays pending, where /proc shows it), with a second thread.
BLOCKING_WORKER = (
    "import signal, threading, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def _pending(pid: int) -> tuple[int, int]:
    """(thread-directed signals pending on the main thread, signals pending on the whole process)."""
    fields = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)
    return int(fields["SigPnd"], 16), int(fields["ShdPnd"], 16)


def test_the_signal_goes_to_each_workers_main_thread() -> None:
    """A signal for the whole process may be taken by any thread: at a load of 13 a frozen rank's gloo thread took
    it on thaw while the main thread met its timeout and moved on, so the stacks missed where the freeze held
    it. Sent to the main thread, it is handled there first."""
    worker = subprocess.Popen(
        [sys.executable, "-c", BLOCKING_WORKER, "-m", "distval_suite.main"],
        env={**os.environ, "RANK": "5", "LOCAL_RANK": "0"},
        stdout=subprocess.PIPE,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline() == b"ready\n"
        signalled = signal_workers(LocalExec("r"), None, sys.executable, signal.SIGUSR1, ranks=[5])
        assert _mine(signalled, [worker]) == [(worker.pid, 5, 0)]
        bit = 1 << (signal.SIGUSR1 - 1)
        deadline = time.monotonic() + 10
        while not _pending(worker.pid)[0] & bit and time.monotonic() < deadline:
            time.sleep(0.05)
        thread_pending, process_pending = _pending(worker.pid)
        assert thread_pending & bit and not process_pending & bit
    finally:
        worker.kill()
        worker.wait()
