"""A scenario's plan as data: the steps the runtime executes in order, ``ScenarioPlan`` and a run's ``RunPlan``.

The planners (distval/plan/model.py for one Engine, distval/targets/engines/plan.py across hosts,
distval/targets/local/plan.py for local processes) fill these in; the runtimes execute them, the scenario hash
(distval/plan/identity.py) is computed over them and the results carry them. This module depends on none of
those: only on the config and the plain data of containers, networks and faults.
"""

from __future__ import annotations

from dataclasses import dataclass

from distval.config import NCCL_BACKENDS, Scenario
from distval.faults.plan import FaultPlan
from distval.plan.specs import ContainerPlan, NetworkPlan


# -- the steps, in the order the runtime executes them ----------------------------------------------
@dataclass(frozen=True)
class CreateNetwork:
    network: str
    host: str = ""  # every step names the Engine it runs on: a --hosts URL ("" : the one Engine of a plain run)


@dataclass(frozen=True)
class LearnSubnets:
    """Read the network's subnets from the Engine: the fact ``subnets``."""

    network: str
    host: str = ""


@dataclass(frozen=True)
class CreateContainer:
    """Create the container (resolved), connect its further networks, copy its files in."""

    container: str
    host: str = ""


@dataclass(frozen=True)
class StartContainer:
    """Start it; the first start also starts the scenario's deadline."""

    container: str
    host: str = ""


@dataclass(frozen=True)
class LearnAddress:
    """Read the started container's address on the network: the facts ``node0_ip`` and ``node0_host``."""

    container: str
    network: str
    ipv6: bool
    host: str = ""


@dataclass(frozen=True)
class ProbeHost:
    """Run the probe container on its host (host networking) until it exits: the facts ``socket_ifname`` of that
    host and, on host 0, ``node0_ip``/``node0_host`` and the free ports (distval/targets/engines/runtime.py)."""

    container: str
    host: str
    first: bool  # host 0: its address and ports are the rendezvous point


Step = CreateNetwork | LearnSubnets | CreateContainer | StartContainer | LearnAddress | ProbeHost


@dataclass(frozen=True)
class ScenarioPlan:
    scenario: Scenario
    run_id: str
    slug: str  # unique within the run: the names of its resources derive from it
    image: str
    networks: tuple[NetworkPlan, ...]
    containers: tuple[ContainerPlan, ...]
    steps: tuple[Step, ...]
    # "docker": containers of ``image``; "host": local processes of the Python ``image`` names
    # (distval/targets/local/plan.py), shown as `` [host]`` in the suite name and as the ``mode`` property.
    mode: str = "docker"
    # Across several Docker hosts (distval/targets/engines/plan.py): the Engine URLs, and the probe containers run first.
    hosts: tuple[str, ...] = ()
    probes: tuple[ContainerPlan, ...] = ()
    # The scenario's faults (distval/faults/plan.py): when each lands, what the runtime does, its helper containers.
    faults: FaultPlan | None = None
    # Host mode: the directory the nodes' directories are under (a temporary name), so that the scenario hash
    # can read it as a fixed one without planning again. "": the plan names no directory of this machine.
    root_dir: str = ""
    # What runs, as 12 hex digits each (distval/plan/identity.py): filled in by ``with_hashes`` where a run is
    # planned; the results carry them. "" : not computed yet (results refuse such a plan).
    scenario_hash: str = ""
    scenario_hash_any_image: str = ""

    @property
    def network(self) -> NetworkPlan:
        """The scenario's own network: the one the ranks rendezvous on."""
        return self.networks[0]

    @property
    def deadline_s(self) -> float:
        return self.scenario.timeout_s

    @property
    def needs_node0_ip(self) -> bool:
        return any(isinstance(step, LearnAddress) for step in self.steps)

    @property
    def suite_spec_json(self) -> str:
        """Node 0's suite spec (every node's differs at most in placeholders)."""
        return next(f.text for f in self.containers[0].files if f.path.endswith("/spec.json") and f.text is not None)

    @property
    def gpus_needed(self) -> int:
        return sum(len(c.options.gpu_device_ids) for c in self.containers)

    @property
    def gpus_needed_text(self) -> str:
        """The GPUs this scenario needs, in words (the first half of every GPU skip reason)."""
        why = "one per NCCL rank" if self.scenario.backend in NCCL_BACKENDS else "shared by each node's ranks"
        return f"the scenario needs {self.gpus_needed} GPU(s), {why}"

    def container(self, name: str) -> ContainerPlan:
        return next(c for c in self.containers + self.probes if c.name == name)

    def network_named(self, name: str) -> NetworkPlan:
        return next(n for n in self.networks if n.name == name)

    @property
    def suite_name(self) -> str:
        s = self.scenario
        layout = (
            f"{s.world_size} ranks" if s.topology == "in-container" else f"{s.nodes}x{s.nproc_per_node}, {s.world_size} ranks"
        )
        form = "" if s.topology == "in-container" else f", {s.rendezvous}" + (" via IP" if s.master_addr == "ip" else "")
        backend = "" if s.backend == "gloo" else f", {s.backend}"
        mark = " [host]" if self.mode == "host" else ""
        return f"{s.name} ({s.topology}, {layout}{form}{backend}){mark}"

    @property
    def target_args(self) -> tuple[str, ...]:
        """The command-line options that select what this plan ran on (the reproduce command's)."""
        return ("--host", "--python", self.image) if self.mode == "host" else ("--image", self.image)


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    config_path: str
    scenarios: tuple[ScenarioPlan, ...]
