"""What each file of Docker or host tests took in this pytest run, against its budget in tests/budgets.py: a table at
the end of the run (pytest's terminal summary), and a JSON file where ``$DISTVAL_BUDGET_REPORT`` names one.

Why: the budgets are the design of CI's time (tests/project/test_budgets.py checks their sum against CI's limit), so
each run must show which file outgrew its line, with the figure to put there. A file over its budget is reported, not
failed: the figure depends on the machine's load, which the run states beside it (the 1-minute load average at the
end), and the budgets are changed by hand with that measurement. A file's tests marked ``waits`` are held to its
waiting part (tests/budgets.py WAITING_S) and the others to the rest, each in a table of its own: CI runs them in two
processes, each of which must fit its time.

The budgets are for testing: the time a test spent having its fixture images built (``fixture_image`` in
tests/conftest.py, also while it waits for another process building them) is not in its file's figure but beside it.
In a fresh run the first test to ask for an image pays for the image and its parents (537 s against the 120 s of an
attestation file in one such run), which said nothing of the file's own time.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.budgets import BUDGETS_S, WAITING_S, process_budgets
from tests.paths import ROOT

REPORT_ENVIRONMENT = "DISTVAL_BUDGET_REPORT"


def file_of(nodeid: str) -> str:
    """The test file of a node id (``tests/a/test_b_docker.py::test_c[x]`` -> ``tests/a/test_b_docker.py``)."""
    return nodeid.split("::", 1)[0]


def budget_lines(
    spent: Mapping[str, float], budgets: Mapping[str, int], building: Mapping[str, float] | None = None
) -> list[str]:
    """One line per budgeted file that ran: seconds spent testing, its budget, OVER where it spent more, and the
    seconds its tests spent having fixture images built, where they did."""
    lines = []
    for path in sorted(spent, key=lambda p: -spent[p]):
        if path not in budgets:
            continue
        budget = budgets[path]
        flag = "  OVER" if spent[path] > budget else ""
        built = (building or {}).get(path, 0.0)
        beside = f"  (+{built:.1f} s having fixture images built)" if built >= 0.05 else ""
        lines.append(f"{spent[path]:8.1f} s of {budget:5d} s  {path}{flag}{beside}")
    return lines


class BudgetReport:
    """Sums each test's setup, call and teardown time per file, its ``waits`` tests apart from the others, less the
    time spent in ``building`` during that phase (counted per file apart)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.spent: dict[str, float] = {}
        self.waiting: dict[str, float] = {}
        self.built: dict[str, float] = {}  # by file: its tests' time having fixture images built
        self._clock = clock
        self._lock = threading.Lock()  # a test may ask for images from threads of its own
        self._building_s = 0.0  # since the last phase's report

    @contextmanager
    def building(self) -> Iterator[None]:
        """Time spent having fixture images built (tests/conftest.py ``fixture_image``): the phase it falls in
        leaves it out of its file's figure."""
        started = self._clock()
        try:
            yield
        finally:
            elapsed = self._clock() - started
            with self._lock:
                self._building_s += elapsed

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        with self._lock:
            built, self._building_s = self._building_s, 0.0
        path = file_of(report.nodeid)
        if path in BUDGETS_S:
            spent = self.waiting if "waits" in report.keywords else self.spent
            built = min(built, report.duration)
            spent[path] = spent.get(path, 0.0) + report.duration - built
            self.built[path] = self.built.get(path, 0.0) + built

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        main, waiting = process_budgets(BUDGETS_S, WAITING_S)
        tables = [
            ("", budget_lines(self.spent, main, self.built)),
            (", the `waits` tests", budget_lines(self.waiting, waiting, self.built)),
        ]
        if not any(lines for _, lines in tables):
            return
        load = os.getloadavg()[0]
        for which, lines in tables:
            if lines:
                title = f"Docker and host test files{which} against tests/budgets.py (load {load:.1f})"
                terminalreporter.write_sep("=", title)
                for line in lines:
                    terminalreporter.write_line(line)
        target = os.environ.get(REPORT_ENVIRONMENT)
        if target:
            figures = {
                "load": load,
                "spent_s": {path: round(s, 1) for path, s in self.spent.items()},
                "waiting_spent_s": {path: round(s, 1) for path, s in self.waiting.items()},
                "building_fixtures_s": {path: round(s, 1) for path, s in self.built.items() if s >= 0.05},
            }
            Path(target if Path(target).is_absolute() else ROOT / target).write_text(json.dumps(figures, indent=1))
