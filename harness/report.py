"""Live progress while a run goes on (the reports written at the end are ``harness.reports``).

- ``ProgressDisplay``: progress on stderr. On a terminal one status line, rewritten in place (carriage
  return), says which scenario runs, its ranks and containers, its phase and for how long; each finished
  scenario leaves one permanent line. Elsewhere (CI logs, files) every event is a plain timestamped line.
- ``ProgressDisplay`` implements ``events.RunEvents``: the runtime tells it the phases explicitly.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import TextIO

from harness.plan import ScenarioPlan
from harness.results import ERROR, FAILED, PASSED, SKIPPED, ScenarioResult

HEARTBEAT_S = 30.0
SETTING_UP = "setting up"


# --- progress -------------------------------------------------------------------------------------


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


class ProgressDisplay:
    """Progress on ``stream`` (None: silent). ``tty`` defaults to ``stream.isatty()`` (TERM=dumb: not a TTY)."""

    def __init__(
        self,
        stream: TextIO | None,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        columns: int | None = None,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.stream = stream
        if tty is None:
            tty = stream is not None and _isatty(stream) and os.environ.get("TERM") != "dumb"
        self.tty = tty
        self._clock = clock
        self._columns = columns
        self._heartbeat_s = heartbeat_s
        self._started = clock()
        self._shown = 0  # characters of the status line now on the terminal
        self._drawn = ""
        self._plan: ScenarioPlan | None = None
        self._position = ""
        self._scenario_started = 0.0
        self._last_line = 0.0
        self.phase_name = ""
        self._detail = ""

    # -- events ----------------------------------------------------------------------------------

    def log(self, line: str) -> None:
        """A progress message from the runtime or a fixture build (the runtime's Progress callback)."""
        if self.stream is None:
            return
        if not self.tty:
            self._line(line)
            return
        if self._plan is not None:
            # During a scenario the status line says it; the scenario's result line stays the only permanent one.
            self._detail = line.removeprefix(f"{self._plan.suite_name}: ")
            self._redraw()
        elif line.startswith("  "):
            # A build tool's output line (fixtures: "  mmdebstrap: ...", "  build: ..."): status line only.
            self._detail = line.strip()
            self._redraw()
        else:
            self._line(line)

    def scenario_started(self, plan: ScenarioPlan, index: int, total: int) -> None:
        self._plan = plan
        self._position = f"[{index}/{total}]"
        self._scenario_started = self._clock()
        self.phase_name = SETTING_UP
        self._detail = ""
        if self.stream is None:
            return
        if self.tty:
            self._redraw()
        else:
            self._line(f"{plan.suite_name}: starting on {plan.image} (scenario {index} of {total}; {layout(plan)})")

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        self.log(f"{plan.suite_name}: {line}" if plan is not None else line)

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        pass  # the scenario's result line says how each container ended

    def waiting(self, plan: ScenarioPlan) -> None:
        self.tick()

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        if name == self.phase_name:
            return
        self.phase_name = name
        self._detail = ""
        if self.stream is None or self._plan is None:
            return
        if self.tty:
            self._redraw()
        else:
            self._line(f"{self._plan.suite_name}: {name}")

    def tick(self) -> None:
        """Called often (every Engine call, so every poll while the containers run): time moves on screen."""
        if self.stream is None or self._plan is None:
            return
        if self.tty:
            self._redraw()
        elif self._clock() - self._last_line >= self._heartbeat_s:
            elapsed = self._clock() - self._scenario_started
            self._line(f"{self._plan.suite_name}: {self.phase_name}, {elapsed:.0f} s since it started")

    def scenario_finished(self, result: ScenarioResult) -> None:
        self._plan = None
        self.phase_name = ""
        self._detail = ""
        if self.stream is None:
            return
        self._line(f"{result.plan.suite_name}: {result.status} in {result.duration_s:.1f} s ({_counts(result)})")

    def close(self) -> None:
        """Take the status line off the terminal (before anything else is printed)."""
        self._plan = None
        self._detail = ""
        self._clear()

    # -- drawing ---------------------------------------------------------------------------------

    def status_text(self) -> str:
        if self._plan is None:
            return f"[{self._clock() - self._started:6.1f}s] {self._detail}" if self._detail else ""
        elapsed = self._clock() - self._scenario_started
        phase = f"{self.phase_name}: {self._detail}" if self._detail else self.phase_name
        return f"{self._position} {self._plan.suite_name} | {layout(self._plan)} | {phase} | {elapsed:.0f} s"

    def _width(self) -> int:
        if self._columns is not None:
            return self._columns
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            columns = 0
        # A pseudo-terminal nobody sized reports 0: then $COLUMNS, else stdout's terminal, else 80.
        return columns or shutil.get_terminal_size((80, 24)).columns

    def _redraw(self) -> None:
        # One column short of the width: a line that fills it wraps on some terminals, and \r then
        # returns to the wrapped part only.
        text = self.status_text()[: max(self._width() - 1, 10)]
        if text == self._drawn:
            return
        self._write("\r" + text + " " * max(self._shown - len(text), 0))
        self._shown = len(text)
        self._drawn = text

    def _clear(self) -> None:
        if self.stream is not None and self.tty and self._shown:
            self._write("\r" + " " * self._shown + "\r")
        self._shown = 0
        self._drawn = ""

    def _line(self, line: str) -> None:
        """A permanent timestamped line (on a terminal: above the status line, which is drawn again)."""
        self._clear()
        self._last_line = self._clock()
        self._write(f"[{self._last_line - self._started:6.1f}s] {line}\n")
        if self.tty:
            self._redraw()

    def _write(self, text: str) -> None:
        assert self.stream is not None
        self.stream.write(text)
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real stream
        return False
