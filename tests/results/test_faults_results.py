"""A fault scenario's testcases: the checks that ended before the fault keep their verdicts (a wrong answer
before it stays red), the check the fault interrupted is skipped (never passed, never red), exit_status
is judged by the ``faults`` testcase, and a netem scenario on a kernel without netem is skipped whole."""

from __future__ import annotations

import dataclasses
import json

import pytest

from distval.config import parse_config
from distval.config.faults import Expectation
from distval.plan.identity import with_hashes
from distval.results.expectations import CONNECTION_CLOSED, KILLED, ContainerExit, FaultLog, Injected
from distval.results.faults import fault_cases
from distval.results.outcome import CaseResult, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import summarize_scenario
from distval.targets.engines.planning import plan_scenario
from tests.config_helpers import yaml_text

FAULT_AT = 2000.0
CLOSED = "all_reduce iteration 9 raised after 2.1 s in the loop: RuntimeError: Connection closed by peer [10.0.0.3]:4000"


def plan() -> object:
    text = yaml_text(
        """
        scenarios:
          - name: f
            topology: cross-container
            world_size: 2
            checks: [all_reduce, collective_loop]
            faults: [{kind: kill, node: 1, after: {check: all_reduce, delay_s: 2}}]
            expect:
              - {ranks: survivors, error: connection_closed, within_s: [0, 5]}
              - {ranks: victims, error: killed, within_s: [0, 1]}
        """
    )
    return with_hashes(plan_scenario(parse_config(text, "f.yaml").scenarios[0], "r1", None))


def line(check: str, case: str, rank: int, status: str, at: float, message: str = "ok") -> str:
    return json.dumps({"check": check, "case": case, "rank": rank, "status": status, "ended_at": at, "message": message})


def outcome(rank0: list[str], rank1: list[str], log: FaultLog) -> ScenarioOutcome:
    sp = plan()
    containers = tuple(
        ContainerOutcome(f"distval-r1-f-n{n}", n, (n,), code, killed, "", err, {f"rank-{n}.jsonl": "\n".join(lines).encode()})
        for n, lines, code, killed, err in ((0, rank0, None, True, ""), (1, rank1, 137, False, ""))
    )
    return ScenarioOutcome(sp, "sha256:x", 30.0, containers, fault_log=log)  # type: ignore[arg-type]


KILL = FaultLog(injected=(Injected(0, "kill", 1, (1,), FAULT_AT, "kill container distval-r1-f-n1", kills=True),))


def statuses(result: object) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in result.cases}  # type: ignore[attr-defined]


def test_expected_failures_are_not_red_and_nothing_interrupted_passes() -> None:
    before = [line("process_group", "process_group", r, "passed", FAULT_AT - 3) for r in (0, 1)]
    ar = [line("all_reduce", "all_reduce", r, "passed", FAULT_AT - 2) for r in (0, 1)]
    loop = line("collective_loop", "collective_loop.all_reduce", 0, "error", FAULT_AT + 0.3, CLOSED)
    result = summarize_scenario(outcome([before[0], ar[0], loop], [before[1], ar[1]], KILL))
    cases = statuses(result)
    assert cases["all_reduce"][0] == "passed"
    assert cases["collective_loop.all_reduce"] == (
        "skipped",
        "interrupted by the faults or not run after them (faults judges how the ranks reacted)",
    )
    assert cases["exit_status"][0] == "skipped" and cases["exit_status"][1].startswith("the faults ended containers on purpose")
    assert cases["faults"][0] == "passed", cases["faults"]
    assert result.status == "passed"
    faults = next(c for c in result.cases if c.name == "faults")
    assert faults.details["ranks"]["0"]["fault_to_failure_s"] == pytest.approx(0.3)


def test_a_wrong_answer_before_the_fault_stays_red() -> None:
    wrong = line("all_reduce", "all_reduce", 1, "failed", FAULT_AT - 2, "expected 3.0, got 4.0")
    good = line("all_reduce", "all_reduce", 0, "passed", FAULT_AT - 2)
    loop = line("collective_loop", "collective_loop.all_reduce", 0, "error", FAULT_AT + 0.3, CLOSED)
    result = summarize_scenario(outcome([good, loop], [wrong], KILL))
    assert statuses(result)["all_reduce"][0] == "failed"
    assert result.status == "failed"


def test_the_verdict_failing_makes_the_scenario_fail_with_expected_and_seen() -> None:
    ar = [line("all_reduce", "all_reduce", r, "passed", FAULT_AT - 2) for r in (0, 1)]
    late = line(
        "collective_loop", "collective_loop.all_reduce", 0, "error", FAULT_AT + 10.2, "Timed out waiting 10000ms for recv"
    )
    result = summarize_scenario(outcome([ar[0], late], [ar[1]], KILL))
    status, message = statuses(result)["faults"]
    assert status == "failed"
    assert message.startswith(
        "kill of node 1: rank 0: expected connection_closed 0..5 s after the fault; seen timeout after 10.20 s: "
    )
    assert result.status == "failed"


def test_no_netem_skips_the_whole_scenario_with_the_reason() -> None:
    reason = "latency and loss need the kernel's sch_netem, which this machine lacks: ... Specified qdisc kind is unknown."
    result = summarize_scenario(outcome([], [], FaultLog(skip_reason=reason)))
    assert {status for status, _ in statuses(result).values()} == {"skipped"}
    assert statuses(result)["faults"] == ("skipped", reason)
    assert result.status == "skipped"


def test_a_fault_scenario_run_without_containers_passes_nothing() -> None:
    ar = [line("all_reduce", "all_reduce", r, "passed", FAULT_AT - 2) for r in (0, 1)]
    sp = plan()
    containers = tuple(ContainerOutcome(f"n{n}", n, (n,), 0, False, "", "", {f"rank-{n}.jsonl": ar[n].encode()}) for n in (0, 1))
    result = summarize_scenario(ScenarioOutcome(sp, None, 1.0, containers))  # type: ignore[arg-type]
    assert {status for status, _ in statuses(result).values()} == {"skipped"}
    assert statuses(result)["faults"][1].startswith("faults are injected only into containers")


# fault_cases on its own, for what the scenario-level tests above do not reach (each test below kills
# mutants of distval/results/faults.py that tools/mutation_pass.py found surviving).
SURVIVORS_CLOSED = (
    Expectation("survivors", (CONNECTION_CLOSED,), (0.0, 5.0)),
    Expectation("victims", (KILLED,), (0.0, 1.0)),
)
SLOW = FaultLog(injected=(Injected(0, "slow", 1, (1,), FAULT_AT, "tc qdisc add", kills=False),))


def rec(status: str, at: float, message: str = "ok") -> dict[str, object]:
    return {"status": status, "ended_at": at, "message": message}


def judge(
    cases: list[CaseResult],
    records: dict[int, dict[str, dict[str, object]]],
    log: FaultLog = KILL,
    expect: tuple[Expectation, ...] = SURVIVORS_CLOSED,
    containers: tuple[ContainerOutcome, ...] = (),
    world_size: int = 2,
) -> dict[str, CaseResult]:
    judged = fault_cases(cases, log, expect, records, containers, world_size, 30.0)
    assert len({c.name for c in judged}) == len(judged), f"a testcase twice: {[c.name for c in judged]}"
    return {c.name: c for c in judged}


def test_an_exit_is_named_by_its_containers_first_error_line_stderr_before_stdout() -> None:
    exits = (
        ContainerExit("n0", (0,), FAULT_AT + 0.5, 1, False),  # both streams: stderr's line
        ContainerExit("n1", (1,), FAULT_AT + 0.6, 1, False),  # nothing on stderr: stdout's line
        ContainerExit("n2", (2,), FAULT_AT + 0.7, 1, False, "RuntimeError: Connection reset by peer"),  # read already
        ContainerExit("gone", (3,), FAULT_AT + 0.8, 1, False),  # no outcome for it: its own words
    )
    containers = (
        ContainerOutcome("n0", 0, (0,), 1, False, "ValueError: printed to stdout", "DistNetworkError: Broken pipe"),
        ContainerOutcome("n1", 1, (1,), 1, False, "RuntimeError: Timed out waiting 10000ms for recv", ""),
        ContainerOutcome("n2", 2, (2,), 1, False, "", "ValueError: not the line the runtime read"),
    )
    log = dataclasses.replace(SLOW, exits=exits)
    ranks = judge([], {}, log, (), containers, world_size=4)["faults"].details["ranks"]
    seen = {rank: v["seen"] for rank, v in ranks.items()}  # type: ignore[attr-defined]
    assert seen == {
        "0": "connection_closed after 0.50 s: DistNetworkError: Broken pipe",
        "1": "timeout after 0.60 s: RuntimeError: Timed out waiting 10000ms for recv",
        "2": "connection_closed after 0.70 s: RuntimeError: Connection reset by peer",
        "3": "other after 0.80 s: the container exited (exit code 1)",
    }


def test_a_scenario_skipped_for_its_faults_still_lists_every_check_skipped() -> None:
    log = FaultLog(skip_reason="no sch_netem here")
    cases = [CaseResult("all_reduce", "passed", "ok", 1.0), CaseResult("exit_status", "passed", "ok", 0.0)]
    judged = judge(cases, {}, log)
    assert [(c.name, c.status, c.message) for c in judged.values()] == [
        ("all_reduce", "skipped", "no sch_netem here"),
        ("exit_status", "skipped", "no sch_netem here"),
        ("faults", "skipped", "no sch_netem here"),
    ]
    assert judged["faults"].duration_s == 0.0, "nothing ran: no time to report"


def test_the_faults_output_says_which_ranks_were_wrong_which_fault_failed_and_why_the_runtime_stopped() -> None:
    log = dataclasses.replace(KILL, ended="the faults' verdict is decided")
    output = judge([], {0: {"collective_loop": rec("error", FAULT_AT + 0.3, CLOSED)}}, log)["faults"].output.splitlines()
    assert output[0].startswith("rank 0: ok: expected connection_closed")
    assert output[1].startswith("rank 1: ok: expected killed")
    assert output[2:] == [
        "fault 0 (kill, node 1) at 2000.000 (the Engine took 0.00 s): kill container distval-r1-f-n1",
        "the runtime: the faults' verdict is decided",
    ]
    quiet = judge([], {}, KILL)["faults"].output.splitlines()
    assert quiet[0].startswith("rank 0: WRONG: expected connection_closed") and not quiet[-1].startswith("the runtime")
    broken = Injected(1, "partition", 0, (0,), FAULT_AT + 1, "iptables", kills=False, error="exit 2")
    failed = judge([], {}, FaultLog(injected=(broken,)))["faults"].output
    assert failed == "fault 1 (partition, node 0) at 2001.000 (the Engine took 0.00 s): iptables (failed: exit 2)"


def test_exit_status_says_the_runtime_stopped_the_containers_or_keeps_its_own_words() -> None:
    exit_case = [CaseResult("exit_status", "failed", "n0 exited 137", 0.0)]
    stopped = judge(exit_case, {}, dataclasses.replace(KILL, ended="decided"))["exit_status"]
    assert (stopped.status, stopped.message) == (
        "skipped",
        "the faults ended containers on purpose (faults judges it): the runtime stopped them: decided",
    )
    own = judge(exit_case, {}, KILL)["exit_status"]
    assert own.message == "the faults ended containers on purpose (faults judges it): n0 exited 137"


def test_with_no_expectation_every_check_keeps_its_own_verdict() -> None:
    cases = [CaseResult("collective_loop", "failed", "timed out", 9.0), CaseResult("exit_status", "failed", "n1: 1", 0.0)]
    records = {1: {"collective_loop": rec("failed", FAULT_AT + 3, "timed out")}}
    judged = judge(cases, records, SLOW, ())
    assert judged["collective_loop"].status == "failed" and judged["exit_status"].status == "failed"


def test_unreadable_results_stay_one_error() -> None:
    cases = [CaseResult("all_reduce", "passed", "ok", 1.0), CaseResult("results", "error", "rank-1.jsonl:3: unreadable", 0.0)]
    records = {r: {"all_reduce": rec("passed", FAULT_AT - 1)} for r in (0, 1)}
    judged = judge(cases, records)
    assert (judged["results"].status, judged["all_reduce"].status) == ("error", "passed")


def test_a_check_that_ended_at_the_faults_own_instant_is_not_known_to_be_before_it() -> None:
    records = {r: {"all_reduce": rec("passed", FAULT_AT)} for r in (0, 1)}
    assert judge([CaseResult("all_reduce", "passed", "ok", 1.0)], records)["all_reduce"].status == "skipped"


def test_a_wrong_answer_before_the_fault_stays_red_when_another_rank_never_finished_the_check() -> None:
    records = {1: {"all_reduce": rec("failed", FAULT_AT - 2, "expected 3.0, got 4.0")}}
    assert judge([CaseResult("all_reduce", "failed", "wrong", 1.0)], records)["all_reduce"].status == "failed"


def test_a_fault_scenario_whose_checks_were_all_interrupted_is_validated_by_its_faults_verdict() -> None:
    """The faults case is a verdict: when the fault interrupts every listed check on purpose and the ranks
    reacted as expected, the scenario passed (it is not 'skipped'); without the faults verdict it would be."""
    before = [line("process_group", "process_group", r, "passed", FAULT_AT - 3) for r in (0, 1)]
    ar = line("all_reduce", "all_reduce", 0, "error", FAULT_AT + 0.3, CLOSED)
    result = summarize_scenario(outcome([before[0], ar], [before[1]], KILL))
    cases = statuses(result)
    assert cases["all_reduce"][0] == "skipped" and cases["faults"][0] == "passed", cases
    assert result.status == "passed"
    failing = dataclasses.replace(result, cases=tuple(c for c in result.cases if c.name != "faults"))
    assert failing.status == "skipped"  # the same cases without the faults verdict validate nothing


def test_a_check_that_errored_before_the_fault_stays_an_error_not_a_skip() -> None:
    records = {0: {"all_reduce": rec("error", FAULT_AT - 2, "RuntimeError: gloo refused the tensor")}}
    judged = judge([CaseResult("all_reduce", "error", "RuntimeError: gloo refused the tensor", 1.0)], records)["all_reduce"]
    assert judged.status == "error", judged
    assert judged.message == (
        "before the fault, rank 0: RuntimeError: gloo refused the tensor; "
        "interrupted by the faults or not run after them on rank(s) 1"
    )
    # On every rank before the fault: its own verdict and words.
    both = {r: {"all_reduce": rec("error", FAULT_AT - 2, "refused")} for r in (0, 1)}
    assert judge([CaseResult("all_reduce", "error", "own words", 1.0)], both)["all_reduce"].message == "own words"


def test_a_check_that_ended_before_the_fault_on_some_ranks_is_judged_rank_by_rank() -> None:
    world = 3
    # Ranks 0 and 2 passed before the fault, rank 1 was cut by it: not a pass (it did not finish on rank 1), not red.
    records = {0: {"all_reduce": rec("passed", FAULT_AT - 1)}, 2: {"all_reduce": rec("passed", FAULT_AT - 1)}}
    records[1] = {"all_reduce": rec("error", FAULT_AT + 0.4, CLOSED)}
    case = CaseResult("all_reduce", "error", CLOSED, 1.0)
    judged = judge([case], records, world_size=world)["all_reduce"]
    assert (judged.status, judged.message) == (
        "skipped",
        "passed before the fault on rank(s) 0, 2; interrupted by the faults or not run after them on rank(s) 1 "
        "(faults judges how the ranks reacted)",
    )
    # Rank 2 failed before the fault, rank 1 was cut by it: red in rank 2's words, whatever the case said first.
    records[2] = {"all_reduce": rec("failed", FAULT_AT - 1, "expected 3.0, got 4.0")}
    judged = judge([case], records, world_size=world)["all_reduce"]
    assert judged.status == "error" and judged.message.startswith("before the fault, rank 2: expected 3.0, got 4.0; ")
    # A case the summary did not call red (its ranks skipped it) is red from the rank that failed before the fault.
    judged = judge([CaseResult("all_reduce", "skipped", "x", 1.0)], records, world_size=world)["all_reduce"]
    assert judged.status == "failed"
    # Every rank before the fault: the case's own verdict.
    done = {r: {"all_reduce": rec("passed", FAULT_AT - 1)} for r in range(world)}
    assert judge([CaseResult("all_reduce", "passed", "ok", 1.0)], done, world_size=world)["all_reduce"].status == "passed"


def test_the_first_rank_that_failed_before_the_fault_is_the_one_named() -> None:
    records = {
        0: {"all_reduce": rec("failed", FAULT_AT - 2, "rank 0's wrong answer")},
        1: {"all_reduce": rec("failed", FAULT_AT - 1, "rank 1's wrong answer")},
    }
    judged = judge([CaseResult("all_reduce", "failed", "x", 1.0)], records, world_size=3)["all_reduce"]
    assert judged.message.startswith("before the fault, rank 0: rank 0's wrong answer; "), judged.message
