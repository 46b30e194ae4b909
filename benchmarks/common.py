"""What the benchmark scripts share: launching a plan's containers by hand with the docker CLI (the
baseline distval is compared with), reading and verifying what the ranks wrote, checking the images,
and finding the distval executable.

Imported as ``common`` because each script runs as ``python benchmarks/<script>.py``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from distval.cli.values import RUN_ID_PATTERN
from distval.images import FIXTURES, RECIPE_LABEL, recipe_hash
from distval.labels import LABEL_MANAGED, LABEL_RUN
from distval.plan.model import ScenarioPlan, StartContainer
from distval.plan.placeholders import placeholders_in, resolve
from distval.plan.specs import ContainerOptions, ContainerPlan, NetworkPlan
from distval.tarball import regular_files
from distval.targets.docker.runtime import files_archive

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKER_CALL_TIMEOUT_S = 120.0
PASSED = "passed"
SKIPPED = "skipped"


class BenchError(RuntimeError):
    """A benchmark step failed: the numbers would be meaningless, so the benchmark stops."""


def docker(*args: str, stdin_data: bytes | None = None, timeout: float = DOCKER_CALL_TIMEOUT_S) -> bytes:
    """Run one docker CLI command; its stdout, or BenchError with its stderr."""
    try:
        proc = subprocess.run(["docker", *args], input=stdin_data, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"docker {' '.join(args)}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise BenchError(f"docker {' '.join(args)} exited {proc.returncode}: {message}")
    return proc.stdout


class Phases:
    """Adds the wall time of each docker call to its phase ("create", "cp in", ...) in ``into``."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into

    def timed(self, phase: str, *args: str, stdin_data: bytes | None = None, timeout: float = DOCKER_CALL_TIMEOUT_S) -> bytes:
        started = time.perf_counter()
        try:
            return docker(*args, stdin_data=stdin_data, timeout=timeout)
        finally:
            self.into[phase] = self.into.get(phase, 0.0) + time.perf_counter() - started


def sweep(run_id: str) -> int:
    """Remove every container and network labelled with this (benchmark-owned) run id; how many there were."""
    selector = f"label={LABEL_RUN}={run_id}"
    managed = f"label={LABEL_MANAGED}=true"
    removed = 0
    containers = docker("ps", "-aq", "--filter", managed, "--filter", selector).decode().split()
    if containers:
        docker("rm", "-f", "-v", *containers)
        removed += len(containers)
    networks = docker("network", "ls", "-q", "--filter", managed, "--filter", selector).decode().split()
    if networks:
        docker("network", "rm", *networks)
        removed += len(networks)
    return removed


# A benchmark's run ids name the process that owns them: "<kind>-<pid in base 36>-<n>" (distval's run ids are at most 16
# characters: distval/cli/values.py RUN_ID_PATTERN). Two benchmarks at once never share a run id, so neither removes
# the other's containers; a sweep of a killed benchmark's leftovers (``sweep_orphans``) removes only runs whose owner is
# gone. Owners are told by pid on this machine: a benchmark in another pid namespace (another container, another host on
# the same Engine) looks gone, so run those with another kind.
_DIGITS36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(number: int) -> str:
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = _DIGITS36[digit] + text
        if not number:
            return text


def bench_run_id(kind: str, n: int | str, pid: int | None = None) -> str:
    """This process's (or ``pid``'s) run id number ``n`` of a benchmark's ``kind`` ("bs": bench_suite's distval runs, ...);
    BenchError where it is no run id distval takes."""
    run_id = f"{kind}-{_base36(os.getpid() if pid is None else pid)}-{n}"
    if "-" in kind or not RUN_ID_PATTERN.fullmatch(run_id):
        raise BenchError(f"run id {run_id!r}: expected a kind without '-' and at most 16 lowercase letters, digits or '-'")
    return run_id


def run_owner(run_id: str, kinds: Collection[str]) -> int | None:
    """The pid that owns a run id of one of these kinds (``bench_run_id``); None for any other run id."""
    parts = run_id.split("-", 2)
    if len(parts) != 3 or parts[0] not in kinds or not parts[1] or not parts[2]:
        return None
    if any(c not in _DIGITS36 for c in parts[1]):
        return None
    return int(parts[1], 36)


def owner_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine (one of another user's counts: it may be a benchmark)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def managed_runs() -> list[tuple[str, str, str]]:
    """("container" or "network", its id, its distval.run label) of everything distval-managed on the Engine."""
    found = []
    fmt = f'{{{{.ID}}}}\t{{{{.Label "{LABEL_RUN}"}}}}'
    managed = f"label={LABEL_MANAGED}=true"
    for kind, args in (("container", ("ps", "-a")), ("network", ("network", "ls"))):
        for line in docker(*args, "--filter", managed, "--format", fmt).decode().splitlines():
            ident, _, run = line.partition("\t")
            if ident:
                found.append((kind, ident, run))
    return found


def orphans(
    runs: Sequence[tuple[str, str, str]], kinds: Collection[str], alive: Callable[[int], bool] = owner_alive
) -> list[tuple[str, str, str]]:
    """Of ``runs`` (``managed_runs``), those of a benchmark of these kinds whose owner is gone: never this process's,
    never a live one's (a concurrent benchmark's), never a run id of another form."""
    found = []
    for kind, ident, run in runs:
        owner = run_owner(run, kinds)
        if owner is not None and owner != os.getpid() and not alive(owner):
            found.append((kind, ident, run))
    return found


def sweep_orphans(kinds: Collection[str]) -> int:
    """Remove the containers and networks a killed earlier benchmark of these kinds left (``orphans``); how many."""
    found = orphans(managed_runs(), kinds)
    containers = [ident for kind, ident, _ in found if kind == "container"]
    networks = [ident for kind, ident, _ in found if kind == "network"]
    if containers:
        docker("rm", "-f", "-v", *containers)
    if networks:
        docker("network", "rm", *networks)
    return len(found)


def label_args(labels: Sequence[tuple[str, str]], run_id: str) -> list[str]:
    merged = dict(labels)
    # The plan already carries both; make sure regardless, so that nothing can leak unlabelled.
    merged[LABEL_MANAGED] = "true"
    merged[LABEL_RUN] = run_id
    args: list[str] = []
    for key, value in merged.items():
        args += ["--label", f"{key}={value}"]
    return args


def distval_executable(explicit: str | None) -> str:
    """The distval console script next to this interpreter (no pyenv shim in between), else the one on PATH."""
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "distval"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("distval")
    if found is None:
        raise BenchError("no distval executable: install the project (pip install -e .) or pass --distval")
    return found


def network_create_args(network: NetworkPlan, run_id: str) -> list[str]:
    """``docker network create`` arguments equal to the plan's network (NetworkPlan.create_kwargs)."""
    args = ["network", "create", "--driver", "bridge", *(["--internal"] if network.internal else [])]
    if network.ipv6_subnet is not None:
        args += ["--ipv6", "--subnet", network.ipv6_subnet]
    return args + [*label_args(network.labels, run_id), network.name]


def create_args(sp: ScenarioPlan, cp: ContainerPlan, run_id: str, argv: Sequence[str] | None = None) -> list[str]:
    """``docker create`` arguments equal to what distval.targets.docker.engine.Engine.create_container asks of the Engine
    (``cp`` resolved: see ``resolved_containers``), running ``argv`` instead of the plan's command line where
    given (bench_suite's floor).

    Only the plan's env is passed: Docker merges it over the image's env, which is kept (USE_LIBUV etc.).
    """
    if cp.options != ContainerOptions() or len(cp.networks) > 1:
        # Resources, GPUs and extra networks have no by-hand equivalent here: refuse rather than time
        # something other than what distval runs.
        raise BenchError(f"{cp.name}: container options or extra networks are not launched by hand here")
    command = list(cp.argv if argv is None else argv)
    args = ["create", "--name", cp.name, "--hostname", cp.hostname, "--workdir", cp.working_dir]
    args += ["--network", cp.networks[0] if cp.networks else sp.network.name]
    for key, value in cp.env:
        args += ["--env", f"{key}={value}"]
    args += label_args(cp.labels, run_id)
    args += ["--entrypoint", command[0], cp.image or sp.image, *command[1:]]
    return args


def network_subnets(network: str, phases: Phases | None = None, phase: str = "network inspect") -> str:
    """The fact ``subnets`` as distval learns it (its LearnSubnets step): the network's subnets, comma-separated.
    Timed as ``phase`` when ``phases`` is given."""
    args = ("network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}},{{end}}", network)
    out = phases.timed(phase, *args) if phases is not None else docker(*args)
    return out.decode().strip().strip(",")


def resolved_containers(sp: ScenarioPlan, facts: dict[str, str]) -> list[ContainerPlan]:
    """The scenario's containers with their placeholders filled in from ``facts``; BenchError if one needs a
    fact the by-hand launch does not learn (node 0's address: master_addr: ip)."""
    unknown = placeholders_in(sp.containers) - set(facts)
    if unknown:
        raise BenchError(f"scenario {sp.scenario.name} needs {', '.join(sorted(unknown))}: not launched by hand here")
    return [resolve(cp, facts) for cp in sp.containers]


def start_order(sp: ScenarioPlan) -> list[str]:
    """The containers in the order distval starts them (node 0 last, so early ranks must wait for it)."""
    return [step.container for step in sp.steps if isinstance(step, StartContainer)]


def container_archive(cp: ContainerPlan) -> bytes:
    """The tar distval copies into this (resolved) container: its plan's files, the suite included."""
    return files_archive(cp.files)


def read_records(tar_bytes: bytes) -> dict[str, list[dict[str, Any]]]:
    """Every result file (``rank-<rank>.jsonl``) in a ``docker cp <container>:<results dir> -`` tar, by base
    name, with its records in the order the rank wrote them."""
    return {
        name: [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        for name, data in regular_files(tar_bytes).items()
        if name.endswith(".jsonl")
    }


def verify(
    cp: ContainerPlan,
    files: dict[str, list[dict[str, Any]]],
    checks: Sequence[str],
    accepted: Collection[str] = (PASSED, SKIPPED),
) -> list[str]:
    """Problems with one container's results: each of its ranks wrote its file, with records for every check
    and every record's status accepted (a skip with its reason is a verdict too, unless the caller says not).

    Every record counts, not only the last: a check reporting several results (collectives) fails on any.
    """
    problems = []
    for rank in cp.ranks:
        records = files.get(f"rank-{rank}.jsonl")
        if records is None:
            problems.append(f"{cp.name}: rank {rank} wrote no rank-{rank}.jsonl")
            continue
        for check in checks:
            statuses = [str(r["status"]) for r in records if int(r["rank"]) == rank and r["check"] == check]
            if not statuses:
                problems.append(f"{cp.name}: rank {rank} check {check}: no record")
            elif any(status not in accepted for status in statuses):
                problems.append(f"{cp.name}: rank {rank} check {check}: {', '.join(statuses)}")
    return problems


def image_id(image: str) -> str:
    return docker("image", "inspect", "--format", "{{.Id}}", image).decode().strip()


def image_recipe(image: str) -> str | None:
    """The recipe hash a fixture image was built from (its label ``distval.fixture.recipe``, distval/images/build.py);
    None for an image without one. Two builds of one recipe are two image ids and one recipe."""
    labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", image).decode() or "null")
    value = labels.get(RECIPE_LABEL) if isinstance(labels, dict) else None
    return value if isinstance(value, str) and value else None


def check_image(image: str) -> str:
    """The image's id; BenchError if it is missing, or a fixture whose recipe is stale (distval would rebuild
    it inside a timed run). Nothing is pulled."""
    try:
        found = image_id(image)
    except BenchError:
        hint = f"distval fixtures build {image}" if image in FIXTURES else "build, load or pull it"
        raise BenchError(f"image {image} is not in the Docker Engine (nothing is pulled): {hint}") from None
    if image in FIXTURES:
        label = image_recipe(image)
        want = recipe_hash(image)
        if label != want:
            raise BenchError(
                f"fixture {image} is stale (recipe {label or 'none'}, want {want}): `distval run` would rebuild it "
                f"inside a timed run; run `distval fixtures build {image}` first"
            )
    return found


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of ``values`` (paired per-repetition ratios): the order
    statistics x_(k), x_(n+1-k) with the largest k whose two-sided binomial tail P(Binom(n, 1/2) < k) stays within
    (1 - confidence) / 2. None when there are too few values for that confidence (n < 6 at 95 %): one median of a
    handful of repetitions cannot decide a target a few percent away."""
    ordered = sorted(values)
    n = len(ordered)
    tail = (1 - confidence) / 2
    k = 0
    cumulative = 0.0
    while k < n // 2:
        cumulative += math.comb(n, k) / 2**n  # P(Binom(n, 1/2) <= k)
        if cumulative > tail:
            break
        k += 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k]


def target_verdict(interval: tuple[float, float] | None, target: float) -> str:
    """'met' when the whole interval is at or below the target, 'missed' when all of it is above, else 'undecided'."""
    if interval is None:
        return "undecided (too few repetitions for an interval)"
    low, high = interval
    if high <= target:
        return "met"
    if low > target:
        return "missed"
    return "undecided (the interval straddles the target: more repetitions)"
