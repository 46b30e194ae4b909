"""Benchmark: the whole default suite (``distval run configs/default.yaml``) against the floor of its topologies.

What is measured, per image, with ``--repeat N`` repetitions interleaved (for each repetition, for each image:
distval and floor back to back; the order of the two alternates between repetitions so that neither always
runs on a warmer Engine):

A) distval: wall time of ``distval run CONFIG --image IMAGE --quiet --run-id bs-<pid>-<i>`` as a
   subprocess. This runs every scenario of the config (default: 3 ranks in one container, 2 ranks in two
   containers and 2 x 2 across two containers, the whole gloo suite). Its exit code must be 0.
B) the floor: the same plan (distval.config.load_config + distval.targets.engines.planning.plan_run with run id
   ``bf-<pid>-<i>`` and the same image, so network, container names, hostnames, env, labels, working dir
   and torch.distributed.run command line are exactly distval's), except that the trailing
   ``-m distval_suite.main /distval/spec.json`` of each command line is replaced by ``/distval/init_only.py``, a
   script that only initializes the process group (gloo, env://), destroys it and exits. It is launched by
   hand with the docker CLI, one scenario after the other like distval does: ``docker network create
   --internal``, ``docker network inspect`` (the subnets distval puts in the spec), ``docker create`` per
   container (only the plan's env is added, so the image's own env, such as USE_LIBUV, is kept), ``docker
   cp -`` of a tar holding the container's planned files (distval.targets.docker.runtime.files_archive) plus init_only.py,
   ``docker start`` (in distval's order), ``docker wait`` (every exit code must be 0), ``docker rm -f`` and
   ``docker network rm``. Everything created carries ``distval.managed=true`` and
   ``distval.run=bf-<pid>-<i>`` and is removed in ``finally``. The run ids carry this process's pid (base 36:
   common.bench_run_id), so two benchmarks at once never remove each other's containers: its own run ids are swept
   after, and before only the leftovers of an earlier benchmark whose process is gone (common.sweep_orphans).

So ``distval - floor`` is what the checks themselves, the harness and result collection cost on top of
starting the containers and forming the process group. Printed: per repetition times, the medians per image
and the ratio median(distval) / median(floor) per image (target <= 1.5 on every image), and where the
distval run's time went: each check's median duration from its JSON report, per scenario, with its share of the
scenario's time and a flag where it is over its time budget (the catalog's ``budget_s``, shown by ``distval
checks``), and the rest of the scenario (containers, torchrun, imports, teardown) as 'outside the checks'.

Before timing, every fixture image must be present and current (its recipe label equal to the recipe in
distval.images): otherwise ``distval run`` would rebuild it inside the timed run, so the benchmark stops
and says which ``distval fixtures build`` to run. Nothing is ever pulled.

Run from the repository root, with the project installed (``pip install -e .``)::

    python benchmarks/bench_suite.py                      # all three fixture images, 3 repetitions
    python benchmarks/bench_suite.py --repeat 5 --json bench-suite.json
    python benchmarks/bench_suite.py --repeat 1 --images distval-fixtures/torch:2.6-debian   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    REPO_ROOT,
    BenchError,
    bench_run_id,
    check_image,
    container_archive,
    create_args,
    distval_executable,
    docker,
    image_id,
    network_create_args,
    network_subnets,
    resolved_containers,
    start_order,
    sweep,
    sweep_orphans,
)

from distval.checks.catalog import CATALOG
from distval.config import Config, load_config
from distval.plan.model import ContainerPlan, RunPlan, ScenarioPlan
from distval.tarball import File, build_tar, read_entries
from distval.targets.docker.plan import CONTAINER_ROOT, SPEC_PATH
from distval.targets.engines.planning import plan_run

DEFAULT_CONFIG = REPO_ROOT / "configs" / "default.yaml"
DEFAULT_IMAGES = (
    "distval-fixtures/torch:1.13-debian",
    "distval-fixtures/torch:2.6-debian",
    "distval-fixtures/torch:2.15-pypi",
)
DEFAULT_REPEAT = 3
RATIO_TARGET = 1.5  # issue 13: the whole default config within 1.5x the floor on every fixture
# The kinds of this benchmark's run ids (common.bench_run_id): distval's runs and the floor's.
DISTVAL_KIND = "bs"
FLOOR_KIND = "bf"

# What the plan's launcher ends with, and what the floor puts there instead.
SUITE_ENTRY = ("-m", "distval_suite.main", SPEC_PATH)
INIT_ONLY_PATH = f"{CONTAINER_ROOT}/init_only.py"
# Runs inside the image under test (Python >= 3.9, torch >= 1.13): keep it plain.
INIT_ONLY_SCRIPT = '''\
"""bench_suite floor: form the default process group (gloo, env://), tear it down, exit 0."""
import json
import os
from datetime import timedelta

import torch.distributed as dist

with open("/distval/spec.json") as handle:
    spec = json.load(handle)
dist.init_process_group(backend="gloo", init_method="env://", timeout=timedelta(seconds=spec["collective_timeout_s"]))
rank, world = dist.get_rank(), dist.get_world_size()
if world != int(os.environ["WORLD_SIZE"]):
    raise SystemExit("world size %d, expected %s" % (world, os.environ["WORLD_SIZE"]))
dist.destroy_process_group()
print("init_only: rank %d of %d: process group formed and destroyed" % (rank, world), flush=True)
'''


@dataclass
class DistvalSample:
    run_id: str
    wall_s: float
    # scenario -> check -> seconds, from the run's JSON report (a check with parts: the sum of its parts).
    check_s: dict[str, dict[str, float]] = field(default_factory=dict)
    scenario_s: dict[str, float] = field(default_factory=dict)


@dataclass
class FloorSample:
    run_id: str
    wall_s: float
    scenario_s: dict[str, float] = field(default_factory=dict)
    floor_retries: int = 0
    failed_tries_s: float = 0.0  # the failed tries' time, left out of wall_s


@dataclass
class ImageResult:
    image: str
    distval: list[DistvalSample] = field(default_factory=list)
    floor: list[FloorSample] = field(default_factory=list)

    def distval_median(self) -> float:
        return statistics.median(s.wall_s for s in self.distval)

    def floor_median(self) -> float:
        return statistics.median(s.wall_s for s in self.floor)

    def ratio(self) -> float:
        return self.distval_median() / self.floor_median()

    def scenario_medians(self) -> dict[str, float]:
        names = list(self.floor[0].scenario_s) if self.floor else []
        return {name: statistics.median(s.scenario_s[name] for s in self.floor) for name in names}

    def check_medians(self) -> dict[str, dict[str, float]]:
        """Per scenario, each check's median duration over the distval runs."""
        first = self.distval[0].check_s if self.distval else {}
        return {
            scenario: {check: statistics.median(s.check_s[scenario].get(check, 0.0) for s in self.distval) for check in checks}
            for scenario, checks in first.items()
        }

    def distval_scenario_median(self, scenario: str) -> float:
        return statistics.median(s.scenario_s.get(scenario, 0.0) for s in self.distval)


# -- the floor's containers -------------------------------------------------------------------------


def floor_argv(cp: ContainerPlan) -> list[str]:
    """The plan's torch.distributed.run command line with the suite entry point swapped for init_only.py."""
    argv = list(cp.argv)
    tail = tuple(argv[-len(SUITE_ENTRY) :])
    if tail != SUITE_ENTRY:
        raise BenchError(f"{cp.name}: the plan's command line no longer ends with {' '.join(SUITE_ENTRY)}: {' '.join(argv)}")
    return argv[: -len(SUITE_ENTRY)] + [INIT_ONLY_PATH]


def floor_archive(cp: ContainerPlan) -> bytes:
    """The tar distval copies into this container (suite, spec, results dir) with init_only.py added."""
    return build_tar([*read_entries(container_archive(cp)), File(INIT_ONLY_PATH.strip("/"), INIT_ONLY_SCRIPT.encode())])


# -- A) distval -------------------------------------------------------------------------------------


def check_breakdown(report: dict[str, Any]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per scenario, each check's duration from a distval JSON report (parts such as collectives.broadcast
    summed into their check), and each scenario's duration."""
    checks: dict[str, dict[str, float]] = {}
    scenarios: dict[str, float] = {}
    for scenario in report["scenarios"]:
        scenarios[scenario["name"]] = float(scenario["duration_s"] or 0.0)
        per_check = checks.setdefault(scenario["name"], {})
        for case in scenario["cases"]:
            name = case["name"].split(".")[0]
            # process_group is the group's formation inside the first check that needed it (launch): not added twice.
            if name in ("exit_status", "process_group"):
                continue
            per_check[name] = per_check.get(name, 0.0) + float(case.get("duration_s") or 0.0)
    return checks, scenarios


def run_distval(distval: str, config: Path, image: str, run_id: str, timeout_s: float) -> DistvalSample:
    # One scenario at a time, as the floor runs: the comparison is the suite's cost, not --jobs.
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        report_path = Path(tmp) / "report.json"
        argv = [distval, "run", str(config), "--image", image, "--quiet", "--jobs", "1", "--run-id", run_id]
        argv += ["--json", str(report_path)]
        started = time.perf_counter()
        try:
            proc = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{' '.join(argv)}: still running after {timeout_s:g} s") from None
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise BenchError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout.decode('utf-8', 'replace')}")
        checks, scenarios = check_breakdown(json.loads(report_path.read_text(encoding="utf-8")))
    return DistvalSample(run_id=run_id, wall_s=wall, check_s=checks, scenario_s=scenarios)


# -- B) the floor -----------------------------------------------------------------------------------


def run_floor_scenario(sp: ScenarioPlan, run_id: str) -> None:
    network_created = False
    created: list[str] = []
    try:
        docker(*network_create_args(sp.network, run_id))
        network_created = True
        containers = resolved_containers(sp, {"subnets": network_subnets(sp.network.name)})
        for cp in containers:
            docker(*create_args(sp, cp, run_id, floor_argv(cp)))
            created.append(cp.name)
            docker("cp", "-", f"{cp.name}:/", stdin_data=floor_archive(cp))
        names = [cp.name for cp in containers]
        docker("start", *start_order(sp))
        exit_codes = docker("wait", *names, timeout=sp.scenario.timeout_s + 60).decode().split()
        problems = [f"{name}: exit code {code}" for name, code in zip(names, exit_codes, strict=True) if code != "0"]
        if problems:
            logs = "\n".join(f"--- {name}\n" + docker("logs", "--tail", "40", name).decode("utf-8", "replace") for name in names)
            raise BenchError(f"floor of scenario {sp.scenario.name} on {sp.image} failed:\n" + "\n".join(problems) + "\n" + logs)
    finally:
        if created:
            docker("rm", "-f", "-v", *created)
        if network_created:
            docker("network", "rm", sp.network.name)


def run_floor(plan: RunPlan) -> FloorSample:
    sample = FloorSample(run_id=plan.run_id, wall_s=0.0)
    started = time.perf_counter()
    try:
        for sp in plan.scenarios:
            scenario_started = time.perf_counter()
            try:
                run_floor_scenario(sp, plan.run_id)
            except BenchError as failure:
                # A floor that failed is not a measurement: it is said, and that scenario's floor runs once more from
                # the start (its time is the second try's). Seen once at load 5 (2026-12-06): torchrun's 3 ranks in
                # one container exited 1 with nothing in the container's log.
                print(f"  floor retried once: {failure}", flush=True)
                sample.floor_retries += 1
                sweep(plan.run_id)
                sample.failed_tries_s += time.perf_counter() - scenario_started
                scenario_started = time.perf_counter()
                run_floor_scenario(sp, plan.run_id)
            sample.scenario_s[sp.scenario.name] = time.perf_counter() - scenario_started
    finally:
        sample.wall_s = time.perf_counter() - started - sample.failed_tries_s
        sweep(plan.run_id)  # nothing should be left; belt and braces if a scenario failed half-way
    return sample


# -- main -------------------------------------------------------------------------------------------


def load_text() -> str:
    """The machine's load average (1, 5, 15 min): every figure here is wall time on a possibly shared machine."""
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help=f"repetitions per image (default {DEFAULT_REPEAT})")
    parser.add_argument(
        "--images",
        nargs="+",
        default=list(DEFAULT_IMAGES),
        metavar="IMAGE",
        help="images under test (default: the three fixtures)",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="scenario file (default configs/default.yaml)")
    parser.add_argument("--distval", help="distval executable (default: the one next to this Python, else on PATH)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if len(set(args.images)) != len(args.images):
        parser.error("--images: each image once")
    return args


def distval_timeout(config: Config) -> float:
    """Generous bound on one distval run: every scenario's deadline plus setup and teardown."""
    return sum(s.timeout_s + 120.0 for s in config.scenarios)


@dataclass(frozen=True)
class CheckShare:
    name: str
    seconds: float
    share: float  # of the scenario's time (distval's median)
    budget_s: float | None  # CheckInfo.budget_s

    @property
    def over(self) -> bool:
        return self.budget_s is not None and self.seconds > self.budget_s

    def text(self) -> str:
        over = f" OVER its {self.budget_s:g} s budget" if self.over else ""
        return f"{self.name} {self.seconds:.2f} ({self.share:.0%}){over}"


def check_shares(checks: dict[str, float], scenario_s: float) -> list[CheckShare]:
    """Each check's median seconds, its share of the scenario's time and its budget (the catalog's), longest first."""
    return [
        CheckShare(name, seconds, seconds / scenario_s if scenario_s > 0 else 0.0, getattr(CATALOG.get(name), "budget_s", None))
        for name, seconds in sorted(checks.items(), key=lambda kv: -kv[1])
    ]


def print_summary(results: list[ImageResult]) -> None:
    print("\nmedians per image:")
    for r in results:
        scenarios = ", ".join(f"{name} {v:.2f} s" for name, v in r.scenario_medians().items())
        verdict = f"  (target <= {RATIO_TARGET:.1f}: {'met' if r.ratio() <= RATIO_TARGET else 'MISSED'})"
        print(f"  {r.image}")
        print(f"    distval {r.distval_median():7.2f} s   floor {r.floor_median():6.2f} s ({scenarios})")
        print(f"    ratio distval/floor (medians): {r.ratio():.2f}{verdict}")
        for scenario, checks in r.check_medians().items():
            inside = sum(checks.values())
            scenario_s = r.distval_scenario_median(scenario)
            shares = check_shares(checks, scenario_s)
            parts = ", ".join(share.text() for share in shares)
            outside = scenario_s - inside
            print(f"    {scenario} ({scenario_s:.2f} s): checks {inside:.2f} s ({parts}); outside the checks {outside:.2f} s")
            over = [share.name for share in shares if share.over]
            if over:
                print(f"    {scenario}: over budget (distval checks): {', '.join(over)}")


def json_report(config_path: Path, distval: str, repeat: int, results: list[ImageResult]) -> dict[str, Any]:
    return {
        "config": str(config_path),
        "distval": distval,
        "repeat": repeat,
        "images": {
            r.image: {
                "distval_wall_s": [s.wall_s for s in r.distval],
                "distval_run_ids": [s.run_id for s in r.distval],
                "distval_median_s": r.distval_median(),
                "floor_wall_s": [s.wall_s for s in r.floor],
                "floor_run_ids": [s.run_id for s in r.floor],
                "floor_scenario_s": [s.scenario_s for s in r.floor],
                "floor_median_s": r.floor_median(),
                "floor_scenario_median_s": r.scenario_medians(),
                "distval_check_s": [s.check_s for s in r.distval],
                "distval_check_median_s": r.check_medians(),
                "distval_scenario_median_s": {scenario: r.distval_scenario_median(scenario) for scenario in r.check_medians()},
                "over_budget": {
                    scenario: [share.name for share in check_shares(checks, r.distval_scenario_median(scenario)) if share.over]
                    for scenario, checks in r.check_medians().items()
                },
                "ratio": r.ratio(),
                "ratio_target": RATIO_TARGET,
            }
            for r in results
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config_path: Path = args.config.resolve()
    config = load_config(config_path)
    distval = distval_executable(args.distval)
    images: list[str] = args.images
    count = args.repeat * len(images)
    run_ids = [bench_run_id(kind, i) for kind in (DISTVAL_KIND, FLOOR_KIND) for i in range(1, count + 1)]
    ids = {image: check_image(image) for image in images}
    plan0 = plan_run(config, bench_run_id(FLOOR_KIND, 1), images[0])
    for sp in plan0.scenarios:
        for cp in sp.containers:
            floor_argv(cp)  # fails before anything runs if the plan's command line changed shape
    print(f"distval: {distval}")
    print(f"config: {config_path} ({', '.join(sp.suite_name for sp in plan0.scenarios)})")
    print(f"docker server {docker('version', '--format', '{{.Server.Version}}').decode().strip()}")
    print(f"images: {', '.join(images)}")
    print(f"repetitions: {args.repeat} per image, interleaved distval / floor (order alternating per repetition)\n", flush=True)

    left_before = sweep_orphans((DISTVAL_KIND, FLOOR_KIND))
    if left_before:
        print(f"removed {left_before} container(s)/network(s) left by an earlier run of this benchmark", flush=True)

    results = [ImageResult(image) for image in images]
    timeout_s = distval_timeout(config)
    i = 0
    try:
        for rep in range(1, args.repeat + 1):
            for result in results:
                i += 1
                image = result.image
                plan = plan_run(config, bench_run_id(FLOOR_KIND, i), image)
                if rep % 2:
                    d = run_distval(distval, config_path, image, bench_run_id(DISTVAL_KIND, i), timeout_s)
                    f = run_floor(plan)
                else:
                    f = run_floor(plan)
                    d = run_distval(distval, config_path, image, bench_run_id(DISTVAL_KIND, i), timeout_s)
                if image_id(image) != ids[image]:
                    raise BenchError(
                        f"image {image} changed during the benchmark (rebuilt by someone?): the numbers are not comparable"
                    )
                result.distval.append(d)
                result.floor.append(f)
                per_scenario = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in f.scenario_s.items())
                print(
                    f"rep {rep} {image}: distval {d.wall_s:6.2f} s   floor {f.wall_s:6.2f} s ({per_scenario})   "
                    f"ratio {d.wall_s / f.wall_s:.2f}   load {load_text()}",
                    flush=True,
                )
                # Each repetition's own breakdown too: on a loaded machine a benchmark may be stopped before the medians.
                for scenario, checks in d.check_s.items():
                    shares = check_shares(checks, d.scenario_s.get(scenario, 0.0))
                    print(
                        f"    {scenario} {d.scenario_s.get(scenario, 0.0):.2f} s: {', '.join(s.text() for s in shares)}",
                        flush=True,
                    )
    finally:
        left_after = sum(sweep(run_id) for run_id in run_ids)
        if left_after:
            print(f"WARNING: removed {left_after} leftover container(s)/network(s) of this benchmark", file=sys.stderr)

    print_summary(results)
    if args.json:
        args.json.write_text(
            json.dumps(json_report(config_path, distval, args.repeat, results), indent=2) + "\n", encoding="utf-8"
        )
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_suite: {exc}", file=sys.stderr)
        sys.exit(1)
