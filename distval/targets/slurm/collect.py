"""An exported job's directory -> the run summary a Docker run gives (``distval collect slurm``).

The batch script (distval/targets/slurm/export.py) leaves, per node, the records its ranks wrote (``run/node-<i>/``),
the step's output and exit code, and, for the job, its id and node names (``run/job``). Each node becomes the
ContainerOutcome a container is on Docker, the scenario is planned again from the exported origin, and
distval/results/scenario.py makes the verdicts: the same testcases, the same reports.

Fails closed: a node with no exit code (its step never ended, or the job was cancelled or lost its node) is an error
naming the node; a job that never started (no ``run/job``) is an error of every node; the job's state from Slurm
(``sacct``, where the caller has it) names why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distval import strict_json
from distval.bounded_read import CONTAINER_LOG_MAX_BYTES, RESULTS_MAX_BYTES, FileRefused, end_of_file, kept_end, read_regular_file
from distval.errors import BadInput, one_line
from distval.results.outcome import ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.targets.kubernetes.origin import Origin, origin_from_data
from distval.targets.slurm.export import ORIGIN_FILE, JobDir

JOB_FILE_MAX_BYTES = 64 * 1024
ORIGIN_MAX_BYTES = 4 * 1024 * 1024


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


def read_origin(directory: Path) -> Origin:
    path = directory / ORIGIN_FILE
    try:
        data = strict_json.loads(read_regular_file(path, ORIGIN_MAX_BYTES))
        return origin_from_data(data)
    except FileRefused as exc:
        raise CollectError(f"{directory}: not a job directory of distval export slurm ({path}: {exc})") from exc
    except ValueError as exc:
        raise CollectError(f"{path}: {one_line(str(exc))[:200]}") from exc


def read_job_facts(job: JobDir) -> JobFacts | None:
    """None where the job never started (or its file cannot be read)."""
    try:
        text = read_regular_file(job.path("run", "job"), JOB_FILE_MAX_BYTES).decode("utf-8", "replace")
    except FileRefused:
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


def _exit_code(job: JobDir, node: int) -> int | None:
    try:
        text = read_regular_file(job.node_exit(node), 64).decode("ascii", "replace").strip()
    except FileRefused:
        return None
    return int(text) if text.isdigit() and len(text) <= 3 else None


def _log(path: str) -> str:
    try:
        data, total = end_of_file(path, CONTAINER_LOG_MAX_BYTES)
    except (OSError, FileRefused):
        return ""
    return kept_end(data, total)


def _results(directory: str) -> tuple[dict[str, bytes], str | None]:
    """The files the node's ranks wrote: regular files only, not followed, bounded (the image wrote them)."""
    files: dict[str, bytes] = {}
    left = RESULTS_MAX_BYTES
    try:
        for path in sorted(Path(directory).iterdir()):
            if path.is_file() and not path.is_symlink():
                files[path.name] = read_regular_file(path, left, follow_links=False)
                left -= len(files[path.name])
    except FileNotFoundError:
        return files, f"its results directory {directory} does not exist"
    except (OSError, FileRefused) as exc:
        return files, f"its results could not be read from {directory}: {exc}"
    return files, None


def outcome_of(directory: Path, state: JobState | None = None, duration_s: float | None = None) -> ScenarioOutcome:
    """The scenario outcome of an exported job's directory. ``state``: Slurm's word on the job, where known."""
    origin = read_origin(directory)
    plan = origin.plan()
    job = JobDir(str(directory))
    facts = read_job_facts(job)
    killed = state is not None and state.state in ("TIMEOUT", "CANCELLED", "DEADLINE")
    containers = []
    for planned in plan.containers:
        node = planned.node_rank
        host = facts.nodes[node] if facts is not None and node < len(facts.nodes) else None
        name = f"node {node} ({host})" if host else f"node {node}"
        exit_code = _exit_code(job, node)
        files, problem = _results(job.node_results(node)) if facts is not None else ({}, None)
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
                stdout=_log(job.node_output(node, "out")),
                stderr=_log(job.node_output(node, "err")),
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
        if (directory / ORIGIN_FILE).exists():
            jobs.append(directory)
        elif directory.is_dir():
            jobs += sorted(p for p in directory.iterdir() if (p / ORIGIN_FILE).exists())
        else:
            raise CollectError(f"{directory}: not a directory")
    if not jobs:
        raise CollectError(f"no job directory of distval export slurm in {', '.join(map(str, directories))}")
    results: list[ScenarioResult] = []
    origins: list[Origin] = []
    for directory in jobs:
        state = (states or {}).get(directory)
        outcome = outcome_of(directory, state)
        origins.append(read_origin(directory))
        results.append(summarize_scenario(outcome, fail_on_skip=fail_on_skip))
    first = origins[0]
    return RunSummary(first.run_id, tuple(results), config_path=first.config_path, mode="slurm")
