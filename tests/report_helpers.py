"""What the report tests share: a small config and its plans, results built by hand, a fake runtime
and the `fake_docker` fixture that runs `distval run` against it (a plain module, not a test module)."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import pytest

import distval.cli.main
import distval.cli.run
import distval.targets.docker.target
from distval.cli.main import main
from distval.config import parse_config
from distval.plan.identity import with_hashes
from distval.plan.model import ScenarioPlan
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult
from distval.run.events import RunEvents
from distval.targets.engines.planning import plan_scenario
from tests.fake_engine import FakeEngine
from tests.paths import GOLDEN, SCHEMAS

SCHEMA_PATH = SCHEMAS / "junit-10.xsd"
GOLDEN_DIR = GOLDEN / "reports"
VERSION_MARK = "@DISTVAL_VERSION@"  # the goldens hold this instead of harness.__version__
RUN_ID = "abc123"
IMAGE = "example/torch:test"
CONFIG_PATH = "configs/my suite.yaml"  # a space: the reproduce command must quote it
CONFIG = """\
timeout_s: 90
scenarios:
  - name: inside
    topology: in-container
    world_size: 2
    checks: [env, all_reduce]
  - name: across
    topology: cross-container
    world_size: 3
    checks: [env, all_reduce]
"""
LONG_MESSAGE = "rank 1: all_reduce(SUM) of rank+1 over 3 ranks: expected 6.0 in every element, got 5.0 at element 0 " + "x" * 200


def plans() -> tuple[ScenarioPlan, ScenarioPlan]:
    inside, across = parse_config(CONFIG, "report.yaml").scenarios
    return with_hashes(plan_scenario(inside, RUN_ID, IMAGE)), with_hashes(plan_scenario(across, RUN_ID, IMAGE))


def scenario(plan: ScenarioPlan, cases: list[tuple[str, str, str]], duration_s: float = 4.25) -> ScenarioResult:
    properties = (("image", plan.image), ("image_id", "sha256:feed"), ("cuda_version", "none"), ("scenario_hash", "0123abcd4567"))
    return ScenarioResult(
        plan,
        tuple(CaseResult(name, status, message, 0.5, output=f"{name} output") for name, status, message in cases),
        properties,
        f"logs of {plan.scenario.name}",
        duration_s,
    )


def passing(plan: ScenarioPlan) -> ScenarioResult:
    return scenario(
        plan, [("env", PASSED, "torch 2.6.0, Python 3.13.5"), ("all_reduce", PASSED, "ok"), ("exit_status", PASSED, "ok")]
    )


def failing(plan: ScenarioPlan) -> ScenarioResult:
    return scenario(
        plan,
        [
            ("env", SKIPPED, "no CUDA"),
            ("all_reduce", FAILED, LONG_MESSAGE + "\nsecond line"),
            ("exit_status", ERROR, "expected every container to exit 0 within the deadline; container x exited with code 1"),
        ],
        duration_s=12.0,
    )


def summary(**kwargs: Any) -> RunSummary:
    inside, across = plans()
    defaults: dict[str, Any] = {"engine_version": "27.5.1", "host": "ci-host", "config_path": CONFIG_PATH}
    defaults.update(kwargs)
    return RunSummary(RUN_ID, (passing(inside), failing(across)), **defaults)


TIMESTAMP = re.compile(r"^\[\s*\d+\.\ds\] ")
ANNOUNCEMENT = (
    f"run {RUN_ID} (pid {os.getpid()} on {socket.gethostname()}): if distval is killed, "
    f"`distval cleanup --run-id {RUN_ID}` removes its containers and networks"
)


# --- distval run, against a fake Engine and a fake runtime -----------------------------------------


def record(check: str, rank: int, status: str, message: str, **details: Any) -> str:
    return (
        json.dumps({"check": check, "rank": rank, "status": status, "message": message, "duration_s": 0.25, "details": details})
        + "\n"
    )


def fake_run_scenario(engine: Any, plan: ScenarioPlan, events: RunEvents, stop: object = None) -> ScenarioOutcome:
    """What runtime.run_scenario returns: all_reduce fails on rank 1 in 'across', everything else passes."""
    image = engine.image(plan.image)
    engine.create_network(plan.network)
    engine.start(None)
    events.phase(plan, "running")
    events.note(plan, f"started {len(plan.containers)} container(s)")
    events.phase(plan, "collecting logs and results")
    engine.state(None)
    engine.logs(None)
    containers = []
    for cp in plan.containers:
        files = {}
        for rank in cp.ranks:
            bad = plan.scenario.name == "across" and rank == 1
            text = record("env", rank, PASSED, "torch 2.6.0", torch_version="2.6.0", python_version="3.13.5", cuda_version=None)
            text += record("all_reduce", rank, FAILED if bad else PASSED, "expected 3.0, got 2.0" if bad else "ok")
            files[f"rank-{rank}.jsonl"] = text.encode()
        containers.append(ContainerOutcome(cp.name, cp.node_rank, cp.ranks, 0, False, "out", "err", files))
    events.phase(plan, "removing containers and networks")
    engine.remove_labelled(f"distval.scenario={plan.scenario.name}")
    return ScenarioOutcome(plan, image.id, 2.5, tuple(containers))


def use_fake_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """`distval run` against FakeEngine and fake_run_scenario; returns the config to run (conftest's fake_docker)."""
    FakeEngine.instances = []
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(distval.targets.docker.target, "run_scenario", fake_run_scenario)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    config = tmp_path / "suite.yaml"
    config.write_text(CONFIG.replace("world_size: 3", "world_size: 2"), encoding="utf-8")
    return config


def run(config: Path, tmp_path: Path, *extra: str) -> int:
    return main(
        ["run", str(config), "--image", IMAGE, "--run-id", RUN_ID]
        + ["--junit", str(tmp_path / "r.xml"), "--json", str(tmp_path / "r.json")]
        + list(extra)
    )
