"""The slurm target on a real Slurm cluster: a controller and two compute nodes as containers on this machine
(distval/targets/slurm/cluster.py: Debian's Slurm 22.05, munge, runc), the image under test made an OCI bundle
(docker save, skopeo copy, umoci unpack) and run by ``srun --container``. Marked ``docker``.

- the default config's cross-container scenario passes across the two Slurm nodes on the 2.6 image;
- broken:allreduce-wrong fails all_reduce there, the testcase it fails on Docker;
- a job stopped at its deadline is cancelled: nothing of it is queued or running afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from distval.cli.main import main
from distval.config import load_config
from distval.images import cache_dir
from distval.results.outcome import EXIT_STATUS_CASE, FAILED, PASSED
from distval.targets.docker.engine import Engine
from distval.targets.slurm.bundle_config import read_bundle_config
from distval.targets.slurm.cluster import Cluster, cached_bundle, run_on, start_cluster, stop_cluster
from distval.targets.slurm.collect import JobState, summarize_jobs
from distval.targets.slurm.export import export_config, write_job
from distval.targets.slurm.integrations import OCI
from distval.targets.slurm.jobs import ACTIVE, cancel, follow, lost_nodes, submit
from tests.paths import ROOT

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 69 % (232.6 s) of the 2 cores busy
# (2026-12-07, /proc/stat every 10 s), a core idle much of its time; tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.docker, pytest.mark.waits]
IMAGE = "distval-fixtures/torch:2.6-debian"
BROKEN = "distval-fixtures/broken:allreduce-wrong"
JOB_TIMEOUT_S = 900.0


@dataclass
class ControllerCommands:
    """Slurm's client in the cluster's controller (the test cluster's login node)."""

    engine: Engine
    cluster: Cluster

    def run(self, argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str]:
        return run_on(self.engine, self.cluster.controller, argv)


@dataclass
class SlurmHere:
    cluster: Cluster
    commands: ControllerCommands
    bundles: dict[str, str]
    jobs: Path  # this session's directory for jobs, under the cluster's shared one
    images: Callable[[str], str]  # fixture_image: a test's image is built where missing, as every Docker test's


@pytest.fixture(scope="module")
def slurm(fixture_image: Callable[[str], str]) -> Iterator[SlurmHere]:
    fixture_image("distval-fixtures/slurm-node:bookworm")
    # One directory the nodes mount at the same path (the Engine is this machine's): the images' bundles, kept between
    # sessions (minutes each to make: docs/measurements.md#slurm), and this session's jobs beside them. One mount:
    # the batch script hard-links a bundle's rootfs into each job, and link(2) does not cross mounts.
    root = cache_dir() / "slurm"
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    shared = tempfile.mkdtemp(prefix="distval-slurm-", dir=root / "sessions")
    os.chmod(shared, 0o755)
    cluster = start_cluster(str(root), 2, lambda line: print(line, flush=True))
    try:
        yield SlurmHere(cluster, ControllerCommands(Engine("tests-slurm"), cluster), {}, Path(shared), fixture_image)
    finally:
        stop_cluster(cluster.cluster_id)
        shutil.rmtree(shared, ignore_errors=True)


def _bundle(slurm: SlurmHere, image: str) -> str:
    if image not in slurm.bundles:
        slurm.images(image)  # before: the image had to be there already (CI's background build made it, or not yet)
        started = time.monotonic()
        bundles = str(cache_dir() / "slurm" / "bundles")
        slurm.bundles[image] = cached_bundle(slurm.commands.engine, slurm.cluster, image, bundles)
        print(f"bundle of {image}: {time.monotonic() - started:.1f} s", flush=True)
    return slurm.bundles[image]


def _run(
    slurm: SlurmHere,
    image: str,
    name: str,
    scenario: str,
    deadline_s: float = JOB_TIMEOUT_S,
    config_path: Path = ROOT / "configs" / "default.yaml",
) -> tuple[Path, JobState]:
    bundle = _bundle(slurm, image)
    config = load_config(str(config_path))
    out = slurm.jobs / name
    (job,) = [
        j
        for j in export_config(config, name, image, out, OCI, bundle, read_bundle_config(bundle))
        if j.plan.scenario.name == scenario
    ]
    directory = write_job(job, out)
    submitted = submit(slurm.commands, str(directory / "job.sbatch"))
    state = follow(slurm.commands, submitted.job_id, time.monotonic() + deadline_s, threading.Event())
    if state.state.rstrip("+") in ACTIVE:
        state = cancel(slurm.commands, submitted.job_id) or state
    return directory, state


def test_the_default_cross_container_scenario_passes_across_two_slurm_nodes(slurm: SlurmHere) -> None:
    directory, state = _run(slurm, IMAGE, "good", "cross-container-2ranks")
    (result,) = summarize_jobs([directory]).scenarios
    statuses = {c.name: c.status for c in result.cases}
    assert state.state == "COMPLETED", (state, statuses, result.logs[-3000:])
    assert statuses[EXIT_STATUS_CASE] == PASSED and statuses["all_reduce"] == PASSED, (statuses, result.logs[-3000:])
    assert all(s in (PASSED, "skipped") for s in statuses.values()), statuses
    job = (directory / "run" / "job").read_text(encoding="utf-8")
    assert f"node={slurm.cluster.nodes[0]}" in job and f"node={slurm.cluster.nodes[1]}" in job


def test_a_broken_image_fails_all_reduce_as_on_docker(slurm: SlurmHere) -> None:
    directory, _ = _run(slurm, BROKEN, "broken", "cross-container-2ranks")
    (result,) = summarize_jobs([directory]).scenarios
    statuses = {c.name: c.status for c in result.cases}
    assert statuses["all_reduce"] == FAILED, (statuses, result.logs[-3000:])


def test_a_job_stopped_at_its_deadline_leaves_nothing_queued_or_running(slurm: SlurmHere, tmp_path: Path) -> None:
    # A job that runs past its deadline by design (a 300 s collective_loop), never one that is merely slow: the default
    # scenario, about twice as fast since the collectives' answers are built once, finished inside the 8 s at load 1.4
    # (2026-12-06), and its exit_status passed, as it should.
    config = tmp_path / "long.yaml"
    config.write_text(
        "timeout_s: 600\nscenarios:\n  - {name: long-2ranks, topology: cross-container, world_size: 2,"
        " checks: [env, {name: collective_loop, args: {duration_s: 300}}]}\n"
    )
    directory, state = _run(slurm, IMAGE, "deadline", "long-2ranks", deadline_s=8.0, config_path=config)
    code, queue = slurm.commands.run(["squeue", "--noheader", "--format=%i %T"])
    assert code == 0 and queue.strip() == "", queue
    assert state.state.rstrip("+") not in ACTIVE, state
    for node in slurm.cluster.nodes:  # no container of the job left on a node
        code, listing = run_on(slurm.commands.engine, node, ["runc", "--root=/run/distval-runc", "list", "-q"])
        assert listing.strip() == "", listing
    (result,) = summarize_jobs([directory], states={directory: state}).scenarios
    assert {c.name: c.status for c in result.cases}[EXIT_STATUS_CASE] != PASSED


def _client_on_path(slurm: SlurmHere, directory: Path) -> str:
    """Slurm's client commands as this host's, each run in the controller (the test cluster's login node): a PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    for command in ("sbatch", "scontrol", "scancel", "squeue", "sinfo"):
        path = directory / command
        path.write_text(f'#!/bin/sh\nexec docker exec {slurm.cluster.controller} {command} "$@"\n', encoding="utf-8")
        path.chmod(0o755)
    return f"{directory}:{os.environ['PATH']}"


def test_run_target_slurm_submits_follows_and_collects(slurm: SlurmHere, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = _bundle(slurm, IMAGE)
    monkeypatch.setenv("PATH", _client_on_path(slurm, slurm.jobs / "bin"))
    report = slurm.jobs / "run.json"
    argv = ["run", str(ROOT / "configs" / "default.yaml"), "--target", "slurm", "--image", IMAGE, "--bundle", bundle]
    argv += ["--slurm-dir", f"{slurm.jobs}/run-jobs", "--filter", "cross-container-2ranks", "--json", str(report)]
    assert main(argv) == 0
    (scenario,) = json.loads(report.read_text(encoding="utf-8"))["scenarios"]
    assert scenario["properties"]["mode"] == "slurm" and scenario["status"] == "passed", scenario


def test_run_target_slurm_cancels_a_job_past_its_deadline(slurm: SlurmHere, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = _bundle(slurm, IMAGE)
    monkeypatch.setenv("PATH", _client_on_path(slurm, slurm.jobs / "bin"))
    # A job past its 10 s deadline by design (a 300 s collective_loop), never one that is merely slow: the default
    # scenario finished in 7.3 s at load 1.7 (2026-12-06) and rightly exited 0, so it cannot prove the cancel.
    config = slurm.jobs / "short.yaml"
    config.write_text(
        "timeout_s: 10\nscenarios:\n  - {name: long-2ranks, topology: cross-container, world_size: 2,"
        " checks: [env, {name: collective_loop, args: {duration_s: 300}}]}\n",
        encoding="utf-8",
    )
    argv = ["run", str(config), "--target", "slurm", "--image", IMAGE, "--bundle", bundle]
    argv += ["--slurm-dir", f"{slurm.jobs}/short-jobs", "--filter", "long-2ranks"]
    started = time.monotonic()
    assert main(argv) == 1
    assert time.monotonic() - started < 90
    code, queue = slurm.commands.run(["squeue", "--noheader"])
    assert code == 0 and queue.strip() == "", queue
    for node in slurm.cluster.nodes:
        _, listing = run_on(slurm.commands.engine, node, ["runc", "--root=/run/distval-runc", "list", "-q"])
        assert listing.strip() == "", listing


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_to_run_target_slurm_cancels_the_running_job(slurm: SlurmHere, sig: signal.Signals) -> None:
    bundle = _bundle(slurm, IMAGE)
    env = {**os.environ, "PATH": _client_on_path(slurm, slurm.jobs / "bin")}
    argv = [sys.executable, "-m", "distval", "run", str(ROOT / "configs" / "default.yaml"), "--target", "slurm"]
    argv += ["--image", IMAGE, "--bundle", bundle, "--slurm-dir", f"{slurm.jobs}/signal-{sig.name}"]
    argv += ["--filter", "cross-container-2ranks", "--quiet"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        started = time.monotonic()
        while slurm.commands.run(["squeue", "--noheader", "--states=RUNNING"])[1].strip() == "":
            assert process.poll() is None and time.monotonic() - started < 120, "the job never ran"
            time.sleep(0.5)
        time.sleep(3)  # its steps have started
        process.send_signal(sig)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + sig, output[-3000:]  # 143 for SIGTERM, 130 (EXIT_INTERRUPTED) for Ctrl-C
    code, queue = slurm.commands.run(["squeue", "--noheader"])
    assert code == 0 and queue.strip() == "", queue
    for node in slurm.cluster.nodes:
        _, listing = run_on(slurm.commands.engine, node, ["runc", "--root=/run/distval-runc", "list", "-q"])
        assert listing.strip() == "", listing


def test_a_node_taken_out_mid_run_is_the_scenarios_error_naming_the_node(slurm: SlurmHere) -> None:
    """Last: it takes a node out (scontrol update state=down, what an admin or a health check does to a failing node;
    a drain alone lets the job finish) and returns it."""
    bundle = _bundle(slurm, IMAGE)
    config = load_config(str(ROOT / "configs" / "default.yaml"))
    out = slurm.jobs / "down"
    (job,) = [
        j
        for j in export_config(config, "down", IMAGE, out, OCI, bundle, read_bundle_config(bundle))
        if j.plan.scenario.name == "cross-container-2ranks"
    ]
    directory = write_job(job, out)
    submitted = submit(slurm.commands, str(directory / "job.sbatch"))
    victim = slurm.cluster.nodes[1]
    try:
        started = time.monotonic()
        while not list((directory / "run" / "node-1").glob("rank-*.jsonl")):  # its rank has begun
            assert time.monotonic() - started < 180, "the job's rank on node 1 never wrote a record"
            time.sleep(0.5)
        code, output = slurm.commands.run(["scontrol", "update", f"nodename={victim}", "state=down", "reason=distval-test"])
        assert code == 0, output
        state = follow(slurm.commands, submitted.job_id, time.monotonic() + 120, threading.Event())
        if state.state.rstrip("+") in ACTIVE:
            state = cancel(slurm.commands, submitted.job_id) or state
        state = dataclasses.replace(state, lost_nodes=lost_nodes(slurm.commands, slurm.cluster.nodes))
    finally:
        slurm.commands.run(["scontrol", "update", f"nodename={victim}", "state=resume"])
    (result,) = summarize_jobs([directory], states={directory: state}).scenarios
    cases = {c.name: c for c in result.cases}
    assert cases[EXIT_STATUS_CASE].status == "error", (state, cases[EXIT_STATUS_CASE])
    assert f"Slurm took node {victim} out while the job ran" in cases[EXIT_STATUS_CASE].message
    assert "distval-test" in cases[EXIT_STATUS_CASE].message
    code, queue = slurm.commands.run(["squeue", "--noheader"])
    assert queue.strip() == "", queue
