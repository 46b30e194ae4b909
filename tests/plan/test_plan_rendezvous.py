"""The launch plan for each rendezvous form, layout, network and container option (no Docker)."""

from __future__ import annotations

import json

from distval.config import parse_config
from distval.plan.model import ScenarioPlan
from distval.plan.nodes import NODE0_HOST, NODE0_IP, SUBNETS
from distval.plan.placeholders import facts_for_address, resolve
from distval.plan.specs import ContainerPlan
from distval.results.outcome import SKIPPED, ScenarioOutcome
from distval.results.scenario import summarize_scenario
from distval.session.scenarios import default_jobs
from distval.targets.docker.plan import SPEC_PATH
from distval.targets.engines.planning import plan_run

RUN_ID = "0123abcd"


def plan_of(body: str) -> ScenarioPlan:
    (plan,) = plan_run(parse_config("scenarios:\n  - " + body + "\n", "x.yaml"), RUN_ID).scenarios
    return plan


def spec_of(container: ContainerPlan) -> str:
    return next(f.text for f in container.files if f.path == SPEC_PATH and f.text is not None)


def env_of(plan: ScenarioPlan, node: int) -> dict[str, str]:
    return dict(plan.containers[node].env)


def test_static_layout_4x2() -> None:
    plan = plan_of("{name: s, topology: cross-container, nodes: 4, nproc_per_node: 2, checks: [env]}")
    assert [c.ranks for c in plan.containers] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert "--nproc_per_node=2" in plan.containers[3].argv and "--node_rank=3" in plan.containers[3].argv
    assert f"--master_addr=distval-{RUN_ID}-s-n0" in plan.containers[3].argv
    assert json.loads(plan.suite_spec_json)["nproc_per_node"] == 2
    assert plan.suite_name == "s (cross-container, 4x2, 8 ranks, static)"


def test_c10d_has_no_node_rank_and_a_run_unique_id() -> None:
    plan = plan_of("{name: c, topology: cross-container, nodes: 3, rendezvous: c10d, checks: [env]}")
    for container in plan.containers:
        assert not any(a.startswith("--node_rank") for a in container.argv)
        assert "--rdzv_backend=c10d" in container.argv
        assert f"--rdzv_endpoint=distval-{RUN_ID}-c-n0:29400" in container.argv
        assert f"--rdzv_id={RUN_ID}-c" in container.argv
    assert json.loads(plan.suite_spec_json)["dynamic_node_ranks"] is True


def test_env_and_tcp_run_without_a_launcher() -> None:
    env_plan = plan_of("{name: e, topology: cross-container, nodes: 2, rendezvous: env, checks: [env]}")
    assert env_plan.containers[1].argv == ("python3", "-m", "distval_suite.main", "/distval/spec.json")
    assert {k: env_of(env_plan, 1)[k] for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")} == {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": f"distval-{RUN_ID}-e-n0",
        "MASTER_PORT": "29500",
    }
    spec = json.loads(env_plan.suite_spec_json)
    assert (spec["launcher"], spec["init_method"]) == ("none", "env://")
    tcp_plan = plan_of("{name: t, topology: cross-container, nodes: 2, rendezvous: tcp, checks: [env]}")
    assert "MASTER_ADDR" not in env_of(tcp_plan, 1) and env_of(tcp_plan, 1)["RANK"] == "1"
    # Each container's spec names its own way to node 0; the subnets are a placeholder until the network exists.
    spec1 = json.loads(spec_of(resolve(tcp_plan.containers[1], {"subnets": "172.30.0.0/16"})))
    assert spec1["init_method"] == f"tcp://distval-{RUN_ID}-t-n0:29500" and spec1["subnets"] == "172.30.0.0/16"
    assert json.loads(tcp_plan.suite_spec_json)["subnets"] == SUBNETS


def test_master_by_ip_starts_node_0_first_and_fills_in_its_address() -> None:
    plan = plan_of("{name: i, topology: cross-container, nodes: 3, rendezvous: tcp, master_addr: ip, checks: [env]}")
    assert plan.needs_node0_ip
    assert json.loads(spec_of(plan.containers[0]))["init_method"] == f"tcp://distval-{RUN_ID}-i-n0:29500"  # node 0 names itself
    assert [json.loads(spec_of(c))["init_method"] for c in plan.containers[1:]] == [f"tcp://{NODE0_HOST}:29500"] * 2
    facts = {"subnets": "", **facts_for_address("172.30.0.2")}
    assert json.loads(spec_of(resolve(plan.containers[2], facts)))["init_method"] == "tcp://172.30.0.2:29500"
    # An IPv6 address is bracketed where a host:port is built, and bare where only the host is.
    facts6 = {"subnets": "", **facts_for_address("fd12::2")}
    assert json.loads(spec_of(resolve(plan.containers[2], facts6)))["init_method"] == "tcp://[fd12::2]:29500"
    static = plan_of("{name: j, topology: cross-container, nodes: 2, master_addr: ip, checks: [env]}")
    assert f"--master_addr={NODE0_IP}" in static.containers[1].argv
    assert "--master_addr=fd12::2" in resolve(static.containers[1], facts6).argv
    c10d = plan_of("{name: k, topology: cross-container, nodes: 2, rendezvous: c10d, master_addr: ip, checks: [env]}")
    assert "--rdzv_endpoint=[fd12::2]:29400" in resolve(c10d.containers[1], facts6).argv


def test_networks_and_container_options() -> None:
    plan = plan_of(
        "{name: n, topology: cross-container, nodes: 2, extra_networks: 2, egress: true, ipv6: true, cpus: 1.5,"
        " memory: 1g, shm_size: 256m, user: '1000:1000', working_dir: /work, env: {FOO: bar}, checks: [env]}"
    )
    assert [n.name for n in plan.networks] == [f"distval-{RUN_ID}-n", f"distval-{RUN_ID}-n-x1", f"distval-{RUN_ID}-n-x2"]
    assert [n.internal for n in plan.networks] == [False, True, True] and plan.network.ipv6
    container = plan.containers[0]
    assert container.networks == tuple(n.name for n in plan.networks)
    assert (container.options.cpus, container.options.memory, container.options.shm_size, container.options.user) == (
        1.5,
        "1g",
        "256m",
        "1000:1000",
    )
    assert container.working_dir == "/work" and env_of(plan, 0)["PYTHONPATH"] == "/distval" and env_of(plan, 0)["FOO"] == "bar"


def test_an_ipv6_network_the_engine_refuses_is_a_skip() -> None:
    plan = plan_of("{name: v, topology: cross-container, nodes: 2, ipv6: true, checks: [env]}")
    result = summarize_scenario(ScenarioOutcome(plan, None, 0.1, (), setup_error="no IPv6 here", setup_skipped=True))
    assert [(c.name, c.status, c.message) for c in result.cases] == [
        ("process_group", SKIPPED, "no IPv6 here"),
        ("env", SKIPPED, "no IPv6 here"),
    ]
    assert result.status == SKIPPED  # nothing ran: never a pass


def test_default_jobs_is_bounded_by_cores_and_memory() -> None:
    assert 1 <= default_jobs() <= 8
