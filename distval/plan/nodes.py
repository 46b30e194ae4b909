"""One scenario's nodes, for every target: their ContainerPlans (command line, environment, suite spec, files,
ranks, devices, labels) and the steps that create and start them, in order.

A target describes only where its nodes run, as a ``Site``: how they address the store's node, the ports, the
directory holding the suite, spec and results, hostname, networks, host placement, devices, file modes, extra
environment. The rest comes from the scenario and its rendezvous form's row (distval/config/rendezvous.py), whose
templates this module fills in, so a new form is a new row and no planner changes. The planners
(distval/targets/docker/plan.py, distval/targets/local/plan.py, distval/targets/engines/plan.py) build a Site,
call ``build_nodes`` and add what only they have (networks, faults, host probes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from distval.config import NCCL_BACKENDS, Scenario
from distval.config.rendezvous import NO_LAUNCHER, RendezvousForm, rendezvous_form
from distval.labels import LABEL_MANAGED, LABEL_NODE, LABEL_RUN, LABEL_SCENARIO
from distval.plan.model import CreateContainer, LearnAddress, StartContainer, Step
from distval.plan.placeholders import placeholder
from distval.plan.rank_files import ERROR_FILE
from distval.plan.specs import ContainerOptions, ContainerPlan, FileCopy, Ulimit

SUITE_MODULE = "distval_suite.main"
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
# The flight recorder's ring buffer (entries per process), read when the first group is created. torch
# 2.15 records gloo collectives into it (PR #152614); older torches ignore the variable.
FLIGHT_RECORDER_ENTRIES = 2000


@dataclass(frozen=True)
class Address:
    """How a node addresses the store's node."""

    addr: str  # as --master_addr and MASTER_ADDR take it
    host: str  # as it stands before ":port" or in a URL (an IPv6 address in brackets)


@dataclass(frozen=True)
class FileModes:
    root: int  # the node's directory
    suite: int  # its distval_suite/
    results: int  # its results directory: the ranks write their records there
    spec: int  # its spec.json


@dataclass(frozen=True)
class Site:
    """Where one scenario's nodes run: what a target decides; ``build_nodes`` derives everything else."""

    image: str  # each ContainerPlan's image (host mode: the Python)
    python: str  # the interpreter the command line runs
    # The directory holding the suite (<root>/distval_suite), the spec (<root>/spec.json) and the results
    # (<root>/results); with per_node_root, each node's is <root>/<its name> (the nodes share one file system).
    root: str
    ports: Mapping[str, str]  # each port a row may name (rendezvous.PORTS): a number, or a placeholder filled in later
    subnets: str  # what the suite spec says of the subnets (the suite picks its socket interface from them)
    file_modes: FileModes
    # How every node addresses the store's node; None: by its name (which is its hostname).
    reach: Address | None = None
    # A network the store node's address is read on once it started (master_addr: ip on one Engine): the store
    # node is created and started first, and the others address it by {node0_ip} / {node0_host}.
    learn_address_on: str | None = None
    per_node_root: bool = False
    working_dir: str | None = None  # None: the node's root
    # PYTHONPATH names the node's root even where it is the working directory (a host's own PYTHONPATH must not win);
    # otherwise only where it is not (``-m distval_suite.main`` finds the suite through the working directory).
    pythonpath_always: bool = False
    hostname: str | None = None  # None: the node's name
    networks: tuple[str, ...] = ()
    network_mode: str | None = None
    hosts: tuple[str, ...] = ()  # node i's host (a --hosts URL); empty: every node on the one Engine or host
    # The host's CUDA_VISIBLE_DEVICES as a list: the device ids index into it (host mode), as torch's numbers would.
    visible_devices: tuple[str, ...] | None = None
    devices_variable: str | None = None  # set to the node's device ids, where no device request gives them
    limits: bool = True  # the scenario's cpus, memory, shm_size, user and ulimits apply (a container)
    extra_env: tuple[tuple[str, str], ...] = ()  # every node's, unless the scenario sets the same name
    # Several nodes' agents share one address (loopback, host networking): each would decide it hosts the c10d
    # store, so the rows with rdzv_conf say which does (is_host).
    shared_address: bool = False
    # None: each node's first process starts with the image's environment (its ENV) plus what distval sets (a
    # container). Otherwise why there is none (the target's declaration, distval/targets/declarations.py): host mode's
    # nodes start from the host's, and the environment check is skipped with this reason.
    no_image_environment: str | None = None


@dataclass(frozen=True)
class Nodes:
    containers: tuple[ContainerPlan, ...]
    steps: tuple[Step, ...]  # create and start, in order (a target adds its own before them)


def base_name(run_id: str, slug: str) -> str:
    """What the scenario's resource names start with (the nodes are <base>-n<rank>)."""
    return f"distval-{run_id}-{slug}"


def scenario_labels(scenario: Scenario, run_id: str) -> tuple[tuple[str, str], ...]:
    return ((LABEL_MANAGED, "true"), (LABEL_RUN, run_id), (LABEL_SCENARIO, scenario.name))


def suite_copies(root: str, modes: FileModes) -> tuple[FileCopy, FileCopy]:
    """The directory holding the suite and the suite itself: what every node and host probe gets."""
    return FileCopy(root, modes.root), FileCopy(f"{root}/distval_suite", modes.suite, suite=True)


def _pairs(mapping: object) -> tuple[tuple[str, str], ...]:
    items = mapping.items() if hasattr(mapping, "items") else mapping  # a Mapping or (key, value) pairs
    return tuple((str(k), str(v)) for k, v in items)  # type: ignore[union-attr]


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


def _command(
    scenario: Scenario, row: RendezvousForm, python: str, spec_path: str, fields: Mapping[str, object], is_host: str | None
) -> tuple[str, ...]:
    """A node's command line: the row's launcher with its arguments, or (no launcher) the suite itself."""
    if row.launcher is None:
        return (python, "-m", SUITE_MODULE, spec_path)
    cross = scenario.topology == "cross-container"
    arguments = row.launcher_args if cross else row.in_container
    assert arguments is not None  # the loader refuses in-container for a row without in-container arguments
    argv = [python, "-m", row.launcher.module, *(a.format(**fields) for a in arguments)]
    if cross and row.rdzv_conf:
        # Short rendezvous timeouts: torchrun's 600 s join_timeout would outlast the deadline (restarts and
        # a lost node re-rendezvous through it).
        conf = [is_host] if is_host is not None else []
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
    argv += [a.format(**fields) for a in row.launcher.tail]
    return (*argv, "-m", SUITE_MODULE, spec_path)


def _spec(
    scenario: Scenario,
    row: RendezvousForm,
    fields: Mapping[str, object],
    results_dir: str,
    subnets: str,
    env: list[tuple[str, str]],
    no_image_environment: str | None,
) -> str:
    """The suite spec one node reads (distval_suite/main.py). ``env``: the node's environment as distval sets it (the
    environment check tells the image's own variables from these by name)."""
    cross = scenario.topology == "cross-container"
    spec = {
        "scenario": scenario.name,
        "backend": scenario.backend,
        "device": scenario.device,
        "collective_timeout_s": scenario.collective_timeout_s,
        "check_timeout_s": scenario.check_timeout_s,
        "world_size": scenario.world_size,
        "nproc_per_node": scenario.nproc_per_node if cross else scenario.world_size,
        "launcher": row.launcher.name if row.launcher is not None else NO_LAUNCHER,
        "init_method": row.init_method.format(**fields) if row.init_method is not None else None,
        "dynamic_node_ranks": cross and row.dynamic_node_ranks,
        "results_dir": results_dir,
        "subnets": subnets,
        "checks": [{"name": c.name, "args": dict(c.args)} for c in scenario.checks],
        "set_by_distval": sorted({name for name, _ in env}),
        "no_image_environment": no_image_environment,
    }
    return json.dumps(spec, sort_keys=True)


def _env(
    scenario: Scenario,
    row: RendezvousForm,
    run_id: str,
    node_rank: int,
    fields: Mapping[str, object],
    pythonpath: str | None,
    results_dir: str,
) -> list[tuple[str, str]]:
    """A node's environment: the scenario's, distval's, NCCL's defaults and the row's rendezvous variables.
    ``pythonpath`` is where the suite is, when the working directory is not."""
    env = list(_pairs(scenario.env))
    env += [
        ("PYTHONUNBUFFERED", "1"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("DISTVAL_RUN_ID", run_id),
        ("DISTVAL_SCENARIO", scenario.name),
        ("DISTVAL_NODE_RANK", str(node_rank)),
    ]
    own = dict(scenario.env)
    if scenario.backend in NCCL_BACKENDS:
        env += [pair for pair in NCCL_ENV if pair[0] not in own]
    env += [pair for pair in diagnosis_env(scenario, results_dir) if pair[0] not in own]
    if pythonpath is not None:
        env.append(("PYTHONPATH", pythonpath))
    env += [(name, value.format(**fields)) for name, value in row.env]
    return env


def build_nodes(scenario: Scenario, run_id: str, slug: str, site: Site) -> Nodes:
    """The scenario's nodes on ``site``, and the steps that create and start them.

    The store's node starts last (every rendezvous form must cope with nodes that arrive before the one they
    rendezvous at is listening), unless its address must be learned first (``site.learn_address_on``)."""
    row = rendezvous_form(scenario.rendezvous)
    base = base_name(run_id, slug)
    labels = scenario_labels(scenario, run_id)
    cross = scenario.topology == "cross-container"
    count = scenario.nodes if cross else 1
    per_node = scenario.nproc_per_node if cross else scenario.world_size
    hosts = site.hosts or ("",) * count
    store = row.store_node if cross else 0
    store_name = f"{base}-n{store}"
    nccl = scenario.backend in NCCL_BACKENDS
    gpus = scenario.gpus_per_node
    containers = []
    for node_rank in range(count):
        name = f"{base}-n{node_rank}"
        root = f"{site.root}/{name}" if site.per_node_root else site.root
        spec_path, results_dir = f"{root}/spec.json", f"{root}/results"
        working_dir = site.working_dir or root
        if site.learn_address_on is not None and node_rank != store:
            reach = Address(NODE0_IP, NODE0_HOST)
        else:
            reach = site.reach or Address(store_name, store_name)
        fields = {
            "nodes": scenario.nodes,
            "nproc_per_node": scenario.nproc_per_node,
            "world_size": scenario.world_size,
            "max_restarts": scenario.max_restarts,
            "node_rank": node_rank,
            "master_addr": reach.addr,
            "master_host": reach.host,
            "rdzv_id": f"{run_id}-{slug}",
            **{port: site.ports[port] for port in row.ports},
        }
        # GPUs by device id: the nodes on one host share its devices, in order (distval/config/devices.py: one per
        # process for NCCL, one shared by the node's processes for gloo on CUDA tensors, none on the CPU).
        slot = hosts[:node_rank].count(hosts[node_rank])
        device_ids = tuple(str(i) for i in range(slot * gpus, (slot + 1) * gpus))
        if site.visible_devices is not None:
            visible = site.visible_devices
            device_ids = tuple(visible[int(i)] if int(i) < len(visible) else i for i in device_ids)
        pythonpath = root if site.pythonpath_always or working_dir != root else None
        env = _env(scenario, row, run_id, node_rank, fields, pythonpath, results_dir)
        if site.devices_variable is not None:
            env.append((site.devices_variable, ",".join(device_ids)))
        env += [pair for pair in site.extra_env if pair[0] not in dict(scenario.env)]
        if site.limits:
            options = ContainerOptions(
                cpus=scenario.cpus,
                memory=scenario.memory,
                shm_size=scenario.shm_size or (NCCL_SHM_SIZE if nccl else None),
                user=scenario.user,
                ulimits=NCCL_ULIMITS if nccl else (),
                gpu_device_ids=device_ids,
            )
        else:
            options = ContainerOptions(gpu_device_ids=device_ids)
        is_host = f"is_host={int(node_rank == store)}" if site.shared_address else None
        modes = site.file_modes
        files = suite_copies(root, modes) + (
            FileCopy(results_dir, modes.results),
            FileCopy(
                spec_path,
                modes.spec,
                text=_spec(scenario, row, fields, results_dir, site.subnets, env, site.no_image_environment),
            ),
        )
        containers.append(
            ContainerPlan(
                name=name,
                hostname=name if site.hostname is None else site.hostname,
                node_rank=node_rank,
                ranks=tuple(range(node_rank * per_node, (node_rank + 1) * per_node)),
                argv=_command(scenario, row, site.python, spec_path, fields, is_host),
                env=tuple(env),
                labels=labels + ((LABEL_NODE, str(node_rank)),),
                working_dir=working_dir,
                image=site.image,
                networks=site.networks,
                options=options,
                files=files,
                results_dir=results_dir,
                host=hosts[node_rank],
                network_mode=site.network_mode,
            )
        )
    return Nodes(tuple(containers), _steps(tuple(containers), store, site, scenario.ipv6))


def _steps(containers: tuple[ContainerPlan, ...], store: int, site: Site, ipv6: bool) -> tuple[Step, ...]:
    first, others = containers[store], containers[:store] + containers[store + 1 :]
    if site.learn_address_on is not None:
        # The others address the store's node by the address it was given, so it is created and started first.
        steps: list[Step] = [
            CreateContainer(first.name, host=first.host),
            StartContainer(first.name, host=first.host),
            LearnAddress(first.name, site.learn_address_on, ipv6=ipv6, host=first.host),
        ]
        steps += [CreateContainer(c.name, host=c.host) for c in others]
        steps += [StartContainer(c.name, host=c.host) for c in reversed(others)]
        return tuple(steps)
    # The store's node last: every rendezvous form must cope with nodes that arrive before it listens.
    steps = [CreateContainer(c.name, host=c.host) for c in containers]
    steps += [StartContainer(c.name, host=c.host) for c in reversed(others)]
    steps.append(StartContainer(first.name, host=first.host))
    return tuple(steps)
