"""`distval plan` prints what `distval run` executes: for every rendezvous form, each container the Engine
created holds exactly the plan's resolved creation arguments, and the steps ran in the plan's order.
Marked ``docker``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest

from distval.config import load_config
from distval.plan.model import CreateContainer, CreateNetwork, ScenarioPlan, StartContainer
from distval.plan.placeholders import facts_for_address, resolve
from distval.plan.selection import select_checks, selection_of
from distval.plan.specs import ContainerPlan, NetworkPlan
from distval.results.outcome import PASSED
from distval.results.scenario import summarize_scenario
from distval.run.events import NO_EVENTS
from distval.targets.docker.engine import Engine
from distval.targets.docker.runtime import run_scenario
from distval.targets.engines.planning import plan_run
from tests.docker_helpers import leftovers

pytestmark = pytest.mark.docker

# One scenario per form and layout of configs/rendezvous.yaml: static, c10d, env, tcp, by IP, in-container,
# several processes per node, multi-homed.
FORMS = (
    "standalone",
    "torchrun.static.n2.p1",
    "torchrun.c10d.n2.p2",
    "direct.env.n2",
    "direct.tcp.n3",
    "by-ip.static",
    "by-ip.c10d",
    "by-ip.env",
    "by-ip.tcp",
    "multi-homed.static",
)
# What this proves is the Engine's side of the plan: the scenario must run, and env runs in every rank. That the
# forms rendezvous and pass all of configs/rendezvous.yaml's checks is the every-form test's, which runs these same
# scenarios on the same image (tests/plan/test_rendezvous_docker.py): here they ran all of them a second time.
PLANNED_CHECKS = selection_of(["env"], None, None)


class RecordingEngine(Engine):
    """The real Engine, recording what it reports about each container right after creating it, and each call."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.created: dict[str, tuple[ContainerPlan, dict[str, Any]]] = {}
        self.calls: list[tuple[str, str]] = []
        self.facts: dict[str, str] = {}  # what the Engine told the runtime: the placeholders' values

    def network_subnets(self, name: str) -> list[str]:
        subnets = super().network_subnets(name)
        self.facts["subnets"] = ",".join(subnets)
        return subnets

    def address(self, container: Any, network: str, ipv6: bool = False) -> str:
        address = super().address(container, network, ipv6)
        self.facts.update(facts_for_address(address))
        return address

    def create_network(self, network: NetworkPlan) -> None:
        self.calls.append(("network", network.name))
        super().create_network(network)

    def create_container(self, container: ContainerPlan) -> Any:
        handle = super().create_container(container)
        handle.reload()
        self.created[container.name] = (container, handle.attrs)
        self.calls.append(("create", container.name))
        return handle

    def start(self, container: Any) -> None:
        self.calls.append(("start", container.name))
        super().start(container)


def expected_calls(plan: ScenarioPlan) -> list[tuple[str, str]]:
    kinds = {CreateNetwork: "network", CreateContainer: "create", StartContainer: "start"}
    calls = []
    for step in plan.steps:
        kind = kinds.get(type(step))
        if kind is not None:
            calls.append((kind, getattr(step, "network", None) or step.container))
    return calls


def assert_engine_holds(container: ContainerPlan, attrs: dict[str, Any]) -> None:
    kwargs = container.create_kwargs()
    config, host = attrs["Config"], attrs["HostConfig"]
    assert attrs["Name"] == "/" + container.name
    assert config["Image"] == kwargs["image"]
    assert config["Entrypoint"] == kwargs["entrypoint"]
    assert config["Cmd"] == kwargs["command"]
    assert config["Hostname"] == kwargs["hostname"]
    assert config["WorkingDir"] == kwargs["working_dir"]
    # Every label of the plan; any other comes from the image (fixtures carry their recipe labels).
    assert {k: config["Labels"].get(k) for k in kwargs["labels"]} == kwargs["labels"]
    # The image's own environment (PATH, LANG) stays; every variable of the plan is there with its value.
    env = dict(line.split("=", 1) for line in config["Env"])
    assert {k: env.get(k) for k in kwargs["environment"]} == kwargs["environment"]
    assert host["NetworkMode"] == kwargs["network"]
    assert (host.get("NanoCpus") or None) == kwargs.get("nano_cpus")
    assert (host.get("DeviceRequests") or None) == (kwargs.get("device_requests") or None)
    assert [u["Name"] for u in host.get("Ulimits") or []] == [u["Name"] for u in kwargs.get("ulimits", [])]
    # No placeholder reaches the Engine.
    assert "{" not in " ".join(config["Cmd"] + config["Env"])


@pytest.mark.parametrize("name", FORMS)
def test_the_engine_creates_exactly_the_resolved_plan(
    fixture_image: Callable[[str], str], docker_client: object, name: str
) -> None:
    run_id = "p" + secrets.token_hex(4)
    config = select_checks(load_config("configs/rendezvous.yaml"), PLANNED_CHECKS).config
    plan = next(p for p in plan_run(config, run_id).scenarios if p.scenario.name == name)
    fixture_image(plan.image)
    engine = RecordingEngine(run_id)
    try:
        result = summarize_scenario(run_scenario(engine, plan, NO_EVENTS))
    finally:
        engine.remove_labelled()
    assert result.status == PASSED, [(c.name, c.status, c.message) for c in result.cases]
    assert engine.calls == expected_calls(plan)
    assert sorted(engine.created) == sorted(c.name for c in plan.containers)
    for created, attrs in engine.created.values():
        # What was created is the plan's container with its placeholders filled in, and nothing else.
        planned = plan.container(created.name)
        assert created == resolve(planned, engine.facts)
        assert_engine_holds(created, attrs)
        networks = set(attrs["NetworkSettings"]["Networks"])
        assert networks == {created.networks[0]}  # the others are connected after creation, as the plan shows
    assert leftovers(docker_client, run_id) == []
