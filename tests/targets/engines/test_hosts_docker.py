"""Several Docker hosts against real, separate Docker Engines: three node Engines (distval/targets/engines/dind.py; node 2 over
TLS) started once per session, the 2.6 fixture copied to them by distval itself, the default config's
cross-container scenario with one node per Engine on 2 and on 3 Engines, and a node Engine stopped mid-run.

Slow where the machine is loaded (every node holds its own copy of the 1.2 GB image): they print their
durations, which docs/measurements.md quotes ("Several Docker hosts")."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import yaml

from distval.images import NODE_ENGINE
from distval.labels import LABEL_RUN
from tests.docker_helpers import DEFAULT_CONFIG, GOOD
from tests.paths import ROOT

pytestmark = pytest.mark.docker
IMAGE = "distval-fixtures/torch:2.6-debian"
REAP_BOUND_S = 60.0  # from SIGKILL to nothing of the run on any host (one host: 4-7 s measured, docs/measurements.md)
RUN_TIMEOUT_S = 1500  # a run that copies the image to two hosts on a machine at load 30 took 14 min


@pytest.fixture(scope="session")
def nodes(fixture_image: Callable[[str], str]) -> Iterator[Any]:
    from distval.targets.engines.dind import start_nodes, stop_nodes

    fixture_image(NODE_ENGINE)
    fixture_image(IMAGE)
    started = time.monotonic()
    node_set = start_nodes(3, plain=[0, 1], progress=lambda line: print(line, flush=True))
    print(f"3 node Engines answered {time.monotonic() - started:.1f} s after the first start", flush=True)
    try:
        yield node_set
    finally:
        stop_nodes(node_set.set_id)


def _client(node: Any) -> Any:
    from distval.targets.docker.engine import Engine

    return Engine("tests-hosts", host=node.host).client


def _config(tmp_path: Path, nodes: int, timeout_s: int | None = None) -> Path:
    """The default config's cross-container scenario, with one node per Engine (and another deadline)."""
    document = yaml.safe_load(Path(DEFAULT_CONFIG).read_text())
    if timeout_s is not None:
        document["timeout_s"] = timeout_s
    (scenario,) = [s for s in document["scenarios"] if s["name"] == "cross-container-2ranks"]
    scenario.update(name=f"cross-container-{nodes}ranks", world_size=nodes)
    document["scenarios"] = [scenario]
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _command(config: Path, hosts: list[Any], run_id: str, report: Path) -> list[str]:
    tls = next(n.host.tls for n in hosts if n.host.tls is not None)
    return [
        sys.executable,
        "-m",
        "distval",
        "run",
        str(config),
        "--image",
        IMAGE,
        "--hosts",
        ",".join(n.url for n in hosts),
        "--tls-ca",
        tls.ca,
        "--tls-cert",
        tls.cert,
        "--tls-key",
        tls.key,
        "--run-id",
        run_id,
        "--json",
        str(report),
    ]


def _leftovers(node: Any, run_id: str) -> list[str]:
    # The low-level list: docker-py's containers.list() inspects each container it listed and raises NotFound
    # for one removed in between (issue 20: a restarted node Engine removing its auto-removed reaper, distval
    # removing a probe while this polls).
    containers = _client(node).api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    return [str(c["Names"][0]).lstrip("/") for c in containers]


@pytest.mark.parametrize("count", [2, 3])
def test_the_cross_container_scenario_passes_with_one_node_per_engine(nodes: Any, tmp_path: Path, count: int) -> None:
    hosts = [nodes.nodes[i] for i in ((0, 2) if count == 2 else (0, 1, 2))]  # always one over TLS
    run_id = f"hosts{count}-{int(time.time()) % 100000}"
    report = tmp_path / "report.json"
    started = time.monotonic()
    done = subprocess.run(
        _command(_config(tmp_path, count), hosts, run_id, report),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=ROOT,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    (scenario,) = json.loads(report.read_text())["scenarios"]
    statuses = {case["name"]: case["status"] for case in scenario["cases"]}
    assert {name for name, status in statuses.items() if status != "passed"} == GOOD[IMAGE][0], statuses
    # One node per Engine, each reached over the Engine's own URL and using its own interface.
    assert scenario["world_size"] == count
    lines = [line for line in done.stderr.splitlines() if "GiB to host" in line or "host tcp" in line or "host https" in line]
    print(f"{count} hosts: run took {took:.1f} s, scenario {scenario['duration_s']:.1f} s; " + " | ".join(lines))
    for node in hosts:
        assert _leftovers(node, run_id) == []


@pytest.mark.waits
def test_a_node_engine_stopped_mid_run_is_that_hosts_error_and_the_others_are_cleaned(
    nodes: Any, tmp_path: Path, docker_client: Any
) -> None:
    hosts = [nodes.nodes[0], nodes.nodes[1], nodes.nodes[2]]
    victim = hosts[1]
    run_id = f"hostsstop-{int(time.time()) % 100000}"
    report = tmp_path / "report.json"
    # The survivors wait for the stopped node's rank; the runtime asks every Engine it does not wait on about
    # one of its containers every 2 s (runtime.HOST_WATCH_S), so the stopped Engine is seen then, not at the
    # scenario's deadline (120 s here, which the run must not reach; the scenario on 3 Engines takes 42 s
    # when nothing is stopped).
    config = _config(tmp_path, 3, timeout_s=120)
    process = subprocess.Popen(
        _command(config, hosts, run_id, report), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        # Wait until the victim runs its node (its container exists there), then stop that whole Engine.
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not [n for n in _leftovers(victim, run_id) if n.endswith("-n1")]:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never started node 1"
            time.sleep(1)
        docker_client.containers.get(victim.name).stop(timeout=1)
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, stdout + stderr
    (scenario,) = json.loads(report.read_text())["scenarios"]
    errors = [case for case in scenario["cases"] if case["status"] == "error"]
    assert errors and errors[0]["message"].startswith(f"host 1 ({victim.url}): "), errors
    assert "deadline" not in errors[0]["message"], errors
    assert scenario["duration_s"] < 120, f"the stopped Engine was seen at the deadline: {scenario['duration_s']:.1f} s"
    print(f"stopped Engine seen: scenario {scenario['duration_s']:.1f} s; {errors[0]['message'][:200]}")
    for node in (hosts[0], hosts[2]):
        assert _leftovers(node, run_id) == [], f"{node.url} kept containers of run {run_id}"
    # Bring the node back for whatever runs next in this session, and remove what the dead Engine kept.
    from distval.targets.engines.dind import wait_ready

    docker_client.containers.get(victim.name).start()
    wait_ready(victim, time.monotonic())
    _client(victim).containers.list()  # it answers again
    for name in _leftovers(victim, run_id):
        try:
            _client(victim).api.remove_container(name, force=True, v=True)
        except docker.errors.NotFound:
            pass  # removed meanwhile by the restarted Engine itself (AutoRemove)


def test_a_sigkilled_distval_leaves_nothing_on_any_host(nodes: Any, tmp_path: Path) -> None:
    """Each Engine has its own reaper holding distval's connection: after a SIGKILL each removes that Engine's
    part of the run (the reaper included) within the bound, with no distval left to clean up."""
    hosts = [nodes.nodes[0], nodes.nodes[2]]  # one over TLS
    run_id = f"hostskill-{int(time.time()) % 100000}"
    process = subprocess.Popen(
        _command(_config(tmp_path, 2), hosts, run_id, tmp_path / "report.json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not [n for n in _leftovers(hosts[1], run_id) if n.endswith("-n1")]:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never started node 1"
            time.sleep(1)
        reapers = {node.url: [n for n in _leftovers(node, run_id) if n.endswith("-reaper")] for node in hosts}
        if not all(reapers.values()):  # a reaper on every Engine; else distval's stderr says why
            process.kill()
            raise AssertionError(f"no reaper on some host: {reapers}; distval's stderr: {process.communicate()[1][-3000:]}")
        process.kill()
        process.communicate()
        killed = time.monotonic()
        while any(_leftovers(node, run_id) for node in hosts):
            assert time.monotonic() < killed + REAP_BOUND_S, {node.url: _leftovers(node, run_id) for node in hosts}
            time.sleep(0.5)
        print(f"SIGKILL to nothing left on {len(hosts)} hosts: {time.monotonic() - killed:.1f} s")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
