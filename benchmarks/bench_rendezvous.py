"""Benchmark: time to verdict of the rendezvous matrix (configs/rendezvous.yaml), per layout and as a whole.

What is measured, in one run:

1. Time to verdict per layout, for the static-torchrun scenarios ``torchrun.static.n2.p1`` (2x1),
   ``torchrun.static.n4.p1`` (4x1), ``torchrun.static.n8.p1`` (8x1) and ``torchrun.static.n4.p2`` (4x2), with
   ``--repeat N`` repetitions interleaved (per repetition, per layout: distval and by-hand back to back, the
   order of the two alternating between repetitions so that neither always runs on a warmer Engine):

   A) distval: wall time of ``distval run CONFIG --filter <scenario> --quiet --run-id <unique>`` as a
      subprocess; its exit code must be 0.
   B) by hand: the same plan (distval.config.load_config + distval.targets.engines.planning.plan_run with this sample's run id, so
      network, container names, hostnames, env, labels, working dir and command lines are exactly distval's)
      launched with the docker CLI: ``docker network create --internal`` (the plan's network name and labels),
      ``docker network inspect`` (the subnets, the one placeholder these static scenarios hold: they address
      node 0 by name, so there is no node 0 address to learn; the benchmark checks that), ``docker create`` per
      container, ``docker cp -`` of the container's planned files (distval.targets.docker.runtime.files_archive), ``docker
      start`` of all in distval's order, ``docker wait`` of all (every exit code must be 0), ``docker cp
      <container>:/distval/results -`` (every rank must have written records, all ``passed``, for env, launch,
      all_reduce and store), then ``docker rm -f``
      and ``docker network rm``.

   Printed: every repetition, the medians, the ratio median(distval) / median(by hand) per layout, the by-hand
   phases (setup, start+wait, copy out, teardown), and how the time grows with the number of containers
   (seconds per added container 2x1 -> 4x1 -> 8x1, a least-squares slope over the three, and 4x1 -> 4x2).

2. The whole matrix (29 scenarios): wall time of ``distval run CONFIG --quiet --jobs 1``, of the same with no
   ``--jobs`` (the default: one per core, at most one per 4 GiB, at most 8; ``distval run --help`` says which
   here), and of ``--jobs 3``; one run each (``--matrix-repeat``), each exit code must be 0 (a failed run is
   reported, the benchmark goes on, and exits 1 at the end). ``--json`` is added to each of these runs, into a
   temporary file, for the per-scenario statuses and durations. Printed: the ratios of each against
   ``--jobs 1`` (target for the default: <= 0.6), the sum of the scenario durations and the longest scenario,
   and two floors taken from the uncontended ``--jobs 1`` run: max(sum of durations / jobs, longest scenario),
   and its CPU-seconds divided by the host's CPUs.

For every measurement the host's CPU use is read from /proc/stat (busy fraction of all CPUs, CPU-seconds):
it says whether a run was bound by the CPUs, which is what limits --jobs on a small host. It is only
meaningful where the Docker Engine runs on this host (a local socket, as here), and it includes the
benchmark's own docker CLI calls.

Run ids are ``rz<4 hex>-...`` (random per benchmark run); everything created carries ``distval.managed=true`` and
``distval.run=<that run id>``, is removed in ``finally``, and the benchmark checks at the end that nothing
labelled with any of its run ids remains.

Before each measurement the benchmark waits (up to ``--wait-s``, default 300 s) until no other distval container
is running (``docker ps --filter label=distval.managed=true``), and says so; a ``docker events`` listener records
any foreign distval container that starts during a measurement, and that sample is flagged.

Every image of the config must be in the Engine and, for a fixture, current (distval would otherwise rebuild it
inside a timed run). Nothing is pulled.

Run from the repository root, with the project installed (``pip install -e .``)::

    python benchmarks/bench_rendezvous.py                                  # 2 repetitions + the 3 matrix runs
    python benchmarks/bench_rendezvous.py --repeat 3 --json bench-rendezvous.json
    python benchmarks/bench_rendezvous.py --repeat 1 --skip-matrix         # the per-layout part only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common import (
    PASSED,
    REPO_ROOT,
    BenchError,
    Phases,
    check_image,
    container_archive,
    create_args,
    distval_executable,
    docker,
    network_create_args,
    network_subnets,
    read_records,
    resolved_containers,
    start_order,
    verify,
)

from distval.config import Config, load_config
from distval.labels import LABEL_MANAGED, LABEL_RUN
from distval.plan.model import ScenarioPlan
from distval.plan.placeholders import placeholders_in
from distval.plan.specs import ContainerOptions
from distval.session.scenarios import default_jobs
from distval.targets.engines.planning import plan_run

DEFAULT_CONFIG = REPO_ROOT / "configs" / "rendezvous.yaml"
LAYOUT_SCENARIOS = ("torchrun.static.n2.p1", "torchrun.static.n4.p1", "torchrun.static.n8.p1", "torchrun.static.n4.p2")
EXPECTED_CHECKS = ("env", "launch", "all_reduce", "store")
DEFAULT_REPEAT = 2
DEFAULT_WAIT_S = 300.0
EXTRA_JOBS = 3
DEFAULT_JOBS_TARGET = 0.6  # wall(default --jobs) / wall(--jobs 1)
MATRIX_TIMEOUT_S = 3600.0
POLL_S = 5.0


# -- docker CLI -------------------------------------------------------------------------------------


def managed(kind: str, *, running_only: bool = False) -> list[tuple[str, str, str]]:
    """(id, name, run label) of every distval-managed container (kind "container") or network ("network")."""
    fmt = f'{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.Label "{LABEL_RUN}"}}}}'
    if kind == "container":
        args = ["ps", *([] if running_only else ["-a"]), "--filter", f"label={LABEL_MANAGED}=true", "--format", fmt]
    else:
        args = ["network", "ls", "--filter", f"label={LABEL_MANAGED}=true", "--format", fmt.replace(".Names", ".Name")]
    rows = []
    for line in docker(*args).decode().splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def sweep_prefix(prefix: str) -> tuple[int, int]:
    """Remove every container and network whose distval.run label starts with this benchmark's prefix."""
    containers = [cid for cid, _name, run in managed("container") if run.startswith(prefix)]
    if containers:
        docker("rm", "-f", "-v", *containers)
    networks = [nid for nid, _name, run in managed("network") if run.startswith(prefix)]
    if networks:
        docker("network", "rm", *networks)
    return len(containers), len(networks)


# -- other distval runs on this Engine --------------------------------------------------------------


class ForeignWatch:
    """Notices distval containers that are not this benchmark's: waits them out, and logs the ones that start later."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.starts: list[tuple[float, str, str]] = []  # (monotonic time, container name, run label)
        self.waits: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    def foreign_running(self) -> list[str]:
        return sorted(
            f"{name} (run {run or '?'})"
            for _cid, name, run in managed("container", running_only=True)
            if not run.startswith(self.prefix)
        )

    def wait_quiet(self, before: str, budget_s: float) -> float:
        """Wait until no foreign distval container runs (BenchError after budget_s); the seconds waited."""
        started = time.monotonic()
        seen: set[str] = set()
        while True:
            running = self.foreign_running()
            if not running:
                break
            if not seen:
                print(
                    f"  waiting for {len(running)} other distval container(s) to finish before {before}: "
                    + ", ".join(running[:6])
                    + (" ..." if len(running) > 6 else ""),
                    flush=True,
                )
            seen.update(running)
            if time.monotonic() - started >= budget_s:
                raise BenchError(
                    f"other distval containers still running after {budget_s:g} s ({', '.join(running[:6])}): "
                    "timings would be contended; try again later"
                )
            time.sleep(POLL_S)
        waited = time.monotonic() - started
        if seen:
            print(f"  ... they finished after {waited:.0f} s", flush=True)
            self.waits.append({"before": before, "waited_s": round(waited, 1), "containers": sorted(seen)})
        return waited

    def start(self) -> None:
        argv = ["docker", "events", "--filter", "type=container", "--filter", "event=start"]
        argv += ["--filter", f"label={LABEL_MANAGED}=true", "--format", "{{json .}}"]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._thread = threading.Thread(target=self._read, name="bench-docker-events", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                attributes = json.loads(line)["Actor"]["Attributes"]
            except (ValueError, KeyError, TypeError):
                continue
            run = str(attributes.get(LABEL_RUN, ""))
            if not run.startswith(self.prefix):
                with self._lock:
                    self.starts.append((time.monotonic(), str(attributes.get("name", "?")), run))

    def started_between(self, begin: float, end: float) -> list[str]:
        with self._lock:
            return sorted({f"{name} (run {run or '?'})" for at, name, run in self.starts if begin <= at <= end})

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


# -- host CPU -------------------------------------------------------------------------------------


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat, or None where there is none (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - idle, total


@dataclass
class CpuUse:
    """Host CPU use over a measurement: busy fraction of all CPUs, and CPU-seconds (meaningful where the Engine is local)."""

    busy: float
    cpu_s: float


def cpu_since(before: tuple[int, int] | None) -> CpuUse | None:
    after = cpu_ticks()
    if before is None or after is None or after[1] <= before[1]:
        return None
    busy, total = after[0] - before[0], after[1] - before[1]
    hz = os.sysconf("SC_CLK_TCK")
    return CpuUse(busy=busy / total, cpu_s=busy / hz)


# -- samples ----------------------------------------------------------------------------------------


@dataclass
class Sample:
    run_id: str
    wall_s: float
    foreign: list[str] = field(default_factory=list)  # foreign distval containers that started meanwhile
    phase_s: dict[str, float] = field(default_factory=dict)  # by hand only
    cpu: CpuUse | None = None


@dataclass
class Layout:
    scenario: str
    nodes: int
    nproc_per_node: int
    distval: list[Sample] = field(default_factory=list)
    hand: list[Sample] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.nodes}x{self.nproc_per_node}"

    @property
    def ranks(self) -> int:
        return self.nodes * self.nproc_per_node

    def distval_median(self) -> float:
        return statistics.median(s.wall_s for s in self.distval)

    def hand_median(self) -> float:
        return statistics.median(s.wall_s for s in self.hand)

    def ratio(self) -> float:
        return self.distval_median() / self.hand_median()

    def phase_medians(self) -> dict[str, float]:
        names = list(self.hand[0].phase_s) if self.hand else []
        return {p: statistics.median(s.phase_s.get(p, 0.0) for s in self.hand) for p in names}


@dataclass
class MatrixRun:
    label: str
    jobs: int
    argv: list[str]
    run_id: str
    wall_s: float = 0.0
    exit_code: int | None = None
    foreign: list[str] = field(default_factory=list)
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> status, duration_s
    output_tail: str = ""
    cpu: CpuUse | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def scenario_sum_s(self) -> float:
        return sum(float(s["duration_s"]) for s in self.scenarios.values())

    def longest(self) -> tuple[str, float]:
        if not self.scenarios:
            return "-", 0.0
        name = max(self.scenarios, key=lambda n: float(self.scenarios[n]["duration_s"]))
        return name, float(self.scenarios[name]["duration_s"])


# -- A) distval -------------------------------------------------------------------------------------


def run_subprocess(argv: list[str], timeout_s: float) -> tuple[float, int, str]:
    """(wall seconds, exit code, combined output) of one distval invocation."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(argv)}: still running after {timeout_s:g} s") from None
    return time.perf_counter() - started, proc.returncode, proc.stdout.decode("utf-8", "replace")


def run_distval_layout(distval: str, config: Path, scenario: str, run_id: str, timeout_s: float) -> float:
    argv = [distval, "run", str(config), "--filter", scenario, "--quiet", "--run-id", run_id]
    wall, code, output = run_subprocess(argv, timeout_s)
    if code != 0:
        raise BenchError(f"{' '.join(argv)} exited {code}:\n{output[-6000:]}")
    return wall


# -- B) by hand -------------------------------------------------------------------------------------


def check_by_hand_possible(sp: ScenarioPlan) -> None:
    """BenchError if the scenario needs what the by-hand path does not do (node 0's IP, extra networks, options)."""
    problems = []
    if sp.needs_node0_ip:
        problems.append("it addresses node 0 by IP (master_addr: ip)")
    if len(sp.networks) != 1:
        problems.append(f"it has {len(sp.networks)} networks")
    learned_elsewhere = placeholders_in(sp.containers) - {"subnets"}
    if learned_elsewhere:
        problems.append(f"its containers hold placeholders other than subnets: {', '.join(sorted(learned_elsewhere))}")
    if any(cp.options != ContainerOptions() for cp in sp.containers):
        problems.append("it sets container options")
    if tuple(c.name for c in sp.scenario.checks) != EXPECTED_CHECKS:
        problems.append(f"its checks are {[c.name for c in sp.scenario.checks]}, not {list(EXPECTED_CHECKS)}")
    if problems:
        raise BenchError(f"scenario {sp.scenario.name} cannot be launched by hand here: " + "; ".join(problems))


def run_by_hand(sp: ScenarioPlan, run_id: str) -> dict[str, float]:
    """Launch the scenario's containers with the docker CLI; the seconds per phase. BenchError unless every rank passed."""
    phase_s: dict[str, float] = {}
    phases = Phases(phase_s)
    network = sp.network
    network_created = False
    created: list[str] = []
    names = [cp.name for cp in sp.containers]
    try:
        phases.timed("setup", *network_create_args(network, run_id))
        network_created = True
        containers = resolved_containers(sp, {"subnets": network_subnets(network.name, phases, "setup")})
        for cp in containers:
            phases.timed("setup", *create_args(sp, cp, run_id))
            created.append(cp.name)
            phases.timed("setup", "cp", "-", f"{cp.name}:/", stdin_data=container_archive(cp))
        phases.timed("start+wait", "start", *start_order(sp))
        exit_codes = phases.timed("start+wait", "wait", *names, timeout=sp.scenario.timeout_s + 60).decode().split()
        problems = [f"{name}: exit code {code}" for name, code in zip(names, exit_codes, strict=True) if code != "0"]
        for cp in containers:
            files = read_records(phases.timed("copy out", "cp", f"{cp.name}:{cp.results_dir}", "-"))
            # Only passed: env, launch, all_reduce and store have no version gate, so a skip means a broken image.
            problems += verify(cp, files, EXPECTED_CHECKS, accepted=(PASSED,))
        if problems:
            logs = "\n".join(f"--- {name}\n" + docker("logs", "--tail", "30", name).decode("utf-8", "replace") for name in names)
            raise BenchError(f"by-hand {sp.scenario.name} ({run_id}) did not pass:\n" + "\n".join(problems) + "\n" + logs)
    finally:
        if created:
            phases.timed("teardown", "rm", "-f", "-v", *created)
        if network_created:
            phases.timed("teardown", "network", "rm", network.name)
    return phase_s


# -- 2) the whole matrix ----------------------------------------------------------------------------


def parse_help_default_jobs(distval: str) -> int | None:
    """The default --jobs that ``distval run --help`` states ("... here 2)"), or None."""
    proc = subprocess.run([distval, "run", "--help"], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    text = " ".join(proc.stdout.split())
    match = re.search(r"--jobs K .*?here (\d+)\)", text)
    return int(match.group(1)) if match else None


def run_matrix(run: MatrixRun, timeout_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-rendezvous-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [*run.argv, "--json", str(report)]
        run.wall_s, run.exit_code, output = run_subprocess(argv, timeout_s)
        run.output_tail = output[-4000:]
        if report.is_file():
            data = json.loads(report.read_text(encoding="utf-8"))
            for s in data.get("scenarios", []):
                run.scenarios[str(s["name"])] = {"status": s["status"], "duration_s": float(s["duration_s"])}


# -- main -------------------------------------------------------------------------------------------


def slope(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return k, my - k * mx


def growth(layouts: dict[str, Layout]) -> dict[str, dict[str, float]]:
    """Seconds per added container (1 process each) and per added process per node, for distval and by hand."""
    out: dict[str, dict[str, float]] = {}
    by_nodes = {lay.nodes: lay for lay in layouts.values() if lay.nproc_per_node == 1}
    four_by_two = next((lay for lay in layouts.values() if lay.nodes == 4 and lay.nproc_per_node == 2), None)
    for side in ("distval", "hand"):

        def med(lay: Layout, side: str = side) -> float:
            return lay.distval_median() if side == "distval" else lay.hand_median()

        g: dict[str, float] = {}
        if {2, 4} <= by_nodes.keys():
            g["per_container_2x1_to_4x1_s"] = (med(by_nodes[4]) - med(by_nodes[2])) / 2
        if {4, 8} <= by_nodes.keys():
            g["per_container_4x1_to_8x1_s"] = (med(by_nodes[8]) - med(by_nodes[4])) / 4
        if {2, 8} <= by_nodes.keys():
            g["per_container_2x1_to_8x1_s"] = (med(by_nodes[8]) - med(by_nodes[2])) / 6
        if len(by_nodes) >= 2:
            xs = sorted(by_nodes)
            g["fit_slope_s_per_container"], g["fit_intercept_s"] = slope(xs, [med(by_nodes[x]) for x in xs])
        if four_by_two is not None and 4 in by_nodes:
            g["4x1_to_4x2_s"] = med(four_by_two) - med(by_nodes[4])
        out[side] = g
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help=f"repetitions per layout (default {DEFAULT_REPEAT})")
    parser.add_argument("--matrix-repeat", type=int, default=1, help="runs of the whole matrix per --jobs value (default 1)")
    parser.add_argument("--skip-matrix", action="store_true", help="only the per-layout part")
    parser.add_argument("--skip-layouts", action="store_true", help="only the whole-matrix part")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="scenario file (default configs/rendezvous.yaml)")
    parser.add_argument("--distval", help="distval executable (default: the one next to this Python, else on PATH)")
    parser.add_argument(
        "--wait-s", type=float, default=DEFAULT_WAIT_S, help="how long to wait for other distval runs (default 300)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.matrix_repeat < 1:
        parser.error("--repeat and --matrix-repeat must be at least 1")
    if args.skip_matrix and args.skip_layouts:
        parser.error("--skip-matrix and --skip-layouts: nothing left to measure")
    return args


def matrix_timeout(config: Config) -> float:
    return min(MATRIX_TIMEOUT_S, sum(s.timeout_s + 60 for s in config.scenarios))


def print_layouts(layouts: dict[str, Layout], growth_s: dict[str, dict[str, float]]) -> None:
    print("\n== time to verdict per layout (medians) ==")
    print(f"{'scenario':24} {'layout':>6} {'ranks':>5} {'distval s':>10} {'hand s':>8} {'ratio':>6}   by-hand phases (median)")
    for lay in layouts.values():
        phases = ", ".join(f"{p} {v:.2f}" for p, v in lay.phase_medians().items())
        print(
            f"{lay.scenario:24} {lay.label:>6} {lay.ranks:>5} {lay.distval_median():10.2f} {lay.hand_median():8.2f} "
            f"{lay.ratio():6.3f}   {phases}"
        )
    print("growth with the number of containers (from medians; one process per container unless noted):")
    for side, g in growth_s.items():
        print(f"  {side:7}: " + ", ".join(f"{k} {v:+.2f}" for k, v in g.items()))


def fmt_cpu(cpu: CpuUse | None) -> str:
    return "?" if cpu is None else f"{cpu.busy:.0%} ({cpu.cpu_s:.0f} CPU-s)"


def print_matrix(runs: list[MatrixRun], default_j: int) -> dict[str, float]:
    print("\n== the whole matrix ==")
    base = next((r for r in runs if r.jobs == 1 and r.ok), None)
    ratios: dict[str, float] = {}
    for r in runs:
        counts: dict[str, int] = {}
        for s in r.scenarios.values():
            counts[str(s["status"])] = counts.get(str(s["status"]), 0) + 1
        longest_name, longest_s = r.longest()
        ratio = r.wall_s / base.wall_s if base is not None and r.ok else None
        if ratio is not None:
            ratios[r.label] = ratio
        flag = f"  [other distval containers started meanwhile: {', '.join(r.foreign[:4])}]" if r.foreign else ""
        print(
            f"{r.label:18} jobs {r.jobs}: {r.wall_s:7.1f} s  exit {r.exit_code}  "
            f"ratio vs --jobs 1: {'-' if ratio is None else f'{ratio:.3f}'}  host CPU busy {fmt_cpu(r.cpu)}\n"
            f"{'':20}scenarios {dict(sorted(counts.items()))}, sum of their durations {r.scenario_sum_s():.1f} s "
            f"(x{r.scenario_sum_s() / r.wall_s:.2f} the wall time), longest {longest_name} {longest_s:.1f} s{flag}"
        )
    if base is not None:
        # Bounds from the uncontended --jobs 1 run: scenario-level parallelism alone, and the host's CPUs.
        sum1, (_n, longest1) = base.scenario_sum_s(), base.longest()
        cpus = os.cpu_count() or 1
        for r in runs:
            if r.jobs > 1:
                bound = max(sum1 / r.jobs, longest1)
                print(f"  jobs {r.jobs}: scenario-level floor max(sum(--jobs 1 durations)/{r.jobs}, longest) = {bound:.1f} s")
        if base.cpu is not None:
            print(
                f"  CPU floor: --jobs 1 used {base.cpu.cpu_s:.0f} CPU-seconds on this host; / {cpus} CPUs = "
                f"{base.cpu.cpu_s / cpus:.1f} s = {base.cpu.cpu_s / cpus / base.wall_s:.2f}x of --jobs 1, whatever --jobs"
            )
    default_label = f"default ({default_j})"
    if default_label in ratios:
        verdict = "met" if ratios[default_label] <= DEFAULT_JOBS_TARGET else "MISSED"
        print(
            f"default --jobs {default_j} vs --jobs 1: {ratios[default_label]:.3f}  (target <= {DEFAULT_JOBS_TARGET}: {verdict})"
        )
    return ratios


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config_path: Path = args.config.resolve()
    config = load_config(config_path)
    distval = distval_executable(args.distval)
    prefix = f"rz{secrets.token_hex(2)}"
    help_jobs = parse_help_default_jobs(distval)
    default_j = default_jobs()  # the same function distval asks
    if help_jobs is not None and help_jobs != default_j:
        raise BenchError(
            f"`distval run --help` says the default --jobs is {help_jobs}, "
            f"distval.session.scenarios.default_jobs() says {default_j}"
        )

    plan0 = plan_run(config, f"{prefix}-plan")
    by_name = {sp.scenario.name: sp for sp in plan0.scenarios}
    missing = [name for name in LAYOUT_SCENARIOS if name not in by_name]
    if missing:
        raise BenchError(f"{config_path} has no scenario(s) {', '.join(missing)}")
    for name in LAYOUT_SCENARIOS:
        check_by_hand_possible(by_name[name])
    images = sorted({sp.image for sp in plan0.scenarios})
    image_ids = {image: check_image(image) for image in images}

    print(f"distval: {distval}  (default --jobs here: {default_j}; `distval run --help` says {help_jobs})")
    print(f"config: {config_path} ({len(plan0.scenarios)} scenarios)")
    print(f"image(s): {', '.join(images)}; docker server {docker('version', '--format', '{{.Server.Version}}').decode().strip()}")
    print(f"host: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB")
    print(
        f"run ids: {prefix}-*; repetitions per layout: {args.repeat}, matrix runs per --jobs: {args.matrix_repeat}\n", flush=True
    )

    watch = ForeignWatch(prefix)
    layouts = {
        name: Layout(name, by_name[name].scenario.nodes, by_name[name].scenario.nproc_per_node) for name in LAYOUT_SCENARIOS
    }
    matrix_runs: list[MatrixRun] = []
    leftovers_removed = (0, 0)
    watch.wait_quiet("the benchmark", args.wait_s)
    watch.start()
    try:
        if not args.skip_layouts:
            print("== per layout ==", flush=True)
            for rep in range(1, args.repeat + 1):
                for name, lay in layouts.items():
                    sp0 = by_name[name]
                    d_id, h_id = f"{prefix}-d{rep}-{lay.label}", f"{prefix}-h{rep}-{lay.label}"
                    order = ("distval", "hand") if rep % 2 else ("hand", "distval")
                    for side in order:
                        watch.wait_quiet(f"{side} {name} rep {rep}", args.wait_s)
                        begin, ticks = time.monotonic(), cpu_ticks()
                        if side == "distval":
                            wall = run_distval_layout(distval, config_path, name, d_id, sp0.scenario.timeout_s + 300)
                            foreign = watch.started_between(begin, time.monotonic())
                            lay.distval.append(Sample(d_id, wall, foreign, cpu=cpu_since(ticks)))
                        else:
                            sp = next(s for s in plan_run(config, h_id).scenarios if s.scenario.name == name)
                            started = time.perf_counter()
                            phase_s = run_by_hand(sp, h_id)
                            wall = time.perf_counter() - started
                            foreign = watch.started_between(begin, time.monotonic())
                            lay.hand.append(Sample(h_id, wall, foreign, phase_s, cpu_since(ticks)))
                    d, h = lay.distval[-1], lay.hand[-1]
                    foreign = sorted(set(d.foreign) | set(h.foreign))
                    cpu = f"   host CPU busy distval {fmt_cpu(d.cpu)}, hand {fmt_cpu(h.cpu)}"
                    flag = f"  [other distval containers started meanwhile: {', '.join(foreign[:4])}]" if foreign else ""
                    phases = ", ".join(f"{p} {v:.2f}" for p, v in h.phase_s.items())
                    print(
                        f"rep {rep} {name:22} {lay.label}: distval {d.wall_s:6.2f} s   hand {h.wall_s:6.2f} s "
                        f"({phases})   ratio {d.wall_s / h.wall_s:.3f}   [{' then '.join(order)}]{cpu}{flag}",
                        flush=True,
                    )
        if not args.skip_matrix:
            print("\n== the whole matrix: one run per --jobs value ==", flush=True)
            variants = [("--jobs 1", 1, ["--jobs", "1"]), (f"default ({default_j})", default_j, [])]
            variants.append((f"--jobs {EXTRA_JOBS}", EXTRA_JOBS, ["--jobs", str(EXTRA_JOBS)]))
            timeout_s = matrix_timeout(config)
            for rep in range(1, args.matrix_repeat + 1):
                for index, (label, jobs, extra) in enumerate(variants, start=1):
                    run_id = f"{prefix}-m{rep}-{index}"
                    run = MatrixRun(
                        label, jobs, [distval, "run", str(config_path), "--quiet", *extra, "--run-id", run_id], run_id
                    )
                    watch.wait_quiet(f"matrix {label}", args.wait_s)
                    begin, ticks = time.monotonic(), cpu_ticks()
                    run_matrix(run, timeout_s)
                    run.cpu = cpu_since(ticks)
                    run.foreign = watch.started_between(begin, time.monotonic())
                    matrix_runs.append(run)
                    bad = {n: s["status"] for n, s in run.scenarios.items() if s["status"] != PASSED}
                    print(
                        f"matrix {label:14} (run {run_id}): {run.wall_s:7.1f} s, exit {run.exit_code}, "
                        f"host CPU busy {fmt_cpu(run.cpu)}"
                        + (f", not passed: {bad}" if bad else "")
                        + (f"\n{run.output_tail}" if not run.ok else ""),
                        flush=True,
                    )
    finally:
        watch.stop()
        leftovers_removed = sweep_prefix(prefix)
        if any(leftovers_removed):
            print(
                f"WARNING: removed {leftovers_removed[0]} container(s), {leftovers_removed[1]} network(s) left by this benchmark",
                file=sys.stderr,
            )

    remaining = [r for r in managed("container") + managed("network") if r[2].startswith(prefix)]
    if remaining:
        raise BenchError(f"still labelled with this benchmark's run ids after cleanup: {remaining}")
    for image, wanted in image_ids.items():
        if check_image(image) != wanted:
            raise BenchError(f"image {image} changed during the benchmark (rebuilt by someone?): the numbers are not comparable")

    growth_s: dict[str, dict[str, float]] = {}
    if not args.skip_layouts:
        growth_s = growth(layouts)
        print_layouts(layouts, growth_s)
    ratios: dict[str, float] = {}
    if matrix_runs:
        ratios = print_matrix(matrix_runs, default_j)
    if watch.waits:
        print("\nwaited for other distval runs: " + "; ".join(f"{w['waited_s']} s before {w['before']}" for w in watch.waits))
    print(f"\nleft behind by this benchmark (run ids {prefix}-*): nothing")

    if args.json:
        report: dict[str, Any] = {
            "config": str(config_path),
            "images": images,
            "distval": distval,
            "run_id_prefix": prefix,
            "host": {"cpus": os.cpu_count(), "default_jobs": default_j, "help_default_jobs": help_jobs},
            "repeat": args.repeat,
            "layouts": {
                name: {
                    "layout": lay.label,
                    "containers": lay.nodes,
                    "ranks": lay.ranks,
                    "distval_s": [s.wall_s for s in lay.distval],
                    "distval_run_ids": [s.run_id for s in lay.distval],
                    "hand_s": [s.wall_s for s in lay.hand],
                    "hand_run_ids": [s.run_id for s in lay.hand],
                    "hand_phase_s": [s.phase_s for s in lay.hand],
                    "distval_cpu": [asdict(s.cpu) if s.cpu else None for s in lay.distval],
                    "hand_cpu": [asdict(s.cpu) if s.cpu else None for s in lay.hand],
                    "distval_median_s": lay.distval_median(),
                    "hand_median_s": lay.hand_median(),
                    "hand_phase_median_s": lay.phase_medians(),
                    "ratio": lay.ratio(),
                    "foreign_started": sorted({f for s in lay.distval + lay.hand for f in s.foreign}),
                }
                for name, lay in layouts.items()
                if lay.distval and lay.hand
            },
            "growth": growth_s,
            "matrix": {
                "runs": [
                    {
                        "label": r.label,
                        "jobs": r.jobs,
                        "run_id": r.run_id,
                        "argv": r.argv,
                        "wall_s": r.wall_s,
                        "exit_code": r.exit_code,
                        "scenario_sum_s": r.scenario_sum_s(),
                        "longest": r.longest(),
                        "scenarios": r.scenarios,
                        "foreign_started": r.foreign,
                        "cpu": asdict(r.cpu) if r.cpu else None,
                    }
                    for r in matrix_runs
                ],
                "ratio_vs_jobs1": ratios,
                "default_target": DEFAULT_JOBS_TARGET,
            },
            "waits_for_other_runs": watch.waits,
            "leftovers_removed_in_finally": {"containers": leftovers_removed[0], "networks": leftovers_removed[1]},
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    failed = [r for r in matrix_runs if not r.ok]
    if failed:
        print(
            f"bench_rendezvous: matrix run(s) did not exit 0: {', '.join(f'{r.label} ({r.exit_code})' for r in failed)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_rendezvous: {exc}", file=sys.stderr)
        sys.exit(1)
