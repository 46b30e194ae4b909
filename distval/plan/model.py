"""The launch plan's data model: a Docker-free plan that is exactly what runs.

A ``ScenarioPlan`` holds every network and container with its full creation
arguments and files, and the ordered steps that create, start and observe them. What only the Engine can know (node 0's address,
the network's subnets) is a named placeholder (distval/plan/placeholders.py). ``distval plan`` prints this
object, placeholders included; distval/targets/docker/runtime.py resolves each step with the facts it observed and
executes it verbatim, deciding nothing itself (the model is TorchX's docker scheduler, whose dry run
returns the docker-py arguments and whose schedule() only loops over them).

The planners fill it in: distval/targets/engines/planning.py chooses one per target (distval/targets/docker/plan.py,
distval/targets/engines/plan.py, distval/targets/local/plan.py), and all of them build the nodes with
distval/plan/nodes.py.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from distval.config import NCCL_BACKENDS, Config, Scenario
from distval.labels import LABEL_MANAGED, LABEL_NODE, LABEL_RUN, LABEL_SCENARIO
from distval.plan.faults import FaultPlan
from distval.plan.specs import ContainerOptions, ContainerPlan, FileCopy, NetworkPlan, Ulimit

__all__ = [  # the names other modules take from here; the data types live in plan/specs and labels
    "LABEL_MANAGED",
    "LABEL_NODE",
    "LABEL_RUN",
    "LABEL_SCENARIO",
    "ContainerOptions",
    "ContainerPlan",
    "CreateContainer",
    "CreateNetwork",
    "FileCopy",
    "LearnAddress",
    "LearnSubnets",
    "NetworkPlan",
    "ProbeHost",
    "RunPlan",
    "ScenarioPlan",
    "StartContainer",
    "Step",
    "Ulimit",
]


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
    # What the reports call the target it runs on (the ``mode`` property; "host": local processes of the Python
    # ``image`` names, distval/targets/local/plan.py), and how they show it, as its target's planner says: a mark
    # after the suite name ("[host]"), and the options before ``image`` in the command that runs it again.
    mode: str = "docker"
    suite_mark: str = ""
    image_options: tuple[str, ...] = ("--image",)
    # Across several Docker hosts (distval/targets/engines/plan.py): the Engine URLs, and the probe containers run first.
    hosts: tuple[str, ...] = ()
    probes: tuple[ContainerPlan, ...] = ()
    # The scenario's faults (distval/plan/faults.py): when each lands, what the runtime does, its helper containers.
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
        mark = f" {self.suite_mark}" if self.suite_mark else ""
        return f"{s.name} ({s.topology}, {layout}{form}{backend}){mark}"

    @property
    def target_args(self) -> tuple[str, ...]:
        """The command-line options that select what this plan ran on (the reproduce command's)."""
        return (*self.image_options, self.image)


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    config_path: str
    scenarios: tuple[ScenarioPlan, ...]
    # Planned but not run: the scenarios the check selection (--check, --skip-check, -k) left no check; each is
    # reported skipped (distval/plan/selection.py NO_CHECK_SELECTED). ``selection_notes``: what the selection
    # kept that was not selected, and why (a fault's trigger check).
    unselected: tuple[ScenarioPlan, ...] = ()
    selection_notes: tuple[str, ...] = ()

    @property
    def images(self) -> list[str]:
        """The images its scenarios run, each once, sorted."""
        return sorted({s.image for s in self.scenarios})


def scenario_slug(name: str) -> str:
    """A scenario's name as its resources' names take it (run_slugs makes the run's unique)."""
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:30] or "scenario"


def ipv6_subnet(network_name: str) -> str:
    """A unique-local /64 derived from the (run-unique) network name: parallel runs never share one."""
    digest = hashlib.sha256(network_name.encode()).hexdigest()
    return f"fd{digest[:2]}:{digest[2:6]}:{digest[6:10]}:{digest[10:14]}::/64"


def run_slugs(config: Config) -> list[str]:
    """Each scenario's slug, unique within the run. Names that differ only in case or punctuation
    ("a_b", "A.b") share a slug; number the later ones so that container, host and network names stay
    unique within the run."""
    slugs: list[str] = []
    for index, scenario in enumerate(config.scenarios):
        slug, suffix = scenario_slug(scenario.name), index
        candidate = slug
        while candidate in slugs:  # against every earlier slug, generated ones included: unique by construction
            candidate, suffix = f"{slug[:24]}-{suffix}", suffix + len(config.scenarios)
        slugs.append(candidate)
    return slugs
