"""Profile: where one rank of the suite spends its time, check by check, on a real image.

Runs a config's scenarios (default: configs/default.yaml) on one image as distval plans them (the same network,
containers, env and torch.distributed.run command lines, like bench_suite's floor), launched by hand with the docker
CLI, except that each rank runs ``/distval/profile_rank.py SPEC`` instead of ``-m distval_suite.main SPEC``: the very
same ``distval_suite.main.main`` under cProfile, the main thread whole (imports, the agreement between checks,
shutdown) and each check's thread apart (``distval_suite.main._run_one`` wrapped). Each rank also writes a timeline:
when its process started (from /proc), when the script started, when each check began and ended. After the
containers exit, their results directories are copied out and, per scenario and rank, printed:

- the timeline: container start -> worker process start (torchrun, rendezvous) -> script start (the interpreter) ->
  the suite's imports -> each check (inside it; then the wait for the other ranks) -> the end -> container exit;
- per check, the functions with the most cumulative time (``--top``), the suite's own and torch's.

cProfile slows pure-Python code (the suite's scans of files, torch's imports) by up to about 2x and C calls (the
collectives) hardly at all: read the shares, not the absolute seconds. The ``.prof`` files stay in ``--out`` for
``python -m pstats``.

Run from the repository root, with the project installed::

    python benchmarks/profile_suite.py --image distval-fixtures/torch:2.6-debian --out /tmp/prof-2.6
    python benchmarks/profile_suite.py --image distval-fixtures/torch:2.15-pypi -k cross-container --top 25
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import sys
import time
from datetime import datetime
from pathlib import Path

from common import (
    REPO_ROOT,
    BenchError,
    check_image,
    container_archive,
    create_args,
    docker,
    network_create_args,
    network_subnets,
    resolved_containers,
    start_order,
    sweep,
)

from distval.config import load_config
from distval.plan.model import ScenarioPlan
from distval.plan.specs import ContainerPlan
from distval.tarball import File, build_tar, read_entries, regular_files
from distval.targets.docker.plan import CONTAINER_ROOT, SPEC_PATH
from distval.targets.engines.planning import plan_run

DEFAULT_CONFIG = REPO_ROOT / "configs" / "default.yaml"
RUN_ID = "profile-{pid}"
SUITE_ENTRY = ("-m", "distval_suite.main", SPEC_PATH)
WRAPPER_PATH = f"{CONTAINER_ROOT}/profile_rank.py"
RESULTS_DIR = f"{CONTAINER_ROOT}/results"
# Runs inside the image under test (Python >= 3.9, torch >= 1.13): the standard library only, plain.
WRAPPER_SCRIPT = '''\
"""profile_suite: one rank of distval_suite.main under cProfile (main thread, and each check's thread apart)."""
import cProfile
import json
import os
import sys
import time

SCRIPT_STARTED = time.time()
sys.path.insert(0, "/distval")
from distval_suite import main as suite_main  # noqa: E402


def process_started():
    """This process's start (epoch seconds) from /proc: boot time + starttime ticks."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


spec_path = sys.argv[1]
with open(spec_path) as handle:
    spec = json.load(handle)
rank = os.environ["RANK"]
out = os.path.join(spec["results_dir"], "profile")
os.makedirs(out, exist_ok=True)
events = []
original = suite_main._run_one
original_thread = suite_main._run_in_thread
original_agree = suite_main._agree
# DISTVAL_PROFILE=0: the timeline only, no profiler (cProfile slows pure-Python code severalfold).
PROFILE = os.environ.get("DISTVAL_PROFILE", "1") != "0"
# One profiler at a time: from Python 3.12 on, cProfile uses sys.monitoring, which takes one profiler per process
# (a second enable() raises "Another profiling tool is already active"). So the startup (the suite's imports) has
# its own, ended when the first check begins, and each check its own.
startup = [cProfile.Profile()] if PROFILE else []


def in_thread(ctx, function, entry):
    # In the main thread, which enabled it (before 3.12 a profiler is per thread).
    if startup:
        startup[0].disable()
        startup.pop().dump_stats(os.path.join(out, "rank%s-startup.prof" % rank))
    return original_thread(ctx, function, entry)


def profiled(ctx, function, entry):
    profile = cProfile.Profile() if PROFILE else None
    events.append(["begin", entry["name"], time.time()])
    if profile is not None:
        profile.enable()
    try:
        return original(ctx, function, entry)
    finally:
        if profile is not None:
            profile.disable()
        events.append(["end", entry["name"], time.time()])
        if profile is not None:
            profile.dump_stats(os.path.join(out, "rank%s-check-%s.prof" % (rank, entry["name"])))


def agree(ctx, name, status, message):
    events.append(["agree", name, time.time()])
    try:
        return original_agree(ctx, name, status, message)
    finally:
        events.append(["agreed", name, time.time()])


suite_main._run_one = profiled
suite_main._run_in_thread = in_thread
suite_main._agree = agree
if startup:
    startup[0].enable()
code = suite_main.main(["distval_suite.main", spec_path])
events.append(["exit", "", time.time()])
with open(os.path.join(out, "rank%s-timeline.json" % rank), "w") as handle:
    json.dump({"process_started": process_started(), "script_started": SCRIPT_STARTED, "events": events}, handle)
sys.stdout.flush()
os._exit(code)
'''


def profile_argv(cp: ContainerPlan) -> list[str]:
    argv = list(cp.argv)
    if tuple(argv[-len(SUITE_ENTRY) :]) != SUITE_ENTRY:
        raise BenchError(f"{cp.name}: the plan's command line no longer ends with {' '.join(SUITE_ENTRY)}")
    return argv[: -len(SUITE_ENTRY)] + [WRAPPER_PATH, SPEC_PATH]


def epoch(docker_time: str) -> float:
    """An Engine timestamp (RFC 3339 with nanoseconds) as epoch seconds."""
    whole, _, rest = docker_time.partition(".")
    fraction = rest.rstrip("Z").split("+")[0].split("-")[0]
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (fraction or "0"))


def run_scenario(sp: ScenarioPlan, run_id: str, out: Path, timeline_only: bool = False) -> dict[str, dict[str, float]]:
    """Run one scenario with the wrapper; copy every container's results directory under ``out``; return each
    container's start and finish (epoch seconds)."""
    times: dict[str, dict[str, float]] = {}
    created: list[str] = []
    network_created = False
    try:
        docker(*network_create_args(sp.network, run_id))
        network_created = True
        containers = resolved_containers(sp, {"subnets": network_subnets(sp.network.name)})
        for cp in containers:
            args = create_args(sp, cp, run_id, profile_argv(cp))
            if timeline_only:
                args[1:1] = ["--env", "DISTVAL_PROFILE=0"]
            docker(*args)
            created.append(cp.name)
            archive = build_tar([*read_entries(container_archive(cp)), File(WRAPPER_PATH.strip("/"), WRAPPER_SCRIPT.encode())])
            docker("cp", "-", f"{cp.name}:/", stdin_data=archive)
        docker("start", *start_order(sp))
        codes = docker("wait", *created, timeout=sp.scenario.timeout_s + 60).decode().split()
        for cp, code in zip(containers, codes, strict=True):
            state = json.loads(docker("inspect", "--format", "{{json .State}}", cp.name))
            times[cp.name] = {"started": epoch(state["StartedAt"]), "finished": epoch(state["FinishedAt"])}
            for name, data in regular_files(docker("cp", f"{cp.name}:{RESULTS_DIR}", "-")).items():
                target = out / sp.scenario.name / cp.name.rsplit("-", 1)[-1] / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            if code != "0":
                print(f"WARNING: {cp.name} exited {code}:\n" + docker("logs", "--tail", "30", cp.name).decode("utf-8", "replace"))
    finally:
        if created:
            docker("rm", "-f", "-v", *created)
        if network_created:
            docker("network", "rm", sp.network.name)
    return times


def statuses(records_path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    if records_path.is_file():
        for line in records_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                found[record["case"]] = record["status"]
    return found


def top_functions(path: Path, top: int) -> list[str]:
    stats = pstats.Stats(str(path))
    rows = []
    for (filename, line, function), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.split("/site-packages/")[-1].split("/dist-packages/")[-1].replace("/distval/", "")
        rows.append((cumtime, tottime, calls, f"{where}:{line}({function})"))
    rows.sort(key=lambda r: -r[0])
    return [f"{cum:8.3f} {tot:8.3f} {calls:8d}  {name}" for cum, tot, calls, name in rows[:top]]


def report(sp: ScenarioPlan, times: dict[str, dict[str, float]], out: Path, top: int) -> None:
    print(f"\n=== scenario {sp.scenario.name} on {sp.image}")
    for container in sorted(p for p in (out / sp.scenario.name).iterdir() if p.is_dir()):
        name = next(n for n in times if n.endswith("-" + container.name))
        started, finished = times[name]["started"], times[name]["finished"]
        for timeline_path in sorted(container.glob("rank*-timeline.json")):
            rank = timeline_path.name.split("-")[0][len("rank") :]
            timeline = json.loads(timeline_path.read_text(encoding="utf-8"))
            status = statuses(container / f"rank-{rank}.jsonl")
            print(f"\n--- {container.name} rank {rank}: container {finished - started:.2f} s")
            print(f"  {timeline['process_started'] - started:7.2f}  worker process started (torchrun, rendezvous)")
            print(f"  {timeline['script_started'] - started:7.2f}  script started (the interpreter)")
            previous = timeline["script_started"]
            for kind, check, at in timeline["events"]:
                if kind == "begin":
                    what = "suite imports, then begin" if previous == timeline["script_started"] else "begin"
                    print(f"  {at - started:7.2f}  {what} {check} (+{at - previous:.2f})")
                elif kind == "end":
                    print(f"  {at - started:7.2f}  end {check}: {at - previous:.2f} s inside ({status.get(check, '?')})")
                elif kind == "agree":
                    print(f"  {at - started:7.2f}    recorded {check} (+{at - previous:.2f})")
                elif kind == "agreed":
                    print(f"  {at - started:7.2f}    the ranks agreed on {check} (+{at - previous:.2f})")
                else:
                    print(f"  {at - started:7.2f}  suite returned (shutdown +{at - previous:.2f})")
                previous = at
            print(f"  {finished - started:7.2f}  container exited (+{finished - previous:.2f})")
            checks = [e[1] for e in timeline["events"] if e[0] == "begin"]
            for check in checks:
                prof = container / f"rank{rank}-check-{check}.prof"
                if prof.is_file():
                    print(f"\n  [{check}] rank {rank}: cumulative, own, calls")
                    print("\n".join("    " + line for line in top_functions(prof, top)))
            startup_prof = container / f"rank{rank}-startup.prof"
            if startup_prof.is_file():
                print(f"\n  [startup: the suite's imports] rank {rank}: cumulative, own, calls")
                print("\n".join("    " + line for line in top_functions(startup_prof, top)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--image", required=True, help="the image under test")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="scenario file (default configs/default.yaml)")
    parser.add_argument("-k", dest="only", help="only the scenarios whose name contains this")
    parser.add_argument("--out", type=Path, help="keep the results and .prof files here (default: a new temp dir)")
    parser.add_argument("--top", type=int, default=15, help="functions listed per check (default 15)")
    parser.add_argument("--timeline-only", action="store_true", help="no profiler: the timeline alone, at the suite's own speed")
    args = parser.parse_args(argv)
    check_image(args.image)
    out: Path = args.out or Path(f"/tmp/profile-suite-{os.getpid()}")
    out.mkdir(parents=True, exist_ok=True)
    run_id = RUN_ID.format(pid=os.getpid())
    plan = plan_run(load_config(args.config.resolve()), run_id, args.image)
    print(f"load {'/'.join(f'{v:.1f}' for v in os.getloadavg())}; results in {out}", flush=True)
    try:
        for sp in plan.scenarios:
            if args.only and args.only not in sp.scenario.name:
                continue
            began = time.perf_counter()
            times = run_scenario(sp, run_id, out, args.timeline_only)
            (out / sp.scenario.name / "containers.json").write_text(json.dumps(times), encoding="utf-8")
            print(f"scenario {sp.scenario.name}: {time.perf_counter() - began:.2f} s", flush=True)
            report(sp, times, out, args.top)
    finally:
        sweep(run_id)
    print(f"\nload {'/'.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"profile_suite: {exc}", file=sys.stderr)
        sys.exit(1)
