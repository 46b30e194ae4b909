"""Pod logs -> the run summary a Docker run gives (``distval collect kubernetes``).

An exported job's suite writes each result record to stdout as ``@distval-record`` lines (distval_suite/records.py),
and each node's first rank names its job. This module reads those lines back from pod logs -- files (one per pod, or
one concatenated file; ``kubectl logs`` with or without ``--prefix`` and ``--timestamps``) or the Kubernetes API --
into the ContainerOutcome/ScenarioOutcome that distval/results/scenario.py summarizes for Docker runs, so the verdicts
and reports are the same.

What ran is the plan file the export wrote beside the manifests (distval/targets/plan_file.py), checked against the
SHA-256 the manifests carry (or, through the API, the pods' annotation): every scenario of the plan files given is
judged with its own checks, ranks and image. The logs are the image's output: a job they name is only which plan
their lines belong to (one the plan files do not hold is refused), and every line is bounded as a Docker
container's output and records are (LOG_LINES_MAX lines, the last CONTAINER_LOG_MAX_BYTES of text, records through
distval/results/records.py).

A rank with no records for a check is an error naming the rank and why (its pod's log is missing, or ends
before them); a record line that cannot be read back is an error naming its file and line. A pod's exit code
is not in its log: from files, ``exit_status`` is skipped with that reason; through the API, it is checked.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from distval import strict_json
from distval.bounded_read import CONTAINER_LOG_MAX_BYTES, LOG_MAX_BYTES, FileRefused, read_regular_file, size_text
from distval.config.layout import WORLD_SIZE_MAX
from distval.errors import BadInput, EnvironmentUnusable, one_line
from distval.plan.model import ScenarioPlan
from distval.results.logs import tail
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, SKIPPED, CaseResult, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.targets.kubernetes.export import CONTAINER_NAME, LABEL_JOB, PLAN_SUFFIX
from distval.targets.plan_file import NO_PLAN_FILE, PLAN_SHA256_KEY, ExportedPlan, PlanFileError, is_sha256, read_plan
from distval_suite.records import STDOUT_MARKER

# Numbers of at most 9 digits: the log is the image's text, and int() of thousands of digits raises or is slow.
RECORD_LINE = re.compile(r"v1 r=(\d{1,9}) n=(\d{1,9}) p=(\d{1,9})/(\d{1,9}) (.*)$")
# Pieces of one record, at most (3500 characters each: distval_suite/records.py): a record of some 14 MB. A line
# claiming p=1/99999999999 once made the part check list every absent part, exhausting memory.
RECORD_PARTS_MAX = 4096
RECORD_EXPECTED = f"'{STDOUT_MARKER} v1 r=<rank> n=<number> p=<part>/<parts> <JSON piece>'"
# kubectl logs --prefix: "[pod/<pod>/<container>] "; --timestamps: an RFC 3339 time and a space. kubectl
# writes the prefix first; either may be absent.
_POD_PREFIX = re.compile(r"^\[pod/([^/\]\s]+)/[^\]\s]+\] ")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ")
# Lines of one log read: a pod of the default config writes a few hundred, a record of RECORD_PARTS_MAX pieces 4096.
# Past it the rest of the log is not read (an error of its results): 200,000 one-line records cost 3 s and 400 MB
# here, and a 256 MiB log of them would cost a minute and gigabytes.
LOG_LINES_MAX = 200_000
# Start lines kept per log: one per rank and torchrun attempt.
STARTS_MAX = 64 * WORLD_SIZE_MAX
# A Kubernetes object name (DNS subdomain): the longest job name a start line may claim.
JOB_NAME_MAX = 253
# The manifests beside a plan file: the suite's files make each about 200 KB.
MANIFEST_MAX_BYTES = 16 * 2**20


class CollectError(BadInput):
    """Logs that hold no distval job: nothing can be reported from them."""

    kind = "logs"


@dataclass
class _Source:
    """One pod's log, or a whole file whose lines name no pod."""

    label: str  # FILE, FILE[pod NAME], or pod NAME (API)
    pod: str | None
    text: deque[str] = field(default_factory=deque)  # the end of the lines that are not records
    text_chars: int = 0  # in ``text``
    text_cut: int = 0  # characters of older lines dropped from ``text``
    starts: list[dict[str, Any]] = field(default_factory=list)  # {"rank": int, "node_rank": int | None}
    jobs: list[str] = field(default_factory=list)  # the jobs its start lines name, in order
    records: dict[int, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)  # rank -> (n, record)
    garbled: list[str] = field(default_factory=list)
    pieces: dict[tuple[int, int], dict[int, tuple[int, str]]] = field(default_factory=dict)
    parts: dict[tuple[int, int], tuple[int, str]] = field(default_factory=dict)  # (rank, n) -> (parts, where)
    exit_code: int | None = None
    reason: str | None = None  # the API's termination reason
    image_id: str | None = None
    node_rank: int | None = None  # the pod's completion index, when the API gave it

    def keep_text(self, line: str) -> None:
        """A line of the pod's own output: its end is kept, CONTAINER_LOG_MAX_BYTES characters (a Docker
        container's stdout is kept as much)."""
        if len(line) > CONTAINER_LOG_MAX_BYTES:
            self.text_cut += len(line) - CONTAINER_LOG_MAX_BYTES
            line = line[-CONTAINER_LOG_MAX_BYTES:]
        self.text.append(line)
        self.text_chars += len(line) + 1
        while self.text_chars > CONTAINER_LOG_MAX_BYTES and len(self.text) > 1:
            dropped = len(self.text.popleft()) + 1
            self.text_chars -= dropped
            self.text_cut += dropped

    @property
    def output(self) -> str:
        kept = "\n".join(self.text)
        return f"[... cut: {self.text_cut} characters before these]\n{kept}" if self.text_cut else kept


def _strip(line: str) -> tuple[str | None, str]:
    pod = None
    for _ in range(2):
        match = _POD_PREFIX.match(line)
        if match and pod is None:
            pod, line = match.group(1), line[match.end() :]
            continue
        match = _TIMESTAMP.match(line)
        if match:
            line = line[match.end() :]
    return pod, line


def read_log(label: str, text: str) -> list[_Source]:
    """The sources of one log: one per pod named by ``--prefix``, else the whole text as one."""
    sources: dict[str | None, _Source] = {}
    source: _Source | None = None
    # Line by line (a list of a 256 MiB log's lines would take gigabytes), at most LOG_LINES_MAX of them.
    for number, raw in enumerate(io.StringIO(text), start=1):
        if number > LOG_LINES_MAX:
            if source is not None:
                source.garbled.append(f"{label}: more than {LOG_LINES_MAX} lines; the rest was not read")
            break
        pod, line = _strip(raw.rstrip("\n").rstrip("\r"))
        source = sources.get(pod)
        if source is None:
            source = sources[pod] = _Source(f"{label}[pod {pod}]" if pod else label, pod)
        where = f"{label}:{number}"
        at = line.find(STDOUT_MARKER)
        if at < 0:
            source.keep_text(line)
            continue
        match = RECORD_LINE.match(line[at + len(STDOUT_MARKER) :].lstrip(" "))
        if match is None:
            source.garbled.append(f"{where}: garbled record line: expected {RECORD_EXPECTED}; got {one_line(line[at:])[:120]!r}")
            continue
        rank, serial, part, parts = (int(match.group(i)) for i in range(1, 5))
        key = (rank, serial)
        known = source.parts.setdefault(key, (parts, where))
        if parts > RECORD_PARTS_MAX:
            source.garbled.append(
                f"{where}: garbled record line: rank {rank}'s record {serial} claims {parts} parts; "
                f"expected at most {RECORD_PARTS_MAX}"
            )
            continue
        if not 1 <= part <= parts or known[0] != parts:
            source.garbled.append(
                f"{where}: garbled record line: part {part}/{parts} of rank {rank}'s record {serial} does not fit"
            )
            continue
        earlier = source.pieces.setdefault(key, {}).get(part)
        if earlier is not None and earlier[1] != match.group(5):
            source.garbled.append(
                f"{where}: rank {rank}'s record {serial} part {part} differs from the one at line {earlier[0]} "
                "(two pods' logs in one file without kubectl logs --prefix?)"
            )
            continue
        source.pieces[key][part] = (number, match.group(5))
    if not sources:
        sources[None] = _Source(label, None)
    for source in sources.values():
        _assemble(source, label)
    return list(sources.values())


def _assemble(source: _Source, label: str) -> None:
    for (rank, serial), pieces in sorted(source.pieces.items()):
        parts, where = source.parts[(rank, serial)]
        if len(pieces) != parts:
            absent = [str(p) for p in range(1, parts + 1) if p not in pieces]
            shown = ", ".join(absent[:10]) + (f", ... ({len(absent)} in all)" if len(absent) > 10 else "")
            source.garbled.append(f"{where}: rank {rank}'s record {serial} lacks part(s) {shown} of {parts}")
            continue
        text = "".join(pieces[p][1] for p in range(1, parts + 1))
        try:
            record = strict_json.loads(text)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            if "start" in record:
                if len(source.starts) >= STARTS_MAX:
                    raise ValueError(f"more than {STARTS_MAX} start lines in one log")
                source.starts.append(_start(record["start"], rank, source.jobs))
            else:
                if int(record["rank"]) != rank or not isinstance(record.get("check"), str):
                    raise ValueError("a result record without its rank or check")
                source.records.setdefault(rank, []).append((serial, record))
        except (ValueError, KeyError, TypeError, OverflowError) as exc:  # OverflowError: int(Infinity)
            source.garbled.append(f"{where}: rank {rank}'s record {serial} is not a distval record ({one_line(str(exc))[:120]})")
    for rank, records in source.records.items():
        missing = _gaps(sorted({serial for serial, _ in records} | {0}))  # 0 is the start line
        if missing:
            source.garbled.append(
                f"{label}: rank {rank}'s record(s) {', '.join(map(str, missing[:10]))} are missing between the ones present"
            )


def _start(start: object, rank: int, jobs: list[str]) -> dict[str, Any]:
    """A start line's facts, checked (the image wrote them): its rank, its node, and the job it names (added to
    ``jobs``). ValueError for anything else."""
    if not isinstance(start, dict) or start.get("rank") != rank:
        raise ValueError("a start record of another rank")
    node = start.get("node_rank")
    node_rank = None if node in (None, "") else node_rank_of(node)
    named = start.get("origin")
    if named is not None:
        job = named.get("job") if isinstance(named, dict) else None
        if not isinstance(job, str) or not 0 < len(job) <= JOB_NAME_MAX:
            raise ValueError(f"origin.job: expected a job name of at most {JOB_NAME_MAX} characters")
        if job not in jobs:
            jobs.append(job)
    return {"rank": rank, "node_rank": node_rank}


def _completion_index(text: Any) -> int | None:
    """The Job's completion index annotation: a small whole number, else unknown (int() of it could raise)."""
    ok = isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 9
    return int(text) if ok else None


def _gaps(serials: list[int], shown: int = 10) -> list[int]:
    """The first ``shown`` numbers missing between sorted ``serials``: walked gap by gap, never by the range
    (a record numbered n=999999999 must not make a list of a billion numbers)."""
    missing: list[int] = []
    for before, after in zip(serials, serials[1:], strict=False):
        missing.extend(range(before + 1, min(after, before + 1 + shown - len(missing))))
        if len(missing) >= shown:
            break
    return missing


# -- the API --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PodLog:
    name: str
    completion_index: int | None
    log: str
    exit_code: int | None  # None: not terminated (or not known)
    reason: str | None  # the container's termination reason ("Completed", "Error", "OOMKilled")
    image_id: str | None
    plan_sha256: str | None = None  # the pod's annotation PLAN_SHA256_KEY: the plan file it was made from


class PodSource(Protocol):
    """What collect reads from a cluster: the Kubernetes client (``KubernetesPods``) or a test's stand-in."""

    def pod_logs(self, namespace: str, job: str) -> list[PodLog]: ...

    def job_failure(self, namespace: str, job: str) -> str | None: ...


class KubernetesPods:
    """The ``kubernetes`` client over the current kubeconfig (imported here: distval does not depend on it)."""

    def __init__(self) -> None:
        try:
            import kubernetes  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError as exc:
            raise EnvironmentUnusable(
                "reading pod logs through the API needs the kubernetes Python client (pip install kubernetes); "
                "or pass the logs as files (kubectl logs ... > FILE)"
            ) from exc
        client: Any = kubernetes
        try:
            # $KUBECONFIG as it is now (the client reads it once, at import), else its default ~/.kube/config.
            client.config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None)
        except Exception as exc:  # noqa: BLE001 - the client raises its own ConfigException, or OSError
            raise EnvironmentUnusable(f"no usable kubeconfig ($KUBECONFIG or ~/.kube/config): {one_line(str(exc))}") from exc
        self._core: Any = client.client.CoreV1Api()  # its models' fields are all Optional: read as Any
        self._batch: Any = client.client.BatchV1Api()

    def pod_logs(self, namespace: str, job: str) -> list[PodLog]:
        found = []
        for pod in self._core.list_namespaced_pod(namespace, label_selector=f"{LABEL_JOB}={job}").items:
            annotations = pod.metadata.annotations or {}
            index = annotations.get("batch.kubernetes.io/job-completion-index")
            status = next((s for s in pod.status.container_statuses or [] if s.name == CONTAINER_NAME), None)
            terminated = status.state.terminated if status is not None and status.state is not None else None
            # limit_bytes: the log is the image's output; one byte past the bound says it was cut.
            log = self._core.read_namespaced_pod_log(
                pod.metadata.name, namespace, container=CONTAINER_NAME, limit_bytes=LOG_MAX_BYTES + 1
            )
            if len(log.encode("utf-8", "surrogateescape")) > LOG_MAX_BYTES:
                raise CollectError(f"the log of pod {pod.metadata.name} is larger than {size_text(LOG_MAX_BYTES)}; expected less")
            found.append(
                PodLog(
                    name=pod.metadata.name,
                    completion_index=int(index)
                    if isinstance(index, str) and index.isascii() and index.isdigit() and len(index) <= 9
                    else None,
                    log=log,
                    exit_code=terminated.exit_code if terminated is not None else None,
                    reason=terminated.reason if terminated is not None else None,
                    image_id=status.image_id if status is not None else None,
                    plan_sha256=annotations.get(PLAN_SHA256_KEY),
                )
            )
        return found

    def job_failure(self, namespace: str, job: str) -> str | None:
        for item in self._batch.list_namespaced_job(namespace, label_selector=f"{LABEL_JOB}={job}").items:
            for condition in item.status.conditions or []:
                if condition.type == "Failed" and condition.status == "True":
                    return f"Job {item.metadata.name} failed: {condition.reason}: {condition.message}"
        return None


# -- sources -> outcomes -> summary ---------------------------------------------------------------------
def _node_of(source: _Source) -> int | None:
    if source.node_rank is not None:
        return source.node_rank
    return next((start["node_rank"] for start in source.starts if start["node_rank"] is not None), None)


def node_rank_of(value: object) -> int:
    """A start record's node_rank (the image wrote it): a whole number from 0 to WORLD_SIZE_MAX - 1, as an int or
    its decimal digits; ValueError for anything else (a list, a float, 5,000 digits, "1; rm")."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < WORLD_SIZE_MAX:
        raise ValueError(f"node_rank: expected a whole number from 0 to {WORLD_SIZE_MAX - 1}")
    return value


def _checks_missing(plan: ScenarioPlan, records: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    reported = {str(record["check"]) for _, record in records}
    return [c.name for c in plan.scenario.checks if c.name not in reported]


def _outcome(exported: ExportedPlan, sources: list[_Source], from_api: bool, job_failure: str | None) -> ScenarioOutcome:
    origin = exported.origin
    plan = origin.plan()  # the plan file's: never what the logs say ran
    world = set(range(plan.scenario.world_size))
    by_node: dict[int, list[_Source]] = {}
    unplaced: list[_Source] = []
    for source in sources:
        node = _node_of(source)
        (by_node.setdefault(node, []) if node is not None else unplaced).append(source)
    # A source whose start lines were lost still holds its ranks' records: place it on the nodes left.
    for source, node in zip(unplaced, [c.node_rank for c in plan.containers if c.node_rank not in by_node], strict=False):
        by_node.setdefault(node, []).append(source)
    observed: dict[int, set[int]] = {}
    for node, node_sources in by_node.items():
        for source in node_sources:
            # Only the plan's ranks: a log's rank 5000 is no rank of this scenario (its records judge nothing).
            observed.setdefault(node, set()).update(world & {int(s["rank"]) for s in source.starts})
            observed[node].update(world & set(source.records))
    claimed = set().union(*observed.values()) if observed else set()
    containers = []
    for planned in plan.containers:
        node_sources = by_node.get(planned.node_rank, [])
        # Under c10d the rendezvous gives the node ranks: the ranks a pod's log shows are its own.
        ranks = tuple(sorted(observed.get(planned.node_rank) or set(planned.ranks) - claimed)) or planned.ranks
        name = next((s.pod for s in node_sources if s.pod), None) or f"{origin.job} node {planned.node_rank}"
        files: dict[str, bytes] = {}
        for source in node_sources:
            for rank, records in source.records.items():
                lines = [json.dumps(record) for _, record in sorted(records, key=lambda item: item[0])]
                files[f"rank-{rank}.jsonl"] = files.get(f"rank-{rank}.jsonl", b"") + "\n".join(lines + [""]).encode()
        text = "\n".join(source.output for source in node_sources)
        problem = None
        if not node_sources:
            problem = f"no log of node {planned.node_rank}'s pod was given (expected rank(s) {', '.join(map(str, ranks))})" + (
                f"; {job_failure}" if job_failure else ""
            )
        else:
            short = [rank for rank in ranks if _checks_missing(plan, [r for s in node_sources for r in s.records.get(rank, [])])]
            if short:
                labels = ", ".join(s.label for s in node_sources)
                last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "(empty)")
                problem = (
                    f"the log of {name} ({labels}) ends before rank(s) {', '.join(map(str, short))} reported every check "
                    f"(a truncated log, or the rank stopped); its last line: {one_line(last)[:200]}"
                    + (f"; {job_failure}" if job_failure else "")
                )
        exit_code = next((s.exit_code for s in node_sources if s.exit_code is not None), None)
        reason = next((s.reason for s in node_sources if s.reason), None)
        if from_api and node_sources and exit_code is None:
            problem = problem or f"pod {name} had not terminated when its log was read"
        if from_api and reason and exit_code not in (None, 0):
            problem = problem or f"pod {name} exited with code {exit_code} ({reason})"
        containers.append(
            ContainerOutcome(
                name=name,
                node_rank=planned.node_rank,
                ranks=ranks,
                exit_code=exit_code,
                # The Job's deadline stopped this pod only if it had not ended on its own.
                killed_at_deadline=bool(job_failure and "DeadlineExceeded" in job_failure and exit_code != 0),
                stdout=text,
                stderr="",
                result_files=files,
                problem=problem,
                kind="pod",
            )
        )
    image_id = next((s.image_id for s in sources if s.image_id), None)
    # No Engine clock here: the longest rank's check time stands for the duration.
    duration_s = max(
        (sum(float(r.get("duration_s") or 0.0) for _, r in records) for source in sources for records in source.records.values()),
        default=0.0,
    )
    return ScenarioOutcome(plan=plan, image_id=image_id, duration_s=duration_s, containers=tuple(containers))


def _result(outcome: ScenarioOutcome, sources: list[_Source], from_api: bool, fail_on_skip: bool) -> ScenarioResult:
    result = summarize_scenario(outcome, fail_on_skip=fail_on_skip)
    cases = list(result.cases)
    if not from_api:
        # A pod's exit code is not in its log: exit_status says so instead of guessing from the records.
        problems = [c.problem for c in outcome.containers if c.problem]
        if problems:
            exit_case = CaseResult(
                EXIT_STATUS_CASE,
                ERROR,
                f"expected every pod's log to hold its ranks' records; {'; '.join(problems)}",
                outcome.duration_s,
                "\n\n".join(f"--- {c.name} (last lines) ---\n{tail(c.stdout)}" for c in outcome.containers if c.problem),
            )
        else:
            exit_case = CaseResult(
                EXIT_STATUS_CASE,
                SKIPPED,
                "not checked: a pod's exit code is not in its log (collect through the API, --namespace and --job, "
                "to check it); every rank's records are present",
                outcome.duration_s,
            )
            if fail_on_skip:
                exit_case = dataclasses.replace(
                    exit_case, status="failed", message=f"expected no skip (--fail-on-skip); skipped: {exit_case.message}"
                )
        cases = [exit_case if c.name == EXIT_STATUS_CASE else c for c in cases]
    garbled = [line for source in sources for line in source.garbled]
    if garbled:
        cases.append(
            CaseResult(
                "results", ERROR, "; ".join(garbled[:20]) + (f"; ... ({len(garbled)} in all)" if len(garbled) > 20 else ""), 0.0
            )
        )
    return dataclasses.replace(result, cases=tuple(cases))


def summarize_sources(
    sources: list[_Source],
    plans: Sequence[ExportedPlan],
    from_api: bool = False,
    fail_on_skip: bool = False,
    job_failure: str | None = None,
) -> RunSummary:
    """Every scenario of ``plans`` judged with the logs of its job: a scenario no log was given for is an error of
    each of its ranks, never left out."""
    if not plans:
        raise PlanFileError("no plan file given: distval export kubernetes writes one beside each job's manifests")
    groups: dict[str, tuple[ExportedPlan, list[_Source]]] = {}
    for exported in plans:
        groups.setdefault(exported.origin.job, (exported, []))
    orphans: list[_Source] = []
    for source in sources:
        if len(source.jobs) > 1 and source.pod is None:
            raise CollectError(
                f"{source.label}: the log holds records of several jobs ({', '.join(source.jobs)[:300]}) and names no "
                "pod: pass one log per pod, or kubectl logs --prefix"
            )
        if len(source.jobs) > 1:  # one pod's ranks naming several jobs: the image's output, an error of it
            source.garbled.append(f"{source.label}: its ranks name several jobs ({', '.join(source.jobs)[:300]})")
        job = source.jobs[0] if source.jobs else None
        if job is not None and job not in groups:
            raise CollectError(
                f"{source.label}: its ranks name job {one_line(job)[:100]!r}, which no plan file given holds "
                f"({', '.join(groups)[:300]}): the logs of another export?"
            )
        if job is not None:
            groups[job][1].append(source)
        elif source.records or source.starts or source.garbled or source.node_rank is not None:
            orphans.append(source)  # a pod the API named, even with an empty log (it never started the suite)
    if orphans:
        if len(groups) != 1:
            raise CollectError(
                f"{orphans[0].label}: distval records, but no line naming their job (each node's first rank writes one "
                f"at its start), and the plan files given hold {len(groups)} jobs"
            )
        next(iter(groups.values()))[1].extend(orphans)
    if not any(group for _, group in groups.values()):
        raise CollectError("no distval record in the logs given (was the job exported by distval export kubernetes?)")
    results = []
    for exported, group in groups.values():
        outcome = _outcome(exported, group, from_api, job_failure)
        results.append(_result(outcome, group, from_api, fail_on_skip))
    first = plans[0].origin
    return RunSummary(first.run_id, tuple(results), config_path=first.config_path, mode="kubernetes")


def read_files(paths: Iterable[str]) -> list[_Source]:
    sources = []
    for path in paths:
        try:
            text = read_regular_file(path, LOG_MAX_BYTES).decode("utf-8", "replace")
        except FileRefused as exc:
            raise CollectError(f"cannot read the log {path}: {exc}") from exc
        sources += read_log(path, text)
    return sources


def read_api(pods: PodSource, namespace: str, exported: ExportedPlan) -> tuple[list[_Source], str | None]:
    """The logs of the plan's job's pods, each pod made from that plan (its annotation holds the plan file's
    SHA-256: a pod of another export, or of a changed plan, is refused)."""
    job = exported.origin.job
    logs = pods.pod_logs(namespace, job)
    failure = pods.job_failure(namespace, job)
    if not logs:
        raise CollectError(f"no pod with label {LABEL_JOB}={job} in namespace {namespace}" + (f" ({failure})" if failure else ""))
    sources = []
    for pod in logs:
        if pod.plan_sha256 != exported.sha256:
            raise PlanFileError(
                f"pod {pod.name}: its {PLAN_SHA256_KEY} annotation is "
                f"{pod.plan_sha256 if is_sha256(pod.plan_sha256) else 'missing'}, and {exported.path} has SHA-256 "
                f"{exported.sha256}: the pod was not made from this plan (another export, or the plan was changed)"
            )
        for source in read_log(f"pod {pod.name}", pod.log):
            source.pod = pod.name
            source.exit_code, source.reason, source.image_id = pod.exit_code, pod.reason, pod.image_id
            source.node_rank = pod.completion_index
            # The API says which job the pod is of: a log naming another is the image's output, an error of it.
            for other in [j for j in source.jobs if j != job]:
                source.garbled.append(f"{source.label}: its ranks name job {one_line(other)[:100]!r}; the pod is of {job}")
            source.jobs = [job]
            sources.append(source)
    return sources, failure


# -- the plan files -------------------------------------------------------------------------------------
def read_plans(path: str | Path) -> list[ExportedPlan]:
    """The plan files at ``path``: one ``<job>.plan.json``, or every one in the export's directory; each checked
    against the SHA-256 its job's manifests (``<job>.yaml`` beside it) carry. PlanFileError in one line otherwise."""
    given = Path(path)
    if not given.exists() and not given.is_symlink():
        raise PlanFileError(f"{given}: {NO_PLAN_FILE}")
    if given.is_dir():
        files = sorted(p for p in given.iterdir() if p.name.endswith(PLAN_SUFFIX))
        if not files:
            raise PlanFileError(
                f"{given}: no plan file (*{PLAN_SUFFIX}) in it: distval export kubernetes writes one beside each job's "
                "manifests (pass their directory or one of them with --plan)"
            )
        return [read_job_plan(p) for p in files]
    return [read_job_plan(given)]


def read_job_plan(path: Path) -> ExportedPlan:
    if not path.name.endswith(PLAN_SUFFIX):
        raise PlanFileError(f"{path}: expected a plan file <job>{PLAN_SUFFIX} of distval export kubernetes, or their directory")
    job = path.name.removesuffix(PLAN_SUFFIX)
    manifests = path.with_name(f"{job}.yaml")
    exported = read_plan(path, _manifests_sha256(manifests), str(manifests))
    if exported.origin.job != job:
        raise PlanFileError(f"{path}: the plan is of job {exported.origin.job!r}, not {job!r} as its name says")
    return exported


def _manifests_sha256(path: Path) -> str | None:
    """The plan file SHA-256 every resource of the manifests at ``path`` carries; None where none carries one."""
    try:
        text = read_regular_file(path, MANIFEST_MAX_BYTES, follow_links=False).decode("utf-8")
        documents = [d for d in yaml.load_all(text, Loader=strict_json.UniqueKeyLoader) if d is not None]  # noqa: S506
    except FileRefused as exc:
        raise PlanFileError(f"{path}: cannot read the manifests the plan file goes with: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{path}: not the manifests of distval export kubernetes: {one_line(str(exc))[:200]}") from None
    found: set[object] = set()
    for document in documents:
        metadata = document.get("metadata") if isinstance(document, dict) else None
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        found.add(annotations.get(PLAN_SHA256_KEY) if isinstance(annotations, dict) else None)
    if not found or found == {None}:
        return None
    if len(found) > 1 or not all(is_sha256(value) for value in found):
        raise PlanFileError(f"{path}: its resources carry different plan file SHA-256s ({PLAN_SHA256_KEY}): edited by hand?")
    return str(next(iter(found)))
