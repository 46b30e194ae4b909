"""An exported job's directory -> the run summary a Docker run gives (``distval collect slurm``).

The batch script (distval/targets/slurm/export.py) leaves, per node, the records its ranks wrote (``run/node-<i>/``),
the step's output and exit code, and, for the job, its id and node names (``run/job``). Each node becomes the
ContainerOutcome a container is on Docker, the scenario is planned again from the plan file the export wrote
(``plan.json``, checked against the SHA-256 the batch script names: distval/targets/plan_file.py), and
distval/results/scenario.py makes the verdicts: the same testcases, the same reports.

The job directory is on a filesystem other users share: everything read from it must be the job's alone. A
directory or file that another user owns (not the collecting user, nor the job's user the plan names), that its
group or others may write, a symbolic link, a FIFO or a device is refused (``CollectError``, exit 2, one line):
another user's record must never turn a failed run into a pass.

Fails closed: a node with no exit code (its step never ended, or the job was cancelled or lost its node) is an error
naming the node; a job that never started (no ``run/job``) is an error of every node; the job's state from Slurm
(``sacct``, where the caller has it) names why.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from distval.bounded_read import (
    CONTAINER_LOG_MAX_BYTES,
    RESULTS_MAX_BYTES,
    FileRefused,
    end_of_file,
    foreign_writer,
    kept_end,
    read_regular_file,
)
from distval.errors import BadInput
from distval.results.outcome import ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.targets.plan_file import ExportedPlan, is_sha256, read_plan
from distval.targets.slurm.export import BATCH_FILE, PLAN_FILE, PLAN_SHA256_LINE, JobDir

JOB_FILE_MAX_BYTES = 64 * 1024
BATCH_MAX_BYTES = 4 * 1024 * 1024
SHARED_FILES = "a job's files must be written by its user alone (docs/slurm.md#what-the-clusters-users-share)"


class CollectError(BadInput):
    """A directory that holds no exported distval job: nothing can be reported from it."""

    kind = "job directory"


@dataclass(frozen=True)
class JobState:
    """What Slurm says of the job (sacct/squeue): its state ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED",
    "NODE_FAIL", ...) and the nodes it names (a failed node), or what distval did to it."""

    state: str
    reason: str = ""
    # Nodes Slurm took out while the job ran (down, drained, failing): host name -> Slurm's state and reason.
    lost_nodes: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        return f"job state {self.state}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class JobFacts:
    """``run/job``: what the batch script wrote when the job started."""

    job_id: str
    nodes: tuple[str, ...]
    master_addr: str
    master_port: str
    duration_s: float | None  # from the job's start to its last step's end, when both were written


def read_job_plan(directory: Path) -> ExportedPlan:
    """The job's plan file, checked against the SHA-256 its batch script names, and the directory, the plan file and
    the script checked to be the job's user's alone."""
    script, path = directory / BATCH_FILE, directory / PLAN_FILE
    try:
        text = read_regular_file(script, BATCH_MAX_BYTES, follow_links=False).decode("utf-8", "replace")
    except FileRefused as exc:
        raise CollectError(f"{directory}: not a job directory of distval export slurm ({script}: {exc})") from None
    named = next((line[len(PLAN_SHA256_LINE) :].strip() for line in text.splitlines() if line.startswith(PLAN_SHA256_LINE)), None)
    exported = read_plan(path, named if is_sha256(named) else None, str(script))
    owners = _owners(exported)
    _private(directory, owners, directory=True)
    for file in (script, path):
        _private(file, owners)
    return exported


def _owners(exported: ExportedPlan) -> tuple[int, ...]:
    """Who may have written the job's files: the collecting user, and the job's user the plan names."""
    return (os.geteuid(),) + ((exported.job_uid,) if exported.job_uid is not None else ())


def _private(path: Path | str, owners: Collection[int], directory: bool = False) -> None:
    """CollectError unless ``path`` is a directory (or a regular file) only ``owners`` could have written (checked
    before what is in it is opened, each file then with O_NOFOLLOW and its own check)."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return  # missing: what is missing is said where it is needed
    except OSError as exc:
        raise CollectError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(status.st_mode):
        raise CollectError(f"{path}: a symbolic link, never followed in a job's directory; {SHARED_FILES}")
    if directory and not stat.S_ISDIR(status.st_mode):
        raise CollectError(f"{path}: expected a directory; {SHARED_FILES}")
    if not directory and not stat.S_ISREG(status.st_mode):
        raise CollectError(f"{path}: expected a regular file, got something else (a FIFO, a device?); {SHARED_FILES}")
    other = foreign_writer(status, owners)
    if other is not None:
        raise CollectError(f"{path}: {other}; {SHARED_FILES}")


def read_job_facts(job: JobDir, owners: Collection[int] | None = None) -> JobFacts | None:
    """None where the job never started (or its file cannot be read). ``owners``: the file must be theirs alone."""
    try:
        text = read_regular_file(job.path("run", "job"), JOB_FILE_MAX_BYTES, False, owners).decode("utf-8", "replace")
    except FileRefused as exc:
        if owners is not None and not exc.missing and exc.found is not None:
            raise CollectError(f"{job.path('run', 'job')}: {exc.found}; {SHARED_FILES}") from None
        return None
    values: dict[str, str] = {}
    nodes: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "node":
            nodes.append(value.strip())
        elif key in ("job_id", "master_addr", "master_port", "started", "ended"):
            values[key] = value.strip()
    duration = None
    try:
        duration = max(0.0, float(values["ended"]) - float(values["started"]))
    except (KeyError, ValueError):
        pass
    return JobFacts(
        values.get("job_id", "?"), tuple(nodes), values.get("master_addr", ""), values.get("master_port", ""), duration
    )


def _refused(path: str, exc: FileRefused) -> CollectError:
    return CollectError(f"{path}: {exc.found or exc}; {SHARED_FILES}")


def _exit_code(job: JobDir, node: int, owners: Collection[int]) -> int | None:
    try:
        text = read_regular_file(job.node_exit(node), 64, False, owners).decode("ascii", "replace").strip()
    except FileRefused as exc:
        if exc.missing or exc.found is None:
            return None
        raise _refused(job.node_exit(node), exc) from None
    return int(text) if text.isdigit() and len(text) <= 3 else None


def _log(path: str, owners: Collection[int]) -> str:
    try:
        data, total = end_of_file(path, CONTAINER_LOG_MAX_BYTES, owners)
    except FileRefused as exc:
        if exc.missing or exc.found is None:
            return ""
        raise _refused(path, exc) from None
    except OSError:
        return ""
    return kept_end(data, total)


def _results(directory: str, owners: Collection[int]) -> tuple[dict[str, bytes], str | None]:
    """The files the node's ranks wrote: regular files only, the job's user's alone, not followed, bounded (the image
    wrote them). A link, a FIFO or a file someone else could have written is refused (CollectError)."""
    files: dict[str, bytes] = {}
    left = RESULTS_MAX_BYTES
    if not os.path.lexists(directory):
        return files, f"its results directory {directory} does not exist"
    _private(directory, owners, directory=True)
    try:
        for path in sorted(Path(directory).iterdir()):
            if path.is_dir() and not path.is_symlink():
                continue  # nothing the harness reads
            try:
                files[path.name] = read_regular_file(path, left, follow_links=False, owners=owners)
            except FileRefused as exc:
                if exc.found is None:
                    raise
                raise _refused(str(path), exc) from None
            left -= len(files[path.name])
    except (OSError, FileRefused) as exc:
        return files, f"its results could not be read from {directory}: {exc}"
    return files, None


def outcome_of(directory: Path, state: JobState | None = None, duration_s: float | None = None) -> ScenarioOutcome:
    """The scenario outcome of an exported job's directory. ``state``: Slurm's word on the job, where known."""
    exported = read_job_plan(directory)
    owners = _owners(exported)
    plan = exported.origin.plan()  # the plan file's: never what the job's output says ran
    job = JobDir(str(directory))
    _private(job.run, owners, directory=True)
    facts = read_job_facts(job, owners)
    killed = state is not None and state.state in ("TIMEOUT", "CANCELLED", "DEADLINE")
    containers = []
    for planned in plan.containers:
        node = planned.node_rank
        host = facts.nodes[node] if facts is not None and node < len(facts.nodes) else None
        name = f"node {node} ({host})" if host else f"node {node}"
        exit_code = _exit_code(job, node, owners)
        files, problem = _results(job.node_results(node), owners) if facts is not None else ({}, None)
        if facts is None:
            problem = "the job never started here (no run/job in its directory)" + (f"; {state.text}" if state else "")
        elif exit_code is None:
            problem = f"its job step on {host or 'its node'} never reported an exit code" + (f"; {state.text}" if state else "")
        lost = dict(state.lost_nodes) if state is not None else {}
        if host in lost:
            # The node is named whatever else its step left: a node taken out mid-run is the scenario's error.
            problem = f"Slurm took node {host} out while the job ran ({lost[host]}; {state.text if state else ''})"
        containers.append(
            ContainerOutcome(
                name=name,
                node_rank=node,
                ranks=planned.ranks,
                exit_code=exit_code,
                killed_at_deadline=killed and exit_code != 0,
                stdout=_log(job.node_output(node, "out"), owners),
                stderr=_log(job.node_output(node, "err"), owners),
                result_files=files,
                problem=problem,
                kind="job step",
            )
        )
    if duration_s is None:
        # The job's own clock: from its start to its steps' end (0 where it never ended).
        duration_s = facts.duration_s if facts is not None and facts.duration_s is not None else 0.0
    return ScenarioOutcome(plan=plan, image_id=None, duration_s=duration_s, containers=tuple(containers))


def summarize_jobs(directories: list[Path], fail_on_skip: bool = False, states: dict[Path, JobState] | None = None) -> RunSummary:
    """The run summary of one or more exported jobs' directories (a directory of them: each subdirectory)."""
    jobs: list[Path] = []
    for directory in directories:
        if _is_job(directory):
            jobs.append(directory)
        elif directory.is_dir():
            jobs += sorted(p for p in directory.iterdir() if _is_job(p))
        else:
            raise CollectError(f"{directory}: not a directory")
    if not jobs:
        raise CollectError(f"no job directory of distval export slurm in {', '.join(map(str, directories))}")
    results: list[ScenarioResult] = []
    for directory in jobs:
        state = (states or {}).get(directory)
        outcome = outcome_of(directory, state)
        results.append(summarize_scenario(outcome, fail_on_skip=fail_on_skip))
    first = read_job_plan(jobs[0]).origin
    return RunSummary(first.run_id, tuple(results), config_path=first.config_path, mode="slurm")


def _is_job(directory: Path) -> bool:
    """A job directory of the export: its batch script or its plan file (either missing is then said in one line)."""
    return any(os.path.lexists(directory / name) for name in (BATCH_FILE, PLAN_FILE))
