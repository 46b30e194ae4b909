"""The fault plan (what ``distval plan`` shows is what runs) and the runtime hook driven by a fake Engine:
the trigger is the rank's record, the injection time is logged, the verdict stops the containers."""

from __future__ import annotations

import json
import signal
from collections.abc import Sequence
from typing import Any

from distval.cli.plan_render import render_plan
from distval.config import parse_config
from distval.engine_protocol import ContainerState, ExecResult
from distval.plan.fault_render import fault_data
from distval.plan.model import RunPlan
from distval.targets.docker.faults import FaultRunner
from distval.targets.engines.planning import plan_scenario
from tests.config_helpers import yaml_text
from tests.fake_engine import FakeEngine


def plan_of(faults: str, expect: str = "[]", world_size: int = 3, checks: str = "[all_reduce, collective_loop]") -> Any:
    text = yaml_text(
        f"""
        scenarios:
          - name: f
            topology: cross-container
            world_size: {world_size}
            checks: {checks}
            faults: {faults}
            expect: {expect}
        """
    )
    return plan_scenario(parse_config(text, "f.yaml").scenarios[0], "r1", None)


def test_kill_plans_the_container_kill_and_a_rank_kill_plans_sigkill_of_that_worker() -> None:
    whole = plan_of("[{kind: kill, node: 2, after: {check: all_reduce, delay_s: 2}}]").faults.steps[0]
    assert (whole.action, whole.container, whole.victims, whole.trigger_rank, whole.delay_s) == (
        "kill",
        "distval-r1-f-n2",
        (2,),
        2,
        2.0,
    )
    one = plan_of("[{kind: kill, node: 1, rank: 1, after: {check: all_reduce}}]").faults.steps[0]
    assert (one.action, one.signum, one.victims) == ("signal", int(signal.SIGKILL), (1,))


def test_kill_store_hits_node_0() -> None:
    step = plan_of("[{kind: kill-store, after: {check: all_reduce}}]").faults.steps[0]
    assert (step.node, step.container, step.action, step.trigger_rank) == (0, "distval-r1-f-n0", "kill", 0)


def test_partition_to_peers_plans_a_helper_in_the_victims_namespace() -> None:
    plan = plan_of("[{kind: partition, node: 2, peers: [0], heal_after_s: 4, after: {check: all_reduce}}]")
    (helper,) = plan.faults.helpers
    assert helper.create_kwargs() == {
        "image": "distval-fixtures/fault-helper:bookworm",
        "entrypoint": ["sleep"],
        "command": ["infinity"],
        "name": "distval-r1-f-fault-n2",
        "network_mode": "container:distval-r1-f-n2",
        "cap_add": ["NET_ADMIN"],
        "labels": {"distval.managed": "true", "distval.run": "r1", "distval.scenario": "f"},
        "detach": True,
    }
    step = plan.faults.steps[0]
    assert step.commands == (
        ("iptables", "-I", "INPUT", "-s", "distval-r1-f-n0", "-j", "DROP"),
        ("iptables", "-I", "OUTPUT", "-d", "distval-r1-f-n0", "-j", "DROP"),
    )
    assert step.undo_after_s == 4.0 and step.undo_commands[0][1] == "-D"


def test_partition_without_peers_disconnects_and_freeze_pauses() -> None:
    cut = plan_of("[{kind: partition, node: 1, after: {check: all_reduce}}]")
    assert (cut.faults.steps[0].action, cut.faults.steps[0].network, cut.faults.helpers) == ("disconnect", "distval-r1-f", ())
    frozen = plan_of("[{kind: freeze, node: 1, resume_after_s: 3, after: {check: all_reduce}}]").faults.steps[0]
    assert (frozen.action, frozen.undo_after_s) == ("pause", 3.0)


def test_slow_is_tbf_and_latency_needs_netem() -> None:
    tbf = plan_of("[{kind: slow, node: 1, rate: 1mbit, after: {check: all_reduce}}]").faults.steps[0]
    assert tbf.commands == (
        ("tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1mbit", "burst", "32kbit", "latency", "400ms"),
    )
    assert tbf.undo_commands == (("tc", "qdisc", "del", "dev", "eth0", "root"),) and not tbf.needs_netem
    netem = plan_of("[{kind: slow, node: 1, latency_ms: 50, loss_percent: 1, after: {check: all_reduce}}]").faults.steps[0]
    assert netem.needs_netem and netem.commands[0][6:] == ("netem", "delay", "50ms", "loss", "1%")


def test_oom_puts_the_memory_limit_on_that_node_only() -> None:
    plan = plan_of(
        "[{kind: oom, node: 1, memory: 1g, after: {check: all_reduce}}]",
        world_size=2,
        checks="[all_reduce, {name: allocate, args: {mib: 3072, rank: 1}}]",
    )
    assert [c.create_kwargs().get("mem_limit") for c in plan.containers] == [None, "1g"]
    assert plan.faults.steps[0].action == "mark"


def test_distval_plan_shows_the_faults_helpers_and_expectations() -> None:
    plan = plan_of(
        "[{kind: partition, node: 2, peers: [0], after: {check: all_reduce, delay_s: 2}}]",
        "[{ranks: survivors, error: timeout, within_s: [8, 16]}]",
    )
    text = render_plan(RunPlan("r1", "f.yaml", (plan,)))
    assert "    fault 0 (partition, node 2): 2 s after rank 2 finished all_reduce: in helper distval-r1-f-fault-n2: " in text
    assert "       network_mode: container:distval-r1-f-n2" in text
    assert "    expect: survivors fail with timeout 8..16 s after the fault" in text
    data = fault_data(plan)
    assert data["fault_helpers"][0]["cap_add"] == ["NET_ADMIN"] and data["faults"][0]["kind"] == "partition"
    json.dumps(data)  # --format json prints it


class ScriptedEngine(FakeEngine):
    """The fake Engine with running containers, a results file per node, and exec answers."""

    def __init__(self) -> None:
        super().__init__("r1")
        self.files: dict[str, dict[str, bytes]] = {}
        self.status: dict[str, str] = {}
        self.exec_answer = ExecResult(0, "")

    def state(self, container: Any) -> ContainerState:
        return ContainerState(self.status.get(container, "running"), None, False)

    def read_files(self, container: Any, path: str) -> dict[str, bytes]:
        return self.files.get(container, {})

    def exec_run(self, container: Any, argv: Sequence[str]) -> ExecResult:
        self.calls.append(f"exec {container}: {' '.join(argv[:3])}")
        return self.exec_answer

    def kill(self, container: Any) -> None:
        self.calls.append(f"kill {container}")


def line(check: str, status: str, at: float, message: str = "") -> bytes:
    return (
        json.dumps({"check": check, "case": check, "rank": 0, "status": status, "ended_at": at, "message": message}) + "\n"
    ).encode()


def test_the_runner_injects_delay_s_after_the_trigger_record_and_stops_once_decided(monkeypatch: Any) -> None:
    plan = plan_of(
        "[{kind: kill, node: 1, after: {check: all_reduce, delay_s: 2}}]",
        "[{ranks: survivors, error: connection_closed, within_s: [0, 5]}, {ranks: victims, error: killed, within_s: [0, 1]}]",
        world_size=2,
    )
    engine = ScriptedEngine()
    names = [c.name for c in plan.containers]
    containers = {name: name for name in names}
    clock = [1000.0]
    monkeypatch.setattr("distval.targets.docker.faults.time.time", lambda: clock[0])
    monotonic = [0.0]
    monkeypatch.setattr("distval.targets.docker.faults.time.monotonic", lambda: monotonic[0])
    notes: list[str] = []
    runner = FaultRunner(engine, plan, containers, notes.append, deadline=100.0)

    def step(now: float) -> bool:
        clock[0] = now
        monotonic[0] += 1.0  # past READ_INTERVAL_S each time
        return runner.poll(dict(containers))

    assert not step(1000.0)  # no record yet
    engine.files[names[1]] = {"rank-1.jsonl": line("all_reduce", "passed", 1001.0)}
    assert not step(1002.0)  # trigger seen: due at 1003.0
    assert f"kill {names[1]}" not in engine.calls
    assert not step(1003.5)
    assert f"kill {names[1]}" in engine.calls
    assert runner.log().injected[0].at == 1003.5 and notes == ["fault 0 (kill) injected"]
    engine.files[names[0]] = {"rank-0.jsonl": line("collective_loop", "error", 1003.8, "Connection closed by peer")}
    assert step(1004.0), "rank 0 failed and rank 1 was killed: the verdict is decided"
    assert runner.log().decided_at == 1004.0


def test_the_runner_skips_the_scenario_where_the_kernel_has_no_netem(monkeypatch: Any) -> None:
    plan = plan_of("[{kind: slow, node: 1, latency_ms: 50, after: {check: all_reduce}}]", world_size=2)
    engine = ScriptedEngine()
    engine.exec_answer = ExecResult(2, "Error: Specified qdisc kind is unknown.\n")
    runner = FaultRunner(engine, plan, {c.name: c.name for c in plan.containers}, lambda text: None, deadline=1e12)
    assert runner.poll({})
    assert runner.skip_reason == (
        "latency and loss need the kernel's sch_netem, which this machine lacks: `tc qdisc add dev lo root netem delay 1ms` "
        "answered: exit 2: Error: Specified qdisc kind is unknown."
    )
    assert "create_helper" in engine.calls and "start" in engine.calls


def test_the_scenario_hash_covers_the_faults() -> None:
    from distval.plan.identity import scenario_hash

    two = plan_of("[{kind: kill, node: 1, after: {check: all_reduce, delay_s: 2}}]")
    three = plan_of("[{kind: kill, node: 1, after: {check: all_reduce, delay_s: 3}}]")
    assert scenario_hash(two) != scenario_hash(three)
    assert scenario_hash(two) == scenario_hash(plan_of("[{kind: kill, node: 1, after: {check: all_reduce, delay_s: 2}}]"))


def test_the_runner_notices_a_worker_gone_while_its_launcher_still_runs(monkeypatch: Any) -> None:
    plan = plan_of(
        "[{kind: kill-store, after: {check: all_reduce}}]",
        "[{ranks: survivors, error: connection_closed, within_s: [0, 15]}]",
        world_size=2,
    )
    engine = ScriptedEngine()
    names = [c.name for c in plan.containers]
    containers = {name: name for name in names}
    engine.files[names[0]] = {"rank-0.jsonl": line("all_reduce", "passed", 1000.0)}
    clock = [1000.5]
    monkeypatch.setattr("distval.targets.docker.faults.time.time", lambda: clock[0])
    runner = FaultRunner(engine, plan, containers, lambda text: None, deadline=1e12)
    runner.poll(dict(containers))  # trigger seen and due: node 0 killed
    assert f"kill {names[0]}" in engine.calls
    engine.exec_answer = ExecResult(0, "[]\n")  # node 1's launcher runs, its worker is gone
    clock[0] = 1002.0
    runner._last_workers = 0.0
    assert runner.poll({names[1]: names[1]}), "the survivor's failure decides the verdict"
    (gone,) = [e for e in runner.log().exits if e.container == names[1]]
    assert (gone.container, gone.ranks, gone.at) == (names[1], (1,), 1002.0)


def test_a_pause_the_freezer_refuses_once_is_retried(monkeypatch: Any) -> None:
    plan = plan_of("[{kind: freeze, node: 1, after: {check: all_reduce}}]", world_size=2)
    engine = ScriptedEngine()
    refusals = ["OCI runtime pause failed: unable to freeze: unknown"]

    def pause(container: Any) -> None:
        if refusals:
            from distval.errors import EngineError

            raise EngineError(refusals.pop())
        engine.calls.append(f"pause {container}")

    monkeypatch.setattr(engine, "pause", pause)
    names = [c.name for c in plan.containers]
    engine.files[names[1]] = {"rank-1.jsonl": line("all_reduce", "passed", 1.0)}
    runner = FaultRunner(engine, plan, {n: n for n in names}, lambda text: None, deadline=1e12)
    runner.poll({n: n for n in names})
    assert f"pause {names[1]}" in engine.calls
    assert runner.log().injected[0].error is None


def test_close_resumes_a_container_left_paused(monkeypatch: Any) -> None:
    plan = plan_of("[{kind: freeze, node: 1, after: {check: all_reduce}}]", world_size=2)
    engine = ScriptedEngine()
    names = [c.name for c in plan.containers]
    engine.status[names[1]] = "paused"  # e.g. a pause the Engine reported as failed that froze it anyway
    runner = FaultRunner(engine, plan, {n: n for n in names}, lambda text: None, deadline=1e12)
    runner.close()
    assert "unpause" in engine.calls
