"""Scenario -> a plan across several Docker hosts (``--hosts``, or the ``hosts`` key with ``--hosts-from-config``:
distval/targets/engines/hosts.py check_hosts_allowed). The nodes come from distval/plan/nodes.py, as on one Engine
(distval/targets/docker/plan.py), with these differences, all visible in the plan:

- every step and container names its host (an Engine URL); node i runs on host i mod the number of hosts,
  or where the scenario's ``placement`` says;
- there is no shared bridge network: each node's container uses its host's network (``network_mode: host``),
  so no scenario network is created and containers get no hostname of their own;
- before any node, a probe container on each host that runs a node (``distval_suite/host_probe.py``, host networking,
  the image under test) learns the interface holding the route to the rendezvous point: ``{socket_ifname}``,
  set as GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME for that host's nodes (unless the scenario sets them). Host
  0's probe runs first and learns the rendezvous point itself: ``{node0_ip}`` (its source address toward
  ``advertise_addr``, host 0's URL address or the next host's, in that order) and two ports free on host 0,
  ``{master_port}`` and ``{c10d_port}``, so two runs on one host never collide;
- the agents share their host's address (a site with ``shared_address``): c10d gets ``--rdzv_conf=is_host=1`` on
  node 0 and ``is_host=0`` elsewhere (host networking makes the agents' own guess, which compares addresses,
  unreliable when two nodes share a host).

An in-container scenario runs on host 0 as on one Engine (its own bridge network there). A scenario with faults
is refused before it is planned here: the engines target declares it lacks them (distval/targets/declarations.py). The plan
text and JSON show the image transfer to every host and which containers use host networking (hosts_lines).
"""

from __future__ import annotations

import dataclasses

from distval.config import Scenario
from distval.config.engine_hosts import HostSpec, check_urls
from distval.errors import BadInput
from distval.plan.model import ProbeHost, ScenarioPlan, Step
from distval.plan.nodes import NODE0_HOST, NODE0_IP, Address, Site, base_name, build_nodes, scenario_labels, suite_copies
from distval.plan.placeholders import placeholder
from distval.plan.specs import ContainerOptions, ContainerPlan
from distval.targets.docker.plan import CONTAINER_FILE_MODES, CONTAINER_ROOT
from distval.targets.docker.plan import plan_scenario as plan_on_one_engine
from distval.targets.engines.hosts import placement

SOCKET_IFNAME = placeholder("socket_ifname")
MASTER_PORT = placeholder("master_port")
C10D_PORT = placeholder("c10d_port")
PORTS = {"master_port": MASTER_PORT, "c10d_port": C10D_PORT}
PROBED_PORTS = 2  # master_port, c10d_port
PROBE_MODULE = "distval_suite.host_probe"
# The probe runs the image under test in the host's network (as the ranks across hosts do): as the ranks' user,
# with no capability (a UDP connect, an ioctl reading addresses, binding port 0 need none) and no new privileges,
# so it has less than the ranks, never more (issue 19). No read-only root: the suite is copied in.
PROBE_CAP_DROP = ("ALL",)
PROBE_SECURITY_OPT = ("no-new-privileges",)
PROBE_ENV = (("PYTHONDONTWRITEBYTECODE", "1"),)


TRANSFER_HOW = (
    "docker save | docker load, to each host that lacks it or holds another image under that name, from the first "
    "host that has it, else from the local Engine (DOCKER_HOST); --image-distribution pull: pulled by digest instead"
)
HOST_NETWORK_WHAT = (
    "network_mode host: the ranks share each host's network namespace and reach what that host reaches "
    "(egress: false cannot hold there)"
)


def host_networked(plan: ScenarioPlan) -> tuple[str, ...]:
    """The containers of ``plan`` that run in their host's network namespace."""
    return tuple(c.name for c in plan.containers + plan.probes if c.network_mode == "host")


def probe_description() -> dict[str, object]:
    """The host probe as ``distval plan`` lists it beside the ranks; each scenario across hosts also shows its
    probes' exact creation arguments under their steps."""
    return {
        "role": "host-probe",
        "name": "<scenario container base>-probe<index>",
        "when": "only across several hosts (--hosts, hosts in the config): once per host running a node, before "
        "the scenario's containers; removed once it exits",
        "image": "<the image under test>",
        "image_origin": "the image under test on purpose: it learns that host's address, interface and free ports "
        f"as the ranks will see them ({PROBE_MODULE})",
        "entrypoint": ["<the scenario's python>", "-m", PROBE_MODULE],
        "user": "the scenario's user (else the image's own), as the ranks",
        "privileges": {"cap_drop": list(PROBE_CAP_DROP), "security_opt": list(PROBE_SECURITY_OPT)},
        "mounts": [],
        "network": "host (the host's network, as the ranks across hosts; only under --hosts)",
        "environment": [name for name, _ in PROBE_ENV],
    }


def hosts_lines(plan: ScenarioPlan) -> list[str]:
    """What a plan across hosts does beyond one Engine, for ``distval plan``: the image copied to every host of the
    run, and host networking (the decisions --hosts or --hosts-from-config took)."""
    if not plan.hosts:
        return []
    lines = [f"  image transfer: {plan.image} to {', '.join(plan.hosts)} ({TRANSFER_HOW})"]
    networked = host_networked(plan)
    if networked:
        lines.append(f"  host networking: {len(networked)} container(s) ({HOST_NETWORK_WHAT}): {', '.join(networked)}")
    return lines


def hosts_data(plan: ScenarioPlan) -> dict[str, object]:
    """The same for ``distval plan --format json`` (nothing without hosts, so that other plans keep their form)."""
    if not plan.hosts:
        return {}
    return {
        "image_transfer": {"image": plan.image, "destinations": list(plan.hosts), "how": TRANSFER_HOW},
        "host_network": {"containers": list(host_networked(plan)), "what": HOST_NETWORK_WHAT},
    }


def rendezvous_target(hosts: tuple[str, ...], advertise_addr: str | None) -> str:
    """What host 0's probe looks up its route toward: the address the other hosts reach it at."""
    if advertise_addr:
        return advertise_addr
    for url in hosts:  # host 0's own address when its URL has one, else the next host's (the route to it)
        address = HostSpec(url).address
        if address:
            return address
    return "127.0.0.1"  # every host is a local socket: one machine


def plan_across_hosts(scenario: Scenario, run_id: str, image: str, slug: str, hosts: tuple[str, ...]) -> ScenarioPlan:
    check_urls(hosts, f"scenario {scenario.name}: hosts")
    if scenario.topology != "cross-container":
        # As on one Engine, on host 0. The plan's scenario without its own hosts, as it always was (the plan's
        # hosts say where it runs).
        plan = plan_on_one_engine(dataclasses.replace(scenario, hosts=()), run_id, image, slug)
        on_first = tuple(dataclasses.replace(step, host=hosts[0]) for step in plan.steps)
        placed = tuple(dataclasses.replace(c, host=hosts[0]) for c in plan.containers)
        return dataclasses.replace(plan, steps=on_first, containers=placed, hosts=hosts)
    base = base_name(run_id, slug)
    labels = scenario_labels(scenario, run_id)
    try:
        where = placement(scenario.nodes, len(hosts), scenario.placement)
    except BadInput as exc:
        raise BadInput(f"scenario {scenario.name}: {exc}") from None
    site = Site(
        image=image,
        python=scenario.python,
        root=CONTAINER_ROOT,
        ports=PORTS,
        subnets="",
        file_modes=CONTAINER_FILE_MODES,
        reach=Address(NODE0_IP, NODE0_HOST),
        working_dir=scenario.working_dir or CONTAINER_ROOT,
        hostname="",
        network_mode="host",
        hosts=tuple(hosts[w] for w in where),
        extra_env=tuple((name, SOCKET_IFNAME) for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")),
        shared_address=True,
    )
    nodes = build_nodes(scenario, run_id, slug, site)
    containers = nodes.containers
    used = tuple(dict.fromkeys(c.host for c in containers))  # node 0's host first: it is the rendezvous point
    target = rendezvous_target(used + tuple(h for h in hosts if h not in used), scenario.advertise_addr)
    probes = tuple(
        ContainerPlan(
            name=f"{base}-probe{index}",
            hostname="",
            node_rank=-1,
            ranks=(),
            argv=(scenario.python, "-m", PROBE_MODULE, *((target, str(PROBED_PORTS)) if index == 0 else (NODE0_IP, "0"))),
            env=PROBE_ENV,
            labels=labels,
            working_dir=CONTAINER_ROOT,
            image=image,
            options=ContainerOptions(user=scenario.user, cap_drop=PROBE_CAP_DROP, security_opt=PROBE_SECURITY_OPT),
            files=suite_copies(CONTAINER_ROOT, CONTAINER_FILE_MODES),
            host=host,
            network_mode="host",
        )
        for index, host in enumerate(used)
    )
    steps: list[Step] = [ProbeHost(p.name, p.host, first=index == 0) for index, p in enumerate(probes)]
    return ScenarioPlan(
        scenario=scenario,
        run_id=run_id,
        slug=slug,
        image=image,
        networks=(),
        containers=containers,
        steps=(*steps, *nodes.steps),
        hosts=hosts,
        probes=probes,
    )
