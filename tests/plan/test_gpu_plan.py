"""The GPU half of the plan, without a GPU: device ids per rank container, NCCL's container settings, and the
honest skip when the Engine cannot give GPUs (a fake Engine implementing the same Protocol as the real one).
"""

from __future__ import annotations

import os
import threading

from distval.cli.plan_render import render_plan
from distval.config import load_config, parse_config
from distval.engine_protocol import EngineAPI, GpuSupport
from distval.plan.model import ScenarioPlan
from distval.plan.nodes import NCCL_SHM_SIZE
from distval.results.outcome import FAILED, SKIPPED
from distval.results.scenario import RunSummary, summarize_scenario
from distval.run.events import NO_EVENTS
from distval.targets.docker.runtime import run_scenario
from distval.targets.engines.planning import plan_run
from tests.fake_engine import FakeEngine
from tests.paths import GOLDEN, ROOT

GOLDEN_PLAN = GOLDEN / "nccl_plan.txt"
RUN_ID = "0123abcd"


def plans() -> dict[str, ScenarioPlan]:
    return {p.scenario.name: p for p in plan_run(load_config(ROOT / "configs" / "nccl.yaml"), RUN_ID).scenarios}


def test_nccl_plan_matches_golden() -> None:
    text = render_plan(plan_run(load_config(ROOT / "configs" / "nccl.yaml"), RUN_ID)).replace(str(ROOT) + "/", "")
    if os.environ.get("DISTVAL_UPDATE_GOLDEN") == "1":
        GOLDEN_PLAN.write_text(text, encoding="utf-8")
    assert text == GOLDEN_PLAN.read_text(encoding="utf-8"), (
        "plan text changed: rerun with DISTVAL_UPDATE_GOLDEN=1 and review the diff"
    )


def test_each_rank_container_gets_its_own_gpus_by_id_never_by_count() -> None:
    by_name = plans()
    across = by_name["nccl.nccl.cross"]
    requests = [c.create_kwargs()["device_requests"] for c in across.containers]
    assert [r[0]["DeviceIDs"] for r in requests] == [["0"], ["1"]]
    assert all(r[0]["Count"] == 0 and r[0]["Capabilities"] == [["gpu"]] for r in requests)
    inside = by_name["nccl.nccl.in"]
    assert inside.containers[0].create_kwargs()["device_requests"][0]["DeviceIDs"] == ["0", "1"]  # one per rank
    assert by_name["gloo-cuda"].containers[0].options.gpu_device_ids == ("0",)  # two gloo ranks share one GPU
    assert [p.gpus_needed for p in by_name.values()] == [2, 2, 2, 2, 1]


def test_nccl_containers_get_shm_memlock_and_nccl_environment() -> None:
    for plan in plans().values():
        for container in plan.containers:
            kwargs = container.create_kwargs()
            env = kwargs["environment"]
            if plan.scenario.backend.startswith("nccl"):
                assert kwargs["shm_size"] == NCCL_SHM_SIZE  # Docker's 64 MB breaks NCCL's SHM transport (nccl#342)
                assert {u["Name"]: (u["Soft"], u["Hard"]) for u in kwargs["ulimits"]}["memlock"] == (-1, -1)
                assert env["NCCL_DEBUG"] == "INFO" and env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
            else:
                assert "shm_size" not in kwargs and "ulimits" not in kwargs and "NCCL_DEBUG" not in env


def test_a_scenario_can_set_its_own_shm_and_nccl_variables() -> None:
    config = parse_config(
        "scenarios:\n  - {name: s, topology: in-container, world_size: 2, backend: nccl, shm_size: 8g,"
        " env: {NCCL_DEBUG: WARN}, checks: [env]}\n",
        "s.yaml",
    )
    (container,) = plan_run(config, RUN_ID).scenarios[0].containers
    assert container.options.shm_size == "8g" and dict(container.env)["NCCL_DEBUG"] == "WARN"
    assert [k for k, _ in container.env].count("NCCL_DEBUG") == 1


REASON = 'this Docker Engine cannot give GPUs to containers (could not select device driver "" with capabilities: [[gpu]])'


def test_without_gpus_every_check_is_skipped_with_the_reason_and_nothing_is_created() -> None:
    engine = FakeEngine(RUN_ID, GpuSupport(0, REASON))
    typed: EngineAPI = engine  # the fake implements the Protocol the runtime depends on
    plan = plans()["nccl.nccl.cross"]
    result = summarize_scenario(run_scenario(typed, plan, NO_EVENTS, threading.Event()))
    assert engine.calls == ["remove_labelled"]  # nothing created, and cleanup still ran
    assert result.status == SKIPPED
    assert [c.name for c in result.cases] == ["process_group", *(c.name for c in plan.scenario.checks)]
    assert {c.status for c in result.cases} == {SKIPPED}
    assert result.cases[0].message == f"the scenario needs 2 GPU(s), one per NCCL rank; {REASON}"
    summary = RunSummary(RUN_ID, (result,))
    assert summary.nothing_validated and summary.exit_code == 5  # validated nothing: never 0, and not the image's 1


def test_too_few_gpus_is_a_skip_naming_both_numbers_and_require_gpu_makes_it_a_failure() -> None:
    plan = plans()["nccl.nccl.in"]
    outcome = run_scenario(FakeEngine(RUN_ID, GpuSupport(1, "")), plan, NO_EVENTS)
    assert outcome.setup_error == "the scenario needs 2 GPU(s), one per NCCL rank; the Engine gives containers 1"
    failed = summarize_scenario(outcome, require_gpu=True)
    assert failed.status == FAILED and failed.cases[0].message.startswith("expected GPUs (--require-gpu): the scenario needs 2")


def test_enough_gpus_runs_the_steps() -> None:
    engine = FakeEngine(RUN_ID, GpuSupport(2, ""))
    run_scenario(engine, plans()["nccl.nccl.cross"], NO_EVENTS)
    assert engine.calls == [
        "create_network",
        "create_container",
        "put_archive",
        "create_container",
        "put_archive",
        "start",
        "start",
        "remove_labelled",
    ]


def test_the_report_names_the_transport_nccl_chose_between_each_pair() -> None:
    from distval.results.outcome import ContainerOutcome, ScenarioOutcome

    plan = plans()["nccl.nccl.cross"]
    logs = (
        "host-n0:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n",
        "host-n1:56:78 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0\n",
    )
    containers = tuple(
        ContainerOutcome(c.name, c.node_rank, c.ranks, 0, False, log, "") for c, log in zip(plan.containers, logs, strict=True)
    )
    properties = dict(summarize_scenario(ScenarioOutcome(plan, None, 1.0, containers)).properties)
    assert properties["nccl_transports"] == "0-1 NET/Socket"
    gloo = plans()["gloo-cuda"]
    assert "nccl_transports" not in dict(summarize_scenario(ScenarioOutcome(gloo, None, 1.0, ())).properties)


def test_nothing_starts_before_the_runs_reaper_runs_while_setup_goes_on_beside_its_start() -> None:
    """``before_start`` (the reaper's launch, distval/targets/docker/reaper.py ReaperLaunch) comes before the GPU probe and
    before the first start, after the networks and containers are created."""
    engine = FakeEngine(RUN_ID, GpuSupport(2, ""))
    probed: list[str] = []
    original = engine.gpu_support

    def gpu_support(image: str, python: str) -> GpuSupport:
        probed.append("gpu_probe")
        return original(image, python)

    engine.gpu_support = gpu_support  # type: ignore[method-assign]
    order: list[str] = []

    def before_start() -> None:
        order.append(f"reaper ready after {list(engine.calls)} {probed}")

    run_scenario(engine, plans()["nccl.nccl.cross"], NO_EVENTS, before_start=before_start)
    setup = ["create_network", "create_container", "put_archive", "create_container", "put_archive"]
    # Before the GPU probe (it starts a container), then before the first start: setup went on meanwhile.
    assert order == ["reaper ready after [] []", f"reaper ready after {setup} ['gpu_probe']"]
