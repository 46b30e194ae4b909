"""distval.run.progress: live progress from the runtime's events, on a terminal and off it, with scenarios
running one at a time and several at once (``--jobs`` > 1: events from several threads)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import termios
import threading
import time

import pyte
import pytest

from distval.config import parse_config
from distval.plan.model import ScenarioPlan
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.scenario import ScenarioResult
from distval.run.events import COLLECTING, REMOVING, RUNNING, RunEvents
from distval.run.progress import ProgressDisplay, layout
from distval.targets.engines.planning import plan_scenario
from tests.report_helpers import CONFIG, IMAGE, RUN_ID
from tests.terminal import Clock, Terminal, screen

INSIDE = "inside (in-container, 2 ranks)"
ACROSS = "across (cross-container, 3x1, 3 ranks, static)"
TIMESTAMP = re.compile(r"^\[\s*\d+\.\ds\] ")


def plans() -> tuple[ScenarioPlan, ScenarioPlan]:
    inside, across = parse_config(CONFIG, "progress.yaml").scenarios
    return plan_scenario(inside, RUN_ID, IMAGE), plan_scenario(across, RUN_ID, IMAGE)


def result(plan: ScenarioPlan, cases: list[tuple[str, str]], duration_s: float) -> ScenarioResult:
    return ScenarioResult(plan, tuple(CaseResult(name, status, "", 0.5) for name, status in cases), (), "", duration_s)


def passing(plan: ScenarioPlan) -> ScenarioResult:
    return result(plan, [("env", PASSED), ("all_reduce", PASSED), ("exit_status", PASSED)], 4.25)


def failing(plan: ScenarioPlan) -> ScenarioResult:
    return result(plan, [("env", SKIPPED), ("all_reduce", FAILED), ("exit_status", ERROR)], 12.0)


def texts(output: str) -> list[str]:
    """The plain lines without their timestamps (each must have one)."""
    lines = output.splitlines()
    assert all(TIMESTAMP.match(line) for line in lines), lines
    return [TIMESTAMP.sub("", line) for line in lines]


def test_the_display_is_run_events() -> None:
    events: RunEvents = ProgressDisplay(None)  # mypy checks the protocol here too (tests are not type-checked in CI)
    assert all(callable(getattr(events, name)) for name in RunEvents.__dict__ if not name.startswith("_"))


def test_layout_names_ranks_and_containers() -> None:
    inside, across = plans()
    assert layout(inside) == "2 ranks in 1 container"
    assert layout(across) == "3 ranks in 3 containers, one each"


# --- not a terminal -------------------------------------------------------------------------------


def test_plain_lines_when_not_a_terminal() -> None:
    inside, across = plans()
    clock, stream = Clock(), io.StringIO()
    display = ProgressDisplay(stream, clock=clock, heartbeat_s=30)
    assert not display.tty
    display.log("image example/torch:test: present")
    display.scenario_started(across, 2, 2)
    clock.now += 1.5
    display.phase(across, "creating the network")
    display.phase(across, "creating the network")  # no change: no line
    display.note(across, "started 3 container(s)")
    display.phase(across, "running")
    clock.now += 10
    display.waiting(across)  # before the heartbeat: nothing
    clock.now += 25
    display.waiting(across)  # 35 s after the last line: a heartbeat with the phase
    display.scenario_finished(failing(across))
    display.close()
    output = stream.getvalue()
    assert "\r" not in output
    assert texts(output) == [
        "image example/torch:test: present",
        f"{ACROSS}: starting on {IMAGE} (scenario 2 of 2; 3 ranks in 3 containers, one each)",
        f"{ACROSS}: creating the network",
        f"{ACROSS}: started 3 container(s)",
        f"{ACROSS}: running",
        f"{ACROSS}: running, 36 s since it started",
        f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
    ]
    assert output.splitlines()[-1].startswith("[  36.5s] ")  # the run's elapsed time
    assert inside.suite_name not in output


def test_plain_lines_of_two_interleaved_scenarios() -> None:
    inside, across = plans()
    clock, stream = Clock(), io.StringIO()
    display = ProgressDisplay(stream, clock=clock, heartbeat_s=30)
    display.scenario_started(inside, 1, 2)
    display.scenario_started(across, 2, 2)
    clock.now += 2
    display.phase(across, RUNNING)
    display.phase(inside, RUNNING)
    display.container_exited(across, "distval-abc123-across-n1", 0)  # a clean exit is not news
    display.container_exited(across, "distval-abc123-across-n2", 1)
    display.container_exited(inside, "distval-abc123-inside-n0", None)
    clock.now += 30
    display.note(inside, "still here")  # inside's line does not put off across's heartbeat
    display.waiting(inside)
    display.waiting(across)
    display.phase(inside, COLLECTING)
    display.scenario_finished(passing(inside))
    display.phase(across, REMOVING)
    display.scenario_finished(failing(across))
    assert texts(stream.getvalue()) == [
        f"{INSIDE}: starting on {IMAGE} (scenario 1 of 2; 2 ranks in 1 container)",
        f"{ACROSS}: starting on {IMAGE} (scenario 2 of 2; 3 ranks in 3 containers, one each)",
        f"{ACROSS}: running",
        f"{INSIDE}: running",
        f"{ACROSS}: container distval-abc123-across-n2 stopped with exit code 1",
        f"{INSIDE}: container distval-abc123-inside-n0 stopped with an unknown exit code",
        f"{INSIDE}: still here",
        f"{ACROSS}: running, 32 s since it started",
        f"{INSIDE}: collecting logs and results",
        f"{INSIDE}: passed in 4.2 s (3 passed)",
        f"{ACROSS}: removing containers and networks",
        f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
    ]


def test_lines_stay_whole_when_threads_write_at_once() -> None:
    class SlowStream(io.StringIO):
        """Gives other threads a chance between every character written."""

        def write(self, text: str) -> int:
            for char in text:
                super().write(char)
                time.sleep(0)
            return len(text)

    plan_list = plans()
    stream = SlowStream()
    display = ProgressDisplay(stream, clock=Clock())
    start = threading.Barrier(len(plan_list))

    def worker(plan: ScenarioPlan) -> None:
        start.wait()
        for step in range(40):
            display.note(plan, f"step {step}")

    display.scenario_started(plan_list[0], 1, 2)
    display.scenario_started(plan_list[1], 2, 2)
    threads = [threading.Thread(target=worker, args=(plan,)) for plan in plan_list]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = texts(stream.getvalue())
    for plan in plan_list:
        assert [line for line in lines if line.startswith(plan.suite_name + ": step")] == [
            f"{plan.suite_name}: step {step}" for step in range(40)
        ]
    assert len(lines) == 2 + 2 * 40


def test_silent_without_a_stream() -> None:
    inside, _ = plans()
    display = ProgressDisplay(None)
    display.log("x")
    display.scenario_started(inside, 1, 1)
    display.phase(inside, "running")
    display.container_exited(inside, "c", 1)
    display.waiting(inside)
    display.scenario_finished(passing(inside))
    display.close()
    assert display.stream is None and not display.tty


# --- a terminal, one scenario at a time -----------------------------------------------------------


def test_terminal_one_status_line_and_permanent_result_lines() -> None:
    inside, across = plans()
    clock, stream = Clock(), Terminal()
    display = ProgressDisplay(stream, clock=clock, columns=200)
    assert display.tty
    display.scenario_started(inside, 1, 2)
    assert screen(stream.getvalue()) == [f"[1/2] {inside.suite_name} | 2 ranks in 1 container | setting up | 0 s"]
    display.phase(inside, "creating the network")
    display.note(inside, "started 1 container(s)")  # into the status line, not a permanent line
    assert screen(stream.getvalue()) == [
        f"[1/2] {inside.suite_name} | 2 ranks in 1 container | creating the network: started 1 container(s) | 0 s"
    ]
    display.phase(inside, "running")
    clock.now += 7.2
    display.waiting(inside)
    assert screen(stream.getvalue()) == [f"[1/2] {inside.suite_name} | 2 ranks in 1 container | running | 7 s"]
    writes = len(stream.getvalue())
    display.waiting(inside)  # nothing changed on screen: nothing written
    assert len(stream.getvalue()) == writes
    display.scenario_finished(passing(inside))
    display.scenario_started(across, 2, 2)
    display.phase(across, "running")
    clock.now += 3
    display.waiting(across)
    shown = screen(stream.getvalue())
    assert len(shown) == 2
    assert TIMESTAMP.sub("", shown[0]) == f"{inside.suite_name}: passed in 4.2 s (3 passed)"
    assert shown[1] == f"[2/2] {across.suite_name} | 3 ranks in 3 containers, one each | running | 3 s"
    display.scenario_finished(failing(across))
    display.close()
    shown = screen(stream.getvalue())
    assert [TIMESTAMP.sub("", line) for line in shown] == [
        f"{inside.suite_name}: passed in 4.2 s (3 passed)",
        f"{across.suite_name}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
        "",  # the status line is gone
    ]
    # One scenario at a time needs nothing but carriage returns: no cursor movement.
    assert "\r" in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_terminal_status_line_fits_the_width() -> None:
    _, across = plans()
    stream = Terminal()
    display = ProgressDisplay(stream, clock=Clock(), columns=40)
    display.scenario_started(across, 1, 1)
    display.phase(across, "collecting logs and results")
    for chunk in stream.getvalue().split("\r"):
        assert len(chunk) <= 39, chunk  # never wraps (a wrapped line breaks \r)
    assert screen(stream.getvalue())[-1] == f"[1/1] {across.suite_name} | 3 ranks in 3 c"[:39]


def test_terminal_build_output_updates_the_status_line_and_messages_stay() -> None:
    stream = Terminal()
    display = ProgressDisplay(stream, clock=Clock(), columns=120)
    display.log("fixture distval-fixtures/torch:2.6-debian: building (recipe 1234)")
    display.log("  mmdebstrap: I: downloading packages...")
    display.log("  mmdebstrap: I: extracting archives...")
    shown = screen(stream.getvalue())
    assert TIMESTAMP.sub("", shown[0]) == "fixture distval-fixtures/torch:2.6-debian: building (recipe 1234)"
    assert TIMESTAMP.sub("", shown[1]) == "mmdebstrap: I: extracting archives..."
    assert len(shown) == 2
    display.close()
    assert screen(stream.getvalue())[-1] == ""


def test_isatty_decides_and_term_dumb_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    assert not ProgressDisplay(stream).tty
    monkeypatch.setattr(stream, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert ProgressDisplay(stream).tty
    monkeypatch.setenv("TERM", "dumb")
    assert not ProgressDisplay(stream).tty


def test_terminal_without_a_size_falls_back_to_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    class SizelessTerminal(Terminal):
        def fileno(self) -> int:
            return 2

    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))
    monkeypatch.setenv("COLUMNS", "30")
    _, across = plans()
    stream = SizelessTerminal()
    display = ProgressDisplay(stream, clock=Clock())
    display.scenario_started(across, 1, 1)
    assert screen(stream.getvalue())[-1] == f"[1/1] {across.suite_name}"[:29]


# --- a terminal, several scenarios at once --------------------------------------------------------


def status(index: int, plan: ScenarioPlan, phase: str, seconds: int) -> str:
    return f"[{index}/2] {plan.suite_name} | {layout(plan)} | {phase} | {seconds} s"


def test_terminal_a_status_line_per_running_scenario() -> None:
    inside, across = plans()
    clock, stream = Clock(), Terminal()
    display = ProgressDisplay(stream, clock=clock, columns=200, rows=24)
    display.scenario_started(across, 2, 2)  # a worker may start scenario 2 before scenario 1
    clock.now += 1
    display.scenario_started(inside, 1, 2)
    assert screen(stream.getvalue()) == [status(1, inside, "setting up", 0), status(2, across, "setting up", 1)]
    display.phase(across, RUNNING)
    clock.now += 11
    display.container_exited(across, "distval-abc123-across-n2", 1)
    display.phase(inside, RUNNING)
    display.waiting(inside)
    assert screen(stream.getvalue()) == [
        status(1, inside, "running", 11),
        status(2, across, "running: container distval-abc123-across-n2 stopped with exit code 1", 12),
    ]
    # across finishes first: its result line goes above, inside's status line stays below it.
    display.scenario_finished(failing(across))
    shown = screen(stream.getvalue())
    assert [TIMESTAMP.sub("", line) for line in shown] == [
        f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
        status(1, inside, "running", 11),
    ]
    # A third scenario (a rerun of across) joins: the result line above is not touched.
    display.scenario_started(across, 2, 2)
    clock.now += 2
    display.waiting(across)
    shown = screen(stream.getvalue())
    assert TIMESTAMP.sub("", shown[0]) == f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)"
    assert shown[1:] == [status(1, inside, "running", 13), status(2, across, "setting up", 2)]
    display.scenario_finished(passing(inside))
    display.scenario_finished(failing(across))
    display.close()
    assert [TIMESTAMP.sub("", line) for line in screen(stream.getvalue())] == [
        f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
        f"{INSIDE}: passed in 4.2 s (3 passed)",
        f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
        "",
    ]


def test_terminal_shorter_status_lines_leave_nothing_behind() -> None:
    inside, across = plans()
    clock, stream = Clock(), Terminal()
    display = ProgressDisplay(stream, clock=clock, columns=200, rows=24)
    display.scenario_started(inside, 1, 2)
    display.scenario_started(across, 2, 2)
    display.note(inside, "a long note " * 5)
    display.note(across, "another long note " * 5)
    display.note(inside, "short")
    display.phase(across, RUNNING)
    assert screen(stream.getvalue()) == [status(1, inside, "setting up: short", 0), status(2, across, "running", 0)]
    display.close()
    assert screen(stream.getvalue()) == [""]


def test_terminal_more_running_scenarios_than_rows() -> None:
    config = "scenarios:\n" + "".join(
        f"  - {{name: s{i}, topology: in-container, world_size: 2, checks: [env]}}\n" for i in range(1, 6)
    )
    scenario_plans = [plan_scenario(s, RUN_ID, IMAGE) for s in parse_config(config, "many.yaml").scenarios]
    stream = Terminal()
    display = ProgressDisplay(stream, clock=Clock(), columns=120, rows=4)
    for index, plan in enumerate(scenario_plans, start=1):
        display.scenario_started(plan, index, 5)
    # 4 rows: 3 for status lines, one left for the cursor's row when a permanent line pushes them down.
    assert screen(stream.getvalue()) == [
        "[1/5] s1 (in-container, 2 ranks) | 2 ranks in 1 container | setting up | 0 s",
        "[2/5] s2 (in-container, 2 ranks) | 2 ranks in 1 container | setting up | 0 s",
        "... and 3 more running",
    ]


# --- a real pseudo-terminal, two worker threads ---------------------------------------------------


class PseudoTerminal:
    """A pty of ``columns`` x ``rows``: the display writes to its slave end; a reader thread drains the
    master end (a full pty buffer would block the writers) and pyte plays what it read."""

    MARK = b"\x1b[0m"  # resets colours (none are used): invisible, and never written by the display

    def __init__(self, columns: int, rows: int) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.stream = open(slave, "w", encoding="utf-8", closefd=True)
        self.screen = pyte.Screen(columns, rows)
        self._bytes = pyte.ByteStream(self.screen)
        self._received = bytearray()
        self._played = 0
        self._marks = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the slave end is closed
                return
            if not data:
                return
            with self._lock:
                self._received += data

    def settle(self, timeout_s: float = 10.0) -> list[str]:
        """Once everything written so far has come through (a mark written after it has), the screen's
        rows down to the last non-blank one. Call it while nobody else writes."""
        self._marks += 1
        self.stream.write(self.MARK.decode())
        self.stream.flush()
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if self._received.count(self.MARK) >= self._marks:
                    self._bytes.feed(bytes(self._received[self._played :]))
                    self._played = len(self._received)
                    break
            assert time.monotonic() < deadline, "the pty did not pass on what was written"
            time.sleep(0.01)
        rows = [line.rstrip() for line in self.screen.display]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    def close(self) -> None:
        self.stream.close()
        self._reader.join(timeout=5)
        os.close(self.master)


def test_two_worker_threads_on_a_real_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    inside, across = plans()
    terminal = PseudoTerminal(columns=140, rows=12)
    try:
        display = ProgressDisplay(terminal.stream, clock=Clock())
        assert display.tty  # decided by isatty() on the pty, sized by the pty's window size
        both_running, go_on, inside_done = threading.Barrier(3), threading.Barrier(3), threading.Event()

        def run(plan: ScenarioPlan, index: int) -> None:
            display.scenario_started(plan, index, 2)
            display.phase(plan, RUNNING)
            for step in range(200):  # many redraws from both threads at once
                display.note(plan, f"step {step}")
                display.waiting(plan)
            both_running.wait()
            go_on.wait()
            if plan is inside:
                display.phase(plan, REMOVING)
                display.scenario_finished(passing(plan))
                inside_done.set()
            else:
                inside_done.wait()
                display.scenario_finished(failing(plan))

        threads = [threading.Thread(target=run, args=(plan, index)) for index, plan in ((1, inside), (2, across))]
        for thread in threads:
            thread.start()
        both_running.wait()
        assert terminal.settle() == [
            f"[1/2] {INSIDE} | 2 ranks in 1 container | running: step 199 | 0 s",
            f"[2/2] {ACROSS} | 3 ranks in 3 containers, one each | running: step 199 | 0 s",
        ]
        go_on.wait()
        for thread in threads:
            thread.join()
        display.close()
        assert [TIMESTAMP.sub("", line) for line in terminal.settle()] == [
            f"{INSIDE}: passed in 4.2 s (3 passed)",
            f"{ACROSS}: error in 12.0 s (1 skipped; failed: all_reduce; error: exit_status)",
        ]
        assert terminal.screen.cursor.y == 2  # the cursor waits below the result lines, where stdout goes on
    finally:
        terminal.close()
