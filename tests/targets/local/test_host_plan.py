"""distval.targets.local.plan: the same scenarios planned as local processes (host mode), without Docker."""

from __future__ import annotations

import json
import textwrap

import pytest

from distval.config import Config, parse_config
from distval.errors import PlanError
from distval.plan.identity import HASH_ROOT, scenario_hash
from distval.plan.model import CreateContainer, ScenarioPlan, StartContainer
from distval.plan.placeholders import placeholders_in, resolve
from distval.plan.specs import ContainerPlan
from distval.targets.engines.planning import plan_scenario
from distval.targets.local.plan import LOOPBACK, LOOPBACK_SUBNETS, plan_local_scenario, visible_devices_from_env

RUN_ID = "0123abcd"
PYTHON = "/opt/venv/bin/python"
ROOT = "/tmp/distval-0123abcd-x"
FACTS = {"master_port": "41001", "c10d_port": "41002", "subnets": LOOPBACK_SUBNETS}


def config(text: str) -> Config:
    return parse_config(textwrap.dedent(text), "host.yaml")


def host_plan(text: str, index: int = 0, **kwargs: object) -> ScenarioPlan:
    scenario = config(text).scenarios[index]
    return plan_local_scenario(scenario, RUN_ID, PYTHON, ROOT, **kwargs)  # type: ignore[arg-type]


def spec(node: ContainerPlan) -> dict[str, object]:
    text = next(f.text for f in node.files if f.path.endswith("/spec.json"))
    assert text is not None
    loaded: dict[str, object] = json.loads(text)
    return loaded


def env(node: ContainerPlan) -> dict[str, str]:
    return dict(node.env)


CROSS = """
scenarios:
  - {name: x, topology: cross-container, rendezvous: RDZV, nodes: 2, nproc_per_node: 2, checks: [env, all_reduce]}
"""


def test_in_container_is_one_standalone_launcher_in_its_own_directory() -> None:
    plan = host_plan("scenarios:\n  - {name: inside, topology: in-container, world_size: 3, checks: [env]}\n")
    (node,) = plan.containers
    directory = f"{ROOT}/distval-{RUN_ID}-inside-n0"
    assert node.argv == (
        PYTHON,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        "--nproc_per_node=3",
        "--max_restarts=0",
        "-m",
        "distval_suite.main",
        f"{directory}/spec.json",
    )
    assert node.working_dir == directory and node.results_dir == f"{directory}/results"
    assert [(f.path, f.suite, f.text is None) for f in node.files] == [
        (directory, False, True),
        (f"{directory}/distval_suite", True, True),
        (f"{directory}/results", False, True),
        (f"{directory}/spec.json", False, False),
    ]
    assert env(node)["PYTHONPATH"] == directory
    assert env(node)["CUDA_VISIBLE_DEVICES"] == ""  # a CPU scenario sees no GPU, as in a container without one
    assert spec(node)["results_dir"] == f"{directory}/results"
    assert spec(node)["subnets"] == "{subnets}"
    assert plan.steps == (CreateContainer(node.name), StartContainer(node.name))
    assert (plan.mode, plan.image, plan.networks) == ("host", PYTHON, ())


def test_host_mode_is_marked_and_reproduced_with_host_and_python() -> None:
    plan = host_plan("scenarios:\n  - {name: inside, topology: in-container, world_size: 2, checks: [env]}\n")
    assert plan.suite_name == "inside (in-container, 2 ranks) [host]"
    assert plan.target_args == ("--local", "--python", PYTHON)
    docker = plan_scenario(plan.scenario, RUN_ID, None)
    assert docker.suite_name == "inside (in-container, 2 ranks)" and docker.target_args[0] == "--image"


def test_static_nodes_meet_at_loopback_on_a_port_chosen_at_start_node_0_last() -> None:
    plan = host_plan(CROSS.replace("RDZV", "static"))
    n0, n1 = plan.containers
    for node in plan.containers:
        assert f"--master_addr={LOOPBACK}" in node.argv and "--master_port={master_port}" in node.argv
        assert f"--node_rank={node.node_rank}" in node.argv
        assert node.argv[-1] == f"{node.working_dir}/spec.json"
    assert n0.working_dir != n1.working_dir and (n0.ranks, n1.ranks) == ((0, 1), (2, 3))
    assert plan.steps == (CreateContainer(n0.name), CreateContainer(n1.name), StartContainer(n1.name), StartContainer(n0.name))


def test_c10d_says_which_local_agent_hosts_the_store() -> None:
    plan = host_plan(CROSS.replace("RDZV", "c10d"))
    n0, n1 = plan.containers
    assert f"--rdzv_endpoint={LOOPBACK}:{{c10d_port}}" in n0.argv
    # The rendezvous timeouts follow (join_timeout: the key's default, torch's 600 s outlasts deadlines).
    assert "--rdzv_conf=is_host=1,join_timeout=60" in n0.argv and "--rdzv_conf=is_host=0,join_timeout=60" in n1.argv
    assert f"--rdzv_id={RUN_ID}-x" in n0.argv
    # The Docker plan's nodes have distinct hostnames: torch's heuristic is right there, so no is_host.
    docker = plan_scenario(plan.scenario, RUN_ID, None)
    assert all("--rdzv_conf=join_timeout=60" in c.argv for c in docker.containers)


def test_launcher_less_forms_get_their_rendezvous_from_the_environment_and_spec() -> None:
    env_plan = host_plan(CROSS.replace("RDZV", "env").replace("nproc_per_node: 2", "nproc_per_node: 1"))
    for node in env_plan.containers:
        assert node.argv == (PYTHON, "-m", "distval_suite.main", f"{node.working_dir}/spec.json")
        assert (env(node)["MASTER_ADDR"], env(node)["MASTER_PORT"]) == (LOOPBACK, "{master_port}")
        assert (env(node)["RANK"], env(node)["WORLD_SIZE"]) == (str(node.node_rank), "2")
    tcp_plan = host_plan(CROSS.replace("RDZV", "tcp").replace("nproc_per_node: 2", "nproc_per_node: 1"))
    assert {spec(node)["init_method"] for node in tcp_plan.containers} == {f"tcp://{LOOPBACK}:{{master_port}}"}


def test_the_commands_are_the_docker_plans_with_local_paths_and_ports() -> None:
    """One builder for both: the host argv is the container's with python, spec path, address and ports substituted."""
    for form in ("static", "c10d"):
        plan = host_plan(CROSS.replace("RDZV", form))
        docker = plan_scenario(plan.scenario, RUN_ID, None, plan.slug)
        for host_node, container in zip(plan.containers, docker.containers, strict=True):
            translated = [
                arg.replace(docker.containers[0].name, LOOPBACK)
                .replace("python3", PYTHON, 1)
                .replace("/distval/spec.json", f"{host_node.working_dir}/spec.json")
                .replace("29500", "{master_port}")
                .replace("29400", "{c10d_port}")
                for arg in container.argv
                if not arg.startswith("--rdzv_conf")
            ]
            assert [a for a in host_node.argv if not a.startswith("--rdzv_conf")] == translated


def test_resolving_fills_every_placeholder() -> None:
    for form in ("static", "c10d", "env", "tcp"):
        text = CROSS.replace("RDZV", form)
        plan = host_plan(text if form in ("static", "c10d") else text.replace("nproc_per_node: 2", "nproc_per_node: 1"))
        assert placeholders_in(plan.containers) <= set(FACTS)
        resolved = resolve(plan.containers, FACTS)
        assert placeholders_in(resolved) == set()
        text = json.dumps([list(c.argv) + [v for _, v in c.env] + [f.text or "" for f in c.files] for c in resolved])
        assert LOOPBACK_SUBNETS in text
        assert ("41001" in text) or ("41002" in text)
    with pytest.raises(PlanError, match="master_port"):
        resolve(host_plan(CROSS.replace("RDZV", "static")).containers, {"subnets": LOOPBACK_SUBNETS})


def test_nccl_nodes_get_their_own_devices_by_id() -> None:
    text = CROSS.replace("RDZV", "static") + "backend: nccl\n"
    plan = host_plan(text)
    assert [env(n)["CUDA_VISIBLE_DEVICES"] for n in plan.containers] == ["0,1", "2,3"]
    assert plan.gpus_needed == 4
    assert env(plan.containers[0])["NCCL_DEBUG"] == "INFO"
    # The host's own CUDA_VISIBLE_DEVICES: the plan's ids index into it, as torch's device numbers do.
    remapped = host_plan(text, visible_devices=["4", "5", "6", "7"])
    assert [env(n)["CUDA_VISIBLE_DEVICES"] for n in remapped.containers] == ["4,5", "6,7"]
    assert visible_devices_from_env({"CUDA_VISIBLE_DEVICES": "4, 5"}) == ["4", "5"]
    assert visible_devices_from_env({}) is None


def test_scenario_hash_is_stable_across_runs_and_roots_and_names_the_python() -> None:
    text = CROSS.replace("RDZV", "c10d")
    scenario = config(text).scenarios[0]
    first = plan_local_scenario(scenario, "run1", PYTHON, "/tmp/a")
    again = plan_local_scenario(scenario, "run2", PYTHON, "/tmp/b/")
    other_python = plan_local_scenario(scenario, "run1", "/usr/bin/python3", "/tmp/a")
    assert scenario_hash(first) == scenario_hash(again) != scenario_hash(other_python)
    assert scenario_hash(first) != scenario_hash(plan_scenario(scenario, "run1", None))
    assert HASH_ROOT not in json.dumps([c.argv for c in first.containers])
