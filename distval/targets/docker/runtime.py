"""Executes a ScenarioPlan against the Engine: each step, resolved with what the Engine has told so far,
verbatim. The runtime decides nothing the plan does not show; it only observes facts (subnets, node 0's
address), waits, enforces the deadline and collects what happened.

The step loop, the deadline and the removal are distval/run/steps.py's; this is its NodeBackend for Docker:
one Engine, or several (--hosts), each container on its host's. The deadline is the harness's own monotonic
clock (docker-py's wait(timeout=) is only an HTTP read timeout, docker-py#2964). Whatever happens, the
scenario's containers and networks are removed before this returns or raises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import distval_suite
from distval.engine_protocol import EngineAPI
from distval.errors import EngineError, PlanError
from distval.labels import LABEL_SCENARIO
from distval.plan.model import CreateNetwork, LearnAddress, LearnSubnets, ScenarioPlan, Step
from distval.plan.placeholders import facts_for_address, resolve
from distval.plan.specs import ContainerPlan, FileCopy
from distval.results.outcome import ScenarioOutcome
from distval.run.events import RunEvents
from distval.run.interrupts import signals_deferred as signals_deferred  # also distval/targets/docker/keep.py's, from here
from distval.run.steps import KILL_SETTLE_S, Collected, Exited, GpuShortfall, NodeBackend, Skip, run_steps
from distval.tarball import Directory, Entry, File, build_tar
from distval.targets.docker.faults import FaultRunner
from distval.targets.docker.stacks import before_kill

# The Engine's wait said a container stopped and its state says it runs (a restart?): wait this long before
# asking again, so as not to spin on the Engine.
RECHECK_S = 0.05
# Across several Engines, how often each Engine the wait does not block on is asked about one of its
# containers: an Engine that stopped answering is that host's error within this, not at the deadline.
HOST_WATCH_S = 2.0
# A container in these states still runs (paused: a freeze fault).
LIVE = ("created", "running", "restarting", "paused")


def suite_dir() -> Path:
    return Path(distval_suite.__file__).resolve().parent


def files_archive(files: tuple[FileCopy, ...]) -> bytes:
    """One tar rooted at / holding a container's FileCopy entries (the suite's *.py for a suite entry)."""
    entries: list[Entry] = []
    for copy in files:
        path = copy.path.strip("/")
        entries.append(Directory(path, copy.mode) if copy.text is None else File(path, copy.text.encode(), copy.mode))
        if copy.suite:
            entries += [File(f"{path}/{source.name}", source.read_bytes()) for source in sorted(suite_dir().glob("*.py"))]
    return build_tar(entries)


def gpu_shortfall(engine: EngineAPI, plan: ScenarioPlan) -> GpuShortfall | None:
    """Why the Engine cannot give this scenario its GPUs (None: it can, or it needs none). Always a skip: the
    Engine's answer is a measurement."""
    needed = plan.gpus_needed
    if not needed:
        return None
    support = engine.gpu_support(plan.image, plan.scenario.python)
    if support.count >= needed:
        return None
    why = support.reason or f"the Engine gives containers {support.count}"
    return GpuShortfall(f"{plan.gpus_needed_text}; {why}")


def run_scenario(
    engine: EngineAPI,
    plan: ScenarioPlan,
    events: RunEvents,
    stop: threading.Event | None = None,
    hosts: Mapping[str, EngineAPI] | None = None,
    remove: bool = True,
    before_start: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ScenarioOutcome:
    """``hosts``: the Engine of each --hosts URL a step or container names (distval/targets/engines/runtime.py); ``engine``
    runs the steps that name none. ``remove`` False (--keep-on-failure): the scenario's resources stay; the
    caller removes or keeps them once it knows the verdict (distval/targets/docker/keep.py). ``before_start``: called before
    the scenario starts any container (GPU probe, host probe, its own): the run's reaper must run first
    (distval/targets/docker/reaper.py ReaperLaunch), while creating networks and containers may go on beside its start.
    ``clock``: the deadline's and the host watch's (run_steps)."""
    nodes = EngineNodes(engine, plan, events, hosts, before_start, clock)
    return run_steps(nodes, plan, events, stop, remove, clock)


class EngineNodes(NodeBackend):
    """A scenario's containers on one Engine or several (--hosts): the step loop's NodeBackend for Docker. A step
    runs on the Engine of the host it names; a container is waited on, killed and read on its own host's."""

    kind = "container"
    setup_errors: tuple[type[Exception], ...] = (EngineError,)

    def __init__(
        self,
        engine: EngineAPI,
        plan: ScenarioPlan,
        events: RunEvents,
        hosts: Mapping[str, EngineAPI] | None = None,
        before_start: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: when the other Engines are due to be asked (HOST_WATCH_S); the step loop's own (run_steps)."""
        self.plan, self.events = plan, events
        self._clock = clock
        self.engines = dict(hosts or {})
        # Host 0's Engine: the image's, the GPUs', the faults', and that of every step that names no host.
        self.engine = self.engines.get(plan.hosts[0], engine) if plan.hosts else engine
        self.handles: dict[str, Any] = {}  # container name -> the Engine's handle, in creation order
        self._before_start = before_start
        self._watch_at: float | None = None

    def on(self, host: str) -> EngineAPI:
        return self.engines.get(host, self.engine)

    def of(self, name: str) -> EngineAPI:
        """The Engine of a container: its own host's."""
        return self.on(self.plan.container(name).host)

    # -- setup --------------------------------------------------------------------------------------------
    def image_id(self) -> str | None:
        image = self.engine.image(self.plan.image)
        return image.id if image else None

    def before_start(self) -> None:
        """Before anything of the scenario starts (GPU probe, host probe, its own): the run's reaper must run first."""
        if self._before_start is not None:
            self._before_start()

    def gpu_shortfall(self) -> GpuShortfall | None:
        if self.plan.gpus_needed:
            self.before_start()  # the GPU probe starts a container
        return gpu_shortfall(self.engine, self.plan)

    def run_step(self, step: Step, facts: dict[str, str]) -> Skip | None:
        plan = self.plan
        if isinstance(step, CreateNetwork):
            network = resolve(plan.network_named(step.network), facts)
            try:
                self.on(step.host).create_network(network)
            except EngineError as exc:
                if not network.ipv6:
                    raise
                return Skip(f"the Docker Engine cannot create an IPv6 network here: {exc}", "ipv6")
        elif isinstance(step, LearnSubnets):
            facts["subnets"] = ",".join(self.on(step.host).network_subnets(step.network))
        elif isinstance(step, LearnAddress):
            address = self.on(step.host).address(self.handles[step.container], step.network, ipv6=step.ipv6)
            facts.update(facts_for_address(address))
            self.events.note(plan, f"node 0 is at {address}")
        else:
            # ProbeHost is the engines target's (distval/targets/engines/runtime.py HostsNodes).
            raise PlanError(f"the Docker runtime has no step {type(step).__name__} of its own")
        return None

    def create(self, node: ContainerPlan, host: str) -> None:
        engine = self.on(host)
        handle = engine.create_container(node)
        self.handles[node.name] = handle
        for extra in node.networks[1:]:
            engine.connect(extra, handle)
        engine.put_archive(handle, "/", files_archive(node.files))

    def start(self, name: str, host: str) -> None:
        self.on(host).start(self.handles[name])

    def started_note(self, count: int) -> str:
        return f"started {count} container(s)"

    # -- while the containers run -------------------------------------------------------------------------
    def overseer(self, nodes: Sequence[str], deadline: float) -> FaultRunner | None:
        if self.plan.faults is None:
            return None
        plan, handles = self.plan, {n: self.handles[n] for n in nodes}
        return FaultRunner(self.engine, plan, handles, lambda text: self.events.note(plan, text), deadline)

    def wait(self, running: Sequence[str], timeout_s: float) -> dict[str, Exited]:
        """Blocks on the Engine's wait API for the first container instead of polling inspect: an exit is seen at
        once (a 0.2 s poll cost 0.1 s per scenario on average and ~5 inspects per second per container)."""
        waited = running[0]
        stopped = self._watch_other_engines(running, waited)
        if self.of(waited).wait_stopped(self.handles[waited], timeout_s):
            state = self.exited(waited)
            if state is not None:
                stopped[waited] = state
            else:
                time.sleep(RECHECK_S)  # the wait and the state disagree (a restart?): do not spin on the Engine
        return stopped

    def _watch_other_engines(self, running: Sequence[str], waited: str) -> dict[str, Exited]:
        """The wait blocks on one container, of one Engine: every HOST_WATCH_S, ask every other Engine of the
        scenario (--hosts) about one of its running containers. One that stopped answering raises its host's
        EngineError now (a node's Engine stopped mid-run: seen within HOST_WATCH_S instead of at the scenario's
        deadline); the containers seen stopped are returned as the wait's."""
        now = self._clock()
        if self._watch_at is None:
            self._watch_at = now + HOST_WATCH_S
        if now < self._watch_at:
            return {}
        self._watch_at = now + HOST_WATCH_S
        asked = {id(self.of(waited))}
        stopped: dict[str, Exited] = {}
        for name in running:
            if id(self.of(name)) not in asked:
                asked.add(id(self.of(name)))
                state = self.exited(name)
                if state is not None:
                    stopped[name] = state
        return stopped

    def exited(self, name: str) -> Exited | None:
        state = self.of(name).state(self.handles[name])
        return None if state.status in LIVE else Exited(state.exit_code)

    def before_kill(self, running: Sequence[str], stop: threading.Event) -> None:
        # Stacks and flight recorder, bounded. Each handle carries its own Engine's client.
        before_kill(self.of(running[0]), {n: self.handles[n] for n in running}, self.plan, self.events, stop)

    def kill(self, name: str) -> None:
        self.of(name).kill(self.handles[name])

    # -- afterwards ---------------------------------------------------------------------------------------
    def collect(self, name: str) -> Collected:
        engine, handle, node = self.of(name), self.handles[name], self.plan.container(name)
        # A killed container needs a moment to reach 'exited' before its exit code is final.
        state = engine.state(handle)
        if state.status != "exited":
            engine.wait_stopped(handle, KILL_SETTLE_S)
            state = engine.state(handle)
        stdout, stderr = self._logs(name)
        problem = None
        files: dict[str, bytes] = {}
        try:
            files = engine.read_files(handle, node.results_dir)
        except EngineError as exc:
            problem = f"results could not be copied out of {name}: {exc}"
        if state.oom_killed:
            problem = f"container {name} was killed by the kernel's OOM killer"
        return Collected(state.exit_code, stdout, stderr, files, problem)

    def salvage(self, name: str) -> Collected:
        return Collected(None, *self._logs(name))

    def _logs(self, name: str) -> tuple[str, str]:
        try:
            return self.of(name).logs(self.handles[name])
        except EngineError as exc:
            return "", f"(logs unavailable: {exc})"

    def remove(self) -> None:
        """Remove the scenario's containers and networks from every Engine it used. With several hosts, one that
        cannot be reached is noted (the outcome already names it) and the others are still cleaned."""
        used = [self.engines[h] for h in self.plan.hosts if h in self.engines] or [self.engine]
        for each in used:
            try:
                each.remove_labelled(f"{LABEL_SCENARIO}={self.plan.scenario.name}")
            except EngineError as exc:
                if len(used) == 1:
                    raise
                self.events.note(self.plan, f"cleanup: {exc}")
