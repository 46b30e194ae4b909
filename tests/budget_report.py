"""What each file of Docker or host tests took in this pytest run, against its budget in tests/budgets.py: a table at
the end of the run (pytest's terminal summary), and a JSON file where ``$DISTVAL_BUDGET_REPORT`` names one.

Why: the budgets are the design of CI's time (tests/project/test_budgets.py checks their sum against CI's limit), so
each run must show which file outgrew its line, with the figure to put there. A file over its budget is reported, not
failed: the figure depends on the machine's load, which the run states beside it (the 1-minute load average at the
end), and the budgets are changed by hand with that measurement. A file's tests marked ``waits`` are held to its
waiting part (tests/budgets.py WAITING_S) and the others to the rest, each in a table of its own: CI runs them in two
processes, each of which must fit its time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.budgets import BUDGETS_S, WAITING_S, process_budgets
from tests.paths import ROOT

REPORT_ENVIRONMENT = "DISTVAL_BUDGET_REPORT"


def file_of(nodeid: str) -> str:
    """The test file of a node id (``tests/a/test_b_docker.py::test_c[x]`` -> ``tests/a/test_b_docker.py``)."""
    return nodeid.split("::", 1)[0]


def budget_lines(spent: Mapping[str, float], budgets: Mapping[str, int]) -> list[str]:
    """One line per budgeted file that ran: seconds spent, its budget, and OVER where it spent more."""
    lines = []
    for path in sorted(spent, key=lambda p: -spent[p]):
        if path not in budgets:
            continue
        budget = budgets[path]
        flag = "  OVER" if spent[path] > budget else ""
        lines.append(f"{spent[path]:8.1f} s of {budget:5d} s  {path}{flag}")
    return lines


class BudgetReport:
    """Sums each test's setup, call and teardown time per file, its ``waits`` tests apart from the others."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.waiting: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = file_of(report.nodeid)
        if path in BUDGETS_S:
            spent = self.waiting if "waits" in report.keywords else self.spent
            spent[path] = spent.get(path, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        main, waiting = process_budgets(BUDGETS_S, WAITING_S)
        tables = [("", budget_lines(self.spent, main)), (", the `waits` tests", budget_lines(self.waiting, waiting))]
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
            }
            Path(target if Path(target).is_absolute() else ROOT / target).write_text(json.dumps(figures, indent=1))
