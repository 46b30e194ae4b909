"""Scenario -> a Docker-free launch plan: every network, container, command line and file, as data.

``distval plan`` prints it (a dry run); runtime.py executes it and nothing else decides what to create.
Later topologies (fault injection, per-rank GPUs, host mode) add plan fields, not Docker calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.config import Config, Scenario

DEFAULT_IMAGE = "distval-fixtures/torch:2.6-debian"
CONTAINER_ROOT = "/distval"
SPEC_PATH = f"{CONTAINER_ROOT}/spec.json"
RESULTS_DIR = f"{CONTAINER_ROOT}/results"
MASTER_PORT = 29500
LABEL_MANAGED = "distval.managed"
LABEL_RUN = "distval.run"
LABEL_SCENARIO = "distval.scenario"
LABEL_NODE = "distval.node"


# Where the harness puts node 0's IP address once the Engine has given it one (master_addr: ip).
NODE0_IP = "{node0_ip}"
# In the suite spec: each container's own address for node 0 (ContainerPlan.master_addr).
MASTER_ADDR_FIELD = "{master_addr}"
C10D_PORT = 29400


@dataclass(frozen=True)
class NetworkPlan:
    name: str
    internal: bool
    labels: tuple[tuple[str, str], ...]
    ipv6: bool = False


@dataclass(frozen=True)
class ContainerOptions:
    """Resource and identity options, passed to the Engine as they are (None: the Engine's default)."""

    cpus: float | None = None
    memory: str | None = None
    shm_size: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class ContainerPlan:
    name: str
    hostname: str
    node_rank: int
    ranks: tuple[int, ...]
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    working_dir: str
    networks: tuple[str, ...] = ()
    options: ContainerOptions = ContainerOptions()
    master_addr: str = ""  # how this container reaches node 0 (NODE0_IP: filled in at run time)


@dataclass(frozen=True)
class ScenarioPlan:
    scenario: Scenario
    image: str
    networks: tuple[NetworkPlan, ...]
    containers: tuple[ContainerPlan, ...]
    suite_spec_json: str
    # master_addr: ip -- node 0 starts first, and NODE0_IP in the others' command, environment and
    # spec becomes its address on the scenario's network.
    needs_node0_ip: bool = False

    @property
    def network(self) -> NetworkPlan:
        """The scenario's own network: the one the ranks rendezvous on."""
        return self.networks[0]

    @property
    def suite_name(self) -> str:
        s = self.scenario
        layout = (
            f"{s.world_size} ranks" if s.topology == "in-container" else f"{s.nodes}x{s.nproc_per_node}, {s.world_size} ranks"
        )
        form = "" if s.topology == "in-container" else f", {s.rendezvous}" + (" via IP" if s.master_addr == "ip" else "")
        return f"{s.name} ({s.topology}, {layout}{form})"


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    config_path: str
    scenarios: tuple[ScenarioPlan, ...]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:30] or "scenario"


def _pairs(mapping: object) -> tuple[tuple[str, str], ...]:
    items = mapping.items() if hasattr(mapping, "items") else mapping  # a Mapping or (key, value) pairs
    return tuple((str(k), str(v)) for k, v in items)  # type: ignore[union-attr]


def _command(scenario: Scenario, node_rank: int, master: str, rdzv_id: str) -> tuple[str, ...]:
    """The container's command line for the scenario's topology and rendezvous form."""
    if scenario.rendezvous in ("env", "tcp"):
        # No launcher: one process per container, rank and world size from the harness.
        return (scenario.python, "-m", "suite.main", SPEC_PATH)
    # torch.distributed.run through the interpreter, not the torchrun script that some images lack.
    # Underscore spellings: torch 1.13's launcher knows only those; later ones accept both.
    argv = [scenario.python, "-m", "torch.distributed.run"]
    if scenario.topology == "in-container":
        argv += ["--standalone", "--nnodes=1", f"--nproc_per_node={scenario.world_size}"]
    elif scenario.rendezvous == "c10d":
        # No node rank: c10d assigns them. A run-unique id: two jobs on one endpoint must not meet.
        argv += [
            f"--nnodes={scenario.nodes}",
            f"--nproc_per_node={scenario.nproc_per_node}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={master}:{C10D_PORT}",
            f"--rdzv_id={rdzv_id}",
        ]
    else:
        argv += [
            f"--nnodes={scenario.nodes}",
            f"--nproc_per_node={scenario.nproc_per_node}",
            f"--node_rank={node_rank}",
            f"--master_addr={master}",
            f"--master_port={MASTER_PORT}",
        ]
    # No restarts: a failing rank must fail the scenario, not be retried into a pass.
    argv += ["--max_restarts=0", "-m", "suite.main", SPEC_PATH]
    return tuple(argv)


def plan_scenario(scenario: Scenario, run_id: str, image_override: str | None, slug: str | None = None) -> ScenarioPlan:
    image = image_override or scenario.image or DEFAULT_IMAGE
    base = f"distval-{run_id}-{slug or _slug(scenario.name)}"
    common_labels = ((LABEL_MANAGED, "true"), (LABEL_RUN, run_id), (LABEL_SCENARIO, scenario.name))
    cross = scenario.topology == "cross-container"
    node_count = scenario.nodes if cross else 1
    by_ip = cross and scenario.master_addr == "ip"
    # Internal unless the scenario allows egress: the image under test reaches nothing outside. One
    # network per scenario, even in-container, so that the hostname resolves (torchrun's workers dial
    # the agent's store by it). Extra networks make the containers multi-homed, as on real clusters.
    networks = (NetworkPlan(name=base, internal=not scenario.egress, labels=common_labels, ipv6=scenario.ipv6),) + tuple(
        NetworkPlan(name=f"{base}-x{i}", internal=True, labels=common_labels) for i in range(1, scenario.extra_networks + 1)
    )
    working_dir = scenario.working_dir or CONTAINER_ROOT
    options = ContainerOptions(cpus=scenario.cpus, memory=scenario.memory, shm_size=scenario.shm_size, user=scenario.user)
    containers = []
    for node_rank in range(node_count):
        name = f"{base}-n{node_rank}"
        # Node 0 names itself; with master_addr: ip the others get its address once it has one.
        master = NODE0_IP if by_ip and node_rank > 0 else f"{base}-n0"
        first = node_rank * scenario.nproc_per_node if cross else 0
        ranks = tuple(range(first, first + (scenario.nproc_per_node if cross else scenario.world_size)))
        env = list(_pairs(scenario.env))
        env += [
            ("PYTHONUNBUFFERED", "1"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("DISTVAL_RUN_ID", run_id),
            ("DISTVAL_SCENARIO", scenario.name),
            ("DISTVAL_NODE_RANK", str(node_rank)),
        ]
        if working_dir != CONTAINER_ROOT:
            # `-m suite.main` finds the suite through the working directory; elsewhere, through this.
            env.append(("PYTHONPATH", CONTAINER_ROOT))
        if scenario.rendezvous in ("env", "tcp"):
            env += [("RANK", str(node_rank)), ("WORLD_SIZE", str(scenario.world_size))]
        if scenario.rendezvous == "env":
            env += [("MASTER_ADDR", master), ("MASTER_PORT", str(MASTER_PORT))]
        containers.append(
            ContainerPlan(
                name=name,
                hostname=name,
                node_rank=node_rank,
                ranks=ranks,
                argv=_command(scenario, node_rank, master, f"{run_id}-{slug or _slug(scenario.name)}"),
                env=tuple(env),
                labels=common_labels + ((LABEL_NODE, str(node_rank)),),
                working_dir=working_dir,
                networks=tuple(n.name for n in networks),
                options=options,
                master_addr=master,
            )
        )
    spec = {
        "scenario": scenario.name,
        "backend": scenario.backend,
        "collective_timeout_s": scenario.collective_timeout_s,
        "check_timeout_s": scenario.check_timeout_s,
        "world_size": scenario.world_size,
        "nproc_per_node": scenario.nproc_per_node if cross else scenario.world_size,
        "launcher": "none" if scenario.rendezvous in ("env", "tcp") else "torchrun",
        "init_method": {"env": "env://", "tcp": f"tcp://{MASTER_ADDR_FIELD}:{MASTER_PORT}"}.get(scenario.rendezvous),
        "dynamic_node_ranks": cross and scenario.rendezvous == "c10d",
        "results_dir": RESULTS_DIR,
        "checks": [{"name": c.name, "args": dict(c.args)} for c in scenario.checks],
    }
    return ScenarioPlan(
        scenario=scenario,
        image=image,
        networks=networks,
        containers=tuple(containers),
        suite_spec_json=json.dumps(spec, indent=2, sort_keys=True),
        needs_node0_ip=by_ip,
    )


def plan_run(config: Config, run_id: str, image_override: str | None = None) -> RunPlan:
    # Names that differ only in case or punctuation ("a_b", "A.b") share a slug; number the later ones so
    # that container, host and network names stay unique within the run.
    slugs: list[str] = []
    for index, scenario in enumerate(config.scenarios):
        slug = _slug(scenario.name)
        slugs.append(slug if slug not in slugs else f"{slug[:26]}-{index}")
    return RunPlan(
        run_id=run_id,
        config_path=config.path,
        scenarios=tuple(plan_scenario(s, run_id, image_override, slug) for s, slug in zip(config.scenarios, slugs, strict=True)),
    )


def images_of(plan: RunPlan) -> list[str]:
    return sorted({s.image for s in plan.scenarios})


def render_plan(plan: RunPlan) -> str:
    """The plan as text for people; golden-tested, so keep it deterministic."""
    lines = [f"run {plan.run_id} from {plan.config_path}: {len(plan.scenarios)} scenario(s)"]
    for sp in plan.scenarios:
        s = sp.scenario
        lines.append("")
        lines.append(f"scenario {sp.suite_name}")
        lines.append(f"  image: {sp.image}")
        lines.append(f"  backend: {s.backend}; deadline: {s.timeout_s:g} s; collective timeout: {s.collective_timeout_s:g} s")
        lines.append(f"  checks: {', '.join(c.name + (' (required)' if c.required else '') for c in s.checks)}")
        for network in sp.networks:
            ipv6 = ", ipv6" if network.ipv6 else ""
            lines.append(f"  network: {network.name} (internal={str(network.internal).lower()}{ipv6})")
        if sp.needs_node0_ip:
            lines.append(f"  node 0 starts first; {NODE0_IP} becomes its IP address on {sp.network.name}")
        for c in sp.containers:
            lines.append(f"  container {c.name} (node {c.node_rank}, ranks {', '.join(map(str, c.ranks))})")
            lines.append(f"    hostname: {c.hostname}")
            lines.append(f"    command: {' '.join(c.argv)}")
            lines.append(f"    env: {' '.join(f'{k}={v}' for k, v in c.env)}")
            options = ", ".join(f"{k}={v}" for k, v in vars(c.options).items() if v is not None)
            if options or c.working_dir != CONTAINER_ROOT:
                lines.append(f"    options: {options or '-'}; working dir {c.working_dir}")
            lines.append(f"    labels: {' '.join(f'{k}={v}' for k, v in c.labels)}")
            lines.append(f"    copy in: suite/ -> {CONTAINER_ROOT}/suite, spec -> {SPEC_PATH}")
            lines.append(f"    results out: {RESULTS_DIR}/rank-<rank>.jsonl")
    return "\n".join(lines) + "\n"
