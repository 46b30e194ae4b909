"""The slurm target (``distval run --target slurm``): each scenario exported as a job (distval/targets/slurm/export.py)
into a directory on the cluster's shared filesystem, submitted with ``sbatch``, followed with the scenario's deadline
(queueing included: a job that never starts is as late as one that hangs), collected (distval/targets/slurm/collect.py)
and cancelled with ``scancel`` whenever it is still queued or running when the wait ends: the deadline, Ctrl-C, SIGTERM
(the run sets ``stop``; ``interrupted`` and ``close`` cancel every job still known). Nothing is left queued or
running; the job directories stay, as Slurm's own output files do.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

from distval.config import Scenario
from distval.config.shipped import DEFAULT_IMAGE
from distval.plan.model import RunPlan, ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult
from distval.run.events import RunEvents
from distval.targets.base import Log
from distval.targets.declarations import SLURM
from distval.targets.docker import plan as one_engine
from distval.targets.slurm.collect import JobState, outcome_of, read_job_facts
from distval.targets.slurm.export import JobDir, export_scenario, job_names, write_job
from distval.targets.slurm.integrations import OCI
from distval.targets.slurm.jobs import ACTIVE, Commands, cancel, follow, lost_nodes, started_at, submit

# After the deadline, what the job may take to be cancelled and its steps to end (KillWait and the runtime's kill).
CANCEL_MARGIN_S = 60.0


class SlurmTarget:
    declaration = SLURM

    def __init__(
        self,
        commands: Commands,
        directory: str,
        image: str | None,
        config_path: str,
        integration: str = OCI,
        bundle: str | None = None,
        image_config: dict[str, Any] | None = None,
        partition: str | None = None,
        image_options: tuple[str, ...] = ("--target", SLURM.name, "--image"),
    ) -> None:
        """``directory``: where the jobs' directories go, on a filesystem every node sees at the same path;
        ``image_options``: what its plans' reproduce command says before the image (--target slurm and the options
        that chose this target: kind.py)."""
        self.commands = commands
        self.directory = Path(directory).resolve()
        self.image = image
        self.config_path = config_path
        self.integration = integration
        self.bundle = bundle
        self.image_config = image_config
        self.partition = partition
        self.image_options = image_options
        self._active: dict[str, str] = {}  # job id -> scenario, for cancelling
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}
        self.timings: dict[str, dict[str, float]] = {}  # scenario -> submit_to_start_s, cancel_s (measured)

    def plan_scenario(self, scenario: Scenario, run_id: str, slug: str, image: str | None = None) -> ScenarioPlan:
        plan = one_engine.plan_scenario(scenario, run_id, image or self.image or scenario.image or DEFAULT_IMAGE, slug)
        return dataclasses.replace(plan, image_options=self.image_options)  # reproduced on Slurm, not on Docker

    def open(self, plan: RunPlan, log: Log) -> None:
        self._names = dict(zip((s.slug for s in plan.scenarios), job_names(s.slug for s in plan.scenarios), strict=True))

    def execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        deadline = time.monotonic() + plan.deadline_s
        name = self._names.get(plan.slug, plan.slug)
        job = export_scenario(
            plan,
            name,
            str(self.directory / name),
            self.integration,
            self.config_path,
            self.bundle,
            self.image_config,
            self.partition,
        )
        if job.refused is not None:
            return ScenarioOutcome(plan=plan, image_id=None, duration_s=0.0, containers=(), setup_error=job.refused)
        directory = write_job(job, self.directory)
        submitted = submit(self.commands, str(directory / "job.sbatch"))
        with self._lock:
            self._active[submitted.job_id] = plan.scenario.name
        try:
            state = follow(self.commands, submitted.job_id, deadline, stop)
            start = started_at(self.commands, submitted.job_id)
            timing = self.timings.setdefault(plan.scenario.name, {})
            if start is not None:
                timing["submit_to_start_s"] = max(0.0, start - submitted.submitted_at)
            if state.state.rstrip("+") in ACTIVE:
                began = time.monotonic()
                reason = "stopped (Ctrl-C or SIGTERM)" if stop.is_set() else f"past its deadline of {plan.deadline_s:g} s"
                state = JobState(
                    "CANCELLED", f"{reason}; distval cancelled it: {cancel(self.commands, submitted.job_id) or 'gone'}"
                )
                timing["cancel_s"] = time.monotonic() - began
        except BaseException:
            # Ctrl-C or SIGTERM raised in this thread (a run of one scenario executes it in the main thread): the job
            # is cancelled here, before it leaves the jobs that interrupted() and close() would cancel.
            cancel(self.commands, submitted.job_id)
            raise
        finally:
            with self._lock:
                self._active.pop(submitted.job_id, None)
        facts = read_job_facts(JobDir(str(directory)))
        lost = lost_nodes(self.commands, facts.nodes) if facts is not None else ()
        outcome = outcome_of(directory, dataclasses.replace(state, lost_nodes=lost))
        # The job's plan file's plan, reproduced as this target's plans are.
        return dataclasses.replace(outcome, plan=dataclasses.replace(outcome.plan, image_options=plan.image_options))

    execute_again = execute

    def settle(self, result: ScenarioResult) -> None:
        """Nothing to keep or remove: the job has ended; its directory stays."""

    def interrupted(self) -> None:
        self._cancel_all()

    def close(self) -> None:
        self._cancel_all()

    def _cancel_all(self) -> None:
        with self._lock:
            jobs = list(self._active)
        for job_id in jobs:
            try:
                cancel(self.commands, job_id)
            except Exception:  # noqa: BLE001 - close never raises; the next job still gets its scancel
                continue

    def engine_version(self) -> str | None:
        return None

    def closing_lines(self) -> list[str]:
        return [f"the jobs' directories (records, output): {self.directory}"]
