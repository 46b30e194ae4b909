"""Live progress on stderr while a run goes on, from the runtime's explicit events (``events.RunEvents``).

``ProgressDisplay`` implements ``RunEvents``. With ``--jobs`` > 1 the runtime's worker threads call it
at once, so every event takes one lock and writes whole lines under it: lines never interleave.

On a terminal: one status line per running scenario, at the bottom, rewritten in place; each finished
scenario leaves one permanent line above them. A status line says which scenario (``[2/3]``), its
ranks and containers, its phase (and the last note, e.g. a container that exited non-zero) and the
seconds since it started; with exactly one scenario running the screen is what it was before scenarios
ran in parallel.

Why a line per scenario rather than one combined line: ``--jobs`` runs up to 8 scenarios by default,
and one line of 80 columns cannot name 8 scenarios with their phase and time; a combined line would
have to drop some, while a line each shows every running scenario in full. The cost is moving the
cursor up (``ESC [ n A``) to the first status line before rewriting them: every terminal but
``TERM=dumb`` (treated as no terminal) understands it, and the rest is carriage returns and spaces as
before. Each line is cut one column short of the width so that none wraps (a wrapped line would make
the cursor-up count wrong), and the block never grows past the terminal's height less one line (the
last line then says how many more run). Only the block's own lines are ever rewritten or blanked: a
permanent line, once written, stays.

Elsewhere (CI logs, files, ``TERM=dumb``): every event of every scenario is a plain line stamped with
the run's elapsed time and naming its scenario, so interleaved scenarios stay readable; a container
that exits with a non-zero (or unknown) code gets a line, and a scenario with nothing new to say for
``heartbeat_s`` gets a line with its phase and elapsed time.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from distval.escape import terminal_line, terminal_text
from distval.plan.model import ScenarioPlan
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from distval.results.scenario import ScenarioResult
from distval.run.events import SETTING_UP

HEARTBEAT_S = 30.0
CURSOR_UP = "\x1b[{}A"


def layout(plan: ScenarioPlan) -> str:
    """Where the ranks run, in words: '2 ranks in 1 container' or '3 ranks in 3 containers, one each'."""
    ranks = plan.scenario.world_size
    containers = len(plan.containers)
    text = f"{ranks} rank{'s' if ranks != 1 else ''} in {containers} container{'s' if containers != 1 else ''}"
    return text + (", one each" if containers > 1 and containers == ranks else "")


def _counts(result: ScenarioResult) -> str:
    by_status: dict[str, list[str]] = {}
    for case in result.cases:
        by_status.setdefault(case.status, []).append(case.name)
    parts = [f"{len(by_status[s])} {s}" for s in (PASSED, SKIPPED) if s in by_status]
    parts += [f"{s}: {', '.join(by_status[s])}" for s in (FAILED, ERROR) if s in by_status]
    return "; ".join(parts) or "no results"


@dataclass
class _Running:
    """What the display knows of one running scenario."""

    plan: ScenarioPlan
    index: int
    total: int
    started: float
    last_line: float  # when its last plain line was written (for the heartbeat)
    phase: str = SETTING_UP
    detail: str = ""


class ProgressDisplay:
    """Progress on ``stream`` (None: silent). ``tty`` defaults to ``stream.isatty()`` (TERM=dumb: not a TTY).

    ``columns`` and ``rows`` fix the terminal's size (default: asked on every redraw).
    """

    def __init__(
        self,
        stream: TextIO | None,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        columns: int | None = None,
        rows: int | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        rank_output: bool = False,
    ) -> None:
        self.stream = stream
        self.rank_output = rank_output  # --verbose: each scenario's rank output once it ends
        if tty is None:
            tty = stream is not None and _isatty(stream) and os.environ.get("TERM") != "dumb"
        self.tty = tty
        self._clock = clock
        self._columns = columns
        self._rows = rows
        self._heartbeat_s = heartbeat_s
        self._lock = threading.RLock()
        self._started = clock()
        self._running: dict[str, _Running] = {}  # by scenario name
        self._detail = ""  # a build tool's last line, shown while no scenario runs
        self._drawn: list[str] = []  # the status lines now on the terminal; the cursor is on the last one

    # -- events (RunEvents) ----------------------------------------------------------------------

    def scenario_started(self, plan: ScenarioPlan, index: int, total: int) -> None:
        if self.stream is None:
            return
        with self._lock:
            now = self._clock()
            self._running[plan.scenario.name] = _Running(plan, index, total, now, now)
            self._detail = ""
            if self.tty:
                self._redraw()
            else:
                self._line(f"{plan.suite_name}: starting on {plan.image} (scenario {index} of {total}; {layout(plan)})")

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        if self.stream is None:
            return
        with self._lock:
            running = self._running.get(plan.scenario.name)
            if running is None or running.phase == name:
                return
            running.phase = name
            running.detail = ""
            self._about(running, name)

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        if self.stream is None:
            return
        with self._lock:
            running = self._running.get(plan.scenario.name) if plan is not None else None
            if running is not None:
                running.detail = line
                self._about(running, line)
            elif plan is not None:
                self._line(f"{plan.suite_name}: {line}")
            elif self.tty and line.startswith("  "):
                # A build tool's output line (fixtures: "  mmdebstrap: ...", "  build: ..."): status line only.
                self._detail = line.strip()
                self._redraw()
            else:
                self._line(line)

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        if exit_code == 0:
            return  # the scenario's result line says how each container ended; only a surprise is news
        code = "an unknown exit code" if exit_code is None else f"exit code {exit_code}"
        self.note(plan, f"container {container} stopped with {code}")

    def waiting(self, plan: ScenarioPlan) -> None:
        """Time moves on screen; off a terminal, a scenario silent for ``heartbeat_s`` gets a line."""
        if self.stream is None:
            return
        with self._lock:
            if self.tty:
                self._redraw()
                return
            running = self._running.get(plan.scenario.name)
            if running is not None and self._clock() - running.last_line >= self._heartbeat_s:
                elapsed = self._clock() - running.started
                self._about(running, f"{running.phase}, {elapsed:.0f} s since it started")

    def scenario_finished(self, result: ScenarioResult) -> None:
        if self.stream is None:
            return
        with self._lock:
            self._running.pop(result.plan.scenario.name, None)
            self._line(f"{result.plan.suite_name}: {result.status} in {result.duration_s:.1f} s ({_counts(result)})")
            if self.rank_output and result.logs:
                self._block(result.plan.suite_name, result.logs)

    # -- the rest --------------------------------------------------------------------------------

    def log(self, line: str) -> None:
        """A line from outside any scenario (the Progress callback of a fixture build)."""
        self.note(None, line)

    def close(self) -> None:
        """Take the status lines off the terminal (before anything else is printed) and forget what ran."""
        with self._lock:
            self._running.clear()
            self._detail = ""
            if self.stream is not None and self.tty:
                self._draw([])

    def status_lines(self) -> list[str]:
        """The status lines a terminal shows now, uncut: one per running scenario, in start order."""
        with self._lock:
            now = self._clock()
            lines = [f"[{now - self._started:6.1f}s] {self._detail}"] if self._detail else []
            for running in sorted(self._running.values(), key=lambda r: r.index):
                phase = f"{running.phase}: {running.detail}" if running.detail else running.phase
                lines.append(
                    f"[{running.index}/{running.total}] {running.plan.suite_name} | {layout(running.plan)} "
                    f"| {phase} | {now - running.started:.0f} s"
                )
            return lines

    # -- drawing (callers hold the lock) ---------------------------------------------------------

    def _about(self, running: _Running, text: str) -> None:
        """News about one scenario: its status line on a terminal, else a plain line naming it."""
        if self.tty:
            self._redraw()
        else:
            self._line(f"{running.plan.suite_name}: {text}")
            running.last_line = self._clock()

    def _redraw(self) -> None:
        lines = self.status_lines()
        height = max(self._height() - 1, 1)
        if len(lines) > height:
            lines = lines[: height - 1] + [f"... and {len(lines) - height + 1} more running"]
        # One column short of the width: a line that fills it wraps on some terminals, and the cursor
        # movements then land in the wrong row.
        width = max(self._width() - 1, 10)
        # Controls out before the cut: scenario and case names, notes and build output are others' text.
        self._draw([terminal_line(line)[:width] for line in lines])

    def _draw(self, lines: list[str]) -> None:
        """Replace the status lines on screen with ``lines``: back to the first one, rewrite each (spaces
        over what is longer than the new text), blank those no longer needed, and end on the last one
        (on the first row's column 0 when none are left, where the next permanent line goes)."""
        if lines == self._drawn:
            return
        old = self._drawn
        out = ["\r"]
        if len(old) > 1:
            out.append(CURSOR_UP.format(len(old) - 1))
        rows = max(len(old), len(lines))
        for row in range(rows):
            text = lines[row] if row < len(lines) else ""
            previous = old[row] if row < len(old) else ""
            out.append(("\n" if row else "") + text + " " * max(len(previous) - len(text), 0))
        if len(lines) < rows:
            up = rows - max(len(lines), 1)
            out.append("\r" + (CURSOR_UP.format(up) if up else ""))
        self._write("".join(out))
        self._drawn = lines

    def _line(self, line: str) -> None:
        """A permanent timestamped line (on a terminal: above the status lines, which are drawn again)."""
        if self.tty:
            self._draw([])
        # The one place permanent lines are made: names and notes can be the image's text (ESC, OSC, bidi).
        self._write(f"[{self._clock() - self._started:6.1f}s] {terminal_line(line)}\n")
        if self.tty:
            self._redraw()

    def _block(self, name: str, text: str) -> None:
        """Rank output (--verbose), each line prefixed with its scenario's name, so that scenarios that end
        together stay apart: the image's text, so controls and bidi overrides are taken out (terminal_text)."""
        if self.tty:
            self._draw([])
        self._write("".join(f"{name} | {line}\n" for line in terminal_text(text).splitlines()))
        if self.tty:
            self._redraw()

    def _width(self) -> int:
        if self._columns is not None:
            return self._columns
        columns = self._terminal_size().columns
        # A pseudo-terminal nobody sized reports 0: then $COLUMNS, else stdout's terminal, else 80.
        return columns or shutil.get_terminal_size((80, 24)).columns

    def _height(self) -> int:
        if self._rows is not None:
            return self._rows
        return self._terminal_size().lines or shutil.get_terminal_size((80, 24)).lines

    def _terminal_size(self) -> os.terminal_size:
        try:
            return os.get_terminal_size(self.stream.fileno())  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            return os.terminal_size((0, 0))

    def _write(self, text: str) -> None:
        assert self.stream is not None
        self.stream.write(text)
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real stream
        return False
