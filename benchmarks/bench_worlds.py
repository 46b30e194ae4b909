"""Benchmark: time to verdict against the world size, in one container and across containers.

What is measured: wall time of ``distval run <one-scenario config> --image IMAGE --quiet --jobs 1 --json ...`` as a
subprocess, for every world size of ``--worlds`` (default 2 3 4 8 16) in each topology of ``--topologies``
(in-container: every rank in one container; cross-container: one container per rank), ``--repeat N`` times,
interleaved (per repetition every (topology, world size) once, the order reversed every other repetition so that
no size always runs on a warmer Engine or a quieter minute). Every run's exit code must be 0 (a run that fails is
reported and the benchmark exits 1 at the end: a failed run's time is no time to verdict).

The checks are ``--checks`` (default ``env launch all_reduce store``): the default config's whole list does not fit
every world size (``collectives``' known answers are exact up to 8 ranks in bfloat16, and its rooted operations run
from every root, so its cost grows as W**2), so the curve is taken on the checks whose work is one collective or
one store round per rank, and the rest of a scenario (containers, torchrun, ``import torch`` on every rank, the
process group, teardown) is what grows with W. A check list with ``collectives`` is refused above 8 ranks.

The machine's load average (1/5/15 min) is recorded before and after every run: every figure is wall time on a
shared machine. Printed: every run (seconds, the scenario's duration from the JSON report, the load), the median per
(topology, W), and the least-squares seconds per added rank per topology (the curve's slope), with the ratio of
each size's median to W=2's. ``--json PATH`` writes every number.

Run from the repository root, with the project installed (``pip install -e .``)::

    python benchmarks/bench_worlds.py --repeat 1
    python benchmarks/bench_worlds.py --worlds 2 3 4 --topologies in-container --json worlds.json
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
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common import REPO_ROOT, BenchError, bench_run_id, check_image, distval_executable, sweep, sweep_orphans

DEFAULT_IMAGE = "distval-fixtures/torch:2.6-debian"
# This benchmark's run ids (common.bench_run_id: they carry its pid, so two at once never remove each other's).
KIND = "bw"
DEFAULT_WORLDS = (2, 3, 4, 8, 16)
TOPOLOGIES = ("in-container", "cross-container")
DEFAULT_CHECKS = ("env", "launch", "all_reduce", "store")
COLLECTIVES_MAX_WORLD = 8
# A run's deadline in the generated config, and the harness's bound on the subprocess beyond it.
SCENARIO_TIMEOUT_S = 900
SUBPROCESS_SLACK_S = 180


@dataclass
class Sample:
    topology: str
    world: int
    repetition: int
    wall_s: float
    scenario_s: float | None
    exit_code: int
    load_before: str
    load_after: str


def load_text() -> str:
    """The machine's load average (1, 5, 15 min)."""
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def config_text(topology: str, world: int, checks: list[str]) -> str:
    listed = ", ".join(checks)
    return (
        f"timeout_s: {SCENARIO_TIMEOUT_S}\ncheck_timeout_s: 600\ncollective_timeout_s: 120\nscenarios:\n"
        f"  - {{name: w{world}, topology: {topology}, world_size: {world}, checks: [{listed}]}}\n"
    )


def run_one(distval: str, image: str, topology: str, world: int, checks: list[str], repetition: int) -> Sample:
    run_id = bench_run_id(KIND, f"{repetition}{topology[0]}{world}")
    with tempfile.TemporaryDirectory(prefix="bench-worlds-") as tmp:
        config = Path(tmp) / "worlds.yaml"
        config.write_text(config_text(topology, world, checks), encoding="utf-8")
        report = Path(tmp) / "report.json"
        argv = [distval, "run", str(config), "--image", image, "--quiet", "--jobs", "1", "--run-id", run_id]
        argv += ["--json", str(report)]
        before = load_text()
        started = time.perf_counter()
        try:
            limit = SCENARIO_TIMEOUT_S + SUBPROCESS_SLACK_S
            proc = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=limit)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{topology} W={world}: distval did not finish within its deadline") from None
        finally:
            sweep(run_id)
        wall = time.perf_counter() - started
        scenario_s = None
        if report.exists():
            scenarios = json.loads(report.read_text(encoding="utf-8"))["scenarios"]
            scenario_s = float(scenarios[0]["duration_s"] or 0.0) if scenarios else None
        if proc.returncode != 0:
            print(proc.stdout.decode("utf-8", "replace")[-3000:], file=sys.stderr)
            if report.exists():  # the evidence of a failed run outlives the temporary directory
                kept = Path(tempfile.gettempdir()) / f"bench-worlds-{run_id}-failed.json"
                shutil.copyfile(report, kept)
                print(f"{topology} W={world}: the failed run's report is kept in {kept}", file=sys.stderr)
    return Sample(topology, world, repetition, wall, scenario_s, proc.returncode, before, load_text())


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares seconds per added rank."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=1, help="repetitions per (topology, world size) (default 1)")
    parser.add_argument("--worlds", type=int, nargs="+", default=list(DEFAULT_WORLDS), metavar="W", help="world sizes")
    parser.add_argument("--topologies", nargs="+", choices=TOPOLOGIES, default=list(TOPOLOGIES), help="topologies")
    parser.add_argument("--checks", nargs="+", default=list(DEFAULT_CHECKS), help="the checks of every scenario")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"image under test (default {DEFAULT_IMAGE})")
    parser.add_argument("--distval", help="distval executable (default: the one next to this Python, else on PATH)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if any(w < 2 or w > 64 for w in args.worlds):
        parser.error("--worlds: each between 2 and 64")
    if any(c.startswith("collectives") for c in args.checks) and max(args.worlds) > COLLECTIVES_MAX_WORLD:
        parser.error(f"--checks: collectives' known answers are exact up to {COLLECTIVES_MAX_WORLD} ranks")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    distval = distval_executable(args.distval)
    try:
        check_image(args.image)
    except BenchError as exc:
        print(f"bench_worlds: {exc}", file=sys.stderr)
        return 2
    # Both topologies at each size before the next size: a run cut short still has both at the small sizes.
    order = [(t, w) for w in sorted(set(args.worlds)) for t in args.topologies]
    print(f"image {args.image}; checks {', '.join(args.checks)}; {args.repeat} repetition(s), interleaved; cpus {os.cpu_count()}")
    left_before = sweep_orphans((KIND,))  # a killed earlier benchmark's: never a live one's
    if left_before:
        print(f"removed {left_before} container(s)/network(s) left by an earlier run of this benchmark", flush=True)
    samples: list[Sample] = []
    for repetition in range(1, args.repeat + 1):
        for topology, world in order if repetition % 2 else list(reversed(order)):
            sample = run_one(distval, args.image, topology, world, args.checks, repetition)
            samples.append(sample)
            scenario = f"{sample.scenario_s:.1f}" if sample.scenario_s is not None else "-"
            print(
                f"rep {repetition} {topology:15} W={world:<3} {sample.wall_s:7.1f} s (scenario {scenario} s) "
                f"exit {sample.exit_code}  load {sample.load_before} -> {sample.load_after}",
                flush=True,
            )
    print("\nmedian wall time per topology and world size (ratio to the smallest world):")
    summary: dict[str, Any] = {}
    for topology in args.topologies:
        medians = {
            w: statistics.median(s.wall_s for s in samples if s.topology == topology and s.world == w and s.exit_code == 0)
            for w in sorted(set(args.worlds))
            if any(s.topology == topology and s.world == w and s.exit_code == 0 for s in samples)
        }
        if not medians:
            continue
        base = medians[min(medians)]
        print(f"  {topology}: " + ", ".join(f"W={w} {m:.1f} s (x{m / base:.2f})" for w, m in medians.items()))
        if len(medians) >= 2:
            per_rank = slope(list(medians.items()))
            print(f"    least squares: {per_rank:.2f} s per added rank")
            summary[topology] = {"medians": medians, "seconds_per_rank": per_rank}
    if args.json:
        numbers = {"samples": [asdict(s) for s in samples], "summary": summary}
        args.json.write_text(json.dumps(numbers, indent=2), encoding="utf-8")
    failed = [s for s in samples if s.exit_code != 0]
    for s in failed:
        print(f"FAILED: {s.topology} W={s.world} repetition {s.repetition} exited {s.exit_code}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
