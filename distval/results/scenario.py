"""What happened, as data: raw outcomes from the runtime -> one result per check -> a run summary.

A scenario's testcases are its checks in config order plus ``exit_status`` (every container exited 0
within the deadline). A rank that wrote no record for a check makes that check an error naming the
rank and why (killed at the deadline, launcher exit code, last error line). Zero results is never a pass,
and neither is a scenario whose listed checks were all skipped: bookkeeping cases (``exit_status``,
``process_group``) validate nothing. Where a rank's records for one case disagree (written twice, or left by
restart attempts that cannot be ordered: distval/results/diagnosis.py) the worse outcome counts.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from distval.checks.catalog import FAULTS_CASE, is_check, is_collective
from distval.config import NCCL_BACKENDS
from distval.errors import EXIT_CHECKS_FAILED, EXIT_NOTHING_VALIDATED, EXIT_PASSED, PlanError
from distval.plan.model import ScenarioPlan
from distval.results.bandwidth import Figure, figure_properties, figures_of, link_of
from distval.results.diagnosis import Diagnosis, current_attempts, diagnose
from distval.results.faults import NOT_INJECTED, fault_cases
from distval.results.logs import first_error_line, tail
from distval.results.nccl_environment import describe as describe_nccl_environment
from distval.results.nccl_environment import set_by_environment
from distval.results.nccl_transport import describe as describe_transports
from distval.results.nccl_transport import transports_between
from distval.results.outcome import (
    ERROR,
    EXIT_STATUS_CASE,
    FAILED,
    PASSED,
    SKIPPED,
    CaseResult,
    ContainerOutcome,
    ScenarioOutcome,
)
from distval.results.records import RecordsByRank, read_records
from distval.text_caps import RANK_LOG_MAX_CHARS, capped_end


@dataclass(frozen=True)
class ScenarioResult:
    plan: ScenarioPlan
    cases: tuple[CaseResult, ...]
    properties: tuple[tuple[str, str], ...]
    logs: str
    duration_s: float
    # Stacks, flight recorder, root cause, restarts (distval/results/diagnosis.py); empty when nothing ran.
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    # When the run loop started it (seconds since the epoch); None where no start was seen (collect kubernetes).
    started_at: float | None = None

    @property
    def figures(self) -> tuple[Figure, ...]:
        """The bandwidth check's figures (operation x message size), empty when it did not run."""
        return figures_of((c.name, c.details) for c in self.cases)

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.cases}
        if not self.cases or ERROR in statuses:
            return ERROR
        if FAILED in statuses:
            return FAILED
        # A scenario passes only through a check it lists that passed. Bookkeeping cases (exit_status,
        # process_group, results) and records of checks it does not list validate nothing: a scenario in which
        # every check was skipped is skipped, with its reasons in its cases. The faults verdict of a scenario with
        # faults validates too: its checks may all have been interrupted on purpose.
        listed = {check.name for check in self.plan.scenario.checks}
        validated = any(
            c.status == PASSED
            and (
                (is_check(c.name) and c.name.split(".", 1)[0] in listed)
                or (c.name == FAULTS_CASE and self.plan.faults is not None)
            )
            for c in self.cases
        )
        return PASSED if validated else SKIPPED


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    scenarios: tuple[ScenarioResult, ...]
    early_error: tuple[str, str] | None = None  # (kind, message) when the run stopped before or between scenarios
    early_exit_code: int | None = None
    engine_version: str | None = None  # Engine.version(), asked once per run; None when no Engine answered
    host: str = field(default_factory=socket.gethostname)
    config_path: str | None = None  # as given on the command line: the reproduce commands name it
    # What the reports call the target (its TargetKind's ``mode``: "host" for --local): a property of every testsuite.
    mode: str = "docker"
    # What the terminal summary starts with when the image was not the user's choice (SAMPLE_IMAGE_NOTE of
    # distval/session/sample.py), set only where the target runs images (TargetKind.runs_images): then every
    # scenario that named no image ran distval's sample image (the ``sample_image`` property).
    image_note: str | None = None
    # The images the plan was to validate (host mode: its Python), else --image's; () when unknown. What names the
    # reports of a run that stopped before any scenario ran (reports/common.py run_label), as scenarios name theirs.
    images: tuple[str, ...] = ()
    # --suite-prefix: names the JUnit testsuites and classnames instead of each scenario's image (docs/reports.md).
    suite_prefix: str | None = None
    # The check selection's options (--check, --skip-check, -k): the reproduce commands repeat them.
    selection_args: tuple[str, ...] = ()
    config_sha256: str | None = None  # the config file's content, as the loader read it (None: not read)

    @property
    def exit_code(self) -> int:
        if self.early_exit_code is not None:
            return self.early_exit_code
        if not self.scenarios or self.nothing_validated:
            return EXIT_NOTHING_VALIDATED  # never 0, and not the image's failure (1)
        return EXIT_PASSED if all(s.status in (PASSED, SKIPPED) for s in self.scenarios) else EXIT_CHECKS_FAILED

    @property
    def nothing_validated(self) -> bool:
        """True when no check ran anywhere (every scenario skipped): such a run exits EXIT_NOTHING_VALIDATED, never 0."""
        return bool(self.scenarios) and all(s.status == SKIPPED for s in self.scenarios)


def unselected_result(plan: ScenarioPlan, reason: str) -> ScenarioResult:
    """A scenario the check selection left no check (``reason`` says which selection): not run, so each check it lists
    is skipped with the reason and it validates nothing. Neither ``required`` nor --fail-on-skip turn these skips into
    failures: the command line chose them, they are no drift."""
    cases = tuple(CaseResult(check.name, SKIPPED, reason, 0.0) for check in plan.scenario.checks)
    return ScenarioResult(plan, cases, _properties(ScenarioOutcome(plan, None, 0.0, ()), {}), "", 0.0)


def _why_missing(outcome: ContainerOutcome, deadline_s: float) -> str:
    if outcome.problem:
        return outcome.problem
    if outcome.killed_at_deadline:
        return f"{outcome.kind} {outcome.name} was still running at the {deadline_s:g} s deadline and was killed"
    reason = f"{outcome.kind} {outcome.name} exited with code {outcome.exit_code}"
    cause = diagnose((outcome,)).root_cause
    if cause is not None:
        return f"{reason}: root cause (torchelastic error file): {cause.message}"
    error = first_error_line(outcome.stderr) or first_error_line(outcome.stdout)
    return f"{reason}: {error}" if error else reason


def _exit_case(outcomes: tuple[ContainerOutcome, ...], deadline_s: float, duration_s: float, restarts: int | None) -> CaseResult:
    """``restarts``: torchrun's restart count, as the scenario's diagnosis read it."""
    bad = [o for o in outcomes if o.killed_at_deadline or o.exit_code != 0 or o.problem]
    kind = outcomes[0].kind if outcomes else "container"
    if not bad:
        after = f" after {restarts} torchrun restart(s) (the last attempt's records count)" if restarts else ""
        return CaseResult(
            EXIT_STATUS_CASE,
            PASSED,
            f"{len(outcomes)} {kind}(s) exited 0 within the {deadline_s:g} s deadline{after}",
            duration_s,
        )
    message = "; ".join(_why_missing(o, deadline_s) for o in bad)
    output = "\n\n".join(f"--- {o.name} (last lines) ---\n{tail(o.stdout + o.stderr)}" for o in bad)
    found = diagnose(bad)
    if any(o.killed_at_deadline for o in bad) and found.headline():
        message += f" ({found.headline()})"
    output += f"\n\n{found.text()}" if found.text() else ""
    return CaseResult(
        EXIT_STATUS_CASE, ERROR, f"expected every {kind} to exit 0 within the deadline; {message}", duration_s, output
    )


def summarize_scenario(outcome: ScenarioOutcome, require_gpu: bool = False, fail_on_skip: bool = False) -> ScenarioResult:
    """The scenario's testcases. ``require_gpu``: a GPU shortfall fails instead of skipping; ``fail_on_skip``:
    every skip (of a whole check, or on some ranks) fails, for pipelines that must not drift into skipping."""
    result = _summarize(outcome, require_gpu)
    if not fail_on_skip:
        return result
    return dataclasses.replace(result, cases=tuple(_no_skip(case) for case in result.cases))


def _no_skip(case: CaseResult) -> CaseResult:
    if case.status == SKIPPED:
        return dataclasses.replace(case, status=FAILED, message=f"expected no skip (--fail-on-skip); skipped: {case.message}")
    if case.skipped_ranks:
        ranks = ", ".join(map(str, case.skipped_ranks))
        return dataclasses.replace(
            case, status=FAILED, message=f"expected no skip (--fail-on-skip); skipped on rank(s) {ranks}: {case.message}"
        )
    return case


def _summarize(outcome: ScenarioOutcome, require_gpu: bool) -> ScenarioResult:
    """One pass: each container's records are read once (distval/results/records.py), then the testcases, the
    verdict on the faults, the scenario's diagnosis and its properties are made from them, in that order."""
    plan = outcome.plan
    scenario = plan.scenario
    read = [read_records(container) for container in outcome.containers]
    properties = _properties(outcome, _env_details(read))
    logs = "\n\n".join(
        f"===== {o.name} (node {o.node_rank}, ranks {','.join(map(str, o.ranks))}) stdout =====\n"
        f"{capped_end(o.stdout, RANK_LOG_MAX_CHARS)}\n===== {o.name} stderr =====\n{capped_end(o.stderr, RANK_LOG_MAX_CHARS)}"
        for o in outcome.containers
    )
    if outcome.setup_skipped and outcome.setup_error is not None:
        # Every check the scenario lists appears, skipped with the measured reason: never missing, never passed.
        # --require-gpu makes a GPU shortfall a failure, for pipelines that run on GPU machines.
        if outcome.skip_kind == "gpu" and require_gpu:
            status, message = FAILED, f"expected GPUs (--require-gpu): {outcome.setup_error}"
        else:
            status, message = SKIPPED, outcome.setup_error
        skipped = (CaseResult("process_group", status, message, 0.0),) + tuple(
            # A required check must run: the Engine's shortfall fails it as any other skip does.
            CaseResult(c.name, FAILED, f"expected required check {c.name} to run; it was skipped: {message}", 0.0)
            if c.required and status == SKIPPED
            else CaseResult(c.name, status, message, 0.0)
            for c in scenario.checks
        )
        return ScenarioResult(plan, skipped, properties, logs, outcome.duration_s)
    if outcome.setup_error is not None:
        case = CaseResult("setup", ERROR, outcome.setup_error, outcome.duration_s)
        return ScenarioResult(plan, (case,), properties, logs, outcome.duration_s)

    # Records are grouped by testcase (``case``); a check may report several (collectives.broadcast, ...).
    records: dict[int, dict[str, dict[str, object]]] = {}
    owner: dict[int, ContainerOutcome] = {}
    order: list[str] = []
    check_of: dict[str, str] = {}
    unreadable: list[str] = []
    by_container: list[tuple[str, dict[int, list[dict[str, object]]]]] = []
    for container, (by_rank, problems) in zip(outcome.containers, read, strict=True):
        unreadable += problems
        for rank in container.ranks:
            owner[rank] = container
        by_container.append((container.name, by_rank))
    # After a torchrun restart only the last attempt's records count (a rank may run on another node then);
    # where the last attempt cannot be told, and where one attempt reported a case twice, the worse counts.
    for rank, attempts in sorted(current_attempts(by_container).items()):
        for case_name, record in _counting_records(rank, attempts).items():
            records.setdefault(rank, {})[case_name] = record
            check_of.setdefault(case_name, str(record["check"]))
            if case_name not in order:
                order.append(case_name)

    # A listed check that no rank reported at all still gets its testcase, as an error.
    names: list[str] = []
    for check in scenario.checks:
        names += [n for n in order if check_of[n] == check.name] or [check.name]
    names += [n for n in order if n not in names]
    if "process_group" in names:  # it happened before the first check that needed it
        names.remove("process_group")
        names.insert(
            next((i for i, n in enumerate(names) if check_of.get(n, n) not in ("env", "identity")), len(names)), "process_group"
        )
    required = {c.name for c in scenario.checks if c.required}
    cases = []
    for name in names:
        per_rank = {rank: records.get(rank, {}).get(name) for rank in range(scenario.world_size)}
        case = _check_case(name, per_rank, owner, scenario.timeout_s)
        if scenario.world_size == 1 and case.status == PASSED and is_collective(check_of.get(name, name)):
            # One rank compares nothing: all_reduce of one rank's buffer is that buffer, whatever the backend
            # does. Not a pass; a skip that --fail-on-skip and ``required`` catch. A failure stays a failure.
            case = dataclasses.replace(
                case,
                status=SKIPPED,
                message=f"not validated: {check_of.get(name, name)} compares ranks, and world size 1 has one "
                f"(ran: {case.message})",
                skipped_ranks=(),
            )
        if (case.status == SKIPPED or case.skipped_ranks) and check_of.get(name, name) in required:
            case = CaseResult(
                name,
                FAILED,
                f"expected required check {check_of.get(name, name)} to run; it was skipped: {case.message}",
                case.duration_s,
                case.output,
            )
        cases.append(case)
    diagnosis = diagnose(outcome.containers)
    cases.append(_exit_case(outcome.containers, scenario.timeout_s, outcome.duration_s, diagnosis.restarts))
    if unreadable:
        cases.append(CaseResult("results", ERROR, "; ".join(unreadable), 0.0))
    if scenario.faults:
        cases = fault_cases(
            cases,
            outcome.fault_log or NOT_INJECTED,
            scenario.expect,
            records,
            outcome.containers,
            scenario.world_size,
            outcome.duration_s,
        )
    # The bandwidth figures as properties too (bandwidth.all_reduce.1MiB.busbw_gbps): JUnit consumers read those.
    properties += tuple(figure_properties(figures_of((c.name, c.details) for c in cases)).items())
    # The interface the backend's sockets used and its nominal speed: NCCL's yardstick beside nccl_transports.
    link = link_of((c.name, c.details) for c in cases)
    if link is not None:
        properties += (("bandwidth.link", link),)
    if diagnosis.restarts is not None:  # the suite's launch facts were read: torchrun's restart count
        properties += (("restarts", str(diagnosis.restarts)),)
    if diagnosis.store_path is not None:
        properties += (("rendezvous_store", diagnosis.store_path),)
    if diagnosis.flight_recorder_summary is not None:
        properties += (("flight_recorder", diagnosis.flight_recorder_summary),)
    # Where the target saw no start (collected from Kubernetes or Slurm), the earliest rank process's, as the records
    # say it (validated: a number within TIME_MAX_S): the history orders runs by it, whatever the order it was given.
    starts = [
        float(started)
        for by_case in records.values()
        for record in by_case.values()
        if isinstance(started := record.get("started_at"), (int, float)) and not isinstance(started, bool) and started > 0
    ]
    started_at = min(starts) if starts else None
    return ScenarioResult(plan, tuple(cases), properties, logs, outcome.duration_s, diagnosis, started_at)


# The worse outcome wins where one case has several records that count: error > failed > skipped > passed;
# a status the harness does not know is worse still (_check_case makes it an error).
_SEVERITY = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}
DUPLICATES_SHOWN = 10  # statuses named in the message; a rank that writes a case 10,000 times gets one line


def _severity(record: Mapping[str, object]) -> int:
    return _SEVERITY.get(str(record.get("status")), len(_SEVERITY))


def _counting_records(rank: int, attempts: list[tuple[str, list[dict[str, object]]]]) -> dict[str, dict[str, object]]:
    """The one record per case that counts for a rank, in first-seen order. ``attempts``: the rank's last
    attempt (one (container, records) pair), or several that cannot be ordered. A case written twice in one
    attempt, or by attempts that cannot be ordered, counts with its worse record and says so in its message;
    a case that only some of those attempts wrote cannot pass (the attempt that lacks it may be the newer)."""
    found: dict[str, list[tuple[str, dict[str, object]]]] = {}
    for container, rank_records in attempts:
        for record in rank_records:
            written = found.setdefault(str(record.get("case") or record["check"]), [])
            if (container, record) not in written:  # the same record read twice (two copies of a file) says nothing new
                written.append((container, record))
    places = [container for container, _ in attempts]
    counted: dict[str, dict[str, object]] = {}
    for case_name, written in found.items():
        worst = max((record for _, record in written), key=_severity)  # the first of the worst
        shown = [str(record.get("status"))[:20] for _, record in written[:DUPLICATES_SHOWN]]
        statuses = ", ".join(shown) + (f", ... ({len(written)} in all)" if len(written) > DUPLICATES_SHOWN else "")
        lacking = [c for c in places if c not in {where for where, _ in written}]
        if len(places) > 1:
            why = f"rank {rank} left records on {', '.join(places)} from attempts that cannot be ordered"
            if lacking:
                worst = {**worst, "status": ERROR}
                why += f"; the one on {', '.join(lacking)}, which may be the newer, has no {case_name} record, so it cannot pass"
            else:
                why += f": {statuses}; the worse counts"
            counted[case_name] = {**worst, "message": f"{worst.get('message')} ({why})"}
        elif len(written) > 1:
            why = f"rank {rank} wrote {len(written)} records for {case_name} in one attempt"
            counted[case_name] = {**worst, "message": f"{worst.get('message')} ({why}: {statuses}; the worse counts)"}
        else:
            counted[case_name] = worst
    return counted


def _check_case(
    name: str,
    per_rank: dict[int, dict[str, object] | None],
    owner: dict[int, ContainerOutcome],
    deadline_s: float,
) -> CaseResult:
    world_size = len(per_rank)
    missing = [rank for rank, record in per_rank.items() if record is None]
    present = {rank: record for rank, record in per_rank.items() if record is not None}
    duration_s = max((float(str(r.get("duration_s", 0.0))) for r in present.values()), default=0.0)
    by_status: dict[str, list[int]] = {}
    for rank, record in present.items():
        by_status.setdefault(str(record.get("status")), []).append(rank)

    lines = [f"rank {rank}: {record.get('status')}: {record.get('message')}" for rank, record in sorted(present.items())]
    parts: list[str] = []
    for status in (FAILED, ERROR):
        for rank in by_status.get(status, []):
            parts.append(f"rank {rank}: {present[rank].get('message')}")
    if missing:
        reasons = sorted({_why_missing(owner[rank], deadline_s) for rank in missing if rank in owner})
        parts.append(f"no result from rank(s) {', '.join(map(str, missing))}: {'; '.join(reasons) or 'no container ran it'}")
        for rank in missing:
            lines.append(f"rank {rank}: no result")
        for container in sorted({owner[r].name: owner[r] for r in missing if r in owner}.values(), key=lambda o: o.name):
            lines.append(f"--- {container.name} (last lines) ---\n{tail(container.stdout + container.stderr)}")
    output = "\n".join(lines)
    first = present[min(present)].get("details") if present else None
    details: Mapping[str, object] = first if isinstance(first, dict) else {}

    unknown = sorted(
        rank for status, ranks in by_status.items() if status not in (PASSED, FAILED, ERROR, SKIPPED) for rank in ranks
    )
    for rank in unknown:
        parts.append(f"rank {rank}: unrecognized result status {present[rank].get('status')!r}")
    if by_status.get(FAILED):
        return CaseResult(name, FAILED, "; ".join(parts), duration_s, output, details=details)
    if unknown or by_status.get(ERROR) or missing:
        return CaseResult(name, ERROR, "; ".join(parts), duration_s, output, details=details)
    skipped = by_status.get(SKIPPED, [])
    if skipped and len(skipped) == world_size:
        return CaseResult(name, SKIPPED, str(present[0].get("message")), duration_s, output, details=details)
    passed = by_status.get(PASSED, [])
    message = str(present[passed[0]].get("message"))
    if skipped:
        reason = present[skipped[0]].get("message")
        message += f" (rank(s) {', '.join(map(str, passed))}; skipped on rank(s) {', '.join(map(str, skipped))}: {reason})"
    return CaseResult(name, PASSED, message, duration_s, output, skipped_ranks=tuple(skipped), details=details)


def _properties(outcome: ScenarioOutcome, env: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """``env``: the details of the scenario's first ``env`` record (none: empty)."""
    scenario = outcome.plan.scenario
    props: dict[str, str] = {
        "image": outcome.plan.image,
        "image_id": outcome.image_id or "unknown",
        "backend": scenario.backend,
        "topology": scenario.topology,
        "world_size": str(scenario.world_size),
    }
    props["torch_version"] = str(env.get("torch_version", "unknown"))
    props["python_version"] = str(env.get("python_version", "unknown"))
    # torch.version.cuda is None on a CPU build: "none"; no env record at all: "unknown", like the others.
    props["cuda_version"] = str(env.get("cuda_version") or "none") if env else "unknown"
    props["scenario_hash"], props["scenario_hash_any_image"] = carried_hashes(outcome.plan)
    if scenario.backend in NCCL_BACKENDS and outcome.containers:
        # Which transport NCCL chose between each pair of ranks (NCCL_DEBUG=INFO, set by the plan): separate
        # containers fall back to sockets unless IPC and the host hash are shared (NVIDIA/nccl#945).
        props["nccl_transports"] = describe_transports(transports_between(c.stdout + c.stderr for c in outcome.containers))
        # What NCCL itself took from the environment ("set by environment to", its ENV subsystem): the proof that a
        # variable the environment check lists took effect.
        props["nccl_set_by_environment"] = describe_nccl_environment(
            set_by_environment(c.stdout + c.stderr for c in outcome.containers)
        )
    return tuple(props.items())


def carried_hashes(plan: ScenarioPlan) -> tuple[str, str]:
    """The plan's scenario hashes, as the planner filled them in (distval/plan/identity.py ``with_hashes``). The
    results never compute them: they describe the plan that ran, whatever happened to it since."""
    if not plan.scenario_hash or not plan.scenario_hash_any_image:
        raise PlanError(
            f"scenario {plan.scenario.name}: its plan carries no scenario hash (a bug in distval: every plan that runs "
            "is made with with_hashes, distval/plan/identity.py)"
        )
    return plan.scenario_hash, plan.scenario_hash_any_image


def _env_details(read: Sequence[tuple[RecordsByRank, list[str]]]) -> Mapping[str, object]:
    """The details of the first ``env`` record (containers in order, then ranks): the image's versions."""
    for by_rank, _ in read:
        for rank in sorted(by_rank):
            for record in by_rank[rank]:
                details = record.get("details")
                if record.get("check") == "env" and isinstance(details, dict):
                    return details
    return {}
