"""The step loop (distval/run/steps.py) against a fake NodeBackend: the steps in order with their facts resolved, the
deadline from the first start, the kill at the deadline and on a stop request, the collection, the skips, and the
removal whatever happens (and not with ``remove=False``)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Sequence

import pytest

from distval.config import load_config
from distval.errors import EngineError, RunStopped
from distval.plan.model import LearnAddress, LearnSubnets, ScenarioPlan, Step
from distval.plan.placeholders import facts_for_address, placeholders_in
from distval.plan.specs import ContainerPlan
from distval.results.expectations import FaultLog
from distval.results.scenario import ScenarioResult
from distval.run.events import COLLECTING, KILLING, REMOVING, RUNNING
from distval.run.steps import WAIT_SLICE_S, Collected, Exited, GpuShortfall, NodeBackend, Overseer, Skip, run_steps
from distval.targets.engines.planning import plan_run
from tests.fake_clock import FakeClock

# How long the fake's before_start takes (a reaper that takes its time): not the scenario's.
REAPER_START_S = 0.3


def plan_with(timeout_s: float = 30.0) -> ScenarioPlan:
    """The default cross-container scenario (a network, its subnets learned, two containers) with its own deadline."""
    plan = plan_run(load_config("configs/default.yaml"), "0123abcd", "x/y:z").scenarios[1]
    return dataclasses.replace(plan, scenario=dataclasses.replace(plan.scenario, timeout_s=timeout_s))


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def scenario_started(self, plan: ScenarioPlan, index: int, total: int) -> None:
        pass

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        self.seen.append(("phase", name))

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        self.seen.append(("note", line))

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        self.seen.append(("exited", f"{container}={exit_code}"))

    def waiting(self, plan: ScenarioPlan) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass

    def of(self, kind: str) -> list[str]:
        return [value for k, value in self.seen if k == kind]


class FakeNodes:
    """Nodes that run ``run_s[node_rank]`` seconds after their start (None: until killed); ``fail_in``: the method
    that raises EngineError (a setup error) or ValueError (distval's own failure). Time is ``clock``'s, a fake one
    that moves only where a real backend would block (its wait, a slow reaper before the first start), so that no
    assertion depends on the machine's speed; ``stop_at``: when (on that clock) a stop request arrives, as a
    Ctrl-C would during a wait."""

    kind = "node"
    setup_errors: tuple[type[Exception], ...] = (EngineError,)

    def __init__(
        self, plan: ScenarioPlan, run_s: dict[int, float | None], fail_in: str = "", error: type[Exception] = EngineError
    ) -> None:
        self.plan, self.run_s, self.fail_in, self.error = plan, run_s, fail_in, error
        self.clock = FakeClock()
        self.calls: list[str] = []
        self.created: dict[str, ContainerPlan] = {}
        self.ends: dict[str, float | None] = {}
        self.killed: list[str] = []
        self.killed_at: float | None = None
        self.first_start_at: float | None = None
        self.limit: Skip | None = None
        self.shortfall: GpuShortfall | None = None
        self.step_skip: Skip | None = None
        self.faults: Overseer | None = None
        self.stop: threading.Event | None = None
        self.stop_at: float | None = None

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_in:
            raise self.error(f"{name} failed")

    def image_id(self) -> str | None:
        return "sha256:fake"

    def limitation(self) -> Skip | None:
        return self.limit

    def gpu_shortfall(self) -> GpuShortfall | None:
        return self.shortfall

    def initial_facts(self) -> dict[str, str]:
        return {}

    def run_step(self, step: Step, facts: dict[str, str]) -> Skip | None:
        self._call(type(step).__name__)
        if isinstance(step, LearnSubnets):
            facts["subnets"] = "10.9.0.0/16"
        elif isinstance(step, LearnAddress):
            facts.update(facts_for_address("10.9.0.2"))
        return self.step_skip

    def create(self, node: ContainerPlan, host: str) -> None:
        self._call("create")
        self.created[node.name] = node

    def before_start(self) -> None:
        self._call("before_start")
        self.clock.advance(REAPER_START_S)  # a reaper that takes its time: not the scenario's

    def start(self, name: str, host: str) -> None:
        self._call("start")
        self.first_start_at = self.first_start_at or self.clock()
        run_s = self.run_s[self.created[name].node_rank]
        self.ends[name] = None if run_s is None else self.clock() + run_s

    def started_note(self, count: int) -> str:
        return f"started {count}"

    def overseer(self, nodes: Sequence[str], deadline: float) -> Overseer | None:
        return self.faults

    def wait(self, running: Sequence[str], timeout_s: float) -> dict[str, Exited]:
        """Blocks as the Engine's wait does: until the first of ``running`` ends, else ``timeout_s``; a stop request
        that arrives meanwhile does not cut it short (the real waits do not see it either)."""
        self._call("wait")
        now = self.clock()
        ends = [end for name in running if (end := self.ends.get(name)) is not None and name not in self.killed]
        until = min([now + timeout_s, *ends])
        if self.stop is not None and self.stop_at is not None and now <= self.stop_at <= until:
            self.stop.set()
        self.clock.advance(until - now)
        return {name: state for name in running if (state := self.exited(name)) is not None}

    def exited(self, name: str) -> Exited | None:
        if name in self.killed:
            return Exited(137)
        end = self.ends.get(name)
        return Exited(0) if end is not None and self.clock() >= end else None

    def before_kill(self, running: Sequence[str], stop: threading.Event) -> None:
        self._call("before_kill")

    def kill(self, name: str) -> None:
        self._call("kill")
        self.killed.append(name)
        self.killed_at = self.clock()

    def collect(self, name: str) -> Collected:
        self._call("collect")
        state = self.exited(name)
        return Collected(state.exit_code if state else None, f"out of {name}", "", {"rank-0.jsonl": b"{}"})

    def salvage(self, name: str) -> Collected:
        self._call("salvage")
        return Collected(None, f"partial {name}", "")

    def remove(self) -> None:
        self._call("remove")


_CONFORMS: type[NodeBackend] = FakeNodes  # mypy: the fake is a NodeBackend


def names(plan: ScenarioPlan) -> list[str]:
    return [c.name for c in plan.containers]


def test_the_steps_run_in_order_with_their_facts_and_every_exit_is_collected() -> None:
    plan, events = plan_with(), Events()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.2})
    outcome = run_steps(nodes, plan, events, clock=nodes.clock)
    assert outcome.setup_error is None and outcome.image_id == "sha256:fake"
    assert [c for c in nodes.calls if c != "wait"] == [
        "CreateNetwork",
        "LearnSubnets",
        "create",
        "create",
        "before_start",
        "start",
        "start",
        "collect",
        "collect",
        "remove",
    ]
    assert all(placeholders_in(node) == set() for node in nodes.created.values())
    assert "10.9.0.0/16" in str(nodes.created[names(plan)[0]])
    assert events.of("phase") == [RUNNING, COLLECTING, REMOVING]
    assert sorted(events.of("exited")) == sorted(f"{name}=0" for name in names(plan))
    assert "started 2" in events.of("note")
    assert [(o.name, o.exit_code, o.killed_at_deadline, o.kind, o.stdout) for o in outcome.containers] == [
        (name, 0, False, "node", f"out of {name}") for name in names(plan)
    ]
    assert outcome.containers[0].result_files == {"rank-0.jsonl": b"{}"}


def test_the_deadline_starts_after_before_start_and_kills_only_what_still_runs() -> None:
    plan, events = plan_with(timeout_s=1.0), Events()
    nodes = FakeNodes(plan, {0: None, 1: 0.1})
    started = nodes.clock()
    outcome = run_steps(nodes, plan, events, clock=nodes.clock)
    # before_start's 0.3 s are not the scenario's: the deadline is 1 s after the first start, and it is seen within
    # one slice of the wait.
    assert nodes.first_start_at == started + REAPER_START_S
    deadline = nodes.first_start_at + 1.0
    assert nodes.killed_at is not None and deadline <= nodes.killed_at <= deadline + WAIT_SLICE_S
    n0, n1 = names(plan)
    assert nodes.killed == [n0]
    assert nodes.calls.index("before_kill") < nodes.calls.index("kill")
    assert events.of("phase") == [RUNNING, KILLING, COLLECTING, REMOVING]
    assert f"deadline of 1 s reached; killing {n0}" in events.of("note")
    assert events.of("exited") == [f"{n1}=0"]
    assert {o.name: (o.exit_code, o.killed_at_deadline) for o in outcome.containers} == {n0: (137, True), n1: (0, False)}
    assert outcome.duration_s == nodes.killed_at - started


def test_a_stop_request_kills_within_one_slice_without_reading_stacks() -> None:
    """The stop request comes while the nodes run (on the fake clock, 0.7 s after the first start, inside a wait):
    everything is killed within one slice, without the stacks a deadline reads. It once came from a 0.5 s timer on
    the real clock, which at a load of 14-19 fired before the fake nodes had started (a setup error: nothing killed)."""
    plan, events = plan_with(), Events()
    nodes = FakeNodes(plan, {0: None, 1: None})
    nodes.stop = stop = threading.Event()
    nodes.stop_at = nodes.clock() + REAPER_START_S + 0.7  # inside the second slice of the wait
    outcome = run_steps(nodes, plan, events, stop, clock=nodes.clock)
    assert outcome.setup_error is None and stop.is_set()
    assert nodes.killed_at is not None and nodes.stop_at <= nodes.killed_at <= nodes.stop_at + WAIT_SLICE_S
    assert sorted(nodes.killed) == sorted(names(plan)) and "before_kill" not in nodes.calls
    assert KILLING not in events.of("phase")
    assert all(o.killed_at_deadline for o in outcome.containers)
    assert nodes.calls[-1] == "remove"


def test_a_stop_during_setup_is_a_setup_error_with_what_was_created_and_everything_is_removed() -> None:
    plan, events = plan_with(), Events()
    stop = threading.Event()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1})
    nodes.before_start = stop.set  # type: ignore[method-assign] # the stop request comes while the reaper starts
    outcome = run_steps(nodes, plan, events, stop, clock=nodes.clock)
    # Set in before_start, seen before the next step: the first start happened, the second did not.
    assert nodes.calls.count("start") == 1
    assert outcome.setup_error == str(RunStopped())
    assert [o.stdout for o in outcome.containers] == [f"partial {name}" for name in names(plan)]
    assert nodes.calls[-1] == "remove" and events.of("phase") == [REMOVING]


@pytest.mark.parametrize("fail_in", ["create", "start", "wait", "collect"])
def test_a_setup_error_is_the_outcome_with_what_the_nodes_left_and_everything_is_removed(fail_in: str) -> None:
    plan = plan_with()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1}, fail_in=fail_in)
    outcome = run_steps(nodes, plan, Events(), clock=nodes.clock)
    assert outcome.setup_error == f"{fail_in} failed" and not outcome.setup_skipped
    created = names(plan)[: 0 if fail_in == "create" else 2]
    assert [o.name for o in outcome.containers] == created and all(o.exit_code is None for o in outcome.containers)
    assert nodes.calls[-1] == "remove"


def test_distvals_own_failure_propagates_after_the_removal() -> None:
    plan = plan_with()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1}, fail_in="start", error=ValueError)
    with pytest.raises(ValueError, match="start failed"):
        run_steps(nodes, plan, Events(), clock=nodes.clock)
    assert nodes.calls[-1] == "remove" and "salvage" not in nodes.calls


def test_a_removal_the_engine_refuses_is_a_note_and_the_outcome_stands() -> None:
    """CI at a load of 19: the Engine still held an endpoint of the scenario network 30 s on, and the EngineError
    of the removal replaced the scenario's outcome (no verdict, a traceback in a thread)."""
    plan, events = plan_with(), Events()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1}, fail_in="remove")
    outcome = run_steps(nodes, plan, events, clock=nodes.clock)
    assert outcome.setup_error is None and [c.exit_code for c in outcome.containers] == [0, 0]
    assert ("note", "not removed yet (remove failed); the run's final cleanup tries again") in events.seen


def test_remove_false_keeps_everything() -> None:
    plan, events = plan_with(), Events()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1}, fail_in="collect")
    assert run_steps(nodes, plan, events, remove=False, clock=nodes.clock).setup_error == "collect failed"
    assert "remove" not in nodes.calls and REMOVING not in events.of("phase")


@pytest.mark.parametrize("where", ["limitation", "gpu", "step"])
def test_what_the_target_cannot_give_is_a_skip_before_anything_starts(where: str) -> None:
    plan = plan_with()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1})
    if where == "limitation":
        nodes.limit = Skip("no IPv6 here", "host")
    elif where == "gpu":
        nodes.shortfall = GpuShortfall("needs 2 GPU(s); sees 1")
    else:
        nodes.step_skip = Skip("no IPv6 network", "ipv6")
    outcome = run_steps(nodes, plan, Events(), clock=nodes.clock)
    expected = {
        "limitation": ("no IPv6 here", "host"),
        "gpu": ("needs 2 GPU(s); sees 1", "gpu"),
        "step": ("no IPv6 network", "ipv6"),
    }
    assert (outcome.setup_error, outcome.skip_kind) == expected[where] and outcome.setup_skipped
    assert "start" not in nodes.calls and outcome.containers == () and nodes.calls[-1] == "remove"


def test_gpus_that_cannot_be_counted_are_an_error_not_a_skip() -> None:
    plan = plan_with()
    nodes = FakeNodes(plan, {0: 0.1, 1: 0.1})
    nodes.shortfall = GpuShortfall("cannot tell how many GPUs", skip=False)
    outcome = run_steps(nodes, plan, Events(), clock=nodes.clock)
    assert (outcome.setup_error, outcome.setup_skipped, outcome.skip_kind) == ("cannot tell how many GPUs", False, None)


class EndingOverseer:
    """Ends the scenario on its third poll; records what the loop asked of it."""

    def __init__(self, calls: list[str]) -> None:
        self.ended: str | None = None
        self.polls = 0
        self.calls = calls  # the backend's: one order for both

    def poll(self, running: Collection[str]) -> bool:
        self.polls += 1
        if self.polls == 3:
            self.ended = "the verdict is decided"
            return True
        return False

    def thaw(self) -> None:
        self.calls.append("thaw")

    def close(self) -> None:
        self.calls.append("close")

    def log(self) -> FaultLog:
        return FaultLog((), (), None, self.ended, None)


def test_an_overseer_ends_the_wait_its_stacks_read_before_the_thaw_and_closes_before_the_removal() -> None:
    plan, events = plan_with(), Events()
    nodes = FakeNodes(plan, {0: None, 1: None})
    nodes.faults = overseer = EndingOverseer(nodes.calls)
    outcome = run_steps(nodes, plan, events, clock=nodes.clock)
    assert "the verdict is decided" in events.of("note") and KILLING not in events.of("phase")
    assert overseer.polls == 3
    after = [c for c in nodes.calls if c != "wait"][-8:]
    assert after == ["before_kill", "thaw", "kill", "kill", "collect", "collect", "close", "remove"]
    assert sorted(nodes.killed) == sorted(names(plan))
    assert outcome.fault_log is not None and outcome.fault_log.ended == "the verdict is decided"
