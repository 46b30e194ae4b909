"""Reports people read: progress while running, a summary at the end, JSON and Markdown.

- ``ProgressDisplay``: progress on stderr. On a terminal one status line, rewritten in place (carriage
  return), says which scenario runs, its ranks and containers, its phase and for how long; each finished
  scenario leaves one permanent line. Elsewhere (CI logs, files) every event is a plain timestamped line.
- ``ProgressDisplay`` implements ``events.RunEvents``: the runtime tells it the phases explicitly.
- ``render_summary``: the table printed at the end, with the command that reproduces each failure.
- ``json_report`` / ``write_json``: everything the JUnit file holds, machine-readable (schema in README.md).
- ``render_markdown`` / ``write_markdown`` / ``append_step_summary``: a Markdown summary, for
  ``$GITHUB_STEP_SUMMARY`` (appended to, as GitHub expects) or a file.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO, TypeVar

from harness import __version__
from harness.plan import ScenarioPlan
from harness.results import ERROR, FAILED, PASSED, SKIPPED, CaseResult, RunSummary, ScenarioResult, suite_properties

SCHEMA_VERSION = 1
TABLE_MESSAGE_CHARS = 100
TABLE_NAME_CHARS = 40
MARKDOWN_MESSAGE_CHARS = 2000
MARKDOWN_MAX_FAILURES = 50
HEARTBEAT_S = 30.0
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
SETTING_UP = "setting up"
RUNNING = "running"

E = TypeVar("E")


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


# --- the summary on stdout ------------------------------------------------------------------------


def reproduce_command(summary: RunSummary, scenario: ScenarioResult) -> str:
    """The one command that runs this scenario again, on the same image."""
    config = summary.config_path or "CONFIG"
    return shlex.join(
        ["distval", "run", config, *scenario.plan.target_args, "--filter", glob.escape(scenario.plan.scenario.name)]
    )


def first_line(message: str, limit: int) -> str:
    text = message.strip().splitlines()[0] if message.strip() else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _status_word(status: str) -> str:
    return status.upper() if status in (FAILED, ERROR) else status


def _failing(scenario: ScenarioResult) -> list[CaseResult]:
    return [c for c in scenario.cases if c.status in (FAILED, ERROR)]


def passed_counts(summary: RunSummary) -> tuple[int, int]:
    passed = sum(1 for s in summary.scenarios for c in s.cases if c.status == PASSED)
    return passed, sum(len(s.cases) for s in summary.scenarios)


def render_summary(summary: RunSummary) -> str:
    """A table scenario x testcase -> status and the key message; then how to reproduce each failure."""
    rows: list[tuple[tuple[str, str, str], str]] = [
        (
            (first_line(s.plan.scenario.name, TABLE_NAME_CHARS), first_line(c.name, TABLE_NAME_CHARS), _status_word(c.status)),
            first_line(c.message, TABLE_MESSAGE_CHARS),
        )
        for s in summary.scenarios
        for c in s.cases
    ]
    lines: list[str] = []
    if rows:
        heading = ("scenario", "testcase", "status")
        widths = [max(len(heading[i]), *(len(cells[i]) for cells, _ in rows)) for i in range(3)]

        def row(cells: tuple[str, str, str], message: str) -> str:
            return ("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + "  " + message).rstrip()

        lines.append(row(heading, "message"))
        lines.append(row(("-" * widths[0], "-" * widths[1], "-" * widths[2]), "-" * 7))
        lines += [row(cells, message) for cells, message in rows]
    failing = [(s, _failing(s)) for s in summary.scenarios if s.status != PASSED]
    if failing:
        lines.append("")
        lines.append("To reproduce:")
        for scenario, cases in failing:
            names = ", ".join(f"{c.name} ({c.status})" for c in cases) or "no results"
            lines.append(f"  {scenario.plan.scenario.name}: {names}")
            lines.append(f"    {reproduce_command(summary, scenario)}")
    if summary.early_error is not None:
        kind, message = summary.early_error
        if lines:
            lines.append("")
        lines.append(f"ERROR   {kind}: {first_line(message, 300)}")
    passed, total = passed_counts(summary)
    if lines:
        lines.append("")
    lines.append(f"distval run {summary.run_id}: {passed} of {total} check results passed; exit code {summary.exit_code}")
    return "\n".join(lines) + "\n"


# --- JSON -----------------------------------------------------------------------------------------


def _known(value: str | None) -> str | None:
    return None if value in (None, "", "unknown") else value


def json_report(summary: RunSummary) -> dict[str, Any]:
    """Everything the JUnit file holds, as data (schema_version 1, described in README.md)."""
    scenarios = []
    for scenario in summary.scenarios:
        s = scenario.plan.scenario
        properties = suite_properties(summary, scenario)
        scenarios.append(
            {
                "name": s.name,
                "suite_name": scenario.plan.suite_name,
                "topology": s.topology,
                "world_size": s.world_size,
                "backend": s.backend,
                "image": scenario.plan.image,
                "image_id": _known(properties.get("image_id")),
                "status": scenario.status,
                "duration_s": round(scenario.duration_s, 3),
                "properties": properties,
                "reproduce": reproduce_command(summary, scenario) if scenario.status != PASSED else None,
                "cases": [
                    {
                        "name": c.name,
                        "status": c.status,
                        "message": c.message,
                        "duration_s": round(c.duration_s, 3),
                        "output": c.output,
                        "skipped_ranks": list(c.skipped_ranks),
                    }
                    for c in scenario.cases
                ],
                "logs": scenario.logs,
            }
        )
    early = None
    if summary.early_error is not None:
        early = {"kind": summary.early_error[0], "message": summary.early_error[1]}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": summary.run_id,
        "distval_version": __version__,
        "exit_code": summary.exit_code,
        "early_error": early,
        "engine_version": summary.engine_version,
        "host": summary.host,
        "config": summary.config_path,
        "scenarios": scenarios,
    }


def render_json(summary: RunSummary) -> str:
    return json.dumps(json_report(summary), indent=2, ensure_ascii=False) + "\n"


def _write_atomically(path: str | Path, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)


def write_json(summary: RunSummary, path: str | Path) -> None:
    _write_atomically(path, render_json(summary))


# --- Markdown -------------------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#!~])")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, Markdown and HTML characters escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _fenced(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


VERDICT_ICONS = {PASSED: "✅", FAILED: "❌", ERROR: "❌", SKIPPED: "⏭️"}


def verdict(summary: RunSummary) -> str:
    if summary.early_error is not None:
        return f"stopped early ({summary.early_error[0]})"
    return "passed" if summary.exit_code == 0 else "failed"


def render_markdown(summary: RunSummary) -> str:
    passed, total = passed_counts(summary)
    icon = "✅" if summary.exit_code == 0 else "❌"
    lines = [
        f"## {icon} distval: {verdict(summary)}",
        "",
        f"{passed} of {total} check results passed in {len(summary.scenarios)} scenario(s); exit code {summary.exit_code}. "
        f"Run `{summary.run_id}`, distval {__version__}, Docker Engine {summary.engine_version or 'unknown'}, "
        f"host `{summary.host}`.",
        "",
    ]
    if summary.scenarios:
        lines += [
            "| scenario | topology | ranks | image | status | passed | failed | errors | skipped | time |",
            "|---|---|---:|---|---|---:|---:|---:|---:|---:|",
        ]
        for scenario in summary.scenarios:
            s = scenario.plan.scenario
            count = {status: sum(1 for c in scenario.cases if c.status == status) for status in (PASSED, FAILED, ERROR, SKIPPED)}
            lines.append(
                f"| {_cell(s.name)} | {s.topology} | {s.world_size} | {_cell(scenario.plan.image)} "
                f"| {VERDICT_ICONS.get(scenario.status, '')} {scenario.status} | {count[PASSED]} | {count[FAILED]} "
                f"| {count[ERROR]} | {count[SKIPPED]} | {scenario.duration_s:.1f} s |"
            )
        lines.append("")
    if summary.early_error is not None:
        kind, message = summary.early_error
        lines += [f"### The run stopped early: {_cell(kind)}", "", _fenced(message[:MARKDOWN_MESSAGE_CHARS]), ""]
    failures = [(s, c) for s in summary.scenarios for c in _failing(s)]
    if failures:
        lines += ["### Failures", ""]
        for scenario, case in failures[:MARKDOWN_MAX_FAILURES]:
            message = (
                case.message if len(case.message) <= MARKDOWN_MESSAGE_CHARS else case.message[:MARKDOWN_MESSAGE_CHARS] + "..."
            )
            lines += [
                f"#### {_cell(scenario.plan.scenario.name)} / {_cell(case.name)}: {case.status}",
                "",
                _fenced(message),
                "",
                "Reproduce:",
                "",
                _fenced(reproduce_command(summary, scenario)),
                "",
            ]
        if len(failures) > MARKDOWN_MAX_FAILURES:
            lines += [
                f"... and {len(failures) - MARKDOWN_MAX_FAILURES} more failing testcases (see the JUnit or JSON report).",
                "",
            ]
    return "\n".join(lines)


def write_markdown(summary: RunSummary, path: str | Path) -> None:
    _write_atomically(path, render_markdown(summary))


def append_step_summary(summary: RunSummary, environ: Mapping[str, str] = os.environ) -> str | None:
    """Append the Markdown summary to the file $GITHUB_STEP_SUMMARY names, if set; returns that path."""
    path = environ.get(STEP_SUMMARY_ENV)
    if not path:
        return None
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(render_markdown(summary) + "\n")
    return path
