"""``distval run --keep-on-failure``: the containers and networks of failed scenarios stay for inspection.

With the option, the runtime leaves each scenario's resources in place (``run_scenario(remove=False)``) and
``settle`` decides once the scenario's verdict is known: a scenario that failed or errored is kept, any other
is removed at once. The run's final cleanup removes everything of the run but what was kept; an interrupted
run (Ctrl-C, SIGTERM) keeps nothing. ``instructions`` are the lines that name each kept container, the commands
that inspect it and the one command that removes all of them.

A kept container has exited (its launcher ended, or was killed at the deadline), and ``docker exec`` needs a
running one: the shell command commits the container to a throwaway image, runs a shell in it and removes
the image again, so the shell sees the container's files exactly as the failed run left them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from distval.errors import EngineError
from distval.labels import LABEL_ROLE, LABEL_RUN, LABEL_SCENARIO
from distval.results.outcome import ERROR, FAILED
from distval.results.scenario import ScenarioResult
from distval.run.interrupts import signals_deferred

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

SHELL = "sh"  # every image distval runs has Python, so a POSIX shell; bash is not a given


def inspect_commands(container: str) -> tuple[str, str]:
    """(the logs command, the shell command) for a kept container."""
    image = f"distval-kept:{container}"
    shell = f"docker commit {container} {image} && docker run --rm -it --entrypoint {SHELL} {image}; docker rmi {image}"
    return f"docker logs {container}", shell


def removal_command(run_id: str) -> str:
    return f"distval cleanup --run-id {run_id}"


class Keeper:
    """What the run keeps. ``enabled`` False: nothing (the runtime removes each scenario's resources itself)."""

    def __init__(self, engine: Engine | None, enabled: bool) -> None:
        self.engine = engine
        self.enabled = enabled and engine is not None
        self._lock = threading.Lock()
        self._kept: list[str] = []  # scenario names, in the order they finished

    @property
    def kept(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._kept)

    def settle(self, result: ScenarioResult) -> None:
        """After a scenario's verdict (any worker thread): keep it if it failed, else remove its resources."""
        if not self.enabled or self.engine is None:
            return
        name = result.plan.scenario.name
        if result.status in (FAILED, ERROR):
            with self._lock:
                self._kept.append(name)
            return
        with signals_deferred():
            self.engine.remove_labelled(f"{LABEL_SCENARIO}={name}")

    def forget(self) -> None:
        """An interrupted run keeps nothing."""
        with self._lock:
            self._kept.clear()

    def remove_run(self, engine: Engine) -> None:
        """The run's final cleanup: every container and network of the run but the kept scenarios' and the
        reaper (the caller disarms it afterwards, so that it also covers a distval killed during this cleanup)."""
        kept = set(self.kept)
        found = engine.list_managed([f"{LABEL_RUN}={engine.run_id}"])
        engine.remove_resources(
            [r for r in found if r.labels.get(LABEL_SCENARIO) not in kept and r.labels.get(LABEL_ROLE) != "reaper"]
        )

    def instructions(self) -> list[str]:
        """Per kept container: its scenario, and the commands to read its logs and open a shell on its files;
        then the one command that removes them all. Empty when nothing was kept."""
        kept = self.kept
        if not kept or self.engine is None:
            return []
        try:
            found = self.engine.list_managed([f"{LABEL_RUN}={self.engine.run_id}"])
        except EngineError as exc:
            return [f"cannot list the kept containers: {exc}; `{removal_command(self.engine.run_id)}` removes them"]
        resources = [r for r in found if r.labels.get(LABEL_SCENARIO) in kept and r.labels.get(LABEL_ROLE) != "reaper"]
        containers = sorted(r.name for r in resources if r.kind == "container")
        networks = len(resources) - len(containers)
        lines = [
            f"kept {len(containers)} container(s) and {networks} network(s) of {len(kept)} failed scenario(s) "
            f"(--keep-on-failure): {', '.join(kept)}"
        ]
        for container in containers:
            logs, shell = inspect_commands(container)
            lines += [f"  {container}:", f"    {logs}", f"    {shell}"]
        lines.append(f"remove them: {removal_command(self.engine.run_id)}")
        return lines
