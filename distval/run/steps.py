"""The step loop that runs one ScenarioPlan on any target: the steps in order, each resolved with the facts learned
so far; then the wait, the deadline, the kill, the collection and the removal. What runs the nodes is a
``NodeBackend``: Docker Engines (distval/targets/docker/runtime.py) or local processes (distval/targets/local/runtime.py).

The deadline is distval's own monotonic clock and starts with the first start, after setup. No wait blocks longer
than WAIT_SLICE_S, so that a stop request (Ctrl-C, SIGTERM: ``stop``) and the deadline are seen within that; what
still runs then is killed and reported. Whatever happens, the backend removes everything of the scenario before
this returns or raises (unless told to keep it: --keep-on-failure), with signals held off so that a second Ctrl-C
cannot cut the removal short.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from distval.errors import EngineError, RunStopped
from distval.plan.model import CreateContainer, ScenarioPlan, StartContainer, Step
from distval.plan.placeholders import facts_on_host, resolve
from distval.plan.specs import ContainerPlan
from distval.results.expectations import FaultLog
from distval.results.outcome import ContainerOutcome, ScenarioOutcome
from distval.run.events import COLLECTING, KILLING, REMOVING, RUNNING, RunEvents
from distval.run.interrupts import signals_deferred

# The longest one wait blocks: how late a stop request (Ctrl-C, SIGTERM) or the deadline is seen.
WAIT_SLICE_S = 0.5
# With an overseer (faults), every node's state is read this often: a fault's trigger and its verdict need them all.
FAULT_SLICE_S = 0.2
# How long a killed node may take to be gone (a container to reach 'exited', a process tree to die) before it is
# read as it is. Host mode's watchdog, a process that imports nothing of distval's, gets it on its command line.
KILL_SETTLE_S = 10.0


@dataclass(frozen=True)
class Skip:
    """What the target cannot give the scenario: it is skipped with this reason, not run."""

    reason: str
    kind: str  # what it lacks: "gpu", "ipv6", "host"


@dataclass(frozen=True)
class GpuShortfall:
    """Why the target cannot give the scenario its GPUs. ``skip`` False: they could not even be counted, so
    nothing was measured: an error, not a skip."""

    reason: str
    skip: bool = True


@dataclass(frozen=True)
class Exited:
    exit_code: int | None  # None: the target did not say


@dataclass(frozen=True)
class Collected:
    """What a node left; ``problem``: what kept some of it from being read."""

    exit_code: int | None
    stdout: str
    stderr: str
    result_files: dict[str, bytes] = field(default_factory=dict)
    problem: str | None = None


class Overseer(Protocol):
    """What watches the nodes beside the wait and may end it early: the faults (distval/targets/docker/faults.py FaultRunner)."""

    ended: str | None  # why ``poll`` ended the scenario

    def poll(self, running: Collection[str]) -> bool:
        """Advance; True when the nodes still running are to be stopped now."""

    def thaw(self) -> None:
        """Make what is frozen killable again (after its stacks were read, before the kill)."""

    def close(self) -> None:
        """Undo what outlives the nodes, before their removal."""

    def log(self) -> FaultLog: ...


class NodeBackend(Protocol):
    """One scenario's nodes on one kind of target, as the step loop drives them: one object per scenario, keeping
    its own handles; a node is named by its ContainerPlan's name. The methods with a body are what only some
    targets have: a backend that subclasses this inherits them as "nothing"."""

    kind: str  # what a node is called in messages: "container", "node"
    # What ends the scenario as a setup error, with what its nodes left (RunStopped always does); anything else
    # is distval's own failure.
    setup_errors: tuple[type[Exception], ...]

    def gpu_shortfall(self) -> GpuShortfall | None:
        """Why the target cannot give the scenario its GPUs (None: it can, or it needs none)."""

    def run_step(self, step: Step, facts: dict[str, str]) -> Skip | None:
        """A step other than creating and starting a node (networks, probes, addresses), adding what it learns to
        ``facts``; a Skip where the target turns out not to give what the step needs."""

    def create(self, node: ContainerPlan, host: str) -> None:
        """Create the node, its files included, from its resolved plan, on ``host`` (a --hosts URL, or "")."""

    def start(self, name: str, host: str) -> None: ...

    def started_note(self, count: int) -> str: ...

    def wait(self, running: Sequence[str], timeout_s: float) -> dict[str, Exited]:
        """Block at most ``timeout_s``, less once a node of ``running`` stops; the nodes seen stopped."""

    def exited(self, name: str) -> Exited | None:
        """The node's state now: None while it runs."""

    def kill(self, name: str) -> None: ...

    def collect(self, name: str) -> Collected:
        """What the node left, once it stopped or was killed."""

    def salvage(self, name: str) -> Collected:
        """What can still be read of a node after a setup error (it was never waited for)."""

    def remove(self) -> None:
        """Remove everything of the scenario, wherever it was created."""

    def image_id(self) -> str | None:
        return None

    def limitation(self) -> Skip | None:
        """What the scenario asks for that this target can never give."""
        return None

    def initial_facts(self) -> dict[str, str]:
        """The placeholders' facts known before the first step."""
        return {}

    def before_start(self) -> None:
        """Called before the first node starts and the deadline begins."""
        return None

    def overseer(self, nodes: Sequence[str], deadline: float) -> Overseer | None:
        return None

    def before_kill(self, running: Sequence[str], stop: threading.Event) -> None:
        """Read what is worth reading from nodes about to be killed at the deadline (stacks); bounded, cut short by ``stop``."""
        return None


def run_steps(
    backend: NodeBackend,
    plan: ScenarioPlan,
    events: RunEvents,
    stop: threading.Event | None = None,
    remove: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> ScenarioOutcome:
    """Run ``plan`` on ``backend``. ``remove`` False (--keep-on-failure): the scenario's resources stay; the caller
    removes or keeps them once it knows the verdict (distval/targets/docker/keep.py). ``clock``: the monotonic clock
    of the deadline and the outcome's duration (a test's fake one moves only when its backend's wait blocks, so the
    loop's verdicts do not depend on the machine's speed)."""
    started = clock()
    stop = stop or threading.Event()
    image_id = backend.image_id()
    created: list[str] = []  # node names, in creation order
    overseer: Overseer | None = None

    def outcome(
        containers: tuple[ContainerOutcome, ...] = (), error: str | None = None, skip: Skip | None = None
    ) -> ScenarioOutcome:
        return ScenarioOutcome(
            plan,
            image_id,
            clock() - started,
            containers,
            setup_error=skip.reason if skip is not None else error,
            setup_skipped=skip is not None,
            skip_kind=skip.kind if skip is not None else None,
            fault_log=overseer.log() if overseer is not None and error is None else None,
        )

    def node_outcome(name: str, collected: Collected, killed: bool) -> ContainerOutcome:
        node = plan.container(name)
        return ContainerOutcome(
            node.name,
            node.node_rank,
            node.ranks,
            collected.exit_code,
            killed,
            collected.stdout,
            collected.stderr,
            collected.result_files,
            collected.problem,
            backend.kind,
        )

    setup_errors: tuple[type[Exception], ...] = (*backend.setup_errors, RunStopped)
    try:
        try:
            limitation = backend.limitation()
            if limitation is not None:
                return outcome(skip=limitation)
            shortfall = backend.gpu_shortfall()
            if shortfall is not None:
                return outcome(skip=Skip(shortfall.reason, "gpu")) if shortfall.skip else outcome(error=shortfall.reason)
            facts = backend.initial_facts()
            deadline: float | None = None
            for step in plan.steps:
                if stop.is_set():
                    raise RunStopped()
                if isinstance(step, CreateContainer):
                    node = resolve(plan.container(step.container), facts_on_host(facts, step.host))
                    backend.create(node, step.host)
                    created.append(node.name)
                elif isinstance(step, StartContainer):
                    if deadline is None:
                        backend.before_start()
                        deadline = clock() + plan.deadline_s  # from the first start, after setup
                    backend.start(step.container, step.host)
                else:
                    skip = backend.run_step(step, facts)
                    if skip is not None:
                        return outcome(skip=skip)
            assert deadline is not None, "a plan starts at least one node"
            events.phase(plan, RUNNING)
            events.note(plan, backend.started_note(len(created)))
            nodes = [name for name in created if plan.container(name).node_rank >= 0]
            overseer = backend.overseer(nodes, deadline)
            killed = wait_for_nodes(backend, nodes, deadline, events, plan, stop, overseer, clock)
            events.phase(plan, COLLECTING)
            return outcome(tuple(node_outcome(name, backend.collect(name), name in killed) for name in nodes))
        except setup_errors as exc:
            kept = [name for name in created if plan.container(name).node_rank >= 0]
            return outcome(tuple(node_outcome(name, backend.salvage(name), False) for name in kept), error=str(exc))
    finally:
        if overseer is not None:
            overseer.close()
        if remove:
            events.phase(plan, REMOVING)
            with signals_deferred():
                try:
                    backend.remove()
                except EngineError as exc:
                    # The verdict stands: what the Engine would not remove yet (a network it still held an endpoint
                    # of 30 s after its container went, at a load of 19) is the run's final cleanup's to remove, and
                    # the reaper's after it. Raised here, it replaced the scenario's outcome with a traceback.
                    events.note(plan, f"not removed yet ({exc}); the run's final cleanup tries again")


def wait_for_nodes(
    backend: NodeBackend,
    nodes: Sequence[str],
    deadline: float,
    events: RunEvents,
    plan: ScenarioPlan,
    stop: threading.Event,
    overseer: Overseer | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> set[str]:
    """Wait until every node stopped, each exit an event as it is seen; at the deadline, on a stop request, or when
    the overseer ends the scenario, kill what still runs: the names killed."""
    running = list(nodes)

    def seen(name: str, state: Exited | None) -> None:
        if state is not None:
            running.remove(name)
            events.container_exited(plan, name, state.exit_code)

    def kill() -> set[str]:
        for name in running:
            backend.kill(name)
        return set(running)

    slice_s = WAIT_SLICE_S if overseer is None else FAULT_SLICE_S
    while running:
        remaining_s = deadline - clock()
        if remaining_s > 0 and not stop.is_set():
            stopped = backend.wait(tuple(running), min(slice_s, remaining_s))
            for name, state in stopped.items():
                seen(name, state)
            if stopped:
                continue
        if overseer is not None or stop.is_set() or clock() >= deadline:
            # Which ones are still running: the others may have exited while one was waited on.
            for name in list(running):
                seen(name, backend.exited(name))
            if not running:
                break
        if overseer is not None and overseer.poll(running):
            events.note(plan, overseer.ended or "faults ended the scenario")
            # The verdict is decided; what still runs (a frozen node, survivors lingering) shows its stacks first.
            backend.before_kill(running, stop)
            overseer.thaw()
            return kill()
        if stop.is_set() or clock() >= deadline:
            if not stop.is_set():
                events.phase(plan, KILLING)
                events.note(plan, f"deadline of {plan.deadline_s:g} s reached; killing {', '.join(sorted(running))}")
                backend.before_kill(running, stop)  # stacks and flight recorder, bounded
            return kill()
        events.waiting(plan)
    return set()
