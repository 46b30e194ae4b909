"""harness.runtime._wait without Docker: it blocks on the Engine's wait API (no polling), sees every exit,
kills only what still runs at the deadline, and honours a stop request. A scripted Engine stands in for the
real one (FakeEngine's containers have always exited)."""

from __future__ import annotations

import threading
import time
from typing import Any

from harness.config import load_config
from harness.engine_protocol import ContainerState
from harness.events import NoEvents
from harness.plan import ScenarioPlan, plan_run
from harness.runtime import WAIT_SLICE_S, _wait
from tests.fake_engine import FakeEngine


def scenario_plan() -> ScenarioPlan:
    return plan_run(load_config("configs/default.yaml"), "0123abcd", "distval-fixtures/torch:2.6-debian").scenarios[0]


class ScriptedEngine(FakeEngine):
    """Each container exits at its own monotonic time (None: never); wait_stopped sleeps like the Engine's wait."""

    def __init__(self, exits_at: dict[str, float | None]) -> None:
        super().__init__("0123abcd")
        self.exits_at = exits_at
        self.killed: list[str] = []
        self.waits = 0

    def _exited(self, name: str) -> bool:
        at = self.exits_at[name]
        return name in self.killed or (at is not None and time.monotonic() >= at)

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        self.waits += 1
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self._exited(container):
                return True
            time.sleep(0.005)
        return self._exited(container)

    def state(self, container: Any) -> ContainerState:
        if container in self.killed:
            return ContainerState("exited", 137, False)
        return ContainerState("exited", 0, False) if self._exited(container) else ContainerState("running", None, False)

    def kill(self, container: Any) -> None:
        self.killed.append(container)


class Recorder(NoEvents):
    def __init__(self) -> None:
        self.exited: dict[str, float] = {}

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        self.exited[container] = time.monotonic()


def test_exits_are_seen_at_once_without_polling() -> None:
    now = time.monotonic()
    engine = ScriptedEngine({"a": now + 0.3, "b": now + 0.1})
    events = Recorder()
    killed = _wait(lambda name: engine, {"a": "a", "b": "b"}, now + 30, events, scenario_plan(), threading.Event())
    assert killed == set()
    assert set(events.exited) == {"a", "b"}
    assert events.exited["a"] - (now + 0.3) < 0.5  # a bound with room for a loaded machine; the count below is the point
    assert engine.waits <= 3  # blocked on the Engine, not asking it again and again


def test_only_what_still_runs_at_the_deadline_is_killed() -> None:
    now = time.monotonic()
    # "a" never exits and is waited on first; "b" exits meanwhile and must not count as killed.
    engine = ScriptedEngine({"a": None, "b": now + 0.2})
    events = Recorder()
    deadline = now + 1.2
    killed = _wait(lambda name: engine, {"a": "a", "b": "b"}, deadline, events, scenario_plan(), threading.Event())
    assert killed == {"a"}
    assert engine.killed == ["a"]
    assert set(events.exited) == {"b"}
    assert deadline <= time.monotonic() < deadline + WAIT_SLICE_S + 1.0


def test_a_stop_request_kills_within_one_slice() -> None:
    now = time.monotonic()
    engine = ScriptedEngine({"a": None})
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    killed = _wait(lambda name: engine, {"a": "a"}, now + 30, Recorder(), scenario_plan(), stop)
    assert killed == {"a"}
    assert time.monotonic() - now < 0.2 + WAIT_SLICE_S + 1.0
