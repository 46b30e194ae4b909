"""The engines target: a run across several Docker Engines (--hosts, or the scenarios' ``hosts`` with
--hosts-from-config): the image made the same on every host, a reaper on each, every host cleaned at the end."""

from __future__ import annotations

import threading

from distval.config import Scenario
from distval.config.engine_hosts import TlsFiles
from distval.image_names import REAPER_IMAGE
from distval.images.helper_base import DEFAULT, HelperBase
from distval.plan.model import RunPlan, ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult
from distval.run.events import RunEvents
from distval.targets.base import Log
from distval.targets.declarations import ENGINES
from distval.targets.docker.engine_run import EngineRun, announce_run, engine_version, ensure_images
from distval.targets.engines.planning import plan_scenario
from distval.targets.engines.runtime import HostEngine, prepare_hosts, run_across_hosts


class EnginesTarget:
    declaration = ENGINES

    def __init__(
        self,
        urls: tuple[str, ...],
        override: tuple[str, ...],
        image: str | None,
        tls: TlsFiles | None,
        distribution: str,
        warn: Log,
        helpers: HelperBase = DEFAULT,
    ) -> None:
        """``urls``: every Engine of the run, host 0 first; ``override``: --hosts, over every scenario's ``hosts``
        (empty: each scenario's own, and one without any runs on host 0)."""
        self.urls = urls
        self.override = override
        self.image = image
        self.tls = tls
        self.distribution = distribution
        self.helpers = helpers  # what distval's own images are built FROM where an Engine lacks them
        self.warn = warn
        self.hosts: dict[str, HostEngine] = {}
        self.runs: list[EngineRun] = []
        self.version: str | None = None

    def plan_scenario(self, scenario: Scenario, run_id: str, slug: str, image: str | None = None) -> ScenarioPlan:
        return plan_scenario(scenario, run_id, image or self.image, slug, self.override)

    def open(self, plan: RunPlan, log: Log) -> None:
        run_id = plan.run_id
        log(announce_run(run_id))
        log(f"on {len(self.urls)} hosts: `distval cleanup --run-id {run_id} --hosts {','.join(self.urls)}` cleans them all")
        self.hosts = prepare_hosts(
            run_id,
            self.urls,
            self.tls,
            self.distribution,
            [*plan.images, REAPER_IMAGE],  # each Engine's reaper runs in it
            lambda local, image: ensure_images(local, [image], log, self.helpers, self.warn),
            log,
        )
        first = self.hosts[self.urls[0]].engine
        self.version = engine_version(first)
        for url, host in self.hosts.items():  # a reaper on every Engine, each holding that Engine's part
            # Host 0's own Engine removes its part (as a one-Engine run); the others through their host's Engine,
            # whose errors name the host.
            run = EngineRun(host.engine, url=url, remover=None if url == self.urls[0] else host)
            self.runs.append(run)  # kept first: the end waits for its reaper, even after Ctrl-C
            if plan.scenarios:
                run.start_reaper(self.warn, log)

    def _ready(self) -> None:
        for run in self.runs:
            run.reaper_ready()

    def execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        first = self.hosts[self.urls[0]].engine
        return run_across_hosts(first, plan, events, stop, hosts=self.hosts, before_start=self._ready)

    execute_again = execute

    def settle(self, result: ScenarioResult) -> None:
        """Nothing is kept across several Engines (the declaration refuses --keep-on-failure)."""

    def interrupted(self) -> None:
        """Nothing is kept, so nothing to forget."""

    def close(self) -> None:
        for run in self.runs:  # every host is cleaned, whichever fails
            run.close()

    def engine_version(self) -> str | None:
        return self.version

    def closing_lines(self) -> list[str]:
        return []
