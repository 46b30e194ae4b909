"""The docker target: every scenario's containers on one Docker Engine (DOCKER_HOST)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distval.config import Scenario
from distval.images.helper_base import DEFAULT, HelperBase
from distval.plan.model import RunPlan, ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult
from distval.run.events import RunEvents
from distval.targets.base import Log
from distval.targets.declarations import DOCKER
from distval.targets.docker.engine_run import EngineRun, announce_run, engine_version, ensure_images, reaper_images
from distval.targets.docker.keep import Keeper
from distval.targets.docker.plan import plan_scenario
from distval.targets.docker.runtime import run_scenario

if TYPE_CHECKING:  # docker-py is imported with the Engine, by ``engine_for``, only when a run opens
    from distval.targets.docker.engine import Engine


class DockerTarget:
    declaration = DOCKER

    def __init__(
        self,
        image: str | None,
        engine_for: Callable[[str], Engine],
        keep_on_failure: bool,
        warn: Log,
        helpers: HelperBase = DEFAULT,
    ) -> None:
        """``image``: --image, over every scenario's; ``engine_for(run_id)``: the Engine, asked for only by ``open``;
        ``warn``: where the one line of a run without a reaper goes, and a wait for another fixture builder (both
        said even with --quiet); ``helpers``: what distval's own images (the reaper's, the sample) are built FROM
        where the Engine lacks them."""
        self.image = image
        self.helpers = helpers
        self.engine_for = engine_for
        self.keep_on_failure = keep_on_failure
        self.warn = warn
        self.run: EngineRun | None = None
        self.version: str | None = None

    def plan_scenario(self, scenario: Scenario, run_id: str, slug: str, image: str | None = None) -> ScenarioPlan:
        return plan_scenario(scenario, run_id, image or self.image, slug)

    def open(self, plan: RunPlan, log: Log) -> None:
        engine = self.engine_for(plan.run_id)
        # From here on ``close`` cleans this Engine, whatever stops the run (a signal while images are checked).
        self.run = EngineRun(engine, Keeper(engine, self.keep_on_failure))
        # Said once the Engine answered: before that nothing can be created, and a cleanup hint for an Engine that
        # is not there only misleads.
        log(announce_run(plan.run_id))
        self.version = engine_version(engine)
        ensure_images(engine, plan.images, log, self.helpers, self.warn)
        # The reaper's image is built like a missing fixture; where it cannot be, the run stops (one line): never a
        # reaper in another image.
        ensure_images(engine, reaper_images(engine), log, self.helpers, self.warn)
        if plan.scenarios:
            self.run.start_reaper(self.warn, log)

    def _execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event, remove: bool) -> ScenarioOutcome:
        assert self.run is not None, "open comes first"
        options: dict[str, Any] = {} if remove else {"remove": False}
        if self.run.launch is not None:  # nothing starts before the reaper runs
            options["before_start"] = self.run.reaper_ready
        return run_scenario(self.run.engine, plan, events, stop, **options)

    def execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        # With --keep-on-failure the runtime leaves each scenario's resources; settle decides.
        return self._execute(plan, events, stop, remove=not (self.run is not None and self.run.keeper.enabled))

    def execute_again(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        return self._execute(plan, events, stop, remove=True)

    def settle(self, result: ScenarioResult) -> None:
        if self.run is not None:
            self.run.keeper.settle(result)

    def interrupted(self) -> None:
        if self.run is not None:
            self.run.keeper.forget()

    def close(self) -> None:
        if self.run is not None:
            self.run.close()

    def engine_version(self) -> str | None:
        return self.version

    def closing_lines(self) -> list[str]:
        return self.run.keeper.instructions() if self.run is not None else []
