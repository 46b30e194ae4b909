"""distval.results.scenario: raw outcomes (hand-made, no Docker) -> one case per check -> the run's exit code."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from typing import Any

import pytest

from distval import __version__
from distval.checks.catalog import is_collective
from distval.config import CheckSpec, load_config, parse_config
from distval.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECKS_FAILED,
    EXIT_ENVIRONMENT,
    EXIT_NOTHING_VALIDATED,
    EXIT_PASSED,
    ConfigError,
)
from distval.plan.identity import scenario_hash, with_hashes
from distval.plan.model import ScenarioPlan
from distval.reports.common import run_properties, suite_properties
from distval.results.logs import tail
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
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.targets.engines.planning import plan_run, plan_scenario
from tests.paths import ROOT

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
    return with_hashes(plan_scenario(inside, RUN_ID, None)), with_hashes(plan_scenario(across, RUN_ID, None))


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
        "cuda_version": "none",  # env_record reports no cuda_version: a CPU build
        "scenario_hash": scenario_hash(across),
        "scenario_hash_any_image": scenario_hash(across, any_image=True),
    }


def test_properties_without_env_details() -> None:
    _, across = plans()
    files = [{f"rank-{r}.jsonl": jsonl(record("all_reduce", r))} for r in (0, 1)]
    outcome = ScenarioOutcome(across, None, 1.0, (container(across, 0, files[0]), container(across, 1, files[1])))
    properties = dict(summarize_scenario(outcome).properties)
    assert properties["image_id"] == "unknown"
    assert properties["torch_version"] == "unknown"
    assert properties["python_version"] == "unknown"
    assert properties["cuda_version"] == "unknown"  # no env record at all: not known, unlike a CPU build
    assert properties["scenario_hash"] == scenario_hash(across)


def test_scenario_hash_any_image_is_the_same_on_another_image() -> None:
    """A last-known-good comparison matches a candidate image's scenario with the good image's by it."""
    _, across = plans()
    other = plan_scenario(across.scenario, "run2", "my/torch:candidate", across.slug)
    assert scenario_hash(other) != scenario_hash(across)
    assert scenario_hash(other, any_image=True) == scenario_hash(across, any_image=True)


@pytest.mark.parametrize(("reported", "expected"), [("12.8", "12.8"), (None, "none")], ids=["cuda-build", "cpu-build"])
def test_cuda_version_from_the_env_check(reported: str | None, expected: str) -> None:
    inside, _ = plans()
    files = {
        f"rank-{r}.jsonl": jsonl(record("env", r, duration_s=0.5, torch_version="2.6.0", cuda_version=reported)) for r in (0, 1)
    }
    properties = dict(summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),))).properties)
    assert properties["cuda_version"] == expected
    assert properties["torch_version"] == "2.6.0"


# --- scenario_hash --------------------------------------------------------------------------------------


def test_scenario_hash_is_12_hex_and_holds_no_run_id_in_any_form() -> None:
    inside, _ = plans()
    assert len(scenario_hash(inside)) == 12 and int(scenario_hash(inside), 16) >= 0
    # c10d puts the run id into --rdzv_id, by-IP forms into placeholders: every form hashes the same in every run.
    for form in ("static", "c10d", "env", "tcp"):
        for master in ("name", "ip"):
            scenario = replace(
                inside.scenario, topology="cross-container", nodes=2, nproc_per_node=1, rendezvous=form, master_addr=master
            )
            assert scenario_hash(plan_scenario(scenario, "run1", "img")) == scenario_hash(plan_scenario(scenario, "run2", "img"))


def test_scenario_hash_is_the_same_in_every_run_and_changes_with_what_runs() -> None:
    _, across = parse_config(CONFIG, "results.yaml").scenarios
    first = plan_scenario(across, "run1", "example/torch:a")
    again = plan_scenario(across, "run2", "example/torch:a")
    # The run id is in --master_addr of cross-container argv, yet the same scenario hashes the same.
    assert any("distval-run1-" in arg for arg in first.containers[1].argv)
    assert first.containers[1].argv != again.containers[1].argv
    assert scenario_hash(first) == scenario_hash(again)
    other_image = plan_scenario(across, "run1", "example/torch:b")
    other_check_args = plan_scenario(
        replace(across, checks=tuple(replace(c, args={"numel": 8}) if c.name == "all_reduce" else c for c in across.checks)),
        "run1",
        "example/torch:a",
    )
    other_launcher = plan_scenario(replace(across, python="python3.12"), "run1", "example/torch:a")
    hashes = {scenario_hash(p) for p in (first, other_image, other_check_args, other_launcher)}
    assert len(hashes) == 4


def test_scenario_hash_differs_between_scenarios() -> None:
    inside, across = plans()
    assert scenario_hash(inside) != scenario_hash(across)


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
    assert (case.status, case.duration_s) == (PASSED, 0.25)  # rank 0's duration; rank 1's null is no duration


def test_same_check_twice_cannot_mask_a_failure() -> None:
    """Records are keyed by check name: a check listed twice would let its second verdict overwrite the first
    (a failed all_reduce, then a passed one, made the scenario pass). The config rejects such a list, and a
    Scenario built in code cannot hold one."""
    text = (
        "scenarios:\n  - name: twice\n    topology: in-container\n    world_size: 2\n"
        "    checks: [all_reduce, {name: all_reduce, args: {numel: 1024}}]\n"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "twice.yaml")
    assert caught.value.problems == [
        "twice.yaml:5: scenarios[0].checks[1]: expected each check once per scenario; 'all_reduce' is also checks[0]"
    ]
    inside, _ = plans()
    with pytest.raises(ValueError, match="expected each check once; 'all_reduce' is listed 2 times"):
        replace(inside.scenario, checks=(CheckSpec("all_reduce"), CheckSpec("all_reduce", {"numel": 1024})))


# --- testcases per case: checks that report several, process_group, required checks ----------------------

MULTI_CONFIG = """\
timeout_s: 120
scenarios:
  - name: multi
    topology: cross-container
    world_size: 2
    checks: [env, identity, all_reduce, collectives, store]
"""


def plan_of(config: str) -> ScenarioPlan:
    (scenario,) = parse_config(config, "multi.yaml").scenarios
    return with_hashes(plan_scenario(scenario, RUN_ID, None))


def multi_plan(checks: str = "[env, identity, all_reduce, collectives, store]") -> ScenarioPlan:
    return plan_of(MULTI_CONFIG.replace("[env, identity, all_reduce, collectives, store]", checks))


def case_record(check: str, case: str | None, rank: int, status: str = PASSED, message: str = "ok") -> str:
    """A record as distval_suite/records.py writes it now: the check it belongs to and its testcase."""
    data = json.loads(record(check, rank, status, message))
    data["case"] = case
    return json.dumps(data, sort_keys=True)


def outcome_of(plan: ScenarioPlan, lines: dict[int, list[str]], **containers: dict[str, Any]) -> ScenarioOutcome:
    """One container per node; ``containers["n1"]`` overrides exit code, stderr, ... of node 1's container."""
    outcomes = []
    for index, cp in enumerate(plan.containers):
        files = {f"rank-{rank}.jsonl": jsonl(*lines[rank]) for rank in cp.ranks if lines.get(rank)}
        outcomes.append(container(plan, index, files, **containers.get(f"n{index}", {})))
    return ScenarioOutcome(plan, "id", 1.0, tuple(outcomes))


def statuses(result: ScenarioResult) -> list[tuple[str, str]]:
    return [(c.name, c.status) for c in result.cases]


PARTS = ("broadcast", "all_gather", "reduce_scatter")


def suite_order(rank: int, parts: tuple[str, ...] = PARTS, **status_of: tuple[str, str]) -> list[str]:
    """What one rank writes, in the suite's order (collectives before all_reduce, unlike the config)."""
    lines = [
        case_record("env", "env", rank),
        case_record("identity", "identity", rank),
        case_record("process_group", "process_group", rank),
    ]
    for part in parts:
        case = f"collectives.{part}"
        status, message = status_of.get(part, (PASSED, f"{part} ok"))
        lines.append(case_record("collectives", case, rank, status, message))
    lines += [case_record("all_reduce", "all_reduce", rank), case_record("store", "store", rank)]
    return lines


def test_cases_of_a_check_are_grouped_in_config_order_then_first_seen_order() -> None:
    plan = multi_plan()
    # Rank 1 reports the collectives' parts in another order: rank 0's (seen first) decides.
    result = summarize_scenario(outcome_of(plan, {0: suite_order(0), 1: suite_order(1, tuple(reversed(PARTS)))}))
    assert statuses(result) == [
        ("env", PASSED),
        ("identity", PASSED),
        ("process_group", PASSED),
        ("all_reduce", PASSED),
        ("collectives.broadcast", PASSED),
        ("collectives.all_gather", PASSED),
        ("collectives.reduce_scatter", PASSED),
        ("store", PASSED),
        (EXIT_STATUS_CASE, PASSED),
    ]
    assert result.status == PASSED
    case = cases_of(result)["collectives.all_gather"]
    assert case.message == "all_gather ok"
    assert "rank 0: passed: all_gather ok" in case.output and "rank 1: passed: all_gather ok" in case.output


def test_one_failed_case_of_a_check_fails_only_that_case() -> None:
    plan = multi_plan()
    wrong = "all_gather of rank+1: expected [1.0, 2.0] on every rank, got [1.0, 1.0]"
    result = summarize_scenario(outcome_of(plan, {0: suite_order(0), 1: suite_order(1, all_gather=(FAILED, wrong))}))
    cases = cases_of(result)
    assert cases["collectives.all_gather"].status == FAILED
    assert cases["collectives.all_gather"].message == f"rank 1: {wrong}"
    assert cases["collectives.broadcast"].status == PASSED
    assert cases["collectives.reduce_scatter"].status == PASSED
    assert "collectives" not in cases  # no check-level case when the check reported its parts
    assert result.status == FAILED


def test_case_missing_on_one_rank_is_an_error_naming_that_rank() -> None:
    plan = multi_plan()
    stderr = "Traceback (most recent call last):\nRuntimeError: Connection reset by peer\n"
    rank1 = suite_order(1, ("broadcast",))[:-2]  # rank 1 crashed during all_gather: nothing after broadcast
    result = summarize_scenario(outcome_of(plan, {0: suite_order(0), 1: rank1}, n1={"exit_code": 1, "stderr": stderr}))
    cases = cases_of(result)
    name = plan.containers[1].name
    reason = f"container {name} exited with code 1: RuntimeError: Connection reset by peer"
    assert cases["collectives.broadcast"].status == PASSED
    for missing in ("collectives.all_gather", "collectives.reduce_scatter", "all_reduce", "store"):
        assert cases[missing].status == ERROR, missing
        assert cases[missing].message == f"no result from rank(s) 1: {reason}", missing
        assert "rank 0: passed: " in cases[missing].output
        assert "rank 1: no result" in cases[missing].output
        assert plan.containers[0].name not in cases[missing].message
    assert [c.name for c in result.cases][:8] == [
        "env",
        "identity",
        "process_group",
        "all_reduce",
        "collectives.broadcast",
        "collectives.all_gather",
        "collectives.reduce_scatter",
        "store",
    ]


def test_case_reported_only_by_rank_1_names_rank_0() -> None:
    plan = multi_plan()
    rank1 = suite_order(1) + [case_record("collectives", "collectives.gather", 1)]
    cases = cases_of(summarize_scenario(outcome_of(plan, {0: suite_order(0), 1: rank1})))
    gather = cases["collectives.gather"]
    assert gather.status == ERROR
    assert gather.message.startswith("no result from rank(s) 0: ")
    assert plan.containers[0].name in gather.message


def test_listed_check_without_any_record_is_one_error_case_named_after_it() -> None:
    plan = multi_plan()
    lines = {r: [line for line in suite_order(r) if '"check": "collectives"' not in line] for r in (0, 1)}
    result = summarize_scenario(outcome_of(plan, lines))
    assert statuses(result) == [
        ("env", PASSED),
        ("identity", PASSED),
        ("process_group", PASSED),
        ("all_reduce", PASSED),
        ("collectives", ERROR),
        ("store", PASSED),
        (EXIT_STATUS_CASE, PASSED),
    ]
    message = cases_of(result)["collectives"].message
    assert message.startswith("no result from rank(s) 0, 1: ")
    for node in plan.containers:
        assert f"container {node.name} exited with code 0" in message
    assert result.status == ERROR


@pytest.mark.parametrize(
    ("checks", "expected"),
    [
        ("[env, identity, store]", ["env", "identity", "process_group", "store"]),
        ("[identity, launch, env]", ["identity", "process_group", "launch", "env"]),
        ("[store, env]", ["process_group", "store", "env"]),
        ("[env, identity]", ["env", "identity", "process_group"]),
        ("[env]", ["env", "process_group"]),
    ],
)
@pytest.mark.parametrize("where", ["first", "last"], ids=["written-first", "written-last"])
def test_process_group_goes_before_the_first_check_other_than_env_and_identity(
    checks: str, expected: list[str], where: str
) -> None:
    plan = multi_plan(checks)
    lines: dict[int, list[str]] = {}
    for rank in (0, 1):
        own = [case_record(name, name, rank) for name in checks.strip("[]").split(", ")]
        group = case_record("process_group", "process_group", rank)
        lines[rank] = [group] + own if where == "first" else own + [group]
    result = summarize_scenario(outcome_of(plan, lines))
    assert [c.name for c in result.cases] == expected + [EXIT_STATUS_CASE]
    assert result.status == PASSED


def test_process_group_goes_before_a_listed_check_that_reported_nothing() -> None:
    plan = multi_plan("[env, launch, store]")
    lines = {
        r: [env_record(r), case_record("process_group", "process_group", r), case_record("store", "store", r)] for r in (0, 1)
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert statuses(result) == [
        ("env", PASSED),
        ("process_group", PASSED),
        ("launch", ERROR),
        ("store", PASSED),
        (EXIT_STATUS_CASE, PASSED),
    ]


def test_failed_process_group_is_its_own_failed_case() -> None:
    plan = multi_plan("[env, all_reduce, store]")
    init = "expected init_process_group(backend='gloo') to succeed; RuntimeError: Connection refused"
    unavailable = "init_process_group(backend='gloo') failed: RuntimeError: Connection refused"
    lines = {
        r: [
            env_record(r),
            case_record("process_group", "process_group", r, FAILED, init),
            case_record("all_reduce", "all_reduce", r, ERROR, unavailable),
            case_record("store", "store", r, ERROR, unavailable),
        ]
        for r in (0, 1)
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert statuses(result) == [
        ("env", PASSED),
        ("process_group", FAILED),
        ("all_reduce", ERROR),
        ("store", ERROR),
        (EXIT_STATUS_CASE, PASSED),
    ]
    assert cases_of(result)["process_group"].message == f"rank 0: {init}; rank 1: {init}"
    assert result.status == ERROR


REQUIRED_CONFIG = """\
scenarios:
  - name: required
    topology: in-container
    world_size: 2
    checks:
      - env
      - {name: identity, required: true}
      - {name: reconfigure, required: true}
      - {name: store, required: false}
      - ddp_sync
      - {name: timeout, required: true}
"""
IDENTITY_SKIP = "the scenario states nothing about the image (args: torch, python, build, backends)"
RECONFIGURE_SKIP = "reconfigure needs torch >= 2.14; image has 2.6.0+cpu"


def test_required_check_skipped_fails_and_a_check_not_required_stays_skipped() -> None:
    plan = plan_of(REQUIRED_CONFIG)
    lines = {
        r: [
            env_record(r),
            case_record("identity", "identity", r, SKIPPED, IDENTITY_SKIP),
            case_record("store", "store", r, SKIPPED, "no store"),
            case_record("ddp_sync", "ddp_sync", r, SKIPPED, "no DDP"),
            case_record("timeout", "timeout", r, PASSED, "timed out after 2.01 s"),
            case_record("reconfigure", "reconfigure", r, SKIPPED, RECONFIGURE_SKIP),
        ]
        for r in (0, 1)
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert statuses(result) == [
        ("env", PASSED),
        ("identity", FAILED),
        ("reconfigure", FAILED),
        ("store", SKIPPED),
        ("ddp_sync", SKIPPED),
        ("timeout", PASSED),
        (EXIT_STATUS_CASE, PASSED),
    ]
    cases = cases_of(result)
    assert cases["identity"].message == f"expected required check identity to run; it was skipped: {IDENTITY_SKIP}"
    assert cases["reconfigure"].message == f"expected required check reconfigure to run; it was skipped: {RECONFIGURE_SKIP}"
    assert f"rank 1: skipped: {RECONFIGURE_SKIP}" in cases["reconfigure"].output
    assert (cases["store"].message, cases["ddp_sync"].message) == ("no store", "no DDP")
    assert result.status == FAILED


def test_skips_without_required_checks_pass() -> None:
    plan = plan_of(REQUIRED_CONFIG.replace("required: true", "required: false"))
    lines = {
        r: [
            env_record(r),
            case_record("identity", "identity", r, SKIPPED, IDENTITY_SKIP),
            case_record("reconfigure", "reconfigure", r, SKIPPED, RECONFIGURE_SKIP),
            case_record("store", "store", r),
            case_record("ddp_sync", "ddp_sync", r),
            case_record("timeout", "timeout", r),
        ]
        for r in (0, 1)
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert cases_of(result)["identity"].status == SKIPPED
    assert cases_of(result)["reconfigure"].status == SKIPPED
    assert result.status == PASSED


def test_required_check_with_several_cases_fails_each_skipped_case() -> None:
    plan = plan_of(MULTI_CONFIG.replace("collectives,", "{name: collectives, required: true},"))
    assert [c.required for c in plan.scenario.checks] == [False, False, False, True, False]
    bf16 = "bfloat16 all_reduce needs torch >= 1.10"
    lines = {
        r: [
            case_record("collectives", "collectives.float32", r),
            case_record("collectives", "collectives.bfloat16", r, SKIPPED, bf16),
            case_record("store", "store", r, SKIPPED, "not here"),
        ]
        for r in (0, 1)
    }
    cases = cases_of(summarize_scenario(outcome_of(plan, lines)))
    assert cases["collectives.float32"].status == PASSED
    assert cases["collectives.bfloat16"].status == FAILED
    assert cases["collectives.bfloat16"].message == f"expected required check collectives to run; it was skipped: {bf16}"
    assert cases["store"].status == SKIPPED


def test_required_check_without_results_stays_an_error() -> None:
    """Only a skip turns into a failure; no result at all is still the error that names the ranks."""
    plan = plan_of(REQUIRED_CONFIG)
    lines = {r: [env_record(r), case_record("identity", "identity", r, SKIPPED, IDENTITY_SKIP)] for r in (0, 1)}
    lines[1] = lines[1][:1]  # rank 1 never got to identity
    cases = cases_of(summarize_scenario(outcome_of(plan, lines)))
    assert cases["identity"].status == ERROR
    assert cases["identity"].message.startswith("no result from rank(s) 1: ")
    assert cases["reconfigure"].status == ERROR
    assert cases["reconfigure"].message.startswith("no result from rank(s) 0, 1: ")


@pytest.mark.parametrize("case", [None, "", "all_reduce"], ids=["null", "empty", "same-as-check"])
def test_records_without_case_are_grouped_by_check(case: str | None) -> None:
    inside, _ = plans()
    # Rank 0 writes the new shape, rank 1 the old one (no "case" key at all): one testcase each.
    files = {
        "rank-0.jsonl": jsonl(case_record("env", "env", 0), case_record("all_reduce", case, 0, message="all_reduce gave 3.0")),
        "rank-1.jsonl": jsonl(env_record(1), record("all_reduce", 1, message="all_reduce gave 3.0")),
    }
    assert '"case"' not in files["rank-1.jsonl"].decode()
    result = summarize_scenario(ScenarioOutcome(inside, "id", 1.0, (container(inside, 0, files),)))
    assert statuses(result) == [("env", PASSED), ("all_reduce", PASSED), (EXIT_STATUS_CASE, PASSED)]
    assert cases_of(result)["all_reduce"].message == "all_reduce gave 3.0"


# --- run summary and exit codes --------------------------------------------------------------------


def scenario_result(*statuses: str) -> ScenarioResult:
    inside, _ = plans()
    # Cases of a listed check (all_reduce.part<i>): only those can make a scenario pass.
    cases = tuple(CaseResult(f"all_reduce.part{i}", status, "m", 0.0) for i, status in enumerate(statuses))
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
    # Every scenario skipped: nothing was validated, its own code (never 0, and not the image's failure).
    assert RunSummary(RUN_ID, (scenario_result(SKIPPED), scenario_result(SKIPPED))).exit_code == EXIT_NOTHING_VALIDATED == 5
    # A skipped scenario beside a failed one: the failure is the verdict.
    assert RunSummary(RUN_ID, (scenario_result(SKIPPED), scenario_result(FAILED))).exit_code == EXIT_CHECKS_FAILED


def test_early_exit_code_wins() -> None:
    assert RunSummary(RUN_ID, (), ("config", "bad"), EXIT_BAD_INPUT).exit_code == 2
    passed = (scenario_result(PASSED),)
    assert RunSummary(RUN_ID, passed, ("environment", "docker gone"), EXIT_ENVIRONMENT).exit_code == 3
    assert RunSummary(RUN_ID, passed, ("interrupted", "SIGTERM"), 143).exit_code == 143


def test_run_summary_new_fields_default_and_keep_positional_constructors() -> None:
    summary = RunSummary(RUN_ID, (), ("config", "bad"), EXIT_BAD_INPUT)
    assert (summary.engine_version, summary.config_path) == (None, None)
    assert summary.host == socket.gethostname()
    full = RunSummary(RUN_ID, (), None, None, "27.5.1", "ci-host", "configs/default.yaml")
    assert (full.engine_version, full.host, full.config_path) == ("27.5.1", "ci-host", "configs/default.yaml")


def test_run_and_suite_properties() -> None:
    result = scenario_result(PASSED)
    result = ScenarioResult(result.plan, result.cases, (("image", "x/y:z"), ("run_id", "stale")), "", 0.0)
    summary = RunSummary(RUN_ID, (result,), engine_version="27.5.1", host="ci-host")
    expected_run = {"run_id": RUN_ID, "distval_version": __version__, "docker_engine_version": "27.5.1", "host": "ci-host"}
    expected_run["mode"] = "docker"
    assert run_properties(summary) == expected_run
    # The run's values win; the scenario named its image, so it is not distval's sample.
    assert suite_properties(summary, result) == {"image": "x/y:z", **expected_run, "sample_image": "false"}
    assert run_properties(RunSummary(RUN_ID, (), host="h"))["docker_engine_version"] == "unknown"


def test_zero_scenarios_is_never_exit_0() -> None:
    assert RunSummary(RUN_ID, ()).exit_code == EXIT_NOTHING_VALIDATED
    assert RunSummary(RUN_ID, (), ("error", "stopped")).exit_code != 0


# --- helpers -------------------------------------------------------------------------------------------


def test_tail_keeps_the_last_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\n"
    assert tail(text, 3) == "line 97\nline 98\nline 99"
    assert tail("") == ""


# --- --fail-on-skip, names, hashes over the rendezvous matrix ------------------------------------------


def test_fail_on_skip_fails_every_skip_with_its_reason_and_leaves_the_rest() -> None:
    inside, _ = plans()
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0, SKIPPED, "needs torch >= 2.14")),
        "rank-1.jsonl": jsonl(env_record(1, SKIPPED, "not here"), record("all_reduce", 1, SKIPPED, "needs torch >= 2.14")),
    }
    outcome = ScenarioOutcome(inside, None, 1.0, (container(inside, 0, files),))
    assert summarize_scenario(outcome).status == PASSED  # without the option: a pass with skips, each with its reason
    cases = cases_of(summarize_scenario(outcome, fail_on_skip=True))
    assert (cases["all_reduce"].status, cases["all_reduce"].message) == (
        FAILED,
        "expected no skip (--fail-on-skip); skipped: needs torch >= 2.14",
    )
    assert cases["env"].status == FAILED  # passed on rank 0, skipped on rank 1
    assert cases["env"].message.startswith("expected no skip (--fail-on-skip); skipped on rank(s) 1: ")
    assert cases[EXIT_STATUS_CASE].status == PASSED


def test_scenario_names_that_share_a_slug_never_share_a_resource_name() -> None:
    body = "".join(
        f"  - {{name: {n}, topology: cross-container, world_size: 2, checks: [env]}}\n" for n in ("zzz-2", "zzz", "ZZZ", "zzz_2")
    )
    plan = plan_run(parse_config("scenarios:\n" + body, "names.yaml"), RUN_ID)
    names = [c.name for s in plan.scenarios for c in s.containers] + [n.name for s in plan.scenarios for n in s.networks]
    assert len(names) == len(set(names)), names


def test_scenario_hash_is_stable_for_every_form_and_layout_of_the_rendezvous_matrix() -> None:
    config = load_config(ROOT / "configs" / "rendezvous.yaml")
    first = [scenario_hash(p) for p in plan_run(config, "run1").scenarios]
    again = [scenario_hash(p) for p in plan_run(config, "run2").scenarios]
    assert first == again
    assert len(set(first)) == len(first)  # and every scenario hashes differently


# --- a scenario validates only through checks that ran (issue 19) ---------------------------------------


def test_every_listed_check_skipped_inside_the_container_is_skipped_and_never_exit_0() -> None:
    """The reproduction: a config whose only check is reconfigure, on torch 2.6. exit_status (passed) and
    process_group (passed) are bookkeeping: they made the scenario pass and the run exit 0."""
    plan = multi_plan("[reconfigure]")
    lines = {
        r: [
            case_record("process_group", "process_group", r),
            case_record("reconfigure", "reconfigure", r, SKIPPED, RECONFIGURE_SKIP),
        ]
        for r in (0, 1)
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert statuses(result) == [("process_group", PASSED), ("reconfigure", SKIPPED), (EXIT_STATUS_CASE, PASSED)]
    assert result.status == SKIPPED
    summary = RunSummary(RUN_ID, (result,))
    assert summary.nothing_validated and summary.exit_code == EXIT_NOTHING_VALIDATED


def test_records_of_a_check_the_scenario_does_not_list_validate_nothing() -> None:
    """A rank that writes a passed record for a check nobody asked for (env here) cannot make a scenario in
    which every listed check was skipped pass; a case that is not a catalog check cannot either."""
    plan = multi_plan("[reconfigure]")
    lines = {
        r: [
            env_record(r),
            case_record("bogus", "bogus", r),
            case_record("reconfigure", "reconfigure", r, SKIPPED, RECONFIGURE_SKIP),
        ]
        for r in (0, 1)
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert cases_of(result)["env"].status == PASSED and cases_of(result)["bogus"].status == PASSED
    assert result.status == SKIPPED
    # One listed check that ran is enough.
    result = summarize_scenario(outcome_of(multi_plan("[env, reconfigure]"), lines))
    assert result.status == PASSED


def test_a_required_check_skipped_on_some_ranks_fails() -> None:
    plan = multi_plan("[env, {name: store, required: true}]")
    lines = {0: [env_record(0), case_record("store", "store", 0)]}
    lines[1] = [env_record(1), case_record("store", "store", 1, SKIPPED, "no store on this rank")]
    result = summarize_scenario(outcome_of(plan, lines))
    store = cases_of(result)["store"]
    assert store.status == FAILED
    assert store.message.startswith("expected required check store to run; it was skipped: ok (rank(s) 0; skipped on rank(s) 1")
    assert result.status == FAILED


def test_a_required_check_of_a_scenario_the_engine_cannot_run_fails() -> None:
    """The Engine lacks what the scenario needs (IPv6): every check is skipped, but a required one fails."""
    plan = multi_plan("[env, {name: store, required: true}]")
    result = summarize_scenario(ScenarioOutcome(plan, None, 0.1, (), setup_error="no IPv6 here", setup_skipped=True))
    assert statuses(result) == [("process_group", SKIPPED), ("env", SKIPPED), ("store", FAILED)]
    assert cases_of(result)["store"].message == "expected required check store to run; it was skipped: no IPv6 here"
    assert result.status == FAILED


# --- one attempt's records: the worse outcome wins (issue 19) -------------------------------------------


def test_a_case_written_twice_in_one_attempt_counts_with_its_worse_record_and_says_so() -> None:
    plan = multi_plan("[env, all_reduce]")
    lines = {
        r: [env_record(r), record("all_reduce", r, FAILED, "got 2.0"), record("all_reduce", r, PASSED, "gave 3.0")]
        for r in (0, 1)
    }
    lines[1][1:] = [record("all_reduce", 1, PASSED, "gave 3.0"), record("all_reduce", 1, SKIPPED, "skip")]
    cases = cases_of(summarize_scenario(outcome_of(plan, lines)))
    assert cases["all_reduce"].status == FAILED
    assert cases["all_reduce"].message == (
        "rank 0: got 2.0 (rank 0 wrote 2 records for all_reduce in one attempt: failed, passed; the worse counts)"
    )
    assert "rank 1: skipped: skip (rank 1 wrote 2 records for all_reduce in one attempt: passed, skipped" in (
        cases["all_reduce"].output
    )
    # The same record read twice (two copies of one file) is no duplicate.
    same = {
        r: [env_record(r), record("all_reduce", r, PASSED, "gave 3.0"), record("all_reduce", r, PASSED, "gave 3.0")]
        for r in (0, 1)
    }
    assert cases_of(summarize_scenario(outcome_of(plan, same)))["all_reduce"].message == "gave 3.0"
    # error > failed; an unknown status is worse still, and an error.
    lines[0][1:] = [record("all_reduce", 0, ERROR, "boom"), record("all_reduce", 0, FAILED, "got 2.0")]
    assert cases_of(summarize_scenario(outcome_of(plan, lines)))["all_reduce"].status == ERROR
    lines[0][1:] = [record("all_reduce", 0, "weird", "?"), record("all_reduce", 0, ERROR, "boom")]
    case = cases_of(summarize_scenario(outcome_of(plan, lines)))["all_reduce"]
    assert case.status == ERROR and "unrecognized result status 'weird'" in case.message


# --- world size 1 validates no collective (issue 19) ----------------------------------------------------

ONE_RANK = """\
scenarios:
  - name: one
    topology: in-container
    world_size: 1
    checks: [env, launch, all_reduce, {name: collectives, required: true}, store]
"""


def test_a_collective_check_at_world_size_1_is_not_validated() -> None:
    plan = plan_of(ONE_RANK)
    lines = {
        0: [
            env_record(0),
            case_record("launch", "launch", 0),
            case_record("all_reduce", "all_reduce", 0, PASSED, "gave 1.0"),
            case_record("collectives", "collectives.broadcast", 0),
            case_record("store", "store", 0, FAILED, "get gave b'x'"),
        ]
    }
    result = summarize_scenario(outcome_of(plan, lines))
    assert statuses(result) == [
        ("env", PASSED),
        ("launch", PASSED),
        ("all_reduce", SKIPPED),
        ("collectives.broadcast", FAILED),  # required: a skip fails it
        ("store", FAILED),  # a failure with one rank is still a failure
        (EXIT_STATUS_CASE, PASSED),
    ]
    cases = cases_of(result)
    assert cases["all_reduce"].message == ("not validated: all_reduce compares ranks, and world size 1 has one (ran: gave 1.0)")
    assert cases["collectives.broadcast"].message.startswith("expected required check collectives to run; it was skipped: ")
    fail_on_skip = cases_of(summarize_scenario(outcome_of(plan, lines), fail_on_skip=True))
    assert fail_on_skip["all_reduce"].status == FAILED
    # Without the env and launch passes nothing was validated.
    only = {0: [case_record("all_reduce", "all_reduce", 0)]}
    assert (
        summarize_scenario(
            outcome_of(
                plan_of(ONE_RANK.replace("env, launch, all_reduce, {name: collectives, required: true}, store", "all_reduce")),
                only,
            )
        ).status
        == SKIPPED
    )


def test_no_shipped_config_runs_a_collective_check_at_world_size_1() -> None:
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        for scenario in load_config(path).scenarios:
            if scenario.world_size == 1:
                collective = [c.name for c in scenario.checks if is_collective(c.name)]
                assert not collective, f"{path.name}: {scenario.name} runs {collective} with one rank"
