"""distval/plan/nodes.py: one node builder for every target. A rendezvous row added to the table (here by a test)
yields a plan on one Engine, across hosts and in host mode without a planner changing; the sites say only where."""

from __future__ import annotations

import ast
import dataclasses
import json

import pytest

from distval.cli.plan_render import plan_as_data, render_plan
from distval.config import Scenario, parse_config
from distval.config import rendezvous as table
from distval.config.rendezvous import TORCHRUN, RendezvousForm
from distval.plan.model import CreateContainer, LearnAddress, RunPlan, ScenarioPlan, StartContainer
from distval.plan.nodes import SUBNETS, FileModes, Site, build_nodes
from distval.plan.placeholders import facts_for_address, placeholders_in, resolve
from distval.plan.specs import ContainerPlan
from distval.targets.engines.planning import plan_scenario
from distval.targets.local.plan import LOOPBACK, LOOPBACK_SUBNETS, plan_local_scenario
from tests.paths import ROOT

RUN_ID = "0123abcd"
A, B = "tcp://10.0.0.1:2375", "tcp://10.0.0.2:2375"
BASE = f"distval-{RUN_ID}-x"
# torchrun's static rendezvous spelled with --rdzv_* options: a form distval does not have, declared as a row.
STATIC_ENDPOINT = RendezvousForm(
    name="static-endpoint",
    launcher=TORCHRUN,
    launcher_args=(
        "--nnodes={nodes}",
        "--nproc_per_node={nproc_per_node}",
        "--node_rank={node_rank}",
        "--rdzv_backend=static",
        "--rdzv_endpoint={master_host}:{master_port}",
    ),
    ports=("master_port",),
)
# A launcher-less one whose store is on node 1, with a variable of its own.
STORE_ON_1 = RendezvousForm(
    name="store-on-1",
    launcher=None,
    init_method="tcp://{master_host}:{master_port}",
    env=(("RANK", "{node_rank}"), ("WORLD_SIZE", "{world_size}"), ("MASTER_ADDR", "{master_addr}")),
    store_node=1,
    ports=("master_port",),
    several_per_node=False,
)
# c10d's arguments with the store on node 1: is_host and the start order follow the row.
C10D_ON_1 = dataclasses.replace(table.rendezvous_form("c10d"), name="c10d-on-1", store_node=1)
PLANNERS = (
    "distval/plan/nodes.py",
    "distval/targets/docker/plan.py",
    "distval/targets/engines/plan.py",
    "distval/targets/local/plan.py",
    "distval/targets/engines/planning.py",
)


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table, "FORMS", table.FORMS + (STATIC_ENDPOINT, STORE_ON_1, C10D_ON_1))


def cross(form: str, nodes: int = 2, nproc: int = 1, **changes: object) -> Scenario:
    """A cross-container scenario (read by the loader as static), then given ``form``, which the loader may not know."""
    text = f"scenarios:\n  - {{name: x, topology: cross-container, nodes: {nodes}, nproc_per_node: {nproc}, checks: [env]}}\n"
    (scenario,) = parse_config(text, "x.yaml").scenarios
    return dataclasses.replace(scenario, rendezvous=form, **changes)  # type: ignore[arg-type]


def spec(node: ContainerPlan) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(next(f.text for f in node.files if f.path.endswith("/spec.json") and f.text))
    return loaded


def all_three(scenario: Scenario) -> tuple[ScenarioPlan, ScenarioPlan, ScenarioPlan]:
    return (
        plan_scenario(scenario, RUN_ID, None),
        plan_scenario(scenario, RUN_ID, None, hosts=(A, B)),
        plan_local_scenario(scenario, RUN_ID, "/usr/bin/python3", "/tmp/r"),
    )


@pytest.mark.usefixtures("rows")
def test_a_new_launcher_row_is_planned_on_every_target_from_the_row_alone() -> None:
    one, hosts, host = all_three(cross("static-endpoint", nproc=2))
    # Each target's address of node 0 and port, in the row's arguments.
    endpoints = {
        "one Engine": (one, f"{BASE}-n0:29500"),
        "several hosts": (hosts, "{node0_host}:{master_port}"),
        "host mode": (host, f"{LOOPBACK}:{{master_port}}"),
    }
    for what, (plan, endpoint) in endpoints.items():
        for node in plan.containers:
            args = node.argv[node.argv.index("torch.distributed.run") + 1 :]
            assert args[:6] == (
                "--nnodes=2",
                "--nproc_per_node=2",
                f"--node_rank={node.node_rank}",
                "--rdzv_backend=static",
                f"--rdzv_endpoint={endpoint}",
                "--max_restarts=0",
            ), what
            assert not any(a.startswith("--rdzv_conf") for a in node.argv), what  # the row has no rdzv_conf
            assert (spec(node)["launcher"], spec(node)["init_method"], spec(node)["dynamic_node_ranks"]) == (
                "torchrun",
                None,
                False,
            )
        assert [c.ranks for c in plan.containers] == [(0, 1), (2, 3)]
        assert plan.steps[-1] == StartContainer(plan.containers[0].name, host=plan.containers[0].host), what  # node 0 last
    assert one.suite_name == "x (cross-container, 2x2, 4 ranks, static-endpoint)"
    # It prints, and the runtime's facts fill in every placeholder.
    text = render_plan(RunPlan(RUN_ID, "x.yaml", (one, hosts, host)))
    assert "--rdzv_backend=static" in text and json.dumps(plan_as_data(RunPlan(RUN_ID, "x.yaml", (one,))))
    resolved = resolve(host.containers, {"master_port": "41001", "c10d_port": "41002", "subnets": LOOPBACK_SUBNETS})
    assert placeholders_in(resolved) == set()


@pytest.mark.usefixtures("rows")
def test_a_new_launcher_less_row_gets_its_variables_and_init_method_and_its_store_node() -> None:
    one, hosts, host = all_three(cross("store-on-1", nodes=3))
    n0, n1, n2 = one.containers
    for node in one.containers:
        assert node.argv == ("python3", "-m", "distval_suite.main", "/distval/spec.json")
        env = dict(node.env)
        assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == (str(node.node_rank), "3", n1.name)
        assert "MASTER_PORT" not in env  # not in the row
        assert spec(node)["init_method"] == f"tcp://{n1.name}:29500" and spec(node)["launcher"] == "none"
    # The store's node starts last on every target.
    assert [s.container for s in one.steps if isinstance(s, StartContainer)] == [n2.name, n0.name, n1.name]
    h0, h1, h2 = host.containers
    assert [s.container for s in host.steps if isinstance(s, StartContainer)] == [h2.name, h0.name, h1.name]
    assert {dict(c.env)["MASTER_ADDR"] for c in hosts.containers} == {"{node0_ip}"}
    # master_addr: ip on one Engine: the store's node starts first and its address is learned.
    by_ip = plan_scenario(cross("store-on-1", nodes=3, master_addr="ip"), RUN_ID, None)
    created, started, learned = by_ip.steps[2:5]
    assert (created, started) == (CreateContainer(n1.name), StartContainer(n1.name))
    assert isinstance(learned, LearnAddress) and learned.container == n1.name
    assert [dict(c.env)["MASTER_ADDR"] for c in by_ip.containers] == ["{node0_ip}", n1.name, "{node0_ip}"]


@pytest.mark.usefixtures("rows")
def test_is_host_names_the_rows_store_node_where_agents_share_an_address() -> None:
    one, hosts, host = all_three(cross("c10d-on-1", nodes=3))
    for plan in (hosts, host):
        confs = [next(a for a in c.argv if a.startswith("--rdzv_conf=")) for c in plan.containers]
        assert confs == [f"--rdzv_conf=is_host={int(c.node_rank == 1)},join_timeout=60" for c in plan.containers]
        assert confs[1] == "--rdzv_conf=is_host=1,join_timeout=60"
    # On one Engine every node has its own address: torch's own guess is right, no is_host.
    assert all("--rdzv_conf=join_timeout=60" in c.argv for c in one.containers)
    assert all(f"--rdzv_endpoint={BASE}-n1:29400" in c.argv for c in one.containers)


def test_devices_follow_the_hosts_and_the_visible_devices_and_extra_env_yields_to_the_scenarios() -> None:
    scenario = cross("static", nodes=3, gpus_per_node=2, env=(("GLOO_SOCKET_IFNAME", "eth7"),))
    site = Site(
        image="img",
        python="python3",
        root="/r",
        ports={"master_port": "1", "c10d_port": "2"},
        subnets=SUBNETS,
        file_modes=FileModes(0o700, 0o700, 0o700, 0o600),
        hosts=(A, B, A),
        extra_env=(("GLOO_SOCKET_IFNAME", "{socket_ifname}"), ("NCCL_SOCKET_IFNAME", "{socket_ifname}")),
        devices_variable="CUDA_VISIBLE_DEVICES",
        limits=False,
    )
    nodes = build_nodes(scenario, RUN_ID, "x", site)
    # The nodes on one host share its devices in order: node 2 is host A's second.
    assert [c.options.gpu_device_ids for c in nodes.containers] == [("0", "1"), ("0", "1"), ("2", "3")]
    assert [dict(c.env)["CUDA_VISIBLE_DEVICES"] for c in nodes.containers] == ["0,1", "0,1", "2,3"]
    assert {dict(c.env)["GLOO_SOCKET_IFNAME"] for c in nodes.containers} == {"eth7"}
    assert {dict(c.env)["NCCL_SOCKET_IFNAME"] for c in nodes.containers} == {"{socket_ifname}"}
    assert [c.host for c in nodes.containers] == [A, B, A]
    visible = build_nodes(scenario, RUN_ID, "x", dataclasses.replace(site, hosts=(), visible_devices=("7", "5", "3")))
    assert [c.options.gpu_device_ids for c in visible.containers] == [("7", "5"), ("3", "3"), ("4", "5")]
    # PYTHONPATH: only where the working directory is not the suite's root, unless the site always wants it.
    assert "PYTHONPATH" not in dict(nodes.containers[0].env) and nodes.containers[0].working_dir == "/r"
    elsewhere = build_nodes(scenario, RUN_ID, "x", dataclasses.replace(site, working_dir="/w"))
    assert dict(elsewhere.containers[0].env)["PYTHONPATH"] == "/r"
    always = build_nodes(scenario, RUN_ID, "x", dataclasses.replace(site, per_node_root=True, pythonpath_always=True))
    assert dict(always.containers[1].env)["PYTHONPATH"] == f"/r/{BASE}-n1" == always.containers[1].working_dir


def test_the_address_learned_from_node_0_is_its_facts() -> None:
    plan = plan_scenario(cross("tcp", master_addr="ip", ipv6=True), RUN_ID, None)
    node1 = resolve(plan.containers[1], {**facts_for_address("fd00::2"), "subnets": "fd00::/64"})
    assert spec(node1)["init_method"] == "tcp://[fd00::2]:29500"


@pytest.mark.parametrize("path", PLANNERS)
def test_no_planner_compares_form_names_or_imports_a_private_name(path: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    assert not [row.name for row in table.FORMS if f'"{row.name}"' in source or f"'{row.name}'" in source]
    tree = ast.parse(source)
    private = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names if a.name.startswith("_")]
    assert private == []
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    if path == "distval/targets/docker/plan.py":  # the engines planner may use this one, never the reverse
        assert not [m for m in modules if m and m.startswith(("distval.targets.engines", "distval.targets.engines.planning"))]
