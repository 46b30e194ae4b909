"""The step loop's wait (distval.run.steps.wait_for_nodes) on Docker's backend (distval.targets.docker.runtime.EngineNodes)
without Docker: it blocks on the Engine's wait API (no polling), sees every exit, kills only what still runs at the
deadline, and honours a stop request. A scripted Engine stands in for the real one (FakeEngine's containers have
always exited). Time is a fake clock that the scripted Engine's wait moves (tests/fake_clock.py), as the real
Engine's wait takes time: the bounds asserted are the loop's own, whatever the machine's load."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, cast

from distval.config import load_config
from distval.engine_protocol import ContainerState, EngineAPI
from distval.errors import EngineError
from distval.plan.model import ScenarioPlan
from distval.run.events import NoEvents, RunEvents
from distval.run.steps import WAIT_SLICE_S, wait_for_nodes
from distval.targets.docker.engine import Engine
from distval.targets.docker.runtime import HOST_WATCH_S, EngineNodes
from distval.targets.engines.planning import plan_run
from distval.targets.engines.runtime import HostEngine, run_across_hosts
from tests.fake_clock import FakeClock
from tests.fake_engine import FakeEngine


def wait(engine: ScriptedEngine, names: tuple[str, ...], deadline: float, events: RunEvents, stop: threading.Event) -> set[str]:
    """wait_for_nodes on containers named ``names`` (FakeEngine's handle of a container is its name), created on
    ``engine``, on its clock."""
    cross = plan_run(load_config("configs/default.yaml"), "0123abcd", "distval-fixtures/torch:2.6-debian").scenarios[1]
    containers = tuple(dataclasses.replace(c, name=name) for c, name in zip(cross.containers, names, strict=False))
    plan = dataclasses.replace(cross, containers=containers)
    nodes = EngineNodes(engine, plan, events, clock=engine.clock)
    for container in containers:
        nodes.create(container, "")
    return wait_for_nodes(nodes, names, deadline, events, plan, stop, clock=engine.clock)


class ScriptedEngine(FakeEngine):
    """Each container exits at its own time on ``clock`` (None: never); wait_stopped blocks like the Engine's wait,
    moving the clock to the container's exit or the timeout. ``stop_at``: when a stop request (``stop``) arrives,
    during whichever wait passes it."""

    def __init__(self, exits_at: dict[str, float | None], clock: FakeClock | None = None) -> None:
        super().__init__("0123abcd")
        self.clock = clock or FakeClock()
        self.exits_at = exits_at
        self.killed: list[str] = []
        self.killed_at: float | None = None
        self.waits = 0
        self.stop: threading.Event | None = None
        self.stop_at: float | None = None

    def _exited(self, name: str) -> bool:
        at = self.exits_at[name]
        return name in self.killed or (at is not None and self.clock() >= at)

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        self.waits += 1
        now, at = self.clock(), self.exits_at[container]
        until = now + timeout_s if container in self.killed or at is None else min(now + timeout_s, max(now, at))
        if self.stop is not None and self.stop_at is not None and now <= self.stop_at <= until:
            self.stop.set()
        self.clock.advance(until - now)
        return self._exited(container)

    def state(self, container: Any) -> ContainerState:
        if container in self.killed:
            return ContainerState("exited", 137, False)
        return ContainerState("exited", 0, False) if self._exited(container) else ContainerState("running", None, False)

    def kill(self, container: Any) -> None:
        self.killed.append(container)
        self.killed_at = self.clock()


class Recorder(NoEvents):
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.exited: dict[str, float] = {}

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        self.exited[container] = self.clock()


def test_exits_are_seen_at_once_without_polling() -> None:
    clock = FakeClock()
    now = clock()
    engine = ScriptedEngine({"a": now + 0.3, "b": now + 0.1}, clock)
    events = Recorder(clock)
    killed = wait(engine, ("a", "b"), now + 30, events, threading.Event())
    assert killed == set()
    assert events.exited == {"a": now + 0.3, "b": now + 0.3}  # b is seen once the wait on a returns
    assert engine.waits <= 3  # blocked on the Engine, not asking it again and again


def test_only_what_still_runs_at_the_deadline_is_killed() -> None:
    clock = FakeClock()
    now = clock()
    # "a" never exits and is waited on first; "b" exits meanwhile and must not count as killed.
    engine = ScriptedEngine({"a": None, "b": now + 0.2}, clock)
    events = Recorder(clock)
    deadline = now + 1.2
    killed = wait(engine, ("a", "b"), deadline, events, threading.Event())
    assert killed == {"a"}
    assert engine.killed == ["a"]
    assert set(events.exited) == {"b"}
    assert engine.killed_at is not None and deadline <= engine.killed_at <= deadline + WAIT_SLICE_S


def test_a_stop_request_kills_within_one_slice() -> None:
    clock = FakeClock()
    now = clock()
    engine = ScriptedEngine({"a": None}, clock)
    engine.stop, engine.stop_at = threading.Event(), now + 0.2  # inside the first slice
    killed = wait(engine, ("a",), now + 30, Recorder(clock), engine.stop)
    assert killed == {"a"}
    assert engine.killed_at is not None and engine.stop_at <= engine.killed_at <= engine.stop_at + WAIT_SLICE_S


class StoppedEngine(ScriptedEngine):
    """A node's Engine that was stopped mid-run: every call fails as docker-py's NotFound did, once mapped."""

    where = "tcp://192.0.2.1:2375"

    def state(self, container: Any) -> ContainerState:
        raise EngineError(f"inspect {container}: 404 Client Error for http+docker://x/containers/{container}/json: Not Found")

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        return bool(self.state(container))

    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        self.state("cleanup")
        return 0, 0


def test_a_stopped_node_engine_is_that_hosts_error_and_the_other_engine_is_cleaned() -> None:
    """Issue 20: a NotFound from an Engine being stopped is that host's error (HostEngine names it), never a
    traceback, seen within HOST_WATCH_S of the stop, and the scenario is still removed from the other Engine."""
    plan = scenario_plan_across(("tcp://a:2375", "tcp://192.0.2.1:2375"))
    clock = FakeClock()
    survivor = ScriptedEngine({name: None for name in (c.name for c in plan.containers)}, clock)
    survivor.where = "tcp://a:2375"  # what HostEngine names
    stopped = StoppedEngine({})
    hosts: dict[str, EngineAPI] = {
        "tcp://a:2375": HostEngine(0, cast(Engine, survivor)),
        "tcp://192.0.2.1:2375": HostEngine(1, cast(Engine, stopped)),
    }
    started = clock()
    outcome = run_across_hosts(survivor, plan, NoEvents(), hosts=hosts, clock=clock)
    assert outcome.setup_error is not None
    assert outcome.setup_error.startswith("host 1 (tcp://192.0.2.1:2375): inspect "), outcome.setup_error
    # Seen at the first host watch after HOST_WATCH_S (the wait's slices end on it), not at the 300 s deadline.
    assert HOST_WATCH_S <= clock() - started <= HOST_WATCH_S + WAIT_SLICE_S
    assert survivor.removed == 1


def scenario_plan_across(hosts: tuple[str, str]) -> ScenarioPlan:
    """The default cross-container scenario with its containers alternately on two Engines."""
    plan = plan_run(load_config("configs/default.yaml"), "0123abcd", "x/y:z").scenarios[1]
    containers = tuple(dataclasses.replace(c, host=hosts[i % 2]) for i, c in enumerate(plan.containers))
    return dataclasses.replace(plan, containers=containers, hosts=hosts)
