"""distval/targets/docker/beside.py: the beside-helper that signals a paused rank container's workers runs
distval's own image with the declared restrictions, never the image under test (issue 19), and the plan shows
exactly what the Engine creates."""

from __future__ import annotations

import json
from typing import Any

from distval.cli.plan_render import plan_as_data, render_plan
from distval.config import parse_config
from distval.engine_protocol import ExecResult
from distval.images import REAPER_ENTRYPOINT, REAPER_IMAGE
from distval.plan.model import RunPlan
from distval.targets.docker import beside as beside_container
from distval.targets.docker import gpu_probe as gpu_probe_container
from distval.targets.docker.engine import Engine
from distval.targets.docker.processes import WORKER_SCRIPT, signal_workers_beside
from distval.targets.engines.plan import PROBE_CAP_DROP
from distval.targets.engines.planning import plan_run
from tests.config_helpers import FILE, yaml_text
from tests.fake_engine import FakeEngine
from tests.targets.docker.test_engine_errors import Calls, FakeClient, FakeContainer

HOSTILE = "hostile/torch:latest"


def _rank_container(calls: Calls) -> FakeContainer:
    container = FakeContainer(calls, "distval-r1-s-n1")
    # The image's own LABELs reach the container's: one of them claims to be the reaper.
    labels = {"distval.scenario": "s", "distval.node": "1", "distval.role": "reaper", "evil": "x"}
    container.attrs = {"Config": {"Image": HOSTILE, "Labels": labels}, "Image": "sha256:" + "e" * 64}
    return container


def _created_beside() -> dict[str, Any]:
    calls = Calls()
    client = FakeClient(calls)
    engine = Engine("r1", client=client)
    engine.run_beside(_rank_container(calls), ["10", "all"], 5.0)
    (created,) = client.containers.created
    assert isinstance(created, dict)
    assert calls.names[-1] == "container.remove", calls.names  # removed once its output is read
    return created


def test_the_beside_helper_runs_distvals_image_never_the_image_under_test() -> None:
    created = _created_beside()
    assert created["image"] == REAPER_IMAGE != HOSTILE
    assert HOSTILE not in json.dumps(created) and "sha256:eeee" not in json.dumps(created)
    # A fixed program: distval's script under the reaper image's python, isolated from PYTHON* variables and
    # site; the call chooses only the script's arguments.
    assert created["entrypoint"] == [REAPER_ENTRYPOINT[0], "-I", "-S", "-c", WORKER_SCRIPT]
    assert created["command"] == ["10", "all"]
    assert created["name"].startswith("distval-r1-s-n1-beside-")
    # distval's labels only: an image's LABEL distval.role=reaper would exempt the helper from the reaper.
    assert {k: v for k, v in created["labels"].items() if not k.startswith("distval.owner.")} == {
        "distval.scenario": "s",
        "distval.node": "1",
        "distval.managed": "true",
        "distval.run": "r1",
        "distval.role": "",  # given, so that no image's LABEL decides it
    }


def test_the_beside_helper_has_exactly_the_declared_restrictions() -> None:
    created = _created_beside()
    assert created["pid_mode"] == "container:id-distval-r1-s-n1"  # the rank container's, not the host's
    assert created["user"] == "0:0"
    assert created["network_mode"] == "none"
    assert created["cap_drop"] == ["ALL"] and created["cap_add"] == ["DAC_READ_SEARCH", "KILL", "SYS_PTRACE"]
    assert created["read_only"] is True and created["security_opt"] == ["no-new-privileges"]
    assert created["mem_limit"] == "64m" and created["pids_limit"] == 16
    assert created["environment"] == {}
    for absent in ("volumes", "mounts", "privileged", "ipc_mode", "devices", "device_requests", "ports"):
        assert absent not in created, absent
    assert {k: created[k] for k in beside_container.SETTINGS} == beside_container.SETTINGS


class BesideRecorder(FakeEngine):
    def __init__(self) -> None:
        super().__init__("r1")
        self.beside: list[list[str]] = []

    def run_beside(self, container: Any, arguments: Any, timeout_s: float) -> ExecResult:
        self.beside.append(list(arguments))
        return ExecResult(0, json.dumps([{"pid": 7, "rank": 1, "local_rank": 0}]))


def test_signal_workers_beside_passes_only_the_signal_and_the_ranks() -> None:
    engine = BesideRecorder()
    workers = signal_workers_beside(engine, object(), 10)
    assert engine.beside == [["10", "all"]]
    assert [w.rank for w in workers] == [1]


def test_the_plan_lists_the_beside_helper_from_its_declaration() -> None:
    plan = RunPlan("r1", "distval.yaml", ())
    helper = next(b for b in plan_as_data(plan)["beside"] if b["role"] == "beside-helper")
    assert helper == beside_container.description()
    assert helper["image"] == beside_container.IMAGE and helper["entrypoint"][:4] == list(beside_container.ENTRYPOINT[:4])
    assert helper["privileges"]["cap_add"] == beside_container.SETTINGS["cap_add"] and helper["mounts"] == []
    text = render_plan(plan)
    assert "beside the ranks: beside-helper" in text
    assert "cap_drop ALL; cap_add DAC_READ_SEARCH,KILL,SYS_PTRACE" in text


# What no container distval starts beside the ranks may have: the Engine's socket or other mounts, the host's
# PID or IPC namespace, privileged mode, added devices.
FORBIDDEN = ("volumes", "mounts", "privileged", "pid_mode", "ipc_mode", "devices", "cap_add")


def test_the_gpu_probe_runs_the_image_under_test_with_less_than_the_ranks() -> None:
    calls = Calls()
    client = FakeClient(calls)
    Engine("r1", client=client).gpu_support(HOSTILE, "python3")
    (created,) = client.containers.created
    assert isinstance(created, dict)
    assert created["image"] == HOSTILE  # on purpose: it probes what that image gets
    assert created["network_mode"] == "none" and created["cap_drop"] == ["ALL"]
    assert created["security_opt"] == ["no-new-privileges"] and created["pids_limit"] == 64
    assert created["device_requests"] == gpu_probe_container.DEVICE_REQUESTS
    for absent in FORBIDDEN:
        assert absent not in created, absent
    expected = gpu_probe_container.create_kwargs(HOSTILE, "python3", created["name"])
    assert {k: v for k, v in created.items() if k != "labels"} == expected


def test_the_host_probes_get_no_capability_and_the_ranks_user() -> None:
    config = parse_config(yaml_text(CROSS_AS_USER), FILE)
    (plan,) = plan_run(config, "r1", hosts=("tcp://10.0.0.1:2375", "tcp://10.0.0.2:2375")).scenarios
    assert plan.probes
    for probe in plan.probes:
        kwargs = probe.create_kwargs()
        assert kwargs["image"] == plan.image and kwargs["network_mode"] == "host"  # as the ranks across hosts
        assert kwargs["user"] == "1000:1000" == plan.containers[0].create_kwargs()["user"]
        assert kwargs["cap_drop"] == ["ALL"] and kwargs["security_opt"] == ["no-new-privileges"]
        for absent in FORBIDDEN:
            assert absent not in kwargs, absent
    # The plan shows each probe's exact arguments under its step.
    text = render_plan(RunPlan("r1", FILE, (plan,)))
    assert text.count('       cap_drop: ["ALL"]') == len(plan.probes), text
    (data,) = plan_as_data(RunPlan("r1", FILE, (plan,)))["scenarios"]
    assert data["probes"] == [p.create_kwargs() for p in plan.probes]


def test_the_plan_lists_every_container_beside_the_ranks() -> None:
    beside = plan_as_data(RunPlan("r1", "distval.yaml", ()))["beside"]
    assert [b["role"] for b in beside] == ["reaper", "beside-helper", "gpu-probe", "host-probe"]
    for each in beside:
        assert {"image", "user", "privileges", "mounts", "network"} <= set(each), each
    assert beside[2]["privileges"]["cap_drop"] == gpu_probe_container.SETTINGS["cap_drop"]
    assert beside[3]["privileges"]["cap_drop"] == list(PROBE_CAP_DROP) and "only under --hosts" in beside[3]["network"]


CROSS_AS_USER = """
version: 1
scenarios:
  - name: cross
    topology: cross-container
    world_size: 2
    user: "1000:1000"
    checks: [env]
"""
