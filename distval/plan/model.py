"""Scenario -> a Docker-free launch plan that is exactly what runs.

A ``ScenarioPlan`` (distval/plan/scenario_plan.py) holds every network and container with its full creation
arguments and files, and the ordered steps that create, start and observe them. What only the Engine can know (node 0's address,
the network's subnets) is a named placeholder (distval/plan/placeholders.py). ``distval plan`` prints this
object, placeholders included; distval/targets/docker/runtime.py resolves each step with the facts it observed and
executes it verbatim, deciding nothing itself (the model is TorchX's docker scheduler, whose dry run
returns the docker-py arguments and whose schedule() only loops over them).
"""

from __future__ import annotations

import hashlib
import json
import re

from distval.config import NCCL_BACKENDS, Config, Scenario
from distval.faults.plan import plan_faults, with_fault_limits
from distval.labels import LABEL_MANAGED, LABEL_NODE, LABEL_RUN, LABEL_SCENARIO
from distval.plan.identity import with_hashes
from distval.plan.placeholders import placeholder
from distval.plan.scenario_plan import (
    CreateContainer,
    CreateNetwork,
    LearnAddress,
    LearnSubnets,
    ProbeHost,
    RunPlan,
    ScenarioPlan,
    StartContainer,
    Step,
)
from distval.plan.specs import ContainerOptions, ContainerPlan, FileCopy, NetworkPlan, Ulimit
from distval.results.rank_files import ERROR_FILE

__all__ = [  # the names other modules take from here; the data types live in plan/scenario_plan, plan/specs, labels
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

DEFAULT_IMAGE = "distval-fixtures/torch:2.6-debian"
CONTAINER_ROOT = "/distval"
SPEC_PATH = f"{CONTAINER_ROOT}/spec.json"
RESULTS_DIR = f"{CONTAINER_ROOT}/results"
MASTER_PORT = 29500
C10D_PORT = 29400
NODE0_IP = placeholder("node0_ip")
NODE0_HOST = placeholder("node0_host")
SUBNETS = placeholder("subnets")
# NCCL in containers: Docker's 64 MB /dev/shm breaks NCCL's shared-memory transport (nccl#342), and
# NVIDIA's container guide asks for unlimited locked memory and a 64 MiB stack.
NCCL_SHM_SIZE = "1g"
NCCL_ULIMITS = (Ulimit("memlock", -1, -1), Ulimit("stack", 67108864, 67108864))
NCCL_ENV = (
    ("NCCL_DEBUG", "INFO"),  # its INIT lines name the transport between each pair (results: nccl_transport)
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),  # a timed-out collective raises instead of hanging
    ("NCCL_ASYNC_ERROR_HANDLING", "1"),  # the same before torch 2.2 renamed it
)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:30] or "scenario"


def _pairs(mapping: object) -> tuple[tuple[str, str], ...]:
    items = mapping.items() if hasattr(mapping, "items") else mapping  # a Mapping or (key, value) pairs
    return tuple((str(k), str(v)) for k, v in items)  # type: ignore[union-attr]


def ipv6_subnet(network_name: str) -> str:
    """A unique-local /64 derived from the (run-unique) network name: parallel runs never share one."""
    digest = hashlib.sha256(network_name.encode()).hexdigest()
    return f"fd{digest[:2]}:{digest[2:6]}:{digest[6:10]}:{digest[10:14]}::/64"


def _command(
    scenario: Scenario,
    python: str,
    node_rank: int,
    master: str,
    master_host: str,
    rdzv_id: str,
    spec_path: str,
    master_port: str,
    c10d_port: str,
    rdzv_conf: str | None = None,
) -> tuple[str, ...]:
    """A node's command line for the scenario's topology and rendezvous form. The ports are strings so
    that they can be placeholders (host mode chooses free ones when the scenario starts)."""
    if scenario.rendezvous in ("env", "tcp"):
        # No launcher: one process per node, rank and world size from the harness.
        return (python, "-m", "distval_suite.main", spec_path)
    # torch.distributed.run through the interpreter, not the torchrun script that some images lack.
    # Underscore spellings: torch 1.13's launcher knows only those; later ones accept both.
    argv = [python, "-m", "torch.distributed.run"]
    if scenario.topology == "in-container":
        argv += ["--standalone", "--nnodes=1", f"--nproc_per_node={scenario.world_size}"]
    elif scenario.rendezvous == "c10d":
        # No node rank: c10d assigns them. A run-unique id: two jobs on one endpoint must not meet.
        argv += [
            f"--nnodes={scenario.nodes}",
            f"--nproc_per_node={scenario.nproc_per_node}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={master_host}:{c10d_port}",
            f"--rdzv_id={rdzv_id}",
        ]
        # Short rendezvous timeouts: torchrun's 600 s join_timeout would outlast the deadline (restarts and
        # a lost node re-rendezvous through it).
        conf = [rdzv_conf] if rdzv_conf is not None else []
        conf += [
            f"{name}={value}"
            for name, value in (
                ("join_timeout", scenario.rdzv_join_timeout_s),
                ("last_call_timeout", scenario.rdzv_last_call_timeout_s),
                ("close_timeout", scenario.rdzv_close_timeout_s),
                ("read_timeout", scenario.rdzv_read_timeout_s),
            )
            if value is not None
        ]
        argv.append(f"--rdzv_conf={','.join(conf)}")
    else:
        argv += [
            f"--nnodes={scenario.nodes}",
            f"--nproc_per_node={scenario.nproc_per_node}",
            f"--node_rank={node_rank}",
            f"--master_addr={master}",
            f"--master_port={master_port}",
        ]
    # No restarts unless the scenario asks (max_restarts): a failing rank must fail the scenario, not be
    # retried into a pass; with restarts the report says how many happened.
    argv += [f"--max_restarts={scenario.max_restarts}", "-m", "distval_suite.main", spec_path]
    return tuple(argv)


def _spec(scenario: Scenario, master_host: str, master_port: str, results_dir: str, subnets: str) -> str:
    """The suite spec one node reads (distval_suite/main.py)."""
    cross = scenario.topology == "cross-container"
    spec = {
        "scenario": scenario.name,
        "backend": scenario.backend,
        "device": scenario.device,
        "collective_timeout_s": scenario.collective_timeout_s,
        "check_timeout_s": scenario.check_timeout_s,
        "world_size": scenario.world_size,
        "nproc_per_node": scenario.nproc_per_node if cross else scenario.world_size,
        "launcher": "none" if scenario.rendezvous in ("env", "tcp") else "torchrun",
        "init_method": {"env": "env://", "tcp": f"tcp://{master_host}:{master_port}"}.get(scenario.rendezvous),
        "dynamic_node_ranks": cross and scenario.rendezvous == "c10d",
        "results_dir": results_dir,
        "subnets": subnets,
        "checks": [{"name": c.name, "args": dict(c.args)} for c in scenario.checks],
    }
    return json.dumps(spec, sort_keys=True)


def _env(
    scenario: Scenario,
    run_id: str,
    node_rank: int,
    master: str,
    master_port: str,
    pythonpath: str | None,
    results_dir: str = RESULTS_DIR,
) -> tuple[tuple[str, str], ...]:
    """A node's environment: the scenario's, distval's, NCCL's defaults and the rendezvous variables of
    the launcher-less forms. ``pythonpath`` is where the suite is, when the working directory is not."""
    env = list(_pairs(scenario.env))
    env += [
        ("PYTHONUNBUFFERED", "1"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("DISTVAL_RUN_ID", run_id),
        ("DISTVAL_SCENARIO", scenario.name),
        ("DISTVAL_NODE_RANK", str(node_rank)),
    ]
    if scenario.backend in NCCL_BACKENDS:
        env += [pair for pair in NCCL_ENV if pair[0] not in dict(scenario.env)]
    env += [pair for pair in diagnosis_env(scenario, results_dir) if pair[0] not in dict(scenario.env)]
    if pythonpath is not None:
        # `-m distval_suite.main` finds the suite through the working directory; elsewhere, through this.
        env.append(("PYTHONPATH", pythonpath))
    if scenario.rendezvous in ("env", "tcp"):
        env += [("RANK", str(node_rank)), ("WORLD_SIZE", str(scenario.world_size))]
    if scenario.rendezvous == "env":
        env += [("MASTER_ADDR", master), ("MASTER_PORT", master_port)]
    return tuple(env)


# The flight recorder's ring buffer (entries per process), read when the first group is created. torch
# 2.15 records gloo collectives into it (PR #152614); older torches ignore the variable.
FLIGHT_RECORDER_ENTRIES = 2000


def diagnosis_env(scenario: Scenario, results_dir: str) -> tuple[tuple[str, str], ...]:
    """The variables that make a crash or a hang diagnosable (distval/results/diagnosis.py reads what they give)."""
    env = [
        # torchrun (or a worker without it) writes the first failure's traceback here (distval_suite.main is wrapped
        # with torchelastic's record), so the report shows it instead of "exit code 1".
        ("TORCHELASTIC_ERROR_FILE", f"{results_dir}/{ERROR_FILE}"),
        ("TORCH_FR_BUFFER_SIZE", str(FLIGHT_RECORDER_ENTRIES)),
    ]
    if scenario.distributed_debug != "off":
        env.append(("TORCH_DISTRIBUTED_DEBUG", scenario.distributed_debug.upper()))
    if not scenario.share_rdzv_store:
        # Restarts fail with the agent-shared store on some torch versions (pytorch#135712, #167288).
        env.append(("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"))
    return tuple(env)


def plan_scenario(
    scenario: Scenario, run_id: str, image_override: str | None, slug: str | None = None, hosts: tuple[str, ...] = ()
) -> ScenarioPlan:
    slug = slug or _slug(scenario.name)
    image = image_override or scenario.image or DEFAULT_IMAGE
    hosts = hosts or scenario.hosts
    if hosts:
        from distval.targets.engines.plan import plan_across_hosts  # it builds on this module's helpers

        return plan_across_hosts(scenario, run_id, image, slug, hosts)
    base = f"distval-{run_id}-{slug}"
    common_labels = ((LABEL_MANAGED, "true"), (LABEL_RUN, run_id), (LABEL_SCENARIO, scenario.name))
    cross = scenario.topology == "cross-container"
    node_count = scenario.nodes if cross else 1
    by_ip = cross and scenario.master_addr == "ip"
    nccl = scenario.backend in NCCL_BACKENDS
    # Internal unless the scenario allows egress: the image under test reaches nothing outside. One
    # network per scenario, even in-container, so that the hostname resolves (torchrun's workers dial
    # the agent's store by it). Extra networks make the containers multi-homed, as on real clusters.
    networks = (
        NetworkPlan(
            name=base,
            internal=not scenario.egress,
            labels=common_labels,
            ipv6_subnet=ipv6_subnet(base) if scenario.ipv6 else None,
        ),
    ) + tuple(
        NetworkPlan(name=f"{base}-x{i}", internal=True, labels=common_labels) for i in range(1, scenario.extra_networks + 1)
    )
    working_dir = scenario.working_dir or CONTAINER_ROOT
    # GPUs per node come from the config (distval/config/devices.py: one per process for NCCL, one shared
    # by the node's processes for gloo on CUDA tensors, none on the CPU).
    gpus = scenario.gpus_per_node
    containers = []
    for node_rank in range(node_count):
        name = f"{base}-n{node_rank}"
        # Node 0 names itself; with master_addr: ip the others get its address once it has one.
        master, master_host = (NODE0_IP, NODE0_HOST) if by_ip and node_rank > 0 else (f"{base}-n0", f"{base}-n0")
        first = node_rank * scenario.nproc_per_node if cross else 0
        ranks = tuple(range(first, first + (scenario.nproc_per_node if cross else scenario.world_size)))
        env = _env(
            scenario,
            run_id,
            node_rank,
            master,
            str(MASTER_PORT),
            pythonpath=CONTAINER_ROOT if working_dir != CONTAINER_ROOT else None,
        )
        options = ContainerOptions(
            cpus=scenario.cpus,
            memory=scenario.memory,
            shm_size=scenario.shm_size or (NCCL_SHM_SIZE if nccl else None),
            user=scenario.user,
            ulimits=NCCL_ULIMITS if nccl else (),
            gpu_device_ids=tuple(str(i) for i in range(node_rank * gpus, (node_rank + 1) * gpus)),
        )
        files = (
            FileCopy(CONTAINER_ROOT, 0o755),
            FileCopy(f"{CONTAINER_ROOT}/distval_suite", 0o755, suite=True),
            # World-writable: images often run as a non-root user that must still write its records.
            FileCopy(RESULTS_DIR, 0o777),
            FileCopy(SPEC_PATH, 0o644, text=_spec(scenario, master_host, str(MASTER_PORT), RESULTS_DIR, SUBNETS)),
        )
        containers.append(
            ContainerPlan(
                name=name,
                hostname=name,
                node_rank=node_rank,
                ranks=ranks,
                argv=_command(
                    scenario,
                    scenario.python,
                    node_rank,
                    master,
                    master_host,
                    f"{run_id}-{slug}",
                    SPEC_PATH,
                    str(MASTER_PORT),
                    str(C10D_PORT),
                ),
                env=tuple(env),
                labels=common_labels + ((LABEL_NODE, str(node_rank)),),
                working_dir=working_dir,
                image=image,
                networks=tuple(n.name for n in networks),
                options=options,
                files=files,
                results_dir=RESULTS_DIR,
            )
        )
    containers = with_fault_limits(scenario, containers)
    steps: list[Step] = [CreateNetwork(n.name) for n in networks]
    steps.append(LearnSubnets(networks[0].name))
    if by_ip:
        # The others address node 0 by the IP the Engine gave it, so it is created and started first.
        n0 = containers[0].name
        steps += [CreateContainer(n0), StartContainer(n0), LearnAddress(n0, networks[0].name, ipv6=scenario.ipv6)]
        steps += [CreateContainer(c.name) for c in containers[1:]]
        steps += [StartContainer(c.name) for c in reversed(containers[1:])]
    else:
        # Node 0 last: every rendezvous form must cope with ranks that arrive before the one they
        # rendezvous at is listening.
        steps += [CreateContainer(c.name) for c in containers]
        steps += [StartContainer(c.name) for c in reversed(containers)]
    return ScenarioPlan(
        scenario=scenario,
        run_id=run_id,
        slug=slug,
        image=image,
        networks=networks,
        containers=tuple(containers),
        steps=tuple(steps),
        faults=plan_faults(scenario, tuple(containers), networks[0].name, base, common_labels) if scenario.faults else None,
    )


def run_slugs(config: Config) -> list[str]:
    """Each scenario's slug, unique within the run. Names that differ only in case or punctuation
    ("a_b", "A.b") share a slug; number the later ones so that container, host and network names stay
    unique within the run."""
    slugs: list[str] = []
    for index, scenario in enumerate(config.scenarios):
        slug, suffix = _slug(scenario.name), index
        candidate = slug
        while candidate in slugs:  # against every earlier slug, generated ones included: unique by construction
            candidate, suffix = f"{slug[:24]}-{suffix}", suffix + len(config.scenarios)
        slugs.append(candidate)
    return slugs


def plan_run(config: Config, run_id: str, image_override: str | None = None, hosts: tuple[str, ...] = ()) -> RunPlan:
    """``hosts``: --hosts, over every scenario's own ``hosts``."""
    slugs = run_slugs(config)
    return RunPlan(
        run_id=run_id,
        config_path=config.path,
        scenarios=tuple(
            with_hashes(plan_scenario(s, run_id, image_override, slug, hosts))
            for s, slug in zip(config.scenarios, slugs, strict=True)
        ),
    )


def images_of(plan: RunPlan) -> list[str]:
    return sorted({s.image for s in plan.scenarios})
