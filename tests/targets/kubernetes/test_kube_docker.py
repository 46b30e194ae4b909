"""Exported pods run in the real Engine (tests/kube_pods.py), their logs collected: the same verdicts as the
Docker path reads from the same containers' result files, in every rendezvous form a pod template maps
(static with PET_NODE_RANK from the completion index, c10d, env with RANK from it). No cluster is needed:
what the cluster adds (scheduling, image pulls, the Job controller) is not exercised here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distval.config import load_config
from distval.results.outcome import EXIT_STATUS_CASE, PASSED, SKIPPED
from distval.results.scenario import summarize_scenario
from distval.targets.docker.engine import Engine
from distval.targets.kubernetes.collect import read_files, read_plans, summarize_sources
from distval.targets.kubernetes.export import export_config, render
from tests.kube_pods import run_pods, save

pytestmark = pytest.mark.docker
IMAGE = "distval-fixtures/torch:2.6-debian"


# The rendezvous forms whose pod templates differ (node rank through PET_NODE_RANK, none under c10d, RANK
# for the launcher-less env form), with checks that need every rank, and a deadline that holds on this
# machine at a load average of 30 (a whole default run took 250 s there, against its 240 s deadline).
CONFIG = """version: 1
timeout_s: 900
scenarios:
  - name: static
    topology: cross-container
    nodes: 2
    checks: &checks [env, launch, all_reduce, collectives, store]
  - {name: c10d, topology: cross-container, nodes: 2, rendezvous: c10d, checks: *checks}
  - {name: env, topology: cross-container, nodes: 2, nproc_per_node: 1, rendezvous: env, checks: *checks}
"""


@pytest.mark.parametrize("scenario", ("static", "c10d", "env"))
def test_exported_pods_pass_and_their_logs_round_trip(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path: Path, scenario: str
) -> None:
    image = fixture_image(IMAGE)
    config = tmp_path / "kube.yaml"
    config.write_text(CONFIG)
    logs = tmp_path / "logs"
    (exported,) = [
        s for s in export_config(load_config(str(config)), "kube-live", image, "indexed-job") if s.plan.scenario.name == scenario
    ]
    outcome = run_pods(Engine("kube-live"), render(exported), exported.plan_text)
    assert outcome.setup_error is None, outcome.setup_error
    save(outcome, logs, exported)
    docker = summarize_scenario(outcome)
    plans = read_plans(logs)
    (collected,) = summarize_sources(read_files(str(p) for p in sorted(logs.glob("*.log"))), plans).scenarios
    expected = [(c.name, c.status, c.message) for c in docker.cases if c.name != EXIT_STATUS_CASE]
    assert [(c.name, c.status, c.message) for c in collected.cases if c.name != EXIT_STATUS_CASE] == expected
    assert docker.status == PASSED, [c for c in docker.cases if c.status not in (PASSED, SKIPPED)]
    assert collected.status == PASSED
    assert len(list(logs.glob("*.log"))) == len(exported.plan.containers)
    assert [c.exit_code for c in outcome.containers] == [0, 0]
