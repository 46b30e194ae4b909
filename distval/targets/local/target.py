"""The local target (host mode): every node as local processes with a local Python's torch; no Docker."""

from __future__ import annotations

import threading

from distval.config import Scenario
from distval.errors import InternalError
from distval.plan.model import RunPlan, ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult
from distval.run.events import RunEvents
from distval.targets.base import Log
from distval.targets.declarations import LOCAL
from distval.targets.local.plan import plan_local_scenario, visible_devices_from_env
from distval.targets.local.runtime import LocalSession, find_python


class LocalTarget:
    declaration = LOCAL

    def __init__(self, run_id: str, python: str | None, dry_run: bool = False) -> None:
        """``python``: --python, over each scenario's ``python`` (found on PATH); ``dry_run``: only plans
        (``distval plan``), so its session makes no directory and the plan names the one a run would make."""
        self.session = LocalSession(run_id, python, dry_run)
        self.devices = visible_devices_from_env()

    def plan_scenario(self, scenario: Scenario, run_id: str, slug: str, image: str | None = None) -> ScenarioPlan:
        if image is not None:  # refused before planning: the local target lacks "reference" (declarations.py)
            raise InternalError(ValueError(f"the local target runs no image; asked to plan {image}"))
        python = self.session.python or find_python(scenario.python, f"scenario {scenario.name}'s python (give --python PATH):")
        return plan_local_scenario(scenario, run_id, python, self.session.root, slug, self.devices)

    def open(self, plan: RunPlan, log: Log) -> None:
        """Nothing to open: the session's watchdog starts with the first scenario."""

    def execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        return self.session.run_scenario(plan, events, stop)

    execute_again = execute

    def settle(self, result: ScenarioResult) -> None:
        """Nothing is kept: the processes end with their scenario."""

    def interrupted(self) -> None:
        """Nothing is kept."""

    def close(self) -> None:
        self.session.close()

    def engine_version(self) -> str | None:
        return None

    def closing_lines(self) -> list[str]:
        return []
