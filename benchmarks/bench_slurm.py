"""Benchmark: what Slurm adds to time to verdict against the Docker target, for the same scenario and image.

A test cluster (distval/targets/slurm/cluster.py: a controller and two compute nodes as containers, Slurm's OCI
containers through runc) is started once; the image is made an OCI bundle once (timed: docker save, skopeo copy,
umoci unpack). Then, interleaved ``--repeat N`` times (Docker, Slurm, Docker, Slurm, ...):

A) Docker: ``distval run CONFIG --filter SCENARIO --image IMAGE --quiet`` as a subprocess: its wall time.
B) Slurm: the same scenario through ``SlurmTarget`` (what ``distval run --target slurm`` runs), Slurm's client run in
   the controller: its wall time, and its phases from clocks on this machine (the containers share its kernel's
   clock): export (the job directory written), submit -> start (sbatch returning to the batch script's first line),
   start -> steps (the batch script's start to the first rank's process start: hard-linking the rootfs, srun,
   slurmstepd, runc), the ranks (first rank start to the last step's end), and teardown (the steps' end to Slurm no
   longer listing the job).

Run from the repository root with the image and the slurm-node fixture in the Engine::

    python benchmarks/bench_slurm.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from common import bench_run_id

from distval.config import load_config
from distval.targets.docker.engine import Engine
from distval.targets.engines.planning import plan_scenario
from distval.targets.slurm.bundle_config import read_bundle_config
from distval.targets.slurm.cluster import Cluster, make_bundle, run_on, start_cluster, stop_cluster
from distval.targets.slurm.collect import outcome_of, read_job_facts
from distval.targets.slurm.export import JobDir, export_scenario, write_job
from distval.targets.slurm.integrations import OCI
from distval.targets.slurm.jobs import ACTIVE, follow, job_state, submit

ROOT = Path(__file__).resolve().parent.parent


class ControllerCommands:
    def __init__(self, engine: Engine, cluster: Cluster) -> None:
        self.engine, self.cluster = engine, cluster

    def run(self, argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str]:
        return run_on(self.engine, self.cluster.controller, argv)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def docker_run(config: str, scenario: str, image: str, index: int) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "distval", "run", config, "--filter", scenario, "--image", image, "--quiet"]
        # Its containers: distval-sb-<pid>-<i>-... (this process's pid: two benchmarks at once never share a name).
        + ["--run-id", bench_run_id("sb", index)],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the Docker run failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def first_rank_start(directory: Path) -> float | None:
    starts = []
    for path in directory.glob("run/node-*/rank-*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            starts.append(float(json.loads(line)["started_at"]))
            break
    return min(starts) if starts else None


def slurm_run(
    commands: ControllerCommands, config: str, scenario: str, image: str, bundle: str, shared: str, index: int
) -> dict[str, float]:
    started = time.monotonic()
    wall_start = time.time()
    (chosen,) = [s for s in load_config(config).scenarios if s.name == scenario]
    plan = plan_scenario(chosen, f"slurmbench{index}", image)
    root = Path(shared) / f"bench-{index}"
    job = export_scenario(plan, plan.slug, str(root / plan.slug), OCI, config, bundle, read_bundle_config(bundle))
    directory = write_job(job, root)
    exported = time.time()
    submitted = submit(commands, str(directory / "job.sbatch"))
    state = follow(commands, submitted.job_id, time.monotonic() + plan.deadline_s, threading.Event())
    gone = time.time()
    while (current := job_state(commands, submitted.job_id)) is not None and current.state.rstrip("+") in ACTIVE:
        time.sleep(0.05)
        gone = time.time()
    elapsed = time.monotonic() - started
    facts = read_job_facts(JobDir(str(directory)))
    text = (directory / "run" / "job").read_text(encoding="utf-8")
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    job_start, steps_end = float(values["started"]), float(values["ended"])
    rank_start = first_rank_start(directory) or job_start
    result = {c.name: c for c in outcome_of(directory, state).containers}
    if state.state != "COMPLETED" or any(c.exit_code != 0 for c in result.values()) or facts is None:
        raise SystemExit(f"the Slurm job did not complete: {state}")
    return {
        "wall_s": elapsed,
        "export_s": exported - wall_start,
        "submit_to_start_s": job_start - submitted.submitted_at,
        "start_to_ranks_s": rank_start - job_start,
        "ranks_s": steps_end - rank_start,
        "teardown_s": gone - steps_end,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--config", default=str(ROOT / "configs" / "default.yaml"))
    parser.add_argument("--scenario", default="cross-container-2ranks")
    parser.add_argument("--image", default="distval-fixtures/torch:2.6-debian")
    args = parser.parse_args(argv)
    shared = tempfile.mkdtemp(prefix="distval-slurm-bench-")
    os.chmod(shared, 0o755)
    engine = Engine("slurm-bench")
    cluster = start_cluster(shared, 2, print)
    try:
        commands = ControllerCommands(engine, cluster)
        bundle = f"{shared}/bundle"
        began = time.monotonic()
        make_bundle(engine, cluster, args.image, bundle)
        print(f"bundle preparation: {time.monotonic() - began:.1f} s (load {load()})", flush=True)
        docker: list[float] = []
        slurm: list[dict[str, float]] = []
        for index in range(args.repeat):
            docker.append(docker_run(args.config, args.scenario, args.image, index))
            print(f"rep {index + 1}: docker {docker[-1]:.2f} s (load {load()})", flush=True)
            slurm.append(slurm_run(commands, args.config, args.scenario, args.image, bundle, shared, index))
            print(f"rep {index + 1}: slurm " + ", ".join(f"{k} {v:.2f}" for k, v in slurm[-1].items()) + f" (load {load()})")
        print(f"median docker wall: {statistics.median(docker):.2f} s")
        for key in slurm[0]:
            print(f"median slurm {key}: {statistics.median(s[key] for s in slurm):.2f} s")
    finally:
        stop_cluster(cluster.cluster_id)
        shutil.rmtree(shared, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
