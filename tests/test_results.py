"""harness.results: raw outcomes (hand-made, no Docker) -> one case per check -> the run's exit code."""

from __future__ import annotations

import json
from typing import Any

from harness.config import parse_config
from harness.errors import EXIT_BAD_INPUT, EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_PASSED, ConfigError
from harness.plan import ScenarioPlan, plan_scenario
from harness.results import (
    ERROR,
    EXIT_STATUS_CASE,
    FAILED,
    PASSED,
    SKIPPED,
    CaseResult,
    ContainerOutcome,
    RunSummary,
    ScenarioOutcome,
    ScenarioResult,
    summarize_scenario,
    tail,
)

CONFIG = """\
timeout_s: 120
scenarios:
  - name: inside
    topology: in-container
    world_size: 2
    checks: [env, all_reduce]
  - name: across
    topology: cross-container
    world_size: 2
    checks: [env, all_reduce]
"""
RUN_ID = "feedf00d"


def plans() -> tuple[ScenarioPlan, ScenarioPlan]:
    inside, across = parse_config(CONFIG, "results.yaml").scenarios
    return plan_scenario(inside, RUN_ID, None), plan_scenario(across, RUN_ID, None)


def record(check: str, rank: int, status: str = PASSED, message: str = "ok", duration_s: float = 0.25, **details: Any) -> str:
    return json.dumps(
        {
            "check": check,
            "rank": rank,
            "status": status,
            "message": message,
            "duration_s": duration_s,
            "hostname": f"host{rank}",
            "details": details,
        },
        sort_keys=True,
    )


def env_record(rank: int, status: str = PASSED, message: str = "torch 2.6.0, Python 3.11.2") -> str:
    return record("env", rank, status, message, 0.5, torch_version="2.6.0+cpu", python_version="3.11.2")


def jsonl(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def passing_files(rank: int) -> dict[str, bytes]:
    return {f"rank-{rank}.jsonl": jsonl(env_record(rank), record("all_reduce", rank, message="all_reduce gave 3.0"))}


def container(
    plan: ScenarioPlan,
    index: int,
    files: dict[str, bytes],
    exit_code: int | None = 0,
    killed: bool = False,
    stdout: str = "",
    stderr: str = "",
    problem: str | None = None,
) -> ContainerOutcome:
    cp = plan.containers[index]
    return ContainerOutcome(cp.name, cp.node_rank, cp.ranks, exit_code, killed, stdout, stderr, files, problem)


def cases_of(result: ScenarioResult) -> dict[str, CaseResult]:
    names = [c.name for c in result.cases]
    assert len(names) == len(set(names)), names
    return {c.name: c for c in result.cases}


# --- all passed --------------------------------------------------------------------------------------


def test_all_passed_in_container() -> None:
    inside, _ = plans()
    files = {**passing_files(0), **passing_files(1)}
    outcome = ScenarioOutcome(inside, "sha256:1234", 7.5, (container(inside, 0, files, stdout="rank logs here"),))
    result = summarize_scenario(outcome)
    assert [(c.name, c.status) for c in result.cases] == [("env", PASSED), ("all_reduce", PASSED), (EXIT_STATUS_CASE, PASSED)]
    assert result.status == PASSED
    cases = cases_of(result)
    assert cases["env"].message == "torch 2.6.0, Python 3.11.2"  # rank 0's message
    assert cases["all_reduce"].duration_s == 0.25
    assert cases[EXIT_STATUS_CASE].message == "1 container(s) exited 0 within the 120 s deadline"
    assert cases[EXIT_STATUS_CASE].duration_s == 7.5
    assert "rank 0: passed: " in cases["all_reduce"].output and "rank 1: passed: " in cases["all_reduce"].output
    assert result.duration_s == 7.5
    assert "rank logs here" in result.logs
    assert f"===== {inside.containers[0].name} (node 0, ranks 0,1) stdout =====" in result.logs


def test_all_passed_cross_container_and_properties() -> None:
    _, across = plans()
    outcome = ScenarioOutcome(
        across,
        "sha256:abcd",
        3.0,
        (container(across, 0, passing_files(0)), container(across, 1, passing_files(1))),
    )
    result = summarize_scenario(outcome)
    assert [(c.name, c.status) for c in result.cases] == [("env", PASSED), ("all_reduce", PASSED), (EXIT_STATUS_CASE, PASSED)]
    assert dict(result.properties) == {
        "image": across.image,
        "image_id": "sha256:abcd",
        "backend": "gloo",
        "topology": "cross-container",
        "world_size": "2",
        "torch_version": "2.6.0+cpu",
        "python_version": "3.11.2",
    }


def test_properties_without_env_details() -> None:
    _, across = plans()
    files = [{f"rank-{r}.jsonl": jsonl(record("all_reduce", r))} for r in (0, 1)]
    outcome = ScenarioOutcome(across, None, 1.0, (container(across, 0, files[0]), container(across, 1, files[1])))
    properties = dict(summarize_scenario(outcome).properties)
    assert properties["image_id"] == "unknown"
    assert properties["torch_version"] == "unknown"
    assert properties["python_version"] == "unknown"


# --- failures and errors -------------------------------------------------------------------------------


def test_one_rank_failed() -> None:
    _, across = plans()
    message = "all_reduce(SUM) of rank+1 over 2 ranks: expected 3.0 in every element, got 2.0 at element 0"
    rank1 = {"rank-1.jsonl": jsonl(env_record(1), record("all_reduce", 1, FAILED, message, 1.5))}
    outcome = ScenarioOutcome(across, "id", 2.0, (container(across, 0, passing_files(0)), container(across, 1, rank1)))
    result = summarize_scenario(outcome)
    cases = cases_of(result)
    assert cases["env"].status == PASSED
    assert cases["all_reduce"].status == FAILED
    assert cases["all_reduce"].message == f"rank 1: {message}"
    assert "rank 0" not in cases["all_reduce"].message
    assert cases["all_reduce"].duration_s == 1.5  # the slowest rank
    assert f"rank 1: failed: {message}" in cases["all_reduce"].output
    assert cases[EXIT_STATUS_CASE].status == PASSED
    assert result.status == FAILED


def test_rank_error_record_is_an_error() -> None:
    inside, _ = plans()
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0, ERROR, "ProcessGroupUnavailable: init failed")),
        "rank-1.jsonl": jsonl(env_record(1), record("all_reduce", 1, ERROR, "ProcessGroupUnavailable: init failed")),
    }
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    case = cases_of(result)["all_reduce"]
    assert case.status == ERROR
    assert case.message == "rank 0: ProcessGroupUnavailable: init failed; rank 1: ProcessGroupUnavailable: init failed"
    assert result.status == ERROR


def test_rank_killed_at_deadline_wrote_nothing() -> None:
    _, across = plans()
    killed = container(across, 1, {}, exit_code=137, killed=True, stdout="waiting for rendezvous\n" * 3)
    outcome = ScenarioOutcome(across, "id", 120.4, (container(across, 0, passing_files(0)), killed))
    result = summarize_scenario(outcome)
    cases = cases_of(result)
    name = across.containers[1].name
    for check in ("env", "all_reduce"):
        case = cases[check]
        assert case.status == ERROR
        assert case.message.startswith("no result from rank(s) 1: ")
        assert f"container {name} was still running at the 120 s deadline and was killed" in case.message
        assert "rank 1: no result" in case.output
        assert f"--- {name} (last lines) ---\nwaiting for rendezvous" in case.output
    exit_case = cases[EXIT_STATUS_CASE]
    assert exit_case.status == ERROR
    assert exit_case.message.startswith("expected every container to exit 0 within the deadline; ")
    assert "deadline" in exit_case.message and name in exit_case.message
    assert across.containers[0].name not in exit_case.message
    assert result.status == ERROR


def test_rank_exited_nonzero_names_the_exit_code_and_last_error_line() -> None:
    _, across = plans()
    stderr = 'Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: connection refused\n'
    crashed = container(across, 1, {}, exit_code=1, stderr=stderr)
    outcome = ScenarioOutcome(across, "id", 4.0, (container(across, 0, passing_files(0)), crashed))
    cases = cases_of(summarize_scenario(outcome))
    expected = f"container {across.containers[1].name} exited with code 1: RuntimeError: connection refused"
    assert cases["env"].message == f"no result from rank(s) 1: {expected}"
    assert cases[EXIT_STATUS_CASE].status == ERROR
    assert expected in cases[EXIT_STATUS_CASE].message


def test_container_problem_is_the_reason() -> None:
    _, across = plans()
    problem = "container x was killed by the kernel's OOM killer"
    oom = container(across, 1, {}, exit_code=137, problem=problem)
    cases = cases_of(summarize_scenario(ScenarioOutcome(across, "id", 1.0, (container(across, 0, passing_files(0)), oom))))
    assert cases["all_reduce"].message == f"no result from rank(s) 1: {problem}"
    assert problem in cases[EXIT_STATUS_CASE].message


def test_garbled_last_line_keeps_earlier_records() -> None:
    inside, _ = plans()
    cut = record("all_reduce", 1, message="all_reduce gave 3.0")[:37]
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0)),
        "rank-1.jsonl": jsonl(env_record(1)) + cut.encode(),  # no newline: cut by a crash
    }
    outcome = ScenarioOutcome(inside, "id", 2.0, (container(inside, 0, files, exit_code=1, stderr="Killed\n"),))
    result = summarize_scenario(outcome)
    cases = cases_of(result)
    assert cases["env"].status == PASSED  # rank 1's complete env record was kept
    assert cases["all_reduce"].status == ERROR
    assert cases["all_reduce"].message.startswith("no result from rank(s) 1: ")
    assert [c.name for c in result.cases][-1] == "results"
    assert cases["results"].status == ERROR
    assert cases["results"].message == (f"{inside.containers[0].name}:rank-1.jsonl:2: unreadable result line (cut by a crash?)")


def test_garbage_bytes_and_non_record_json_are_unreadable() -> None:
    inside, _ = plans()
    files = {
        "rank-0.jsonl": jsonl(env_record(0), "[1, 2]", record("all_reduce", 0)),
        "rank-1.jsonl": b"\xff\xfe\x00garbage\n" + jsonl(env_record(1), '{"rank": "one"}', record("all_reduce", 1)),
    }
    result = summarize_scenario(ScenarioOutcome(inside, "id", 2.0, (container(inside, 0, files),)))
    cases = cases_of(result)
    assert cases["env"].status == PASSED and cases["all_reduce"].status == PASSED
    name = inside.containers[0].name
    assert cases["results"].message.split("; ") == [
        f"{name}:rank-0.jsonl:2: unreadable result line (cut by a crash?)",
        f"{name}:rank-1.jsonl:1: unreadable result line (cut by a crash?)",
        f"{name}:rank-1.jsonl:3: unreadable result line (cut by a crash?)",
    ]
    assert result.status == ERROR


def test_all_ranks_skipped_is_skipped() -> None:
    inside, _ = plans()
    files = {f"rank-{r}.jsonl": jsonl(env_record(r, SKIPPED, "no CUDA device"), record("all_reduce", r)) for r in (0, 1)}
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    cases = cases_of(result)
    assert cases["env"].status == SKIPPED
    assert cases["env"].message == "no CUDA device"
    assert result.status == PASSED


def test_unexpected_check_in_records_becomes_a_case_after_the_configured_ones() -> None:
    inside, _ = plans()
    files = {f"rank-{r}.jsonl": jsonl(env_record(r), record("all_reduce", r), record("broadcast", r)) for r in (0, 1)}
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    assert [c.name for c in result.cases] == ["env", "all_reduce", "broadcast", EXIT_STATUS_CASE]


def test_containers_that_wrote_nothing_and_exited_0_are_not_a_pass() -> None:
    inside, _ = plans()
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, {}),)))
    cases = cases_of(result)
    assert cases["env"].status == ERROR
    assert cases["env"].message == f"no result from rank(s) 0, 1: container {inside.containers[0].name} exited with code 0"
    assert cases[EXIT_STATUS_CASE].status == PASSED
    assert result.status == ERROR


def test_setup_error_is_a_single_setup_case() -> None:
    _, across = plans()
    partial = container(across, 0, {}, exit_code=None, stdout="partial log")
    outcome = ScenarioOutcome(across, None, 0.7, (partial,), setup_error="network create failed: 409 Conflict")
    result = summarize_scenario(outcome)
    assert result.cases == (CaseResult("setup", ERROR, "network create failed: 409 Conflict", 0.7),)
    assert result.status == ERROR
    assert "partial log" in result.logs
    assert dict(result.properties)["topology"] == "cross-container"


# --- regressions: malformed records crashed or passed when these tests were written ---------------------


def test_unknown_status_is_not_a_pass() -> None:
    """Was: a status other than passed/failed/error/skipped fell through to PASSED."""
    inside, _ = plans()
    files = {f"rank-{r}.jsonl": jsonl(env_record(r), record("all_reduce", r, "bogus", "?")) for r in (0, 1)}
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    case = cases_of(result)["all_reduce"]
    assert case.status == ERROR
    assert "rank 0" in case.message and "rank 1" in case.message and "bogus" in case.message
    assert result.status == ERROR


def test_record_without_check_is_a_results_error() -> None:
    """Was: a JSON line with a rank but no 'check' raised KeyError out of summarize_scenario."""
    inside, _ = plans()
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0)),
        "rank-1.jsonl": jsonl(env_record(1), '{"rank": 1, "status": "passed", "message": "m"}'),
    }
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    cases = cases_of(result)
    assert cases["results"].status == ERROR
    assert cases["results"].message == f"{inside.containers[0].name}:rank-1.jsonl:2: unreadable result line (cut by a crash?)"
    assert cases["all_reduce"].status == ERROR  # rank 1 has no all_reduce record


def test_record_with_null_duration_does_not_crash() -> None:
    """Was: 'duration_s': null raised ValueError in _check_case."""
    inside, _ = plans()
    null_duration = record("all_reduce", 1).replace('"duration_s": 0.25', '"duration_s": null')
    assert '"duration_s": null' in null_duration
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0)),
        "rank-1.jsonl": jsonl(env_record(1), null_duration),
    }
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    case = cases_of(result)["all_reduce"]
    assert isinstance(case.duration_s, float)
    assert case.status in (PASSED, ERROR)


def test_same_check_twice_cannot_mask_a_failure() -> None:
    """Records are keyed by check name, so the config rejects a check listed twice in one scenario."""
    text = (
        "scenarios:\n  - name: twice\n    topology: in-container\n    world_size: 2\n"
        "    checks: [all_reduce, {name: all_reduce, args: {numel: 1024}}]\n"
    )
    try:
        (scenario,) = parse_config(text, "twice.yaml").scenarios
    except ConfigError:
        return  # rejecting duplicate checks in the config is one acceptable fix
    plan = plan_scenario(scenario, RUN_ID, None)
    # Each rank: the first all_reduce (numel 1) failed, the second (numel 1024) passed, in suite order.
    files = {
        f"rank-{r}.jsonl": jsonl(record("all_reduce", r, FAILED, "expected 3.0, got 2.0"), record("all_reduce", r, PASSED, "ok"))
        for r in (0, 1)
    }
    result = summarize_scenario(ScenarioOutcome(plan, "id", 1.0, (container(plan, 0, files),)))
    assert FAILED in [c.status for c in result.cases]
    assert result.status == FAILED


# --- run summary and exit codes --------------------------------------------------------------------


def scenario_result(*statuses: str) -> ScenarioResult:
    inside, _ = plans()
    cases = tuple(CaseResult(f"case{i}", status, "m", 0.0) for i, status in enumerate(statuses))
    return ScenarioResult(inside, cases, (), "", 0.0)


def test_scenario_status() -> None:
    assert scenario_result(PASSED, PASSED).status == PASSED
    assert scenario_result(PASSED, SKIPPED).status == PASSED
    assert scenario_result(PASSED, FAILED).status == FAILED
    assert scenario_result(FAILED, ERROR).status == ERROR
    assert scenario_result().status == ERROR  # no cases: never a pass


def test_run_summary_exit_codes() -> None:
    assert RunSummary(RUN_ID, (scenario_result(PASSED), scenario_result(PASSED, SKIPPED))).exit_code == EXIT_PASSED == 0
    assert RunSummary(RUN_ID, (scenario_result(PASSED), scenario_result(FAILED))).exit_code == EXIT_CHECKS_FAILED == 1
    assert RunSummary(RUN_ID, (scenario_result(ERROR),)).exit_code == EXIT_CHECKS_FAILED
    assert RunSummary(RUN_ID, (scenario_result(),)).exit_code == EXIT_CHECKS_FAILED


def test_early_exit_code_wins() -> None:
    assert RunSummary(RUN_ID, (), ("config", "bad"), EXIT_BAD_INPUT).exit_code == 2
    passed = (scenario_result(PASSED),)
    assert RunSummary(RUN_ID, passed, ("environment", "docker gone"), EXIT_ENVIRONMENT).exit_code == 3
    assert RunSummary(RUN_ID, passed, ("interrupted", "SIGTERM"), 143).exit_code == 143


def test_zero_scenarios_is_never_exit_0() -> None:
    assert RunSummary(RUN_ID, ()).exit_code == EXIT_CHECKS_FAILED
    assert RunSummary(RUN_ID, (), ("error", "stopped")).exit_code != 0


# --- helpers -------------------------------------------------------------------------------------------


def test_tail_keeps_the_last_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\n"
    assert tail(text, 3) == "line 97\nline 98\nline 99"
    assert tail("") == ""
