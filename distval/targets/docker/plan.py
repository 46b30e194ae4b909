"""Scenario -> a plan on one Docker Engine: the scenario's own networks, then its nodes' containers.

The nodes come from distval/plan/nodes.py; this module says where they run on one Engine:

- each node is a container named ``<base>-n<rank>`` with that hostname, the suite, its spec and a results
  directory under /distval, the rendezvous ports fixed (the scenario's network is its own);
- networks: one per scenario, internal unless the scenario allows egress (the image under test reaches nothing
  outside), even in-container so that the hostname resolves (torchrun's workers dial the agent's store by it);
  extra networks make the containers multi-homed, as on real clusters; the first network's subnets are learned
  once it exists (``{subnets}``);
- node 0 by name, or with ``master_addr: ip`` by the address the Engine gave it (``{node0_ip}``), learned once it
  started: then it is created and started first;
- the scenario's faults (distval/plan/faults.py): an oom fault's memory limit on its node, and the fault plan.

distval/targets/engines/planning.py chooses this planner when no --hosts (or hosts key) places the nodes elsewhere.
"""

from __future__ import annotations

from distval.config import Scenario
from distval.config.shipped import DEFAULT_IMAGE
from distval.plan.faults import plan_faults, with_fault_limits
from distval.plan.model import CreateNetwork, LearnSubnets, ScenarioPlan, Step, ipv6_subnet, scenario_slug
from distval.plan.nodes import SUBNETS, FileModes, Site, base_name, build_nodes, scenario_labels
from distval.plan.specs import NetworkPlan

CONTAINER_ROOT = "/distval"
SPEC_PATH = f"{CONTAINER_ROOT}/spec.json"
RESULTS_DIR = f"{CONTAINER_ROOT}/results"
MASTER_PORT = 29500
C10D_PORT = 29400
PORTS = {"master_port": str(MASTER_PORT), "c10d_port": str(C10D_PORT)}
# World-writable results: images often run as a non-root user that must still write its records.
CONTAINER_FILE_MODES = FileModes(root=0o755, suite=0o755, results=0o777, spec=0o644)


def plan_scenario(scenario: Scenario, run_id: str, image_override: str | None, slug: str | None = None) -> ScenarioPlan:
    slug = slug or scenario_slug(scenario.name)
    image = image_override or scenario.image or DEFAULT_IMAGE
    base = base_name(run_id, slug)
    labels = scenario_labels(scenario, run_id)
    networks = (
        NetworkPlan(
            name=base,
            internal=not scenario.egress,
            labels=labels,
            ipv6_subnet=ipv6_subnet(base) if scenario.ipv6 else None,
        ),
    ) + tuple(NetworkPlan(name=f"{base}-x{i}", internal=True, labels=labels) for i in range(1, scenario.extra_networks + 1))
    by_ip = scenario.topology == "cross-container" and scenario.master_addr == "ip"
    site = Site(
        image=image,
        python=scenario.python,
        root=CONTAINER_ROOT,
        ports=PORTS,
        subnets=SUBNETS,
        file_modes=CONTAINER_FILE_MODES,
        learn_address_on=networks[0].name if by_ip else None,
        working_dir=scenario.working_dir or CONTAINER_ROOT,
        networks=tuple(n.name for n in networks),
    )
    nodes = build_nodes(scenario, run_id, slug, site)
    containers = tuple(with_fault_limits(scenario, list(nodes.containers)))
    steps: list[Step] = [CreateNetwork(n.name) for n in networks]
    steps.append(LearnSubnets(networks[0].name))
    return ScenarioPlan(
        scenario=scenario,
        run_id=run_id,
        slug=slug,
        image=image,
        networks=networks,
        containers=containers,
        steps=(*steps, *nodes.steps),
        faults=plan_faults(scenario, containers, networks[0].name, base, labels) if scenario.faults else None,
    )
