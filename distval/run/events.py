"""What the runtime tells the outside while it runs: explicit events, not guesses from Engine calls.

The runtime calls these methods from its worker threads (``--jobs`` > 1 runs several scenarios at
once), so an implementation must be safe to call from several threads. ``NO_EVENTS`` ignores them all.
"""

from __future__ import annotations

from typing import Protocol

from distval.plan.model import ScenarioPlan
from distval.results.scenario import ScenarioResult

# The phases of one scenario, in the order the runtime enters them.
SETTING_UP = "setting up"
RUNNING = "running"
KILLING = "killing what still runs at the deadline"
COLLECTING = "collecting logs and results"
REMOVING = "removing containers and networks"
PHASES = (SETTING_UP, RUNNING, KILLING, COLLECTING, REMOVING)


class RunEvents(Protocol):
    def scenario_started(self, plan: ScenarioPlan, index: int, total: int) -> None:
        """Scenario ``index`` of ``total`` (1-based) begins; its phase is SETTING_UP."""

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        """The scenario enters phase ``name`` (one of PHASES)."""

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        """A line worth showing (node 0's address, a deadline reached, a fixture build's output)."""

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        """A container of the scenario stopped (exit_code None: unknown, e.g. killed and not yet reaped)."""

    def waiting(self, plan: ScenarioPlan) -> None:
        """Called on every poll while the containers run, so that elapsed time can move on screen."""

    def scenario_finished(self, result: ScenarioResult) -> None:
        """The scenario's verdict is known and its containers and networks are gone."""


class NoEvents:
    """Ignores every event: for callers that show no progress (tests, benchmarks, library use)."""

    def scenario_started(self, plan: ScenarioPlan, index: int, total: int) -> None:
        pass

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        pass

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        pass

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        pass

    def waiting(self, plan: ScenarioPlan) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass


NO_EVENTS: RunEvents = NoEvents()
