"""The target interface: what ``distval run`` needs of whatever runs a scenario (one Docker Engine, several, local
processes), so that the command itself is the same loop for all of them.

A target plans (pure: the dry run ``distval plan`` prints, nothing touched), refuses what it lacks before anything
runs (distval/targets/declarations.py), opens what execution needs (an Engine and its reaper, the images, a local
session), executes one scenario plan at a time (from up to --jobs threads) and closes, removing what the run made
(TorchX's schedulers: ``_submit_dryrun`` returns the exact arguments and ``schedule`` only executes them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from distval.config import Config, Scenario
from distval.plan.identity import with_hashes
from distval.plan.model import RunPlan, ScenarioPlan, run_slugs
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult
from distval.run.events import RunEvents
from distval.targets.capabilities import TargetDeclaration

Log = Callable[[str], None]


class Target(Protocol):
    declaration: TargetDeclaration

    def plan_scenario(self, scenario: Scenario, run_id: str, slug: str, image: str | None = None) -> ScenarioPlan:
        """The scenario's plan on this target: pure (no Engine, no process), exactly what ``execute`` runs.
        ``image``: run this image instead of the one the target runs (--reference's; only where the target
        declares the ``reference`` capability)."""
        ...

    def open(self, plan: RunPlan, log: Log) -> None:
        """Everything ``execute`` needs for this plan (Engines, images, the reaper, a local session); ``close``
        undoes it, also when this raises part way."""
        ...

    def execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        """Run one scenario plan (any thread); everything it made is removed before it returns, unless the target
        keeps it for ``settle`` (--keep-on-failure)."""
        ...

    def execute_again(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        """The same, for a re-measurement: never kept."""
        ...

    def settle(self, result: ScenarioResult) -> None:
        """A scenario's verdict is known (any thread): keep or remove what it left."""
        ...

    def interrupted(self) -> None:
        """The run was stopped (Ctrl-C, SIGTERM): nothing is kept."""
        ...

    def close(self) -> None:
        """Remove what the run made (but what is kept) and end what ``open`` started; never raises for that."""
        ...

    def engine_version(self) -> str | None:
        """The Docker Engine's version for the reports (None where there is none)."""
        ...

    def closing_lines(self) -> list[str]:
        """What to tell after the summary (what was kept and how to remove it)."""
        ...


def plan_on(target: Target, config: Config, run_id: str) -> RunPlan:
    """Every scenario of the config planned on ``target`` (each with its run-unique slug), each carrying its scenario
    hash: computed here, from the plan itself, never again by the results."""
    plans = [target.plan_scenario(s, run_id, slug) for s, slug in zip(config.scenarios, run_slugs(config), strict=True)]
    return RunPlan(run_id=run_id, config_path=config.path, scenarios=tuple(with_hashes(p) for p in plans))


# A reference run's slug: the candidate's, marked (its containers and networks are named apart from the candidate's).
REFERENCE_SLUG_SUFFIX = "-ref"


def plan_reference(target: Target, plan: RunPlan, image: str) -> tuple[ScenarioPlan, ...]:
    """Each of ``plan``'s scenarios planned again on ``target`` with the reference ``image`` (--reference), in the
    same order, its slug marked: the same scenario, another image, and another scenario hash."""
    plans = [target.plan_scenario(p.scenario, plan.run_id, p.slug[:26] + REFERENCE_SLUG_SUFFIX, image) for p in plan.scenarios]
    return tuple(with_hashes(p) for p in plans)


def refuse_what_it_lacks(target: Target, plan: RunPlan, options: Sequence[str] = ()) -> None:
    """BadInput naming every capability the plan's scenarios or the run's options ask of ``target`` that it lacks
    (and does not skip with a reason): nothing runs without what it asked for."""
    target.declaration.refuse((s.scenario for s in plan.scenarios), options)
