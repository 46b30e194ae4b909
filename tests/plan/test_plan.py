"""distval.plan.model: the Docker-free launch plan, as a golden text and as structural facts.

Regenerate the golden file after an intended change of the plan's text:

    DISTVAL_UPDATE_GOLDEN=1 python -m pytest tests/plan/test_plan.py -p no:cacheprovider

and review the diff of tests/golden/default_plan.txt before committing it.
"""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest

import distval.cli.main
from distval.cli.plan_render import render_plan
from distval.config import Config, load_config, parse_config
from distval.config.shipped import DEFAULT_IMAGE
from distval.plan.identity import with_hashes
from distval.plan.model import (
    LABEL_MANAGED,
    LABEL_NODE,
    LABEL_RUN,
    LABEL_SCENARIO,
    RunPlan,
    ScenarioPlan,
)
from distval.targets.docker.plan import CONTAINER_ROOT, MASTER_PORT, RESULTS_DIR, SPEC_PATH
from distval.targets.engines.planning import plan_run, plan_scenario
from tests.paths import GOLDEN, ROOT

GOLDEN_PLAN = GOLDEN / "default_plan.txt"
RUN_ID = "0123abcd"
DEFAULT_CHECKS = [
    "env",
    "identity",
    "launch",
    "all_reduce",
    "collectives",
    "ddp_sync",
    "ddp_sampler",
    "store",
    "timeout",
    "reconfigure",
    "libraries",
    "environment",
]
# Docker's container-name rule; a hostname label is at most 63 characters (RFC 1123).
DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", re.IGNORECASE)


# torch 1.13's torch.distributed.run knows only the underscore spellings of these (later ones take both).
TORCH_1_13_FLAGS = ("--nproc_per_node", "--node_rank", "--master_addr", "--master_port", "--max_restarts")


def assert_torch_1_13_spellings(argv: tuple[str, ...]) -> None:
    launcher_flags = argv[: argv.index("-m", 3)]  # up to the suite's own "-m distval_suite.main"
    for flag in launcher_flags[3:]:
        name = flag.split("=", 1)[0]
        assert "-" not in name[2:], f"{flag}: torch 1.13's launcher does not know the dash spelling"
        assert name in TORCH_1_13_FLAGS + ("--standalone", "--nnodes"), flag


def config_of(text: str) -> Config:
    return parse_config(textwrap.dedent(text).lstrip("\n"), "test.yaml")


def one_plan(text: str, run_id: str = RUN_ID, image: str | None = None) -> ScenarioPlan:
    (plan,) = plan_run(config_of(text), run_id, image).scenarios
    return plan


@pytest.fixture
def default_plan(monkeypatch: pytest.MonkeyPatch) -> RunPlan:
    # The plan names its config path as given: load it by the same relative path as the golden text.
    monkeypatch.chdir(ROOT)
    return plan_run(load_config("configs/default.yaml"), RUN_ID, None)


# --- golden ----------------------------------------------------------------------------------------


def test_default_plan_matches_golden(default_plan: RunPlan) -> None:
    text = render_plan(default_plan)
    if os.environ.get("DISTVAL_UPDATE_GOLDEN") == "1":
        GOLDEN_PLAN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN_PLAN.write_text(text, encoding="utf-8")
    assert GOLDEN_PLAN.exists(), f"{GOLDEN_PLAN} is missing: run with DISTVAL_UPDATE_GOLDEN=1 to create it"
    assert text == GOLDEN_PLAN.read_text(encoding="utf-8"), (
        "plan text changed: rerun with DISTVAL_UPDATE_GOLDEN=1 and review the diff"
    )


def test_golden_covers_both_topologies() -> None:
    golden = GOLDEN_PLAN.read_text(encoding="utf-8")
    assert golden.startswith(f"run {RUN_ID} from configs/default.yaml: 3 scenario(s)\n")
    assert "scenario in-container-3ranks (in-container, 3 ranks)\n" in golden
    assert "scenario cross-container-2ranks (cross-container, 2x1, 2 ranks, static)\n" in golden
    assert "scenario cross-container-2x2 (cross-container, 2x2, 4 ranks, static)\n" in golden
    assert golden.count(". create container ") == 5  # one in-container, two cross-container twice
    assert golden.count(". start ") == 5


def test_render_is_deterministic(default_plan: RunPlan) -> None:
    assert render_plan(default_plan) == render_plan(plan_run(load_config("configs/default.yaml"), RUN_ID, None))


def test_cli_plan_prints_the_golden_text(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    assert distval.cli.main.main(["plan", "configs/default.yaml", "--run-id", RUN_ID]) == 0
    captured = capsys.readouterr()
    assert captured.out == GOLDEN_PLAN.read_text(encoding="utf-8")
    assert captured.err == ""


def test_cli_plan_image_override(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    assert distval.cli.main.main(["plan", "configs/default.yaml", "--run-id", RUN_ID, "--image", "mine/torch:x"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n  image: mine/torch:x\n") == 3  # each scenario's header
    assert out.count("\n       image: mine/torch:x\n") == 5  # each container's creation arguments
    assert DEFAULT_IMAGE not in out


# --- topologies ------------------------------------------------------------------------------------


def test_in_container_topology(default_plan: RunPlan) -> None:
    plan = default_plan.scenarios[0]
    assert plan.scenario.topology == "in-container"
    (container,) = plan.containers
    assert container.node_rank == 0
    assert container.ranks == (0, 1, 2)
    argv = container.argv
    assert argv[:3] == ("python3", "-m", "torch.distributed.run")
    assert "--standalone" in argv
    assert "--nnodes=1" in argv
    assert "--nproc_per_node=3" in argv
    assert not any(a.startswith(("--master_addr", "--node_rank", "--master-addr", "--node-rank")) for a in argv)
    assert argv[-4:] == ("--max_restarts=0", "-m", "distval_suite.main", SPEC_PATH)
    assert_torch_1_13_spellings(argv)


def test_in_container_nproc_follows_world_size() -> None:
    plan = one_plan(
        """
        scenarios:
          - {topology: in-container, world_size: 5, checks: [env], python: /venv/bin/python}
        """
    )
    (container,) = plan.containers
    assert container.ranks == (0, 1, 2, 3, 4)
    assert "--nproc_per_node=5" in container.argv
    assert dict(container.env)["DISTVAL_NODE_RANK"] == "0"
    assert container.argv[0] == "/venv/bin/python"


@pytest.mark.parametrize("world_size", [2, 3])
def test_cross_container_topology(world_size: int) -> None:
    plan = one_plan(
        f"""
        scenarios:
          - {{name: cross, topology: cross-container, world_size: {world_size}, checks: [env]}}
        """
    )
    assert len(plan.containers) == world_size
    master = plan.containers[0]
    assert master.hostname == master.name
    for index, container in enumerate(plan.containers):
        assert container.node_rank == index
        assert container.ranks == (index,)
        assert container.hostname == container.name
        argv = container.argv
        assert f"--node_rank={index}" in argv
        assert f"--master_addr={master.name}" in argv
        assert f"--master_port={MASTER_PORT}" in argv
        assert f"--nnodes={world_size}" in argv
        assert "--nproc_per_node=1" in argv
        assert "--standalone" not in argv
        assert argv[-4:] == ("--max_restarts=0", "-m", "distval_suite.main", SPEC_PATH)
        assert_torch_1_13_spellings(argv)
        assert dict(container.labels)[LABEL_NODE] == str(index)
        assert dict(container.env)["DISTVAL_NODE_RANK"] == str(index)
    assert len({c.name for c in plan.containers}) == world_size


def test_default_cross_container_master_is_node_0(default_plan: RunPlan) -> None:
    plan = default_plan.scenarios[1]
    assert [c.name for c in plan.containers] == [
        "distval-0123abcd-cross-container-2ranks-n0",
        "distval-0123abcd-cross-container-2ranks-n1",
    ]
    for container in plan.containers:
        assert "--master_addr=distval-0123abcd-cross-container-2ranks-n0" in container.argv


def test_labels_and_network(default_plan: RunPlan) -> None:
    for plan in default_plan.scenarios:
        network = plan.network
        assert network.internal is True
        net_labels = dict(network.labels)
        assert net_labels[LABEL_MANAGED] == "true"
        assert net_labels[LABEL_RUN] == RUN_ID
        assert net_labels[LABEL_SCENARIO] == plan.scenario.name
        for container in plan.containers:
            labels = dict(container.labels)
            assert labels[LABEL_MANAGED] == "true"
            assert labels[LABEL_RUN] == RUN_ID
            assert labels[LABEL_SCENARIO] == plan.scenario.name
            assert container.working_dir == CONTAINER_ROOT
            env = dict(container.env)
            assert env["DISTVAL_RUN_ID"] == RUN_ID
            assert env["DISTVAL_SCENARIO"] == plan.scenario.name
            assert env["DISTVAL_NODE_RANK"] == str(container.node_rank)
            assert container.name.startswith(network.name)
    # One network per scenario, named after the run and the scenario.
    assert [p.network.name for p in default_plan.scenarios] == [
        "distval-0123abcd-in-container-3ranks",
        "distval-0123abcd-cross-container-2ranks",
        "distval-0123abcd-cross-container-2x2",
    ]


# --- image -----------------------------------------------------------------------------------------

IMAGES = """
image: top/level:1
scenarios:
  - {name: own, topology: in-container, world_size: 2, image: scenario/own:2, checks: [env]}
  - {name: inherits, topology: in-container, world_size: 2, checks: [env]}
"""


def test_image_override_wins_over_config() -> None:
    run = plan_run(config_of(IMAGES), RUN_ID, "override/img:3")
    assert [s.image for s in run.scenarios] == ["override/img:3", "override/img:3"]
    assert run.images == ["override/img:3"]


def test_config_image_wins_over_default() -> None:
    run = plan_run(config_of(IMAGES), RUN_ID, None)
    assert [s.image for s in run.scenarios] == ["scenario/own:2", "top/level:1"]
    assert run.images == ["scenario/own:2", "top/level:1"]


def test_default_image_when_none_is_given(default_plan: RunPlan) -> None:
    assert [s.image for s in default_plan.scenarios] == [DEFAULT_IMAGE] * 3
    assert default_plan.images == [DEFAULT_IMAGE]


# --- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("topology", ["in-container", "cross-container"])
def test_names_fit_docker_and_dns_limits(topology: str) -> None:
    longest = "Scenario_With.A-Very-Long-Name-0123456789"[:40]
    assert len(longest) == 40
    plan = one_plan(
        f"""
        scenarios:
          - {{name: {longest}, topology: {topology}, world_size: 12, checks: [env]}}
        """,
        run_id="f" * 16,  # the longest run id the CLI takes
    )
    names = [plan.network.name] + [c.name for c in plan.containers] + [c.hostname for c in plan.containers]
    for name in names:
        assert len(name) <= 63, name
        assert DOCKER_NAME.match(name), name
    for container in plan.containers:
        assert HOSTNAME.match(container.hostname), container.hostname


def test_default_plan_names_fit(default_plan: RunPlan) -> None:
    for plan in default_plan.scenarios:
        for container in plan.containers:
            assert len(container.name) <= 63
            assert len(container.hostname) <= 63
            assert HOSTNAME.match(container.hostname)


@pytest.mark.parametrize("run_id", ["r" * 64, "my run/1", "UPPER"], ids=["64-chars", "space-and-slash", "uppercase"])
def test_cli_rejects_bad_run_id(run_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: --run-id went verbatim into container names and hostnames (over 63 characters, or names Docker rejects)."""
    monkeypatch.chdir(ROOT)
    code = distval.cli.main.main(["plan", "configs/default.yaml", "--run-id", run_id])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "distval plan: error: argument --run-id: expected 1-16 lowercase letters, digits or '-' (starting with a letter "
        f"or digit); got {run_id!r} (see distval plan --help)"
    ]


# --- suite spec ------------------------------------------------------------------------------------


def test_suite_spec_json() -> None:
    plan = one_plan(
        """
        backend: gloo
        collective_timeout_s: 42
        scenarios:
          - name: spec
            topology: cross-container
            world_size: 2
            checks:
              - {name: all_reduce, args: {numel: 1024}}
              - env
        """
    )
    spec = json.loads(plan.suite_spec_json)
    assert spec == {
        "device": "cpu",
        "subnets": "{subnets}",
        "launcher": "torchrun",
        "init_method": None,
        "dynamic_node_ranks": False,
        "scenario": "spec",
        "backend": "gloo",
        "collective_timeout_s": 42.0,
        "check_timeout_s": 120.0,
        "world_size": 2,
        "nproc_per_node": 1,
        "results_dir": RESULTS_DIR,
        "checks": [
            {"name": "all_reduce", "args": {"numel": 1024}},
            {"name": "env", "args": {}},
        ],
        # What distval sets (the environment check judges the image's own variables, not these), and that the node's
        # first process starts from the image's environment.
        "set_by_distval": [
            "DISTVAL_NODE_RANK",
            "DISTVAL_RUN_ID",
            "DISTVAL_SCENARIO",
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONUNBUFFERED",
            "TORCHELASTIC_ERROR_FILE",
            "TORCH_FR_BUFFER_SIZE",
        ],
        "no_image_environment": None,
    }


def test_default_suite_spec(default_plan: RunPlan) -> None:
    for plan in default_plan.scenarios:
        spec = json.loads(plan.suite_spec_json)
        assert [c["name"] for c in spec["checks"]] == [c.name for c in plan.scenario.checks] == DEFAULT_CHECKS
        assert spec["scenario"] == plan.scenario.name
        assert spec["collective_timeout_s"] == 60.0
        assert spec["check_timeout_s"] == {3: 450.0, 4: 600.0}.get(plan.scenario.world_size, 300.0)
        assert (
            spec["world_size"]
            == plan.scenario.world_size
            == {"in-container-3ranks": 3, "cross-container-2x2": 4}.get(plan.scenario.name, 2)
        )
        assert spec["nproc_per_node"] == len(plan.containers[0].ranks)


def test_plan_scenario_is_what_plan_run_uses(default_plan: RunPlan) -> None:
    config = load_config("configs/default.yaml")
    assert default_plan.scenarios == tuple(with_hashes(plan_scenario(s, RUN_ID, None)) for s in config.scenarios)
    assert default_plan.run_id == RUN_ID
    assert default_plan.config_path == "configs/default.yaml"


def test_names_differing_only_in_case_or_punctuation_get_distinct_resources() -> None:
    text = (
        "scenarios:\n"
        "  - {name: a_b, topology: in-container, world_size: 2, checks: [env]}\n"
        "  - {name: A.b, topology: in-container, world_size: 2, checks: [env]}\n"
    )
    plan = plan_run(parse_config(text, "x.yaml"), "0123abcd", None)
    networks = [s.network.name for s in plan.scenarios]
    containers = [c.name for s in plan.scenarios for c in s.containers]
    assert networks == ["distval-0123abcd-a-b", "distval-0123abcd-a-b-1"]
    assert len(set(containers)) == len(containers) == 2


@pytest.mark.parametrize(
    ("topology", "world_size", "containers", "nproc_per_node"),
    [("in-container", 3, 1, 3), ("cross-container", 3, 3, 1), ("in-container", 1, 1, 1)],
)
def test_suite_spec_states_the_layout(topology: str, world_size: int, containers: int, nproc_per_node: int) -> None:
    plan = one_plan(
        f"""
        scenarios:
          - {{name: layout, topology: {topology}, world_size: {world_size}, checks: [launch]}}
        """
    )
    spec = json.loads(plan.suite_spec_json)
    assert len(plan.containers) == containers
    assert (spec["world_size"], spec["nproc_per_node"]) == (world_size, nproc_per_node)
    # What the launch check compares LOCAL_WORLD_SIZE with is what the launcher is told.
    for container in plan.containers:
        assert f"--nproc_per_node={nproc_per_node}" in container.argv
        assert len(container.ranks) == nproc_per_node


def test_suite_spec_check_timeout_is_inherited_and_overridden() -> None:
    run = plan_run(
        config_of(
            """
            check_timeout_s: 30
            scenarios:
              - {name: inherits, topology: in-container, world_size: 2, checks: [env]}
              - {name: overrides, topology: in-container, world_size: 2, check_timeout_s: 7.5, checks: [env]}
            """
        ),
        RUN_ID,
    )
    assert [json.loads(s.suite_spec_json)["check_timeout_s"] for s in run.scenarios] == [30.0, 7.5]


def test_suite_spec_carries_args_of_every_kind() -> None:
    plan = one_plan(
        """
        scenarios:
          - name: kinds
            topology: cross-container
            world_size: 2
            checks:
              - {name: identity, required: true, args: {torch: '>=2.6,<2.7', python: 3.11.2, build: cpu, backends: [gloo, mpi]}}
              - {name: timeout, args: {deadline_s: 2, margin_s: 0.5}}
              - {name: collectives, args: {repeat: 3, large_mib: 1}}
              - store
        """
    )
    assert json.loads(plan.suite_spec_json)["checks"] == [
        {"name": "identity", "args": {"torch": ">=2.6,<2.7", "python": "3.11.2", "build": "cpu", "backends": ["gloo", "mpi"]}},
        {"name": "timeout", "args": {"deadline_s": 2.0, "margin_s": 0.5}},
        {"name": "collectives", "args": {"repeat": 3, "large_mib": 1}},
        {"name": "store", "args": {}},
    ]


def test_render_marks_required_checks() -> None:
    run = plan_run(
        config_of(
            """
            scenarios:
              - name: req
                topology: in-container
                world_size: 2
                checks:
                  - env
                  - {name: identity, required: true}
                  - {name: reconfigure, required: true}
                  - {name: store, required: false}
            """
        ),
        RUN_ID,
    )
    lines = render_plan(run).splitlines()
    assert "  checks: env, identity (required), reconfigure (required), store" in lines
