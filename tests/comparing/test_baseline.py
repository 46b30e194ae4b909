"""``distval run --baseline`` fails closed: a comparison of nothing, a missing figure, a failed re-measure, a check
that passed in the baseline and did not in the run, and a baseline that is empty or ended early (alone or among
several) are failures, never a pass; a report path that is the baseline is refused. ``distval compare``:
tests/comparing/test_compare.py."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import build_parser, main
from distval.cli.run import command_run
from distval.comparing.baseline import apply_baseline, baseline_case
from distval.comparing.deltas import BASELINE_CASE, Tolerances
from distval.comparing.judges import BaselineOptions, with_baseline
from distval.comparing.reading import scenario_entries
from distval.config import parse_config
from distval.errors import EXIT_BAD_INPUT, EXIT_CHECKS_FAILED, EXIT_INTERNAL, EXIT_PASSED, BadInput
from distval.plan.model import ScenarioPlan
from distval.reports.json_report import json_report
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from distval.session.remeasure import check_remeasure, remeasure
from distval.targets.engines.planning import plan_scenario

CONFIG = """\
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks: [env]
  - name: other
    topology: in-container
    world_size: 2
    checks: [env]
"""


def figure(operation: str, size: int, label: str, busbw: float) -> dict[str, Any]:
    return {"operation": operation, "size": size, "label": label, "busbw_gbps": busbw, "iterations": 5}


def case(name: str, status: str = PASSED, duration_s: float = 1.0, message: str = "ok") -> dict[str, Any]:
    return {"name": name, "status": status, "duration_s": duration_s, "message": message}


def entry(
    bandwidth: list[dict[str, Any]], cases: list[dict[str, Any]], name: str = "bw", status: str = PASSED, image: str = "img"
) -> dict[str, Any]:
    """A scenario's entry of a JSON report (what distval/reports/json_report.py writes)."""
    properties = {"scenario_hash": f"h-{name}", "scenario_hash_any_image": f"a-{name}"}
    return {"name": name, "image": image, "status": status, "properties": properties, "bandwidth": bandwidth, "cases": cases}


def report(run_id: str, *scenarios: dict[str, Any], early_error: dict[str, str] | None = None) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": run_id, "scenarios": list(scenarios), "early_error": early_error}


TWO_FIGURES = [figure("all_reduce", 65536, "64KiB", 1.0), figure("all_reduce", 1048576, "1MiB", 2.0)]


# --- the baseline testcase --------------------------------------------------------------------------------


def test_a_matched_scenario_that_compared_nothing_fails() -> None:
    # Both sides have the scenario, neither a figure the other has: "0 figure(s) within tolerance" was a pass.
    baseline = report("old", entry([], [case("process_group")]))
    result = baseline_case(entry([], [case("process_group")]), baseline, Tolerances(), "GOOD.json")
    assert result.status == FAILED, result.message
    assert "expected figures to compare with GOOD.json (run old) (matched by scenario_hash)" in result.message
    assert "neither has a busbw figure or a check's duration" in result.message


def test_a_scenario_skipped_in_the_run_and_in_the_baseline_is_skipped_and_only_then() -> None:
    # configs/nccl.yaml's scenarios on a machine without GPUs: "compared nothing" failed every such run.
    no_gpu = case("env", SKIPPED, 0.0, "no GPU the Engine can give (probe: 0 devices)")
    skipped = entry([], [no_gpu], status=SKIPPED)
    verdict = baseline_case(skipped, report("old", entry([], [no_gpu], status=SKIPPED)), Tolerances(), "GOOD.json")
    assert verdict.status == SKIPPED, verdict.message
    assert verdict.message == (
        "the scenario was skipped in this run and in GOOD.json (run old) (matched by scenario_hash): "
        "no GPU the Engine can give (probe: 0 devices)"
    )
    # The guard can fail: skipped in the run while the baseline ran it fails, naming what is missing.
    ran = entry(TWO_FIGURES, [case("env")])
    assert "3 missing: busbw all_reduce 64KiB" in baseline_case(skipped, report("old", ran), Tolerances(), "G").message
    assert baseline_case(entry([], [case("env", SKIPPED)]), report("old", ran), Tolerances(), "G").status == FAILED
    # Skipped in the baseline only: nothing of it to compare with, which is no pass either.
    assert baseline_case(ran, report("old", skipped), Tolerances(), "G").status == FAILED
    nothing = baseline_case(entry([], [case("process_group")]), report("old", skipped), Tolerances(), "G")
    assert nothing.status == FAILED and "neither has a busbw figure" in nothing.message, nothing.message
    # Through apply_baseline: skipped beside a scenario that matched; --fail-on-skip fails it like any other skip.
    bw, other = plans()
    no_gpu_case = CaseResult("env", SKIPPED, "no GPU the Engine can give", 0.0)
    hashes = (("scenario_hash", "h-other"), ("scenario_hash_any_image", "a-other"))
    summary = RunSummary("run2", (result(bw, 1.0), ScenarioResult(other, (no_gpu_case,), hashes, "", 0.0)))
    lenient = apply_baseline(summary, json_report(summary), Tolerances(), "GOOD.json")
    assert [s.cases[-1].status for s in lenient.scenarios] == [PASSED, SKIPPED]
    strict = apply_baseline(summary, json_report(summary), Tolerances(), "GOOD.json", fail_on_skip=True)
    assert [s.cases[-1].status for s in strict.scenarios] == [PASSED, FAILED]


def test_a_figure_the_baseline_has_and_the_run_lacks_fails_and_is_named() -> None:
    baseline = report("old", entry(TWO_FIGURES, [case("env"), case("bandwidth.all_reduce")]))
    # The 1 MiB figure is gone and the bandwidth check did not run (skipped): what is left is within tolerance.
    run = entry(TWO_FIGURES[:1], [case("env"), case("bandwidth.all_reduce", SKIPPED)])
    result = baseline_case(run, baseline, Tolerances(), "GOOD.json")
    assert result.status == FAILED, result.message
    assert "2 missing: busbw all_reduce 1MiB, duration bandwidth.all_reduce" in result.message
    assert result.details["missing"] == ["busbw all_reduce 1MiB", "duration bandwidth.all_reduce"]
    # A figure only the run has is new, not a failure.
    more = baseline_case(
        entry(TWO_FIGURES, [case("env")]), report("old", entry(TWO_FIGURES[:1], [case("env")])), Tolerances(), "G"
    )
    assert more.status == PASSED, more.message


def test_a_regression_says_when_the_machines_raw_tcp_fell_too_and_still_fails() -> None:
    # The yardstick is evidence, never a verdict: the image could slow its own sockets too.
    def at(busbw: float, tcp: float | None) -> dict[str, Any]:
        return {**figure("broadcast", 1048576, "1MiB", busbw), "tcp_gbps": tcp}

    baseline = report("old", entry([at(1.1, 1.1)], [case("env")]))
    machine = baseline_case(entry([at(0.6, 0.6)], [case("env")]), baseline, Tolerances(), "GOOD.json")
    assert machine.status == FAILED, machine.message
    assert "busbw broadcast 1MiB: 1.1 -> 0.6 GB/s (0.55x, tolerance -20%; raw TCP 1.1 -> 0.6 GB/s (0.55x))" in machine.message
    assert "the raw TCP between the same ranks fell too (0.55-0.55x" in machine.message
    assert "--reference IMAGE" in machine.message
    assert machine.details["deltas"][0]["old_tcp"] == 1.1 and machine.details["deltas"][0]["new_tcp"] == 0.6
    # The hint can fail: a yardstick that held (or fell within the tolerance), or one a run lacks, says nothing.
    for tcp in (1.1, 0.9, None):
        image = baseline_case(entry([at(0.6, tcp)], [case("env")]), baseline, Tolerances(), "GOOD.json")
        assert image.status == FAILED and "fell too" not in image.message, image.message
    # A yardstick that is not a positive number is no evidence either.
    for bad in (0, -1.0, "fast", True):
        odd = baseline_case(entry([at(0.6, bad)], [case("env")]), baseline, Tolerances(), "GOOD.json")  # type: ignore[arg-type]
        assert odd.status == FAILED and "raw TCP" not in odd.message, odd.message


def test_a_failed_or_errored_remeasure_fails_the_baseline_testcase() -> None:
    baseline = report("old", entry(TWO_FIGURES, [case("env")]))
    slow = entry([figure("all_reduce", 65536, "64KiB", 0.5), TWO_FIGURES[1]], [case("env")])
    crashed = entry(
        TWO_FIGURES, [case("env"), case("collectives.all_reduce", FAILED, message="rank 1 exited 139")], status=FAILED
    )
    result = baseline_case(slow, baseline, Tolerances(), "GOOD.json", [crashed])
    assert result.status == FAILED, result.message
    assert "expected every run re-measuring this scenario to pass; re-measure 1 failed" in result.message
    assert "collectives.all_reduce failed: rank 1 exited 139" in result.message
    errored = entry(TWO_FIGURES, [case("env", ERROR, message="engine gone")], status=ERROR)
    result = baseline_case(slow, baseline, Tolerances(), "GOOD.json", [entry(TWO_FIGURES, [case("env")]), errored])
    assert result.status == FAILED and "re-measure 2 error (env error: engine gone)" in result.message, result.message
    # Two passing re-measures that recovered: noise, a pass.
    recovered = entry(TWO_FIGURES, [case("env")])
    assert baseline_case(slow, baseline, Tolerances(), "GOOD.json", [recovered, recovered]).status == PASSED


def plans() -> tuple[ScenarioPlan, ...]:
    return tuple(plan_scenario(s, "run1", "example/torch:good") for s in parse_config(CONFIG, "bw.yaml").scenarios)


def result(plan: ScenarioPlan, busbw: float, failed: bool = False) -> ScenarioResult:
    details = {
        "operation": "all_reduce",
        "world_size": 2,
        "iterations": 5,
        "warmup": 1,
        "figures": [
            {"size": 65536, "label": "64KiB", "bytes": 65536, "time_us": 65.536 / busbw, "algbw_gbps": busbw, "busbw_gbps": busbw}
        ],
    }
    cases = [CaseResult("env", FAILED if failed else PASSED, "rank 1 died" if failed else "ok", 0.1)]
    cases.append(CaseResult("bandwidth.all_reduce", PASSED, "ok", 0.2, details=details))
    name = plan.scenario.name
    return ScenarioResult(plan, tuple(cases), (("scenario_hash", f"h-{name}"), ("scenario_hash_any_image", f"a-{name}")), "", 1.0)


def test_remeasuring_stops_at_a_failed_remeasure_and_the_failure_fails_the_run() -> None:
    bw, other = plans()
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    first = RunSummary("run2", (result(bw, 0.1), result(other, 1.0)))
    options = BaselineOptions(((("GOOD.json", good),)), 2, Tolerances(busbw_slack_us=0.0), fail_on_skip=False)
    asked: list[list[str]] = []

    def run_again(again: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
        asked.append([p.scenario.name for p in again])
        return [result(p, 1.0, failed=True) for p in again]  # recovered figures, but a check failed

    found = remeasure(first, options, run_again, lambda line: None)
    assert asked == [["bw"]]  # no second re-measure after a failed one
    summary = with_baseline(first, options, found, scenario_entries(first, first.scenarios))
    assert summary.scenarios[0].cases[-1].status == FAILED, summary.scenarios[0].cases[-1].message
    assert "re-measure 1 failed (env failed: rank 1 died)" in summary.scenarios[0].cases[-1].message
    assert summary.exit_code == EXIT_CHECKS_FAILED


def test_remeasuring_runs_what_is_undecided_as_often_as_asked_and_twice_by_default() -> None:
    bw, other = plans()
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    first = RunSummary("run2", (result(bw, 0.1), result(other, 1.0)))  # bw regressed, other did not

    def remeasured(times: int | None, values: tuple[float, ...]) -> list[list[str]]:
        options = BaselineOptions(((("GOOD.json", good),)), times, Tolerances(busbw_slack_us=0.0), fail_on_skip=False)
        asked: list[list[str]] = []
        busbw = iter(values)

        def run_again(again: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
            asked.append([p.scenario.name for p in again])
            value = next(busbw)
            return [result(p, value) for p in again]

        remeasure(first, options, run_again, lambda line: None)
        return asked

    # Recovered, then regressed again: undecided for as long as the runs left can still turn the majority.
    flapping = (1.0, 0.1, 0.1, 0.1)
    assert remeasured(None, flapping) == [["bw"]] * 2 == remeasured(2, flapping)
    assert remeasured(1, flapping) == [["bw"]]
    assert remeasured(3, flapping) == [["bw"]] * 3
    assert remeasured(0, flapping) == []
    # Regressed again at once: 2 of the 3 runs of the default already decide.
    assert remeasured(None, (0.1, 0.1)) == [["bw"]]


def test_without_a_baseline_nothing_is_remeasured_and_remeasure_alone_is_refused() -> None:
    (bw, other) = plans()
    first = RunSummary("run2", (result(bw, 0.1), result(other, 1.0)))
    nothing = BaselineOptions((), None, Tolerances(), fail_on_skip=False)

    def run_again(again: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
        raise AssertionError("nothing is re-measured without a baseline")

    assert remeasure(first, nothing, run_again, lambda line: None) == {}
    check_remeasure(nothing)
    check_remeasure(BaselineOptions((("GOOD.json", report("good")),), 3, Tolerances(), fail_on_skip=False))
    with pytest.raises(BadInput, match="give --baseline too"):
        check_remeasure(BaselineOptions((), 3, Tolerances(), fail_on_skip=False))


def test_a_baseline_that_matches_no_scenario_fails_every_baseline_testcase() -> None:
    bw, other = plans()
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    for baseline, why in (
        (report("old"), "GOOD.json (run old) has no scenario"),
        (
            report("old", early_error={"kind": "environment", "message": "Docker unreachable"}),
            "ended early: environment: Docker unreachable",
        ),
        (report("old", entry([], [], name="unrelated")), "none of its 1 scenario(s) matched a scenario of this run"),
    ):
        summary = apply_baseline(run, baseline, Tolerances(), "GOOD.json")
        cases = [s.cases[-1] for s in summary.scenarios]
        assert [(c.name, c.status) for c in cases] == [(BASELINE_CASE, FAILED)] * 2
        assert all(why in c.message for c in cases), cases[0].message
        assert summary.exit_code == EXIT_CHECKS_FAILED


def test_fail_on_skip_fails_the_skip_of_a_scenario_the_baseline_lacks() -> None:
    bw, other = plans()
    good = json_report(RunSummary("good", (result(bw, 1.0),)))  # has "bw", lacks "other"
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    options = BaselineOptions(((("GOOD.json", good),)), None, Tolerances(), fail_on_skip=False)
    lenient = with_baseline(run, options, {}, scenario_entries(run, run.scenarios))
    assert lenient.scenarios[1].cases[-1].status == SKIPPED and lenient.exit_code == EXIT_PASSED
    strict = with_baseline(run, dataclasses.replace(options, fail_on_skip=True), {}, scenario_entries(run, run.scenarios))
    skipped = strict.scenarios[1].cases[-1]
    assert skipped.status == FAILED and skipped.message.startswith("expected no skip (--fail-on-skip); skipped: no scenario of")
    assert strict.exit_code == EXIT_CHECKS_FAILED


@pytest.mark.parametrize("now", [FAILED, ERROR, SKIPPED, "gone"])
def test_a_check_that_passed_in_the_baseline_and_not_in_the_run_fails_the_run(now: str) -> None:
    bw, other = plans()
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    assert apply_baseline(run, good, Tolerances(), "GOOD.json").exit_code == EXIT_PASSED  # the guard can pass
    first = run.scenarios[0]
    if now == "gone":
        cases = tuple(c for c in first.cases if c.name != "env")
    else:
        cases = tuple(dataclasses.replace(c, status=now) if c.name == "env" else c for c in first.cases)
    worse = dataclasses.replace(run, scenarios=(dataclasses.replace(first, cases=cases), run.scenarios[1]))
    summary = apply_baseline(worse, good, Tolerances(), "GOOD.json")
    assert summary.exit_code == EXIT_CHECKS_FAILED, [(c.name, c.status, c.message) for c in summary.scenarios[0].cases]
    if now in (SKIPPED, "gone"):  # no failed check of its own: the baseline testcase says what is missing
        verdict = summary.scenarios[0].cases[-1]
        assert verdict.status == FAILED and "missing: duration env" in verdict.message, verdict.message


def test_a_baseline_whose_run_ended_early_fails_even_where_its_scenarios_matched() -> None:
    bw, other = plans()
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    assert apply_baseline(run, good, Tolerances(), "GOOD.json").exit_code == EXIT_PASSED  # the guard can pass
    cut = {**good, "early_error": {"kind": "interrupted", "message": "interrupted by signal 15"}}
    summary = apply_baseline(run, cut, Tolerances(), "GOOD.json")
    assert [s.cases[-1].status for s in summary.scenarios] == [FAILED, FAILED]
    assert "GOOD.json (run good) ended early: interrupted: interrupted by signal 15" in summary.scenarios[0].cases[-1].message
    assert summary.exit_code == EXIT_CHECKS_FAILED


@pytest.mark.parametrize("bad", ["empty", "ended early"])
def test_one_unusable_report_among_several_baselines_fails_the_run(bad: str) -> None:
    bw, other = plans()
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    unusable = report("b") if bad == "empty" else {**good, "run_id": "b", "early_error": {"kind": "environment", "message": "x"}}
    options = BaselineOptions((("a.json", good), ("a2.json", good)), None, Tolerances(), fail_on_skip=False)
    assert with_baseline(run, options, {}, scenario_entries(run, run.scenarios)).exit_code == EXIT_PASSED  # the guard can pass
    summary = with_baseline(
        run,
        dataclasses.replace(options, baselines=(("a.json", good), ("b.json", unusable))),
        {},
        scenario_entries(run, run.scenarios),
    )
    message = summary.scenarios[0].cases[-1].message
    assert summary.exit_code == EXIT_CHECKS_FAILED, message
    assert ("b.json (run b) has no scenario" if bad == "empty" else "b.json (run b) ended early: environment: x") in message


# --- a report that is the baseline --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "relative"])
def test_a_report_path_that_is_the_baseline_is_refused_before_anything_runs(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG)
    good = tmp_path / "good.json"
    text = json.dumps(report("good", entry(TWO_FIGURES, [case("env")])))
    good.write_text(text)
    monkeypatch.chdir(tmp_path)
    target = {"same path": str(good), "relative": "good.json"}.get(how, str(tmp_path / "link.json"))
    if how == "symlink":
        os.symlink(good, target)
    elif how == "hard link":
        os.link(good, target)

    def no_engine(run_id: str) -> Any:
        raise AssertionError("the run started")

    args = build_parser().parse_args(["run", str(config), "--baseline", str(good), "--json", target])
    assert command_run(args, no_engine) == EXIT_BAD_INPUT
    assert f"--json {target} is the --baseline {good}: the run would overwrite it" in capsys.readouterr().err
    assert good.read_text() == text  # the baseline is untouched
    # A command line refused by the parser still writes its reports, but never over the baseline.
    assert main(["run", str(config), "--baseline", str(good), "--json", target, "--jobs", "many"]) == EXIT_BAD_INPUT
    assert "not writing --json: " in capsys.readouterr().err
    assert good.read_text() == text
    # Another file is fine: the run starts (and stops here, where no Engine is asked for).
    args = build_parser().parse_args(["run", str(config), "--sample-image", "--baseline", str(good), "--json", "new.json"])
    assert command_run(args, no_engine) == EXIT_INTERNAL  # the stand-in's AssertionError: distval's own failure
    assert "AssertionError: the run started" in capsys.readouterr().err
    assert good.read_text() == text
