"""distval.plan.identity: the scenario hash is a pure function of the plan given, carried by the plan, read by the results."""

from __future__ import annotations

import dataclasses
import sys
import textwrap

import pytest

import distval.targets.docker.plan
import distval.targets.local.plan
from distval.config import Config, parse_config
from distval.errors import PlanError
from distval.plan.identity import scenario_hash, with_hashes
from distval.plan.model import ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import summarize_scenario
from distval.targets.base import plan_on
from distval.targets.engines.planning import plan_run, plan_scenario
from distval.targets.local.plan import plan_local_scenario
from distval.targets.local.target import LocalTarget
from distval.targets.origin import Origin

PYTHON = "/opt/venv/bin/python"
IMAGE = "example/torch:a"
A, B = "tcp://10.0.0.1:2375", "tcp://10.0.0.2:2375"
CONFIG = """
scenarios:
  - {name: cross, topology: cross-container, rendezvous: c10d, nodes: 2, nproc_per_node: 2, checks: [env, all_reduce]}
  - {name: inside, topology: in-container, world_size: 2, checks: [env]}
  - {name: six, topology: cross-container, rendezvous: static, nodes: 2, nproc_per_node: 1, ipv6: true, checks: [env]}
"""


def config(text: str = CONFIG) -> Config:
    return parse_config(textwrap.dedent(text), "identity.yaml")


def both(plan: ScenarioPlan) -> tuple[str, str]:
    return scenario_hash(plan), scenario_hash(plan, any_image=True)


def no_planning(*args: object, **kwargs: object) -> ScenarioPlan:
    raise AssertionError("the hash planned the scenario again")


def test_a_local_plan_hashes_the_same_under_any_root_and_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    for scenario in config().scenarios:
        plans = [
            plan_local_scenario(scenario, "r1", PYTHON, "/tmp/distval-r1-k3j4"),  # the root holds the run id, as mkdtemp's
            plan_local_scenario(scenario, "zz-9", PYTHON, "/var/tmp/elsewhere/"),
            plan_local_scenario(scenario, "r1", PYTHON, "/"),
        ]
        assert len({p.root_dir for p in plans}) == 3  # the plan carries its root: no re-planning needed to read it
        # Pure: computed from the plan given, the planners untouched.
        monkeypatch.setattr(distval.targets.local.plan, "plan_local_scenario", no_planning)
        monkeypatch.setattr(distval.targets.docker.plan, "plan_scenario", no_planning)
        hashes = {both(p) for p in plans}
        monkeypatch.undo()
        assert len(hashes) == 1, scenario.name
        other_python = plan_local_scenario(scenario, "r1", "/usr/bin/python3", "/tmp/a")
        assert scenario_hash(other_python) != scenario_hash(plans[0])
        assert scenario_hash(other_python, any_image=True) == scenario_hash(plans[0], any_image=True)


def test_two_local_targets_with_their_own_temporary_roots_plan_the_same_hashes() -> None:
    first, second = LocalTarget("r1", sys.executable), LocalTarget("zz-9", sys.executable)
    try:
        assert first.session.root != second.session.root
        one, two = plan_on(first, config(), "r1"), plan_on(second, config(), "zz-9")
    finally:
        first.close()
        second.close()
    for a, b in zip(one.scenarios, two.scenarios, strict=True):
        assert a.scenario_hash and a.scenario_hash_any_image  # plan_on fills them in
        assert (a.scenario_hash, a.scenario_hash_any_image) == (b.scenario_hash, b.scenario_hash_any_image) == both(a)


def test_the_target_is_part_of_the_hash() -> None:
    for scenario in config().scenarios:
        one = plan_scenario(scenario, "r1", IMAGE)
        across = plan_scenario(scenario, "r1", IMAGE, hosts=(A, B))
        elsewhere = plan_scenario(scenario, "r1", IMAGE, hosts=(B, A))
        local = plan_local_scenario(scenario, "r1", PYTHON, "/tmp/r")
        for any_image in (False, True):
            hashes = [scenario_hash(p, any_image) for p in (one, across, elsewhere, local)]
            assert len(set(hashes)) == 4, (scenario.name, any_image, hashes)
        # Each part of the target on its own: the mode, and the hosts list.
        assert scenario_hash(dataclasses.replace(one, mode="host")) != scenario_hash(one)
        assert scenario_hash(dataclasses.replace(across, hosts=(A,))) != scenario_hash(across)


def test_a_hosts_plan_hashes_the_same_in_every_run() -> None:
    runs = [plan_run(config(), run_id, IMAGE, hosts=(A, B)) for run_id in ("r1", "zz-9")]
    for a, b in zip(*(r.scenarios for r in runs), strict=True):
        assert (a.scenario_hash, a.scenario_hash_any_image) == (b.scenario_hash, b.scenario_hash_any_image)
    alone = plan_run(config(), "r1", IMAGE)
    assert all(a.scenario_hash != b.scenario_hash for a, b in zip(runs[0].scenarios, alone.scenarios, strict=True))


def test_the_slug_and_the_ipv6_subnet_read_as_fixed_strings() -> None:
    """A scenario's slug is numbered when another scenario's name shares it: the rest of the config must not change
    its hash. An IPv6 network's subnet is derived from its run-unique name."""
    six = config().scenarios[2]
    plans = [plan_scenario(six, run_id, IMAGE, slug) for run_id, slug in (("r1", "six"), ("r2", "six-5"), ("r3", "s"))]
    assert len({p.network.ipv6_subnet for p in plans}) == 3
    assert len({both(p) for p in plans}) == 1


def test_the_visible_devices_of_a_host_plan_are_what_runs() -> None:
    """Host mode's device ids index into the host's CUDA_VISIBLE_DEVICES: other physical GPUs, another hash (a
    container's device ids are the Engine's physical ones, and hashed as such)."""
    gpu = config("scenarios:\n  - {name: g, topology: in-container, world_size: 2, backend: nccl, checks: [env]}\n")
    scenario = gpu.scenarios[0]
    plain = plan_local_scenario(scenario, "r1", PYTHON, "/tmp/a")
    remapped = plan_local_scenario(scenario, "r1", PYTHON, "/tmp/a", visible_devices=["4", "5"])
    assert scenario_hash(plain) != scenario_hash(remapped)
    assert scenario_hash(remapped) == scenario_hash(plan_local_scenario(scenario, "r2", PYTHON, "/b", visible_devices=["4", "5"]))


def test_with_hashes_fills_what_plan_run_and_a_kubernetes_origin_carry() -> None:
    planned = plan_run(config(), "r1", IMAGE)
    for plan in planned.scenarios:
        assert len(plan.scenario_hash) == 12 and len(plan.scenario_hash_any_image) == 12
        assert (plan.scenario_hash, plan.scenario_hash_any_image) == both(plan)
        bare = dataclasses.replace(plan, scenario_hash="", scenario_hash_any_image="")
        assert with_hashes(bare) == plan  # the hash fields are not part of what is hashed
        origin = Origin(plan.scenario, IMAGE, "r2", plan.slug, "identity.yaml", "job")
        assert origin.plan().scenario_hash == plan.scenario_hash  # collect's plan: another run, the same hash


def test_the_results_read_the_carried_hash_and_refuse_a_plan_without_one() -> None:
    plan = plan_run(config(), "r1", IMAGE).scenarios[1]
    # Changed after planning: the results describe the plan as planned and do not hash it again.
    changed = dataclasses.replace(plan, containers=(dataclasses.replace(plan.containers[0], argv=("python3",)),))
    result = summarize_scenario(ScenarioOutcome(changed, None, 1.0, (), setup_error="boom"))
    properties = dict(result.properties)
    assert (properties["scenario_hash"], properties["scenario_hash_any_image"]) == both(plan) != both(changed)
    unhashed = plan_scenario(plan.scenario, "r1", IMAGE)
    with pytest.raises(PlanError, match="carries no scenario hash"):
        summarize_scenario(ScenarioOutcome(unhashed, None, 1.0, (), setup_error="boom"))
