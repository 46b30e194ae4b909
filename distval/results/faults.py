"""A fault scenario's testcases: the ``faults`` testcase (the verdict of distval/results/expectations.py) and the
checks the faults interrupted.

A fault is meant to break the check it lands in; those expected failures must not make that check red,
and nothing that did not run may pass. So a check that ended on every rank before the first fault keeps
its own verdict (a wrong answer before the fault stays red), and a check the fault interrupted, or that
never ran after it, is skipped with that reason; the ``faults`` testcase alone says whether the ranks
reacted as expected. With ``expect: []`` (no rank may fail) every check keeps its own verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from distval.checks.catalog import FAULTS_CASE
from distval.results.expectations import FaultLog, evaluate
from distval.results.logs import first_error_line
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, FAILED, PASSED, SKIPPED, CaseResult, ContainerOutcome

# A fault scenario that ran without the fault runtime (host mode runs local processes, no containers):
# nothing was injected, so nothing about the faults may pass.
NOT_INJECTED = FaultLog(skip_reason="faults are injected only into containers; this run had none (host mode)")


def _with_error_lines(log: FaultLog, containers: tuple[ContainerOutcome, ...]) -> FaultLog:
    by_name = {c.name: c for c in containers}
    exits = tuple(
        dataclasses.replace(
            gone,
            error_line=first_error_line(by_name[gone.container].stderr) or first_error_line(by_name[gone.container].stdout),
        )
        if gone.error_line is None and gone.container in by_name
        else gone
        for gone in log.exits
    )
    return dataclasses.replace(log, exits=exits)


def fault_cases(
    cases: list[CaseResult],
    log: FaultLog,
    expect: tuple[object, ...] | None,
    records: Mapping[int, Mapping[str, Mapping[str, object]]],
    containers: tuple[ContainerOutcome, ...],
    world_size: int,
    duration_s: float,
) -> list[CaseResult]:
    """``cases`` (the scenario's testcases as if there were no faults) judged with the faults in mind."""
    if log.skip_reason is not None:
        return [dataclasses.replace(c, status=SKIPPED, message=log.skip_reason) for c in cases if c.name != "results"] + [
            CaseResult(FAULTS_CASE, SKIPPED, log.skip_reason, 0.0)
        ]
    log = _with_error_lines(log, containers)
    by_rank = {rank: list(rank_records.values()) for rank, rank_records in records.items()}
    verdict = evaluate(tuple(expect or ()), log, by_rank, world_size)  # type: ignore[arg-type]
    lines = [f"rank {v.rank}: {'ok' if v.ok else 'WRONG'}: expected {v.expected}; seen {v.seen}" for v in verdict.ranks]
    lines += [
        f"fault {f.index} ({f.kind}, node {f.node}) at {f.at:.3f} (the Engine took {f.took_s:.2f} s): {f.action}"
        + (f" (failed: {f.error})" if f.error else "")
        for f in log.injected
    ]
    if log.ended:
        lines.append(f"the runtime: {log.ended}")
    details = {
        "fault_at": verdict.fault_at,
        "injected": [dataclasses.asdict(f) for f in log.injected],
        "ranks": {
            str(v.rank): {"expected": v.expected, "seen": v.seen, "fault_to_failure_s": v.after_s, "ok": v.ok}
            for v in verdict.ranks
        },
    }
    faults_case = CaseResult(
        FAULTS_CASE, PASSED if verdict.ok else FAILED, verdict.message, duration_s, "\n".join(lines), details=details
    )
    if not expect or verdict.fault_at is None:
        return [*cases, faults_case]
    fault_at = verdict.fault_at
    judged = []
    for case in cases:
        if case.name in ("results",):
            judged.append(case)
            continue
        if case.name == EXIT_STATUS_CASE:
            if case.status != PASSED:
                why = f"the runtime stopped them: {log.ended}" if log.ended else case.message
                case = dataclasses.replace(
                    case, status=SKIPPED, message=f"the faults ended containers on purpose ({FAULTS_CASE} judges it): {why}"
                )
            judged.append(case)
            continue
        judged.append(_judged_by_rank(case, [records.get(rank, {}).get(case.name) for rank in range(world_size)], fault_at))
    return [*judged, faults_case]


def _judged_by_rank(case: CaseResult, ranks: list[Mapping[str, object] | None], fault_at: float) -> CaseResult:
    """One check of a fault scenario, each rank's record (None: none) judged by whether it ended before the fault."""
    before = [rank for rank, r in enumerate(ranks) if r is not None and _ended(r) < fault_at]
    after = [rank for rank in range(len(ranks)) if rank not in before]
    bad_before = [rank for rank in before if str(ranks[rank].get("status")) in (FAILED, ERROR)]  # type: ignore[union-attr]
    if not after:
        return case  # it ended before the fault on every rank: its own verdict
    interrupted = "interrupted by the faults or not run after them" + (f" on rank(s) {_ranks(after)}" if before else "")
    if bad_before:
        # A failure before the fault is the image's, whatever the fault did to the other ranks: red, in the words
        # of the rank that failed (the case's own message may be an interrupted rank's expected error).
        first = ranks[bad_before[0]] or {}
        status = case.status if case.status in (FAILED, ERROR) else str(first.get("status"))
        return dataclasses.replace(
            case,
            status=status,
            message=f"before the fault, rank {bad_before[0]}: {first.get('message', '')}; {interrupted}",
        )
    passed = f"passed before the fault on rank(s) {_ranks(before)}; " if before else ""
    return dataclasses.replace(
        case, status=SKIPPED, message=f"{passed}{interrupted} ({FAULTS_CASE} judges how the ranks reacted)"
    )


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


def _ended(record: Mapping[str, object]) -> float:
    ended = record.get("ended_at")
    return float(ended) if isinstance(ended, (int, float)) else float("inf")
