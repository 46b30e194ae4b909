"""A fault scenario's testcases: the checks that ended before the fault keep their verdicts (a wrong answer
before it stays red), the check the fault interrupted is skipped (never passed, never red), exit_status
is judged by the ``faults`` testcase, and a netem scenario on a kernel without netem is skipped whole."""

from __future__ import annotations

import json

import pytest

from harness.config import parse_config
from harness.expectations import FaultLog, Injected
from harness.plan import plan_scenario
from harness.results import ContainerOutcome, ScenarioOutcome, summarize_scenario
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
    return plan_scenario(parse_config(text, "f.yaml").scenarios[0], "r1", None)


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
